"""The websocket origin check: a chat socket opens only from BooCode's own pages.

Browsers let any page open a websocket to any server, with that server's cookies, and say
which page did it in the ``Origin`` header (scheme, host and port). The handshake is
accepted only when the Origin is exactly one of:

- the origin the request itself was made to: the ``Host`` header, which must be in
  ALLOWED_HOSTS, with ``http`` for ``ws`` and ``https`` for ``wss``. The scheme is the
  server's (``scope["scheme"]``); behind a TLS-terminating proxy (BOOCODE_TRUSTED_PROXY_COUNT
  above 0) it is the proxy's ``X-Forwarded-Proto``, because Daphne does not put the scheme of a
  websocket in the scope, even with ``--proxy-headers``;
- an origin listed in BOOCODE_ALLOWED_ORIGINS or CSRF_TRUSTED_ORIGINS (``https://*.example.com``
  patterns as Django's CSRF check reads them).

Ports count: ``http://localhost:9999`` is not ``http://localhost:8000``. A missing Origin, an
``Origin: null`` (sandboxed frames, ``file:`` pages) or anything unparsable is refused. A
refused handshake gets HTTP 403 and never reaches the consumer.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from channels.security.websocket import WebsocketDenier
from django.conf import settings
from django.http.request import is_same_domain, split_domain_port, validate_host

logger = logging.getLogger(__name__)

DEFAULT_PORTS = {"http": 80, "https": 443}
# The websocket scheme and its page scheme: a page on https:// opens wss://.
PAGE_SCHEMES = {"ws": "http", "wss": "https", "http": "http", "https": "https"}

Scope = dict[str, Any]


@dataclass(frozen=True)
class Origin:
    """A web origin with the default port filled in, compared exactly."""

    scheme: str
    host: str  # lower case; IPv6 addresses in brackets, as in a Host header
    port: int


def parse_origin(value: str) -> Origin | None:
    """``scheme://host[:port]`` as an :class:`Origin`, or ``None`` if it is not an http(s) origin."""
    try:
        parts = urlsplit(value.strip())
        port = parts.port
    except ValueError:
        return None
    if parts.scheme not in DEFAULT_PORTS or not parts.hostname:
        return None
    if parts.path not in ("", "/") or parts.query or parts.fragment or parts.username or parts.password:
        return None
    host = parts.hostname.lower().rstrip(".")  # as split_domain_port() does for the Host
    if ":" in host:
        host = f"[{host}]"
    return Origin(parts.scheme, host, port or DEFAULT_PORTS[parts.scheme])


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", ()):
        if key == name:
            return value.decode("latin1")
    return None


def _allowed_hosts() -> list[str]:
    # As Django's HttpRequest.get_host(): with DEBUG and no ALLOWED_HOSTS, local names only.
    if settings.DEBUG and not settings.ALLOWED_HOSTS:
        return [".localhost", "127.0.0.1", "[::1]"]
    return list(settings.ALLOWED_HOSTS)


def page_scheme(scope: Scope) -> str:
    """The scheme of the page that may open this socket: ``http`` or ``https``.

    With a trusted proxy in front, its ``X-Forwarded-Proto`` wins: the hop from the proxy to
    Daphne is plain ``ws`` even when the browser used ``wss``.
    """
    if settings.TRUSTED_PROXY_COUNT > 0:
        forwarded = _header(scope, b"x-forwarded-proto")
        if forwarded:
            # A chain of proxies may list several; the first is what the client used.
            scheme = PAGE_SCHEMES.get(forwarded.split(",")[0].strip().lower())
            if scheme:
                return scheme
    return PAGE_SCHEMES.get(str(scope.get("scheme", "ws")).lower(), "http")


def request_origin(scope: Scope) -> Origin | None:
    """The origin the socket was opened at (Host + scheme), or ``None`` if the Host is not allowed."""
    host = _header(scope, b"host")
    if not host:
        return None
    domain, port = split_domain_port(host)
    if not domain or not validate_host(domain, _allowed_hosts()):
        return None
    scheme = page_scheme(scope)
    try:
        number = int(port) if port else DEFAULT_PORTS[scheme]
    except ValueError:
        return None
    return Origin(scheme, domain, number)


def origin_allowed(scope: Scope) -> bool:
    """Whether the handshake's Origin is the request's own origin or an explicitly trusted one."""
    raw = _header(scope, b"origin")
    origin = parse_origin(raw) if raw else None
    if origin is None:
        return False
    # The Host must be ours whatever the Origin: it is what Django would check on HTTP, and it
    # stops DNS-rebinding pages (their own origin, our address) from getting in.
    own = request_origin(scope)
    if own is None:
        return False
    if origin == own:
        return True
    return _explicitly_trusted(origin, raw or "")


def _explicitly_trusted(origin: Origin, raw: str) -> bool:
    for entry in [*settings.ALLOWED_ORIGINS, *settings.CSRF_TRUSTED_ORIGINS]:
        if "*" in entry:  # CSRF_TRUSTED_ORIGINS style: https://*.example.com[:port]
            parts = urlsplit(entry)
            if parts.scheme == origin.scheme and is_same_domain(
                urlsplit(raw.strip()).netloc.lower(), parts.netloc.removeprefix("*").lower()
            ):
                return True
        elif parse_origin(entry) == origin:
            return True
    return False


class WebsocketOriginCheck:
    """ASGI middleware for websockets: refuse (HTTP 403) a handshake from any other origin."""

    def __init__(self, application: Any) -> None:
        self.application = application

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> Any:
        """Pass an allowed handshake on to the application; deny the others."""
        if scope["type"] == "websocket" and not origin_allowed(scope):
            # Worth a line in the log: a proxy that drops Host or X-Forwarded-Proto looks like this.
            logger.warning(
                "websocket refused: Origin %r does not match Host %r (scheme %s)",
                _header(scope, b"origin"),
                _header(scope, b"host"),
                page_scheme(scope),
            )
            return await WebsocketDenier()(scope, receive, send)
        return await self.application(scope, receive, send)

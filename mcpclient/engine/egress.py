"""Connections made on a server's word: the host resolved, every address checked, the checked one used.

The policy is :mod:`mcpclient.core.egress`; this module applies it where connections are opened.
:class:`EgressTransport` is an httpx2 transport whose connection pool dials through
:class:`CheckedBackend`: the host is resolved off the event loop, every address it resolves to
is checked (``BOOCODE_EGRESS_ALLOW`` read from the settings at each connection), and the
connection goes to a checked address, never to a second resolution of the name, so a name that
answers a public address to the check and a private one afterwards (DNS rebinding) reaches
nothing. TLS is still negotiated for the name (SNI and certificate verification are the host's)
and the Host header is the request's own. A redirect is a new request and is checked when it
connects; a kept-alive connection was checked when it was opened. A refused connection raises
:class:`EgressRefused` naming the URL and the rule before anything is sent.

Declared endpoints (a server's own ``url``) and hosts the setting names are dialled by name as
before: the administrator chose them. :func:`refused_origins` applies the same policy to the
origins an MCP Apps view declares for the person's browser.
"""

from __future__ import annotations

import asyncio
import functools
import ipaddress
import socket
import ssl
from collections.abc import Collection, Iterable

import anyio
import httpcore2
import httpx2
from django.conf import settings
from httpcore2 import AsyncNetworkStream

from mcpclient.core.egress import (
    EgressAllow,
    Endpoint,
    IPAddress,
    endpoint,
    named_allowed,
    refusal,
)
from mcpclient.core.redaction import redact_url

# How long the name of an origin a view declares may take to resolve.
ORIGINS_RESOLVE_SECONDS = 2.0


class EgressRefused(httpx2.ConnectError):
    """A connection the egress policy refused; the message names what and by which rule."""


def allowed() -> EgressAllow:
    """``BOOCODE_EGRESS_ALLOW`` as the settings hold it now (nothing without Django's settings)."""
    if not settings.configured:
        return EgressAllow()
    allow = getattr(settings, "EGRESS_ALLOW", None)
    return allow if isinstance(allow, EgressAllow) else EgressAllow()


async def resolve(host: str, port: int, timeout: float | None = None) -> list[IPAddress]:
    """Every address ``host`` resolves to, in the resolver's order (``getaddrinfo`` in a thread)."""
    try:
        with anyio.fail_after(timeout):
            infos = await anyio.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except TimeoutError:
        raise httpcore2.ConnectTimeout(f"resolving {host} took longer than {timeout:g} s") from None
    except (OSError, UnicodeError) as exc:
        raise httpcore2.ConnectError(f"cannot resolve {host}: {exc}") from None
    return list(dict.fromkeys(ipaddress.ip_address(info[4][0]) for info in infos))


class CheckedBackend(httpcore2.AsyncNetworkBackend):
    """httpcore's network backend with the policy applied at each new connection (see the module)."""

    def __init__(self, declared: Collection[Endpoint] = ()) -> None:
        self._declared = frozenset(declared)
        self._inner = httpcore2.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[httpcore2.SOCKET_OPTION] | None = None,
    ) -> AsyncNetworkStream:
        """A connection to a checked address of ``host`` (or to ``host`` itself when declared)."""
        allow = allowed()
        if named_allowed(host, port, allow, self._declared):
            return await self._inner.connect_tcp(host, port, timeout, local_address, socket_options)
        addresses = await resolve(host, port, timeout)
        reason = refusal(host, port, addresses, allow, self._declared)
        if reason is not None:
            raise EgressRefused(reason)
        failure: Exception | None = None
        for address in addresses:
            try:
                return await self._inner.connect_tcp(
                    str(address), port, timeout, local_address, socket_options
                )
            except (httpcore2.ConnectError, httpcore2.ConnectTimeout) as exc:
                failure = exc
        raise failure or httpcore2.ConnectError(f"{host} resolves to no address")

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: Iterable[httpcore2.SOCKET_OPTION] | None = None,
    ) -> AsyncNetworkStream:
        raise EgressRefused("a Unix socket is never reached on a server's word")

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


@functools.cache
def _ssl_context() -> ssl.SSLContext:
    """httpx2's default context (certifi, or ``SSL_CERT_FILE``), made once: loading it takes milliseconds."""
    return httpx2.create_ssl_context()


class EgressTransport(httpx2.AsyncHTTPTransport):
    """httpx2's transport, connecting through a :class:`CheckedBackend` (see the module)."""

    def __init__(
        self,
        *,
        declared: Collection[Endpoint] = (),
        limits: httpx2.Limits,
        verify: ssl.SSLContext | None = None,
    ) -> None:
        context = verify or _ssl_context()
        super().__init__(verify=context, limits=limits)
        # httpx2's transport takes no network backend: its pool is replaced by the same one over ours.
        self._pool = httpcore2.AsyncConnectionPool(
            ssl_context=context,
            max_connections=limits.max_connections,
            max_keepalive_connections=limits.max_keepalive_connections,
            keepalive_expiry=limits.keepalive_expiry,
            network_backend=CheckedBackend(declared),
        )

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        """Send ``request``; a refused connection raises :class:`EgressRefused` naming its URL."""
        try:
            return await super().handle_async_request(request)
        except EgressRefused as exc:
            url = redact_url(str(request.url))
            raise EgressRefused(f"refused {request.method} {url}: {exc}", request=request) from None


async def refused_origins(origins: Iterable[str], declared: Collection[Endpoint] = ()) -> dict[str, str]:
    """The origins (``https://cdn.example.com``, ``wss://*.example.com``) the policy refuses, with why.

    An address is checked as it is; a name is resolved here (all at once, each within
    :data:`ORIGINS_RESOLVE_SECONDS`) and refused when it resolves to an address the policy
    refuses. A wildcard is checked by the name under it; names under ``localhost`` are loopback
    wherever they are resolved. A name that does not resolve here is kept: the person's browser
    resolves it, perhaps otherwise, and only what is known is refused.
    """
    allow = allowed()

    async def check(origin: str) -> str | None:
        point = endpoint(origin.replace("://*.", "://", 1))
        if point is None:
            return "not an origin"
        host, port = point
        if named_allowed(host, port, allow, declared):
            return None
        if host == "localhost" or host.endswith(".localhost"):
            return f"{host} is a loopback name"
        try:
            addresses = await resolve(host, port, ORIGINS_RESOLVE_SECONDS)
        except (httpcore2.ConnectError, httpcore2.ConnectTimeout):
            return None
        return refusal(host, port, addresses, allow, declared)

    unique = list(dict.fromkeys(origins))
    reasons = await asyncio.gather(*(check(origin) for origin in unique))
    return {origin: reason for origin, reason in zip(unique, reasons, strict=True) if reason is not None}

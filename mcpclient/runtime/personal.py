"""Servers of one's own: remote MCP servers a person adds for themselves from the chat page.

A :class:`~mcpclient.models.PersonalServer` row is one person's Streamable HTTP or SSE server
(never stdio: a person never starts a process here). It becomes a
:class:`~mcpclient.config.model.ServerConfig` like an mcp.json entry, parsed by the same code,
with ``owner_id`` set: the hub opens it as that person's own session (like a "perUser" server),
nobody else's catalog, menu or status line holds it, and every rule of a shared server applies
(the read-only guard or approval of each write call, the time limits, the result cap). Unlike an
administrator's server, its address is only the person's word: the egress policy checks the
server's own host too (docs/security.md, *Egress*), so it never reaches BooCode's network.

How it signs in: no sign-in, a header (its value kept encrypted in the secret store, never shown
again), or OAuth as the person (their own Connect, tokens in the secret store under their name).

Operators decide (docs/teams.md, *Servers of one's own*): ``BOOCODE_PERSONAL_SERVERS`` off
removes the feature (rows are kept, nothing connects), ``BOOCODE_PERSONAL_SERVER_DOMAINS``
lists the hosts allowed (``*.name`` for a domain's hosts; networks for addresses), and
``BOOCODE_PERSONAL_SERVERS_MAX`` bounds the servers per person. A row that the current settings
no longer allow, or whose name a shared server they may use now has, stays listed for its person,
with the reason, and is not connected.

Names. A shared server the person may use keeps its name from their own servers; one hidden from
them by its ``groups`` does not (they cannot tell it exists, so the name is as free as any). An own
server never shares a key with a shared server of its name: its session in the hub is kept under
``name@own`` (:func:`~mcpclient.config.model.session_name`), its OAuth tokens under
``name@own:<id>`` (:func:`~mcpclient.engine.authorization.credential_name`; a shared "perUser"
server's are ``name@user:<id>``), and for the person the name means their own server
(:func:`~mcpclient.engine.serving.pick`).
"""

from __future__ import annotations

import dataclasses
import ipaddress
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from channels.db import database_sync_to_async
from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction

from mcpclient.config.entries import parse_server
from mcpclient.config.model import SERVER_NAME_RE, ConfigError, ServerConfig
from mcpclient.core.egress import EgressAllow, normalize_host
from mcpclient.core.headers import HEADER_NAME_RE
from mcpclient.engine import authorization
from mcpclient.models import McpServer, PersonalServer
from mcpclient.runtime import people
from mcpclient.secrets import store as secret_store

__all__ = [
    "HEADERS_KIND",
    "PersonalServerError",
    "add",
    "configs_for",
    "listing",
    "remove",
]

HEADERS_KIND = "personal-headers"  # the secret store's kind for a personal server's header value
MAX_NAME = 40
MAX_URL = 2000
MAX_HEADER_VALUE = 4096
# Headers a person may not set: the transport's own, and ones that would speak for BooCode.
RESERVED_HEADERS = frozenset(
    {
        "host",
        "content-length",
        "content-type",
        "accept",
        "connection",
        "transfer-encoding",
        "mcp-session-id",
        "mcp-protocol-version",
        "cookie",
        "traceparent",
        "tracestate",
    }
)
TRANSPORTS = {"http": "streamableHttp", "sse": "sse"}
SIGN_INS = ("none", "header", "oauth")


class PersonalServerError(ValueError):
    """What is wrong with a server a person adds, naming the form's field (``field``)."""

    def __init__(self, message: str, field: str = "") -> None:
        super().__init__(message)
        self.field = field


@dataclass(frozen=True)
class Draft:
    """A server as the person's form gives it (checked by :func:`add`)."""

    name: str
    url: str
    transport: str = "http"  # "http" (Streamable HTTP) or "sse"
    sign_in: str = "none"  # "none", "header" or "oauth"
    header_name: str = ""
    header_value: str = ""
    writes: bool = False  # write tools offered, each call approved by the person (else refused)


# --- what the operator allows -----------------------------------------------------------------
def feature_on() -> bool:
    """Whether people may add and use servers of their own (BOOCODE_PERSONAL_SERVERS)."""
    return bool(settings.PERSONAL_SERVERS)


def domain_refusal(url: str) -> str:
    """Why ``url``'s host is not among BOOCODE_PERSONAL_SERVER_DOMAINS ("" when it is, or when the
    setting lists nothing)."""
    allowed: EgressAllow = settings.PERSONAL_SERVER_DOMAINS
    if not allowed.hosts and not allowed.networks:
        return ""
    host = normalize_host(urlsplit(url).hostname or "")
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        address = None
    if allowed.allows_host(host) or (address is not None and allowed.allows_address(address)):
        return ""
    return f'"{host}" is not among the hosts this BooCode allows for your own servers.'


# --- rows and configurations ------------------------------------------------------------------
def _entry(row: PersonalServer, header_value: str | None) -> dict[str, Any]:
    """The mcp.json entry a row stands for (the header's value from the secret store)."""
    entry: dict[str, Any] = {
        "type": "sse" if row.transport == "sse" else "http",
        "url": row.url,
        "writeTools": "approve" if row.writes else "reject",
        # The person trusts their own server; its definitions are not held for an administrator.
        "pinTools": "off",
    }
    if row.sign_in == "oauth":
        entry["oauth"] = {"mode": "perUser"}
    else:
        entry["oauth"] = False
        if row.sign_in == "header" and row.header_name:
            entry["headers"] = {row.header_name: header_value or ""}
    return entry


def _config(row: PersonalServer) -> ServerConfig:
    """The row as the hub's configuration (``owner_id``: its person). Raises ConfigError."""
    value = secret_store.get_secret(HEADERS_KIND, str(row.pk)) if row.sign_in == "header" else None
    config = parse_server(row.name, _entry(row, value), source="your servers")
    return dataclasses.replace(config, owner_id=row.owner_id)


def _shared_names(user_id: int) -> set[str]:
    """The names of the shared servers ``user_id`` may use (those without ``groups``, and those of
    a group they are in), which their own servers may not take.

    A shared server hidden from them by its ``groups`` leaves them its name: refusing it would tell
    them the server exists. Nothing of the two mixes (the module docstring, *Names*).
    """
    groups = people.load(user_id)
    taken = set()
    for name, entry in McpServer.objects.values_list("name", "config"):
        wanted = entry.get("groups") if isinstance(entry, dict) else None
        if not wanted or (isinstance(wanted, list) and any(group in groups for group in wanted)):
            taken.add(name)
    return taken


def name_taken(name: str, *, now: bool = False) -> str:
    """Why ``name`` cannot be a server of one's own: it is the name of a shared server the person
    may use (``now``: said of a server added before, e.g. before they joined its group)."""
    if now:
        return f'The name "{name}" is taken on this BooCode now: rename your server to use it.'
    return f'The name "{name}" is taken on this BooCode: pick another.'


def _refusal(row: PersonalServer, shared: set[str]) -> str:
    """Why the row is not connected now ("" when it may be)."""
    if not feature_on():
        return "Servers of one's own are switched off on this BooCode."
    if row.name in shared:
        return name_taken(row.name, now=True)
    return domain_refusal(row.url)


def configs_for(user_id: int) -> list[ServerConfig]:
    """The configurations of ``user_id``'s servers that may be connected now (sync ORM)."""
    if not feature_on():
        return []
    rows = list(PersonalServer.objects.filter(owner_id=user_id).order_by("name"))
    if not rows:
        return []  # (most people: no second query on their turn's path)
    shared = _shared_names(user_id)
    found = []
    for row in rows:
        if _refusal(row, shared):
            continue
        try:
            found.append(_config(row))
        except (ConfigError, secret_store.SecretStoreError):
            continue  # checked when added; a secret that cannot be read leaves the server out
    return found


_read: dict[int, tuple[float, list[ServerConfig]]] = {}
READ_MAX_AGE = 2.0  # seconds a read of a person's servers serves their next turns (this process)


def _fresh(user_id: int) -> list[ServerConfig] | None:
    found = _read.get(user_id)
    if found is not None and time.monotonic() - found[0] <= READ_MAX_AGE:
        return found[1]
    return None


def remember_none(user_id: int, read_at: float) -> None:
    """``user_id`` has no servers of their own, as a read begun at ``read_at`` found (the chat
    turn's one read asks with its own statement): their next use reads nothing."""
    found = _read.get(user_id)
    if found is None or found[0] < read_at:
        _read[user_id] = (read_at, [])


def read_now(user_id: int) -> list[ServerConfig]:
    """:func:`configs_for`, read again at most every :data:`READ_MAX_AGE` s (at once after this
    process added or removed one of the person's servers); sync ORM, for a read already off the
    loop (the chat turn's one read before the model request)."""
    found = _fresh(user_id)
    if found is not None:
        return found
    read_at = time.monotonic()
    configs = configs_for(user_id)
    _read[user_id] = (read_at, configs)
    return configs


async def read(user_id: int) -> list[ServerConfig]:
    """:func:`read_now` off the event loop (no hop when the last read is fresh)."""
    found = _fresh(user_id)
    if found is not None:
        return found
    return await database_sync_to_async(read_now, thread_sensitive=False)(user_id)  # a read (people.refresh)


def listing(user_id: int, state_of: Callable[[str], tuple[str, str, int] | None]) -> list[dict[str, Any]]:
    """The person's servers for the page: name, URL, how it signs in, writes, and its state from
    ``state_of`` (the hub's (status, reason, tool count) of their session) or why it is not connected."""
    shared = _shared_names(user_id)
    connected = authorization.signed_in_servers(user_id, own=True)
    found = []
    for row in PersonalServer.objects.filter(owner_id=user_id).order_by("name"):
        refusal = _refusal(row, shared)
        status, reason, tools = state_of(row.name) or ("not_connected", "", 0)
        if refusal:
            status, reason, tools = "refused", refusal, 0
        elif row.sign_in == "oauth" and row.name not in connected and status == "not_connected":
            status = "sign_in"
        found.append(
            {
                "id": row.pk,
                "name": row.name,
                "url": row.url,
                "transport": row.transport,
                "sign_in": row.sign_in,
                "header_name": row.header_name,
                "writes": row.writes,
                "status": status,
                "reason": reason,
                "tool_count": tools,
            }
        )
    return found


# --- adding and removing ----------------------------------------------------------------------
def add(user_id: int, draft: Draft) -> PersonalServer:
    """Check ``draft`` and store it as ``user_id``'s server (its header value encrypted).

    Raises :class:`PersonalServerError` naming the field and what is wrong; nothing is stored then.
    """
    if not feature_on():
        raise PersonalServerError("Servers of one's own are switched off on this BooCode.")
    name, url = draft.name.strip(), draft.url.strip()
    if not name or len(name) > MAX_NAME or not SERVER_NAME_RE.match(name):
        raise PersonalServerError(
            f"The name must be 1 to {MAX_NAME} letters, digits, '_' or '-' (it prefixes the tools' names).",
            "name",
        )
    if draft.transport not in TRANSPORTS:
        raise PersonalServerError('The transport must be "http" (Streamable HTTP) or "sse".', "transport")
    if draft.sign_in not in SIGN_INS:
        raise PersonalServerError('The sign-in must be "none", "header" or "oauth".', "sign_in")
    if len(url) > MAX_URL:
        raise PersonalServerError(f"The URL is longer than {MAX_URL} characters.", "url")
    parts = urlsplit(url)
    if parts.scheme not in ("https", "http") or not parts.hostname:
        raise PersonalServerError("The URL must be an https:// (or http://) address of the server.", "url")
    if parts.username or parts.password:
        raise PersonalServerError(
            "The URL must not hold a user name or password: use a header for credentials.", "url"
        )
    if refusal := domain_refusal(url):
        raise PersonalServerError(refusal, "url")
    header_name, header_value = draft.header_name.strip(), draft.header_value.strip()
    if draft.sign_in == "header":
        if not HEADER_NAME_RE.match(header_name) or header_name.lower() in RESERVED_HEADERS:
            raise PersonalServerError(
                "The header's name must be a plain HTTP header name such as Authorization or X-Api-Key "
                "(not one the transport sets itself).",
                "header_name",
            )
        if (
            not header_value
            or len(header_value) > MAX_HEADER_VALUE
            or any(ord(char) < 32 or ord(char) == 127 for char in header_value)
        ):
            raise PersonalServerError(
                f"The header's value must be 1 to {MAX_HEADER_VALUE} characters on one line.", "header_value"
            )
    else:
        header_name = ""
    if name in _shared_names(user_id):
        raise PersonalServerError(name_taken(name), "name")
    row = PersonalServer(
        owner_id=user_id,
        name=name,
        url=url,
        transport=draft.transport,
        sign_in=draft.sign_in,
        header_name=header_name,
        writes=draft.writes,
    )
    try:
        parse_server(name, _entry(row, header_value or None), source="your servers")
    except ConfigError as exc:
        raise PersonalServerError(str(exc).removeprefix(f'your servers: server "{name}": '), "url") from None
    with transaction.atomic():
        # Counted and named under a lock of the person's row: two tabs adding at once stay in bounds.
        get_user_model().objects.select_for_update().filter(pk=user_id).first()
        mine = PersonalServer.objects.filter(owner_id=user_id)
        if mine.filter(name=name).exists():
            raise PersonalServerError(f'You already have a server called "{name}".', "name")
        if mine.count() >= int(settings.PERSONAL_SERVERS_MAX):
            raise PersonalServerError(
                f"You have {settings.PERSONAL_SERVERS_MAX} servers, the most this BooCode allows "
                "(BOOCODE_PERSONAL_SERVERS_MAX): remove one first."
            )
        row.save()
        if draft.sign_in == "header":
            secret_store.put_secret(HEADERS_KIND, str(row.pk), header_value)
    _read.pop(user_id, None)
    return row


def remove(user_id: int, server_id: int) -> str | None:
    """Delete ``user_id``'s server ``server_id`` with its header value and OAuth tokens; its name,
    or None when the person has no such server."""
    with transaction.atomic():
        row = PersonalServer.objects.filter(owner_id=user_id, pk=server_id).first()
        if row is None:
            return None
        row.delete()  # (its secrets go with it: _forget_secrets)
    _read.pop(user_id, None)
    return row.name


def _forget_secrets(sender: object, instance: PersonalServer, **kwargs: object) -> None:
    """A server of one's own is deleted (removed, by the admin, or with its person's account):
    its header's value and its OAuth tokens go with it."""
    secret_store.delete_secret(HEADERS_KIND, str(instance.pk))
    secret_store.delete_secret(
        authorization.SECRET_KIND, authorization.credential_name(instance.name, instance.owner_id, own=True)
    )
    _read.pop(instance.owner_id, None)


def connect_receivers() -> None:
    """Delete a server's secrets with its row, however the row goes (mcpclient's app config)."""
    from django.db.models.signals import post_delete

    post_delete.connect(_forget_secrets, sender=PersonalServer, dispatch_uid="personal-server-secrets")

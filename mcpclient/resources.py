"""MCP resources and resource templates of each server, reading them, and ``completion/complete``.

Lifecycle
---------
The owner task of every connection (:class:`mcpclient.hub.ServerConnection`) starts
:func:`keep_listed` in its task group, after the session's change watcher
(:func:`mcpclient.protocol.watch_changes`, one ``subscriptions/listen`` stream for tools,
resources and prompts on 2026-07-28) and before the tools are listed. It returns control at
once, then lists every page of ``resources/list`` and ``resources/templates/list`` in the
background (a failing listing never fails the server, it is kept as the catalog's ``error``)
and lists again whenever :meth:`ResourceCatalog.request_refresh` is called: by the hub's
message handler for a 2025-11-25 ``notifications/resources/list_changed``, by a
``resourcesListChanged`` event of the change stream on 2026-07-28 (a stream the server drops is
opened again, followed by one listing: no replay), or by an administrator's rediscovery
(:func:`refresh_now`). A burst of changes
while a listing runs costs one more listing. The task ends with the owner's task group, so a
connection's catalog lives exactly as long as its session. A server that does not declare the
``resources`` capability is never asked: its catalog stays empty and says so.

Reads and completions (:func:`read`, :func:`complete`) go through the live session of the
server as the person sees it: the shared session, or for a "perUser" server that person's own
(:meth:`mcpclient.hub.Hub.user_connection`), never anybody else's. Each is bounded by the
server's ``timeout``. What a read returns is capped like tool results
(:data:`mcpclient.results.MAX_OUTPUT_BYTES`): text beyond the cap is cut with a marker, a
blob beyond it is refused with a note. Every failure is a :class:`ResourceError` with a message
a person can read and an HTTP-like ``status`` (404 unknown, 409 not supported, 502 server trouble).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import logging
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import anyio
import anyio.abc
import mcp.types as types
from mcp import Client, MCPError
from mcp_types import CONNECTION_CLOSED, INVALID_PARAMS, REQUEST_TIMEOUT

from mcpclient.protocol import all_pages
from mcpclient.results import MAX_OUTPUT_BYTES, cap_output
from mcpclient.tool_metadata import MAX_TITLE_CHARS

if TYPE_CHECKING:
    from mcpclient.hub import Hub, ServerConnection

logger = logging.getLogger(__name__)

# Bounds of one listing, like tools/list (a server that pages forever is an error, not a hang).
MAX_PAGES = 1000
MAX_ENTRIES = 10_000
# What a listing keeps of a server's display text (untrusted, shown in the picker and the API):
# names and titles like tool titles, descriptions like prompt descriptions; a URI (or template)
# longer than a message may attach is left out, since cutting it would name another resource.
MAX_NAME_CHARS = MAX_TITLE_CHARS
MAX_DESCRIPTION_CHARS = 2000
MAX_URI_CHARS = 2048
MAX_MIME_CHARS = 255
# Completion values shown per request (the spec's own maximum) and their length.
MAX_COMPLETIONS = 100
MAX_COMPLETION_CHARS = 1000
# The spec's old "resource not found" code (2025-11-25); newer servers answer INVALID_PARAMS.
RESOURCE_NOT_FOUND = -32002


class ResourceError(Exception):
    """A read, listing or completion that cannot be served; ``str()`` is for people."""

    def __init__(self, message: str, status: int = 502) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class ResourceEntry:
    """One listed resource (display data from the server: untrusted text)."""

    server: str
    uri: str
    name: str
    title: str = ""
    description: str = ""
    mime_type: str = ""
    size: int | None = None

    def to_dict(self) -> dict[str, Any]:
        """The JSON shape of the API (docs/protocol.md)."""
        return {
            "kind": "resource",
            "server": self.server,
            "uri": self.uri,
            "name": self.name,
            "title": self.title,
            "description": self.description,
            "mimeType": self.mime_type,
            "size": self.size,
        }


@dataclass(frozen=True)
class TemplateEntry:
    """One listed resource template; ``arguments`` are the names of its variables, in order."""

    server: str
    uri_template: str
    name: str
    title: str = ""
    description: str = ""
    mime_type: str = ""
    arguments: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """The JSON shape of the API (docs/protocol.md)."""
        return {
            "kind": "template",
            "server": self.server,
            "uriTemplate": self.uri_template,
            "name": self.name,
            "title": self.title,
            "description": self.description,
            "mimeType": self.mime_type,
            "arguments": list(self.arguments),
        }


@dataclass
class ResourceCatalog:
    """One connection's resources and templates, as last listed."""

    resources: tuple[ResourceEntry, ...] = ()
    templates: tuple[TemplateEntry, ...] = ()
    supported: bool = False  # the server declared the resources capability
    completions: bool = False  # the server declared the completions capability
    error: str = ""  # why the last listing failed ("" when it worked)
    listings: int = 0  # how many listings finished (tests and the API wait on it)
    rounds: int = 0  # how many listings started (a rediscovery waits for the next one to finish)
    _wanted: asyncio.Event = field(default_factory=asyncio.Event)
    _listed: asyncio.Event = field(default_factory=asyncio.Event)
    _updated: asyncio.Event = field(default_factory=asyncio.Event)  # pulsed after every listing

    def request_refresh(self) -> None:
        """List again soon (after a change notification of either era); bursts coalesce."""
        self._wanted.set()

    @property
    def listed(self) -> bool:
        """True once a first listing has finished (or nothing is to be listed)."""
        return self._listed.is_set()

    async def wait_listed(self, timeout: float) -> None:
        """Wait up to ``timeout`` seconds for the first listing (no error if it takes longer)."""
        with anyio.move_on_after(timeout):
            await self._listed.wait()


def template_arguments(uri_template: str) -> tuple[str, ...]:
    """The variable names of an RFC 6570 template, in order (``{a}``, ``{+a}``, ``{?a,b}``...)."""
    names: list[str] = []
    position = 0
    while (start := uri_template.find("{", position)) != -1:
        end = uri_template.find("}", start)
        if end == -1:
            break
        expression = uri_template[start + 1 : end].lstrip("+#./;?&")
        for part in expression.split(","):
            name = part.split(":", 1)[0].rstrip("*").strip()
            if name and name not in names:
                names.append(name)
        position = end + 1
    return tuple(names)


def _cut(text: str | None, limit: int) -> str:
    """``text`` (from a server) at most ``limit`` characters long, an ellipsis marking a cut."""
    text = text or ""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _entry(server: str, resource: types.Resource) -> ResourceEntry:
    return ResourceEntry(
        server=server,
        uri=str(resource.uri),
        name=_cut(resource.name, MAX_NAME_CHARS),
        title=_cut(resource.title, MAX_NAME_CHARS),
        description=_cut(resource.description, MAX_DESCRIPTION_CHARS),
        mime_type=_cut(resource.mime_type, MAX_MIME_CHARS),
        size=resource.size,
    )


def _template(server: str, template: types.ResourceTemplate) -> TemplateEntry:
    return TemplateEntry(
        server=server,
        uri_template=template.uri_template,
        name=_cut(template.name, MAX_NAME_CHARS),
        title=_cut(template.title, MAX_NAME_CHARS),
        description=_cut(template.description, MAX_DESCRIPTION_CHARS),
        mime_type=_cut(template.mime_type, MAX_MIME_CHARS),
        arguments=template_arguments(template.uri_template),
    )


async def list_everything(
    client: Client, server: str, *, fresh: bool = True
) -> tuple[list[ResourceEntry], list[TemplateEntry]]:
    """Every page of ``resources/list`` and ``resources/templates/list``."""
    mode = "refresh" if fresh else "use"
    resources = await all_pages(
        lambda cursor: client.list_resources(cursor=cursor, cache_mode=mode),
        "resources",
        "resources/list",
        MAX_PAGES,
        at_most=MAX_ENTRIES,
    )
    templates = await all_pages(
        lambda cursor: client.list_resource_templates(cursor=cursor, cache_mode=mode),
        "resource_templates",
        "resources/templates/list",
        MAX_PAGES,
        at_most=MAX_ENTRIES,
    )
    kept = [r for r in resources if len(str(r.uri)) <= MAX_URI_CHARS]
    kept_templates = [t for t in templates if len(t.uri_template) <= MAX_URI_CHARS]
    if dropped := len(resources) - len(kept) + len(templates) - len(kept_templates):
        logger.warning(
            'MCP server "%s": %d resources left out (URI over %d characters)', server, dropped, MAX_URI_CHARS
        )
    return [_entry(server, r) for r in kept], [_template(server, t) for t in kept_templates]


async def keep_listed(
    connection: ServerConnection,
    client: Client,
    *,
    task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """Keep ``connection.resources`` listed for the life of the session (see the module docstring)."""
    catalog = connection.resources
    capabilities = client.server_capabilities
    catalog.completions = capabilities.completions is not None
    catalog.supported = capabilities.resources is not None
    if not catalog.supported:
        catalog._listed.set()
        task_status.started()
        return
    task_status.started()
    catalog.request_refresh()
    while True:
        await catalog._wanted.wait()
        catalog._wanted.clear()
        catalog.rounds += 1
        await _refresh(connection, client, catalog)


async def refresh_now(connection: ServerConnection) -> None:
    """List ``connection``'s resources and templates again and wait for it (admin rediscovery).

    Waits for a listing that started after the request (one in flight is stale), at most the
    time of two listings; a session that ends meanwhile just ends the wait.
    """
    catalog = connection.resources
    if not catalog.supported or connection.client is None:
        return
    target = catalog.rounds + 1
    catalog.request_refresh()
    with anyio.move_on_after(2 * connection.config.timeout + 1):
        while catalog.listings < target:
            await catalog._updated.wait()


async def _refresh(connection: ServerConnection, client: Client, catalog: ResourceCatalog) -> None:
    try:
        with anyio.fail_after(connection.config.timeout):
            resources, templates = await list_everything(client, connection.name)
    except TimeoutError:
        catalog.error = f"listing resources timed out after {connection.config.timeout:g} s"
    except MCPError as exc:
        if exc.error.code == CONNECTION_CLOSED:
            catalog.error = "connection closed"
        else:
            catalog.error = f"listing resources failed: {exc.error.message}"
    except Exception as exc:  # the top of a background loop: a bad listing must not end the session
        catalog.error = f"listing resources failed: {type(exc).__name__}: {str(exc).splitlines()[0][:300]}"
    else:
        catalog.resources, catalog.templates, catalog.error = tuple(resources), tuple(templates), ""
    if catalog.error:
        logger.warning('MCP server "%s": %s', connection.name, catalog.error)
    catalog.listings += 1
    catalog._listed.set()
    catalog._updated.set()
    catalog._updated = asyncio.Event()


# --- which session serves a person ---------------------------------------------------------
def live_connection(hub: Hub, server: str, user_id: int | None) -> ServerConnection:
    """The ready session of ``server`` that ``user_id`` may use, or a :class:`ResourceError`.

    A "perUser" server is served by that person's own session only; the shared session of
    every other server by the shared one.
    """
    from mcpclient.hub import Status, per_user

    config = hub.config(server)
    if config is None or not config.enabled:
        raise ResourceError(f'There is no MCP server "{server}".', 404)
    if per_user(config):
        connection = hub.user_connection(server, user_id) if user_id is not None else None
        if connection is None:
            raise ResourceError(f'Connect your account to "{server}" first (Connect beside its name).', 502)
    else:
        connection = hub.connection(server)
        if connection is None:
            raise ResourceError(f'MCP server "{server}" is not connected.', 502)
    if connection.status is not Status.READY or connection.client is None:
        reason = connection.reason or f"it is {connection.status.value}"
        raise ResourceError(f'MCP server "{server}" is unreachable: {reason}', 502)
    return connection


def visible_servers(hub: Hub, user_id: int | None) -> list[str]:
    """The servers whose resources ``user_id`` may see now: ready shared ones and their own sessions."""
    from mcpclient.hub import Status
    from mcpclient.prompts import session_of

    names = []
    for snapshot in hub.snapshots():
        connection = session_of(hub, snapshot.name, user_id)
        if connection is not None and connection.status is Status.READY:
            names.append(snapshot.name)
    return names


async def catalog_of(hub: Hub, server: str, user_id: int | None, *, wait: float = 5.0) -> ResourceCatalog:
    """The catalog of ``server`` as ``user_id`` sees it, after its first listing (up to ``wait`` s)."""
    connection = live_connection(hub, server, user_id)
    await connection.resources.wait_listed(wait)
    return connection.resources


# --- reading ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class ResourceContent:
    """One item of a read: its text, or its bytes (a blob), or a note saying why neither is kept."""

    uri: str
    mime_type: str
    text: str | None = None
    data: bytes | None = None
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        """The JSON shape of the API: ``text``, or ``blob`` as base64, or only a ``note``."""
        shaped: dict[str, Any] = {"uri": self.uri, "mimeType": self.mime_type, "note": self.note}
        if self.text is not None:
            shaped["text"] = self.text
        if self.data is not None:
            shaped["blob"] = base64.b64encode(self.data).decode("ascii")
            shaped["size"] = len(self.data)
        return shaped


@dataclass(frozen=True)
class ReadResult:
    """What ``resources/read`` returned, capped (see the module docstring)."""

    server: str
    uri: str
    contents: tuple[ResourceContent, ...]

    def model_text(self) -> str:
        """The contents as the model reads them: texts joined, blobs as a short note."""
        parts = []
        for item in self.contents:
            if item.text is not None:
                parts.append(item.text)
            else:
                size = f"{len(item.data)} bytes" if item.data is not None else item.note
                parts.append(
                    f"[binary content: {item.mime_type or 'unknown type'}, {size}; not shown to the model]"
                )
        return "\n".join(parts)


def _blob_bytes(blob: str) -> bytes | None:
    try:
        return base64.b64decode(blob, validate=True)
    except (binascii.Error, ValueError):
        return None


def shape_contents(
    contents: list[types.TextResourceContents | types.BlobResourceContents], limit: int = MAX_OUTPUT_BYTES
) -> tuple[ResourceContent, ...]:
    """Cap a read's contents to ``limit`` bytes in all: text cut with a marker, blobs refused."""
    shaped: list[ResourceContent] = []
    budget = limit
    for item in contents:
        uri, mime = str(item.uri), item.mime_type or ""
        if isinstance(item, types.TextResourceContents):
            text = cap_output(item.text, max(budget, 0))
            budget -= len(text.encode("utf-8"))
            shaped.append(ResourceContent(uri=uri, mime_type=mime, text=text))
            continue
        size = (len(item.blob) * 3) // 4
        if size > budget:
            note = f"not kept: about {size} bytes, over the {limit} byte limit"
            shaped.append(ResourceContent(uri=uri, mime_type=mime, note=note))
            continue
        data = _blob_bytes(item.blob)
        if data is None:
            shaped.append(
                ResourceContent(uri=uri, mime_type=mime, note="not kept: the blob is not valid base64")
            )
            continue
        budget -= len(data)
        shaped.append(ResourceContent(uri=uri, mime_type=mime, data=data))
    return tuple(shaped)


async def read(hub: Hub, server: str, uri: str, user_id: int | None) -> ReadResult:
    """``resources/read`` of ``uri`` through the session ``user_id`` may use (capped)."""
    connection = live_connection(hub, server, user_id)
    if not connection.resources.supported:
        raise ResourceError(f'MCP server "{server}" offers no resources.', 409)
    client = connection.client
    assert client is not None
    connection.last_used = time.monotonic()  # a person's session in use is not idle
    try:
        with anyio.fail_after(connection.config.timeout):
            result = await client.read_resource(uri, cache_mode="refresh")
    except TimeoutError:
        raise ResourceError(
            f'MCP server "{server}": reading {uri} timed out after {connection.config.timeout:g} s', 502
        ) from None
    except MCPError as exc:
        raise _read_error(server, uri, exc) from None
    except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError) as exc:
        raise ResourceError(
            f'MCP server "{server}" is unreachable: {exc or type(exc).__name__}', 502
        ) from None
    return ReadResult(server=server, uri=uri, contents=shape_contents(list(result.contents)))


def _read_error(server: str, uri: str, exc: MCPError) -> ResourceError:
    code, message = exc.error.code, exc.error.message
    if code in (RESOURCE_NOT_FOUND, INVALID_PARAMS):
        return ResourceError(f'MCP server "{server}" has no resource {uri}: {message}', 404)
    if code == CONNECTION_CLOSED:
        return ResourceError(f'MCP server "{server}" is unreachable: connection closed', 502)
    if code == REQUEST_TIMEOUT:
        return ResourceError(f'MCP server "{server}": reading {uri} timed out', 502)
    return ResourceError(f'MCP server "{server}": reading {uri} failed: {message}', 502)


# --- completion/complete ---------------------------------------------------------------------
@dataclass(frozen=True)
class Completions:
    """Suggested values for one argument (at most :data:`MAX_COMPLETIONS`)."""

    values: tuple[str, ...]
    total: int | None = None
    has_more: bool = False

    def to_dict(self) -> dict[str, Any]:
        """The JSON shape of the API."""
        return {"values": list(self.values), "total": self.total, "hasMore": self.has_more}


def make_ref(kind: str, name: str) -> types.ResourceTemplateReference | types.PromptReference:
    """A completion reference: ``kind`` is ``"resource"`` (a template's URI) or ``"prompt"`` (a name)."""
    if kind == "resource":
        return types.ResourceTemplateReference(uri=name)
    if kind == "prompt":
        return types.PromptReference(name=name)
    raise ResourceError(f'A completion reference is "resource" or "prompt", not "{kind}".', 400)


async def complete(
    hub: Hub,
    server: str,
    ref: types.ResourceTemplateReference | types.PromptReference,
    argument: dict[str, str],
    context: dict[str, str] | None,
    user_id: int | None,
) -> Completions:
    """``completion/complete`` for one argument (``{"name", "value"}``) of a prompt or template.

    Only for servers that declare the ``completions`` capability (else a 409 error): the
    prompts and the resource-template inputs of the page both ask here.
    """
    connection = live_connection(hub, server, user_id)
    client = connection.client
    assert client is not None
    if client.server_capabilities.completions is None:
        raise ResourceError(f'MCP server "{server}" offers no completions.', 409)
    connection.last_used = time.monotonic()
    try:
        with anyio.fail_after(connection.config.timeout):
            result = await client.complete(ref, argument, context or None)
    except TimeoutError:
        raise ResourceError(f'MCP server "{server}": completion timed out', 502) from None
    except MCPError as exc:
        if exc.error.code == CONNECTION_CLOSED:
            raise ResourceError(f'MCP server "{server}" is unreachable: connection closed', 502) from None
        status = 400 if exc.error.code == INVALID_PARAMS else 502
        raise ResourceError(
            f'MCP server "{server}": completion failed: {exc.error.message}', status
        ) from None
    completion = result.completion
    values = tuple(str(value)[:MAX_COMPLETION_CHARS] for value in completion.values[:MAX_COMPLETIONS])
    return Completions(
        values=values,
        total=completion.total,
        has_more=bool(completion.has_more) or len(completion.values) > MAX_COMPLETIONS,
    )

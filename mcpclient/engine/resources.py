"""MCP resources and resource templates of each server, reading them, and ``completion/complete``.

Invariants. Each session's :class:`ResourceCatalog` is kept fresh by :func:`keep_listed` in the
owner's task group (:mod:`mcpclient.engine.catalog`: listed once, again on every change signal,
bursts coalesced, a failed listing kept as ``error``). Reads and completions go through the
session that serves the person (:func:`mcpclient.engine.serving.session_for`), never anybody
else's, each bounded by the server's ``timeout``. What a read returns is capped like tool results
(:data:`mcpclient.core.results.MAX_OUTPUT_BYTES`): text beyond the cap is cut with a marker, a
blob beyond it is refused with a note. Every failure is a :class:`ResourceError` with a message a
person can read and an HTTP-like ``status`` (404 unknown, 409 not supported, 502 server trouble).
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
import time
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.abc
import mcp.types as types
from mcp import Client, MCPError
from mcp_types import CONNECTION_CLOSED, INVALID_PARAMS, REQUEST_TIMEOUT

from mcpclient.config.model import per_user
from mcpclient.core.resources import (
    MAX_URI_CHARS,
    Completions,
    ReadResult,
    ResourceContent,
    ResourceEntry,
    ResourceError,
    TemplateEntry,
)
from mcpclient.core.results import MAX_OUTPUT_BYTES, cap_output
from mcpclient.core.state import Status
from mcpclient.core.tool_metadata import MAX_TITLE_CHARS
from mcpclient.engine.catalog import KeptFresh
from mcpclient.engine.protocol import CacheMode, all_pages
from mcpclient.engine.serving import Session, Sessions, config_for, ready_servers, session_for

logger = logging.getLogger(__name__)

# Bounds of one listing, like tools/list (a server that pages forever is an error, not a hang).
MAX_PAGES = 1000
MAX_ENTRIES = 10_000
# What a listing keeps of a server's display text (untrusted, shown in the picker and the API):
# names and titles like tool titles, descriptions like prompt descriptions; a URI (or template)
# longer than a message may attach is left out, since cutting it would name another resource.
MAX_NAME_CHARS = MAX_TITLE_CHARS
MAX_DESCRIPTION_CHARS = 2000
MAX_VIEW_META_BYTES = 16 * 1024  # an item's _meta.ui (MCP Apps) as JSON; a larger one is not kept
MAX_MIME_CHARS = 255
# Completion values shown per request (the spec's own maximum) and their length.
MAX_COMPLETIONS = 100
MAX_COMPLETION_CHARS = 1000
# The spec's old "resource not found" code (2025-11-25); newer servers answer INVALID_PARAMS.
RESOURCE_NOT_FOUND = -32002


@dataclass(eq=False)
class ResourceCatalog(KeptFresh):
    """One connection's resources and templates, as last listed."""

    resources: tuple[ResourceEntry, ...] = ()
    templates: tuple[TemplateEntry, ...] = ()
    completions: bool = False  # the server declared the completions capability
    # MCP Apps views read through this session: uri -> (the listing they were read after, the read).
    views: dict[str, tuple[int, ReadResult]] = field(default_factory=dict, repr=False)


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
    mode: CacheMode = "refresh" if fresh else "use"
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
    connection: Session,
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
        catalog.mark_listed()
        task_status.started()
        return
    task_status.started()
    await catalog.keep_fresh(lambda: _refresh(connection, client, catalog))


async def refresh_now(connection: Session) -> None:
    """List ``connection``'s resources and templates again and wait for it (admin rediscovery).

    Waits at most the time of two listings (:meth:`~mcpclient.engine.catalog.KeptFresh.refresh_now`).
    """
    if connection.client is not None:
        await connection.resources.refresh_now(2 * connection.config.timeout + 1)


async def _refresh(connection: Session, client: Client, catalog: ResourceCatalog) -> bool:
    """List into ``catalog``; True (the loop goes on: a closed connection ends with the task group)."""
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
    catalog.finish_listing()
    return True


# --- which session serves a person ---------------------------------------------------------
def live_connection(hub: Sessions[Session], server: str, user_id: int | None) -> Session:
    """The ready session of ``server`` that ``user_id`` may use, or a :class:`ResourceError`.

    Which session that is: :func:`mcpclient.engine.serving.session_for`.
    """
    config = config_for(hub, server, user_id)
    if config is None:
        raise ResourceError(f'There is no MCP server "{server}".', 404)
    connection = session_for(hub, server, user_id)
    if connection is None:
        if per_user(config):
            raise ResourceError(f'Connect your account to "{server}" first (Connect beside its name).', 502)
        raise ResourceError(f'MCP server "{server}" is not connected.', 502)
    if connection.status is not Status.READY or connection.client is None:
        reason = connection.reason or f"it is {connection.status.value}"
        raise ResourceError(f'MCP server "{server}" is unreachable: {reason}', 502)
    return connection


def visible_servers(hub: Sessions[Session], user_id: int | None) -> list[str]:
    """The servers whose resources ``user_id`` may see now: ready shared ones and their own sessions."""
    return [name for name, _ in ready_servers(hub, user_id)]


async def catalog_of(
    hub: Sessions[Session], server: str, user_id: int | None, *, wait: float = 5.0
) -> ResourceCatalog:
    """The catalog of ``server`` as ``user_id`` sees it, after its first listing (up to ``wait`` s)."""
    connection = live_connection(hub, server, user_id)
    await connection.resources.wait_listed(wait)
    return connection.resources


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
        meta = _view_meta(item.meta)
        if isinstance(item, types.TextResourceContents):
            text = cap_output(item.text, max(budget, 0))
            budget -= len(text.encode("utf-8"))
            cut = text is not item.text
            shaped.append(ResourceContent(uri=uri, mime_type=mime, text=text, meta=meta, cut=cut))
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
        shaped.append(ResourceContent(uri=uri, mime_type=mime, data=data, meta=meta))
    return tuple(shaped)


def _view_meta(meta: dict[str, Any] | None) -> dict[str, Any] | None:
    """An item's ``_meta.ui`` (checked later, by :func:`mcpclient.core.mcp_apps.view_policy`) if small."""
    ui = (meta or {}).get("ui")
    if not isinstance(ui, dict):
        return None
    try:
        size = len(json.dumps(ui))
    except (TypeError, ValueError, RecursionError):
        return None
    return {"ui": ui} if size <= MAX_VIEW_META_BYTES else None


# Views (MCP Apps documents) kept per session: at most this many, each at most this large.
MAX_KEPT_VIEWS = 8
MAX_KEPT_VIEW_BYTES = 2 * 1024 * 1024


async def read(
    hub: Sessions[Session], server: str, uri: str, user_id: int | None, *, view: bool = False
) -> ReadResult:
    """``resources/read`` of ``uri`` through the session ``user_id`` may use (capped).

    ``view``: an MCP Apps view. It is read once per session and kept (:data:`MAX_KEPT_VIEWS`,
    each up to :data:`MAX_KEPT_VIEW_BYTES`) until the server's resources are listed again (a
    ``notifications/resources/list_changed``, a reconnect): every tool call of a view does not
    read its document again.
    """
    connection = live_connection(hub, server, user_id)
    catalog = connection.resources
    if view and (kept := catalog.views.get(uri)) is not None and kept[0] == catalog.listings:
        return kept[1]
    listing = catalog.listings
    result = await _read(connection, server, uri)
    if view and result.size() <= MAX_KEPT_VIEW_BYTES:
        if len(catalog.views) >= MAX_KEPT_VIEWS:
            catalog.views.clear()
        catalog.views[uri] = (listing, result)
    return result


async def _read(connection: Session, server: str, uri: str) -> ReadResult:
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


async def complete(
    hub: Sessions[Session],
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

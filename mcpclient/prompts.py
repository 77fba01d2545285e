"""The prompts of the MCP servers: listed per live session, kept fresh, and got with arguments.

Prompts are user-controlled (the MCP spec): a person picks one in the chat's ``/`` menu, fills
in its arguments, and the messages ``prompts/get`` returns are inserted into the conversation.
They give the model no capability, so the agent's tool patterns do not filter them.

Lifecycle
---------
Each session's owner task (:class:`mcpclient.hub.ServerConnection`) starts :func:`watch` in its
watcher task group, so the listing lives and dies with the session, in the task that owns it.
:func:`watch` does nothing for a server that does not declare the ``prompts`` capability. For
the others it lists every page of ``prompts/list`` (bounded: :data:`MAX_PAGES`,
:data:`MAX_PROMPTS`, the server's ``timeout``), then waits for a change and lists again (a
burst of changes costs one listing). Changes come as ``notifications/prompts/list_changed``
on 2025-11-25 connections (the hub's message handler calls :func:`changed`) and, on
2026-07-28, as ``promptsListChanged`` events of the session's one ``subscriptions/listen``
stream (:func:`mcpclient.protocol.watch_changes`, opened before the first listings, re-opened
with a re-list when the server drops it), which also calls :func:`changed`. An administrator's
rediscovery lists again at once (:func:`refresh_now`). Cancelling the owner's task group ends
all of it.

A "perUser" server has one session per person, hence one listing per person:
:func:`prompts_for` and :func:`get` only ever use the shared sessions and the asking person's
own ones.

:func:`get` runs ``prompts/get`` on the live session, bounded by the server's ``timeout``;
every failure becomes a :class:`PromptError` whose text a person can read. The result's
messages become :class:`PromptMessage` objects (role and text): text as it is, embedded text
resources with their URI, binary resources, images and audio as short notes, resource links
as ``[resource: uri]``; the whole is capped like tool results (5 MB).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import logging
import time
import weakref
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import anyio
import anyio.abc
import httpx2
import mcp.types as types
import pydantic
from mcp import Client, MCPError
from mcp.client import InputRequiredRoundsExceededError
from mcp_types import CONNECTION_CLOSED, REQUEST_TIMEOUT

from mcpclient import tool_metadata
from mcpclient.protocol import all_pages
from mcpclient.results import MAX_OUTPUT_BYTES, cap_output

if TYPE_CHECKING:
    from mcpclient.hub import Hub, ServerConnection

logger = logging.getLogger(__name__)

MAX_PAGES = 100  # of prompts/list per listing
MAX_PROMPTS = 1000  # kept per server; more are left out with a warning in the log
MAX_MESSAGES = 100  # of one prompts/get result; more are refused (nothing is inserted)
MAX_TEXT_CHARS = 2000  # of a prompt's or argument's description as offered to the page
MAX_TITLE_CHARS = tool_metadata.MAX_TITLE_CHARS  # of a prompt's title, like a tool's
# A prompt or argument name longer than a ``prompt`` frame may carry could never be used:
# such a prompt is left out of the listing (cutting the name would name another prompt).
MAX_NAME_CHARS = 200
MAX_ARGUMENTS = 50  # per prompt


class PromptError(Exception):
    """A prompt cannot be got; ``str()`` is a message for the person who asked."""


@dataclass(frozen=True)
class PromptArgument:
    """One argument a prompt takes (untrusted text from the server, display only)."""

    name: str
    description: str = ""
    required: bool = False


@dataclass(frozen=True)
class HubPrompt:
    """A prompt of a ready session."""

    server: str
    name: str
    title: str = ""
    description: str = ""
    arguments: tuple[PromptArgument, ...] = ()
    completions: bool = False  # the server declares completions: its arguments can be completed

    def as_json(self) -> dict[str, Any]:
        """The shape of ``GET /api/prompts`` (docs/protocol.md)."""
        return {
            "server": self.server,
            "name": self.name,
            "title": self.title,
            "description": self.description,
            "arguments": [
                {"name": a.name, "description": a.description, "required": a.required} for a in self.arguments
            ],
            "completions": self.completions,
        }


@dataclass(frozen=True)
class PromptMessage:
    """One message of a prompt as it enters the conversation: ``user`` or ``assistant``, and text."""

    role: str
    text: str


@dataclass
class Catalog:
    """The prompts of one session, and the signals that keep them fresh."""

    supported: bool = False  # the server declares the prompts capability
    prompts: tuple[HubPrompt, ...] = ()
    error: str = ""  # why the last listing failed ("" when it worked)
    listings: int = 0  # listings done (tests wait for the next one)
    rounds: int = 0  # listings started (a rediscovery waits for the next one to finish)
    listed: asyncio.Event = field(default_factory=asyncio.Event)  # the first listing has finished
    dirty: asyncio.Event = field(default_factory=asyncio.Event)  # a change asks for a new listing
    updated: asyncio.Event = field(default_factory=asyncio.Event)  # pulsed after every listing


_catalogs: weakref.WeakKeyDictionary[ServerConnection, Catalog] = weakref.WeakKeyDictionary()


def catalog(connection: ServerConnection) -> Catalog | None:
    """The prompts of ``connection``'s current session (``None`` before :func:`watch` started)."""
    return _catalogs.get(connection)


def changed(connection: ServerConnection) -> None:
    """A 2025-11-25 ``notifications/prompts/list_changed`` arrived: list again (hub's message handler)."""
    current = _catalogs.get(connection)
    if current is not None:
        current.dirty.set()


async def watch(
    connection: ServerConnection,
    client: Client,
    *,
    task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """Keep ``connection``'s prompt listing fresh (run with ``TaskGroup.start`` by the owner).

    Returns control at once, or once a 2026-07-28 change stream is acknowledged, so that no
    change after the first listing is missed.
    """
    current = Catalog()
    _catalogs[connection] = current
    capability = client.server_capabilities.prompts
    if capability is None:
        current.listed.set()
        task_status.started()
        return
    current.supported = True
    task_status.started()
    while True:
        current.dirty.clear()
        current.rounds += 1
        if not await _relist(connection, client, current):
            return  # the connection ended
        await current.dirty.wait()


async def refresh_now(connection: ServerConnection) -> None:
    """List ``connection``'s prompts again and wait for it (an administrator's rediscovery).

    Waits for a listing that started after the request (one in flight is stale), at most the
    time of two listings; a session that ends meanwhile just ends the wait.
    """
    current = _catalogs.get(connection)
    if current is None or not current.supported or connection.client is None:
        return
    target = current.rounds + 1
    current.dirty.set()
    with anyio.move_on_after(2 * connection.config.timeout + 1):
        while current.listings < target:
            await current.updated.wait()


async def _relist(connection: ServerConnection, client: Client, current: Catalog) -> bool:
    """List the prompts into ``current``; False when the connection has ended."""
    try:
        with anyio.fail_after(connection.config.timeout):
            listed = await list_all_prompts(client)
    except TimeoutError:
        current.error = f"prompts/list timed out after {connection.config.timeout:g} s"
    except MCPError as exc:
        if exc.error.code == CONNECTION_CLOSED:
            return False
        current.error = f"prompts/list failed: {exc.error.message}"
    else:
        completes = client.server_capabilities.completions is not None
        usable = [prompt for prompt in listed if _usable(prompt)]
        if len(usable) < len(listed):
            logger.warning(
                'MCP server "%s": %d prompts left out (a name over %d characters)',
                connection.name,
                len(listed) - len(usable),
                MAX_NAME_CHARS,
            )
        current.prompts = tuple(
            _hub_prompt(connection.name, prompt, completes) for prompt in usable[:MAX_PROMPTS]
        )
        current.error = ""
        if len(listed) > MAX_PROMPTS:
            logger.warning(
                'MCP server "%s" lists %d prompts; the first %d are kept',
                connection.name,
                len(listed),
                MAX_PROMPTS,
            )
    if current.error:
        logger.warning('MCP server "%s": %s', connection.name, current.error)
    current.listings += 1
    current.listed.set()
    current.updated.set()
    current.updated = asyncio.Event()
    return True


async def list_all_prompts(client: Client) -> list[types.Prompt]:
    """Every page of ``prompts/list``, fresh (a repeated cursor or too many pages is an error)."""
    return await all_pages(
        lambda cursor: client.list_prompts(cursor=cursor, cache_mode="refresh"),
        "prompts",
        "prompts/list",
        MAX_PAGES,
        enough=MAX_PROMPTS,
    )


def _short(text: str | None, limit: int = MAX_TEXT_CHARS) -> str:
    text = " ".join((text or "").split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _usable(prompt: types.Prompt) -> bool:
    """False for a prompt whose name, or one of whose arguments' names, no frame could carry."""
    names = [prompt.name, *(a.name for a in (prompt.arguments or [])[:MAX_ARGUMENTS])]
    return all(len(name) <= MAX_NAME_CHARS for name in names)


def _hub_prompt(server: str, prompt: types.Prompt, completions: bool) -> HubPrompt:
    arguments = tuple(
        PromptArgument(name=a.name, description=_short(a.description), required=bool(a.required))
        for a in (prompt.arguments or [])[:MAX_ARGUMENTS]
    )
    return HubPrompt(
        server=server,
        name=prompt.name,
        title=_short(prompt.title, MAX_TITLE_CHARS),
        description=_short(prompt.description),
        arguments=arguments,
        completions=completions,
    )


# -- queries ----------------------------------------------------------------------------------
def session_of(hub: Hub, server: str, user_id: int | None) -> ServerConnection | None:
    """The session ``user_id`` uses for ``server``: the shared one, or their own ("perUser")."""
    from mcpclient.hub import per_user

    config = hub.config(server)
    if config is None or not config.enabled:
        return None
    if per_user(config):
        return hub.user_connection(server, user_id) if user_id is not None else None
    return hub.connection(server)


def prompts_for(hub: Hub, user_id: int | None) -> list[HubPrompt]:
    """The prompts ``user_id`` may use now, in server (config) order, then as each server lists them."""
    from mcpclient.hub import Status

    result: list[HubPrompt] = []
    for snapshot in hub.snapshots():
        connection = session_of(hub, snapshot.name, user_id)
        current = catalog(connection) if connection is not None else None
        if connection is not None and connection.status is Status.READY and current is not None:
            result.extend(current.prompts)
    return result


def find(hub: Hub, server: str, name: str, user_id: int | None) -> HubPrompt | None:
    """The prompt ``name`` of ``server`` as ``user_id`` sees it, if it is listed now."""
    for prompt in prompts_for(hub, user_id):
        if prompt.server == server and prompt.name == name:
            return prompt
    return None


def argument_problem(prompt: HubPrompt, arguments: dict[str, str]) -> str | None:
    """What is wrong with ``arguments`` for ``prompt`` (unknown or missing ones), or ``None``."""
    known = {a.name for a in prompt.arguments}
    unknown = sorted(set(arguments) - known)
    if unknown:
        return f'The prompt "{prompt.name}" takes no argument {", ".join(repr(u) for u in unknown)}.'
    missing = [a.name for a in prompt.arguments if a.required and not arguments.get(a.name, "").strip()]
    if missing:
        return f'The prompt "{prompt.name}" needs {", ".join(repr(m) for m in missing)}.'
    return None


async def get(
    hub: Hub, server: str, name: str, arguments: dict[str, str], user_id: int | None
) -> tuple[HubPrompt, list[PromptMessage]]:
    """``prompts/get`` on ``user_id``'s session with ``server``: the prompt and its messages.

    Raises :class:`PromptError` (a readable message) when the server is not connected, does not
    list the prompt, the arguments do not fit, or the server fails, times out or answers badly.
    """
    from mcpclient.hub import Status

    connection = session_of(hub, server, user_id)
    if connection is None or connection.status is not Status.READY or connection.client is None:
        why = connection.reason if connection is not None and connection.reason else "it is not connected"
        raise PromptError(f'MCP server "{server}" unreachable: {why}')
    prompt = find(hub, server, name, user_id)
    if prompt is None:
        raise PromptError(f'MCP server "{server}" offers no prompt "{name}" (any more).')
    problem = argument_problem(prompt, arguments)
    if problem is not None:
        raise PromptError(problem)
    client, timeout = connection.client, connection.config.timeout
    connection.last_used = time.monotonic()
    prefix = f'MCP server "{server}": prompt "{name}"'
    try:
        with anyio.fail_after(timeout):
            result = await client.get_prompt(name, arguments)
    except TimeoutError:
        raise PromptError(
            f'{prefix} timed out after {timeout:g} s (the server\'s "timeout" in mcp.json)'
        ) from None
    except MCPError as exc:
        if exc.error.code == REQUEST_TIMEOUT:
            raise PromptError(f"{prefix} timed out after {timeout:g} s") from None
        if exc.error.code == CONNECTION_CLOSED:
            connection._mark_unavailable_if_closed(exc)
            raise PromptError(f'MCP server "{server}" unreachable: connection closed') from None
        raise PromptError(f"{prefix} failed: {exc.error.message}") from None
    except pydantic.ValidationError as exc:
        first = str(exc).splitlines()[0]
        raise PromptError(f"{prefix} returned an invalid result: {first}") from None
    except InputRequiredRoundsExceededError:
        raise PromptError(f"{prefix} failed: the server kept asking for more input") from None
    except (httpx2.TransportError, anyio.ClosedResourceError, anyio.BrokenResourceError, OSError) as exc:
        raise PromptError(f'MCP server "{server}" unreachable: {exc or type(exc).__name__}') from None
    if len(result.messages) > MAX_MESSAGES:
        raise PromptError(
            f"{prefix} returned {len(result.messages)} messages; at most {MAX_MESSAGES} are taken."
        )
    if not result.messages:
        raise PromptError(f"{prefix} returned no messages.")
    return prompt, _messages(result.messages)


def _messages(messages: list[types.PromptMessage]) -> list[PromptMessage]:
    """The messages as text, capped together at the tool-result limit (5 MB of UTF-8)."""
    converted: list[PromptMessage] = []
    budget = MAX_OUTPUT_BYTES
    for message in messages:
        text = content_text(message.content)
        size = len(text.encode("utf-8", errors="replace"))
        if size > budget:
            text = cap_output(text, max(budget, 0))
        budget -= size
        role = "assistant" if message.role == "assistant" else "user"
        converted.append(PromptMessage(role=role, text=text))
    return converted


def _decoded_size(data: str) -> int:
    try:
        return len(base64.b64decode(data, validate=True))
    except (binascii.Error, ValueError):
        return len(data)


def content_text(content: Any) -> str:
    """One prompt message's content as the text the conversation stores and the model reads."""
    if isinstance(content, types.TextContent):
        return content.text
    if isinstance(content, types.EmbeddedResource):
        resource = content.resource
        mime = f" ({resource.mime_type})" if resource.mime_type else ""
        if isinstance(resource, types.TextResourceContents):
            return f"[resource: {resource.uri}{mime}]\n{resource.text}"
        size = _decoded_size(resource.blob)
        return f"[resource: {resource.uri}{mime}: {size} bytes of binary data, not included]"
    if isinstance(content, types.ResourceLink):
        return f"[resource: {content.uri}]"
    if isinstance(content, types.ImageContent | types.AudioContent):
        kind = "image" if isinstance(content, types.ImageContent) else "audio"
        size = _decoded_size(content.data)
        return f"[{kind} from the prompt: {content.mime_type}, {size} bytes, not included]"
    return f"[{getattr(content, 'type', 'unknown')} content from the prompt, not included]"


def attach(connection: Any, current: Catalog) -> None:
    """Make ``current`` the prompts of ``connection`` (the hub worker's stand-in mirrors them)."""
    _catalogs[connection] = current

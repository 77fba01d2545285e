"""The prompts of the MCP servers: listed per live session, kept fresh, and got with arguments.

Invariants. :func:`watch` runs in the session owner's watcher task group, so a listing lives and
dies with its session; a server without the ``prompts`` capability is never asked. A listing is
bounded (:data:`MAX_PAGES`, :data:`MAX_PROMPTS`, the server's ``timeout``), and a burst of changes
costs one more listing (:mod:`mcpclient.engine.catalog`). :func:`prompts_for` and :func:`get` use
only the shared sessions and the asking person's own ones, never anybody else's. :func:`get` is
bounded by the server's ``timeout``, takes at most :data:`MAX_MESSAGES` messages and caps their
text together like tool results (5 MB); every failure is a :class:`PromptError` a person can read.
Prompts are user-controlled: the agent's tool patterns never filter them.

The tour: docs/architecture.md (*Prompts*), docs/protocol.md (``prompt``, ``GET /api/prompts/``).
"""

from __future__ import annotations

import base64
import binascii
import logging
import time
from dataclasses import dataclass
from typing import Any

import anyio
import anyio.abc
import httpx2
import mcp.types as types
import pydantic
from mcp import Client, MCPError
from mcp.client import InputRequiredRoundsExceededError
from mcp_types import CONNECTION_CLOSED, REQUEST_TIMEOUT

from mcpclient.core import tool_metadata
from mcpclient.core.prompts import (
    MAX_ARGUMENTS,
    MAX_NAME_CHARS,
    HubPrompt,
    PromptArgument,
    PromptError,
    PromptMessage,
    argument_problem,
)
from mcpclient.core.results import MAX_OUTPUT_BYTES, cap_output
from mcpclient.core.state import Status
from mcpclient.engine.catalog import KeptFresh
from mcpclient.engine.protocol import all_pages
from mcpclient.engine.serving import Session, Sessions, config_for, ready_servers, session_for

logger = logging.getLogger(__name__)

MAX_PAGES = 100  # of prompts/list per listing
MAX_PROMPTS = 1000  # kept per server; more are left out with a warning in the log
MAX_MESSAGES = 100  # of one prompts/get result; more are refused (nothing is inserted)
MAX_TEXT_CHARS = 2000  # of a prompt's or argument's description as offered to the page
MAX_TITLE_CHARS = tool_metadata.MAX_TITLE_CHARS  # of a prompt's title, like a tool's


@dataclass(eq=False)
class Catalog(KeptFresh):
    """The prompts of one session, as last listed."""

    prompts: tuple[HubPrompt, ...] = ()


def catalog(connection: Session) -> Catalog | None:
    """The prompts of ``connection``'s current session (``None`` before :func:`watch` started)."""
    return connection.prompts


def changed(connection: Session) -> None:
    """A 2025-11-25 ``notifications/prompts/list_changed`` arrived: list again (hub's message handler)."""
    if connection.prompts is not None:
        connection.prompts.request_refresh()


async def watch(
    connection: Session,
    client: Client,
    *,
    task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """Keep ``connection``'s prompt listing fresh (run with ``TaskGroup.start`` by the owner).

    Returns control at once, or once a 2026-07-28 change stream is acknowledged, so that no
    change after the first listing is missed.
    """
    current = Catalog()
    connection.prompts = current
    if client.server_capabilities.prompts is None:
        current.mark_listed()
        task_status.started()
        return
    current.supported = True
    task_status.started()
    await current.keep_fresh(lambda: _relist(connection, client, current))


async def refresh_now(connection: Session) -> None:
    """List ``connection``'s prompts again and wait for it (an administrator's rediscovery).

    Waits at most the time of two listings (:meth:`~mcpclient.engine.catalog.KeptFresh.refresh_now`).
    """
    current = connection.prompts
    if current is not None and connection.client is not None:
        await current.refresh_now(2 * connection.config.timeout + 1)


async def _relist(connection: Session, client: Client, current: Catalog) -> bool:
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
    current.finish_listing()
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
def prompts_for(hub: Sessions[Session], user_id: int | None) -> list[HubPrompt]:
    """The prompts ``user_id`` may use now, in server (config) order, then as each server lists them."""
    result: list[HubPrompt] = []
    for _, session in ready_servers(hub, user_id):
        if session.prompts is not None:
            result.extend(session.prompts.prompts)
    return result


def find(hub: Sessions[Session], server: str, name: str, user_id: int | None) -> HubPrompt | None:
    """The prompt ``name`` of ``server`` as ``user_id`` sees it, if it is listed now."""
    for prompt in prompts_for(hub, user_id):
        if prompt.server == server and prompt.name == name:
            return prompt
    return None


async def get(
    hub: Sessions[Session], server: str, name: str, arguments: dict[str, str], user_id: int | None
) -> tuple[HubPrompt, list[PromptMessage]]:
    """``prompts/get`` on ``user_id``'s session with ``server``: the prompt and its messages.

    Raises :class:`PromptError` (a readable message) when the server is not connected, does not
    list the prompt, the arguments do not fit, or the server fails, times out or answers badly.
    """
    if config_for(hub, server, user_id) is None:
        raise PromptError(f'There is no MCP server "{server}".')
    connection = session_for(hub, server, user_id)
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
            connection.mark_unavailable_if_closed(exc)
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


def attach(connection: Session, current: Catalog) -> None:
    """Make ``current`` the prompts of ``connection`` (the hub worker's stand-in mirrors them)."""
    connection.prompts = current

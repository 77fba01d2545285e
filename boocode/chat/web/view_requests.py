"""Requests from a tool call's view (MCP Apps) to its server, carried by the chat socket.

The page's host bridge (``static/chat/appviews.js``) hands a view's ``tools/call``,
``resources/read`` and ``ui/update-model-context`` to the conversation's socket as a
``view_request`` frame (docs/protocol.md); the answer goes back to that socket only, as a
``view_reply``. What a view may do (docs/apps.md):

* **Its own server only.** The request names the tool call whose view asks; the call must be of
  this conversation and have a view, and the tool is looked up by its own name on *that call's*
  server, among the tools views may call (``_meta.ui.visibility`` holds ``"app"``). A tool of
  another server, or one its server shows only to the model, is not found. Views must be on for
  the installation (``BOOCODE_APPS``) and the server (``"apps"``).
* **The same path as the model's calls.** The conversation's agent must allow the tool (its
  ``tools:`` globs); the registry validates the arguments, the write-tool approval gate asks the
  person (the card says a view asks; a view cannot answer it: approvals are answered only by the
  page's own buttons), the server's time limit and the result cap apply, and the call runs in
  the person's own session. Approvals are recorded like the model's (``ToolApproval``, with the
  view's call and "asked by a view").
* **Bounded.** Per socket at most :data:`MAX_IN_FLIGHT` requests run at once
  (:data:`MAX_IN_FLIGHT_PER_VIEW` per view) and :data:`RATE` per second on average after a
  burst of :data:`BURST`; more are refused at once. A reply larger than :data:`MAX_REPLY_BYTES`
  is an error saying so; a context update is at most :data:`MAX_CONTEXT_BYTES`.
* **Model context.** ``ui/update-model-context`` replaces the view's context, kept with its tool
  call and added to what the model reads on its next request (:mod:`boocode.chat.turn.history`).

Closing the socket cancels its requests in flight.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from channels.db import database_sync_to_async
from django.conf import settings
from django.utils import timezone

from boocode.chat.calls.approvals import gate_for
from boocode.chat.calls.execution import execute, prepare_hub
from boocode.chat.calls.questions import asker_for
from boocode.chat.ledger.audit import AuditRecord
from boocode.chat.models import ToolCall
from boocode.chat.storable import text_problem
from boocode.chat.turn import agent_choice
from boocode.chat.wire.events import group_emitter
from boocode.tools.agent_rules import agent_tools
from boocode.tools.approval_gate import approving
from boocode.tools.registry import view_tools
from mcpclient.core.resources import ReadResult, ResourceError
from mcpclient.core.results import ToolResult
from mcpclient.engine.api import asking
from mcpclient.runtime import hub_tools
from mcpclient.runtime.signin import person_hub

logger = logging.getLogger(__name__)

METHODS = ("tools/call", "resources/read", "ui/update-model-context")
MAX_IN_FLIGHT = 8  # requests of one socket's views running at once
MAX_IN_FLIGHT_PER_VIEW = 4
RATE = 5.0  # requests per second per socket, on average ...
BURST = 20  # ... after this many at once
MAX_REPLY_BYTES = 900_000  # a reply frame stays under the socket's frame limit
MAX_CONTEXT_BYTES = 16 * 1024  # of one view's model context, as the model reads it
MAX_NAME_CHARS = 255
MAX_URI_CHARS = 2048
KNOWN_VIEWS = 256  # views whose call this socket remembers (they do not change)

db = database_sync_to_async
Send = Callable[[dict[str, Any]], Awaitable[None]]


class Refused(Exception):
    """The request is not carried out; ``str()`` tells the view why (a sentence)."""


@dataclass(frozen=True)
class View:
    """The tool call a view belongs to."""

    call_id: int
    server: str
    uri: str


def _view_of(conversation_id: int, call_id: int) -> View | None:
    row = (
        ToolCall.objects.filter(pk=call_id, message__conversation_id=conversation_id)
        .exclude(view="")
        .values_list("server", "view")
        .first()
    )
    return View(call_id, row[0], row[1]) if row is not None else None


def _keep_context(call_id: int, context: dict[str, Any]) -> None:
    ToolCall.objects.filter(pk=call_id).update(view_context=context)


def view_result(result: ToolResult) -> dict[str, Any]:
    """A :class:`ToolResult` as the ``CallToolResult`` a view reads (text, media, links, structure)."""
    content: list[dict[str, Any]] = [{"type": "text", "text": result.output}]
    for part in result.parts:
        if part.get("type") in ("image", "audio"):
            content.append({"type": part["type"], "data": part["data"], "mimeType": part["mime_type"]})
        elif part.get("type") == "resource_link":
            link = {"type": "resource_link", "uri": part["uri"], "name": part["name"] or part["uri"]}
            content.append({**link, "mimeType": part["mime_type"]} if part["mime_type"] else link)
    shaped: dict[str, Any] = {"content": content, "isError": result.is_error}
    if result.structured is not None:
        shaped["structuredContent"] = result.structured
    return shaped


def read_reply(result: ReadResult) -> dict[str, Any]:
    """A read as the ``ReadResourceResult`` a view reads (an item that was not kept is left out)."""
    contents = []
    for item in result.contents:
        shaped = item.to_dict()
        shaped.pop("note", None)
        shaped.pop("size", None)
        if "text" in shaped or "blob" in shaped:
            contents.append(shaped)
        if item.cut:
            raise Refused(f"The resource {result.uri} is larger than a view may read.")
    if not contents:
        notes = "; ".join(item.note for item in result.contents if item.note) or "it is empty"
        raise Refused(f"The resource {result.uri} could not be read: {notes}.")
    return {"contents": contents}


def context_text(params: dict[str, Any]) -> str:
    """What the model reads of a ``ui/update-model-context``: its text blocks and structured content."""
    content = params.get("content", [])
    structured = params.get("structuredContent")
    if not isinstance(content, list):
        raise Refused('"content" must be a list of content blocks.')
    if structured is not None and not isinstance(structured, dict):
        raise Refused('"structuredContent" must be an object.')
    parts = []
    for block in content:
        if not isinstance(block, dict):
            raise Refused('"content" must be a list of content blocks.')
        if block.get("type") == "text" and isinstance(block.get("text"), str):
            parts.append(block["text"])
        else:  # images and the rest are not sent to the model; it is told they were there
            parts.append(f"[{str(block.get('type'))[:20]} content, not shown to the model]")
    if structured is not None:
        parts.append(json.dumps(structured, ensure_ascii=False))
    text = "\n".join(parts)
    size = len(text.encode("utf-8"))
    if size > MAX_CONTEXT_BYTES:
        raise Refused(f"The context is {size:,} bytes; a view's context is limited to {MAX_CONTEXT_BYTES:,}.")
    problem = text_problem(text, "context")
    if problem is not None:
        raise Refused(problem)
    return text


class ViewRequests:
    """One socket's requests from views: checked, bounded, each run as a task of its own."""

    def __init__(self, conversation_id: int, user_id: int, send: Send) -> None:
        self.conversation_id = conversation_id
        self.user_id = user_id
        self.send = send
        self.tasks: dict[asyncio.Task[None], int] = {}  # running request -> its view's call
        self.views: dict[int, View] = {}
        self.tokens = float(BURST)
        self.refilled = time.monotonic()

    def close(self) -> None:
        """The socket went: cancel what is in flight (the servers are told, as for a stopped turn)."""
        for task in list(self.tasks):
            task.cancel()

    async def handle(self, frame: dict[str, Any]) -> None:
        """A ``view_request`` frame: refused at once with a reason, or started."""
        request_id, call_id = frame.get("id"), frame.get("call")
        if not (isinstance(request_id, int) and not isinstance(request_id, bool)) and not (
            isinstance(request_id, str) and 0 < len(request_id) <= 64
        ):
            await self.send({"type": "error", "code": "bad_frame", "message": 'view_request needs an "id".'})
            return
        try:
            if isinstance(call_id, bool) or not isinstance(call_id, int):
                raise Refused('"call" must be the id of the tool call whose view asks.')
            method, params = frame.get("method"), frame.get("params", {})
            if method not in METHODS:
                raise Refused(f"Views may ask for {', '.join(METHODS)}; not {str(method)[:50]!r}.")
            if not isinstance(params, dict):
                raise Refused('"params" must be an object.')
            self._admit(call_id)
        except Refused as exc:
            await self._reply(request_id, call_id, error=str(exc))
            return
        task = asyncio.ensure_future(self._run(request_id, call_id, method, params))
        self.tasks[task] = call_id
        task.add_done_callback(self.tasks.pop)

    def _admit(self, call_id: int) -> None:
        """Count the request against the bounds (:class:`Refused` when over one)."""
        now = time.monotonic()
        self.tokens = min(float(BURST), self.tokens + (now - self.refilled) * RATE)
        self.refilled = now
        if len(self.tasks) >= MAX_IN_FLIGHT:
            raise Refused(f"Too many requests from views at once (at most {MAX_IN_FLIGHT}); try again.")
        if sum(1 for view in self.tasks.values() if view == call_id) >= MAX_IN_FLIGHT_PER_VIEW:
            raise Refused(f"Too many requests from this view at once (at most {MAX_IN_FLIGHT_PER_VIEW}).")
        if self.tokens < 1:
            raise Refused(f"Too many requests from views (at most {RATE:g} a second); slow down.")
        self.tokens -= 1

    async def _run(self, request_id: Any, call_id: int, method: str, params: dict[str, Any]) -> None:
        try:
            view = await self._view(call_id)
            if method == "tools/call":
                result = await self._call_tool(view, params)
            elif method == "resources/read":
                result = await self._read(view, params)
            else:
                result = await self._update_context(view, params)
        except Refused as exc:
            await self._reply(request_id, call_id, error=str(exc))
            return
        except Exception:  # a bug here must not leave the view waiting
            logger.exception("a %s request of a view of conversation %s failed", method, self.conversation_id)
            await self._reply(request_id, call_id, error="The request failed inside BooCode.")
            return
        await self._reply(request_id, call_id, result=result)

    async def _reply(
        self, request_id: Any, call_id: Any, *, result: dict[str, Any] | None = None, error: str = ""
    ) -> None:
        frame: dict[str, Any] = {"type": "view_reply", "id": request_id, "call": call_id}
        if result is not None:
            size = len(json.dumps(result, ensure_ascii=False).encode("utf-8"))
            if size > MAX_REPLY_BYTES:
                error = f"The answer is {size:,} bytes; a view may receive at most {MAX_REPLY_BYTES:,}."
            else:
                frame["result"] = result
        if error:
            frame["error"] = error
        await self.send(frame)

    async def _view(self, call_id: int) -> View:
        """The view asking (a call of this conversation with a view), its server ready to serve it."""
        view = self.views.get(call_id)
        if view is None:
            view = await db(_view_of)(self.conversation_id, call_id)
            if view is None:
                raise Refused("No tool call with a view has this id in this conversation.")
            if len(self.views) >= KNOWN_VIEWS:
                self.views.clear()
            self.views[call_id] = view
        if not settings.MCP_APPS:
            raise Refused("Views are turned off on this BooCode (BOOCODE_APPS).")
        await prepare_hub(self.user_id, skills=False)  # (started, changes applied, their sessions open)
        hub = await person_hub(self.user_id)
        config = hub.config(view.server)
        # A server whose groups the person is no longer in is, to them, one that does not exist.
        if config is None or not hub.allowed(config, self.user_id):
            raise Refused(f'The MCP server "{view.server}" is no longer configured.')
        if not config.apps:
            raise Refused(f'Views of the MCP server "{view.server}" are turned off ("apps": false).')
        return view

    async def _call_tool(self, view: View, params: dict[str, Any]) -> dict[str, Any]:
        name, arguments = params.get("name"), params.get("arguments", {})
        if not isinstance(name, str) or not 0 < len(name) <= MAX_NAME_CHARS:
            raise Refused('"name" must be the name of a tool of the view\'s server.')
        if arguments is None:
            arguments = {}
        if not isinstance(arguments, dict):
            raise Refused('"arguments" must be an object.')
        callable_now = hub_tools(self.user_id, views=True)
        found = next((t for t in callable_now if t.server == view.server and t.name == name), None)
        if found is None:
            model_only = any(t.server == view.server and t.name == name for t in hub_tools(self.user_id))
            if model_only:
                raise Refused(f'The tool "{name}" of "{view.server}" is for the model only, not for views.')
            raise Refused(f'The MCP server "{view.server}" has no tool "{name}" that a view may call.')
        try:
            agent = await db(agent_choice.conversation_agent)(self.conversation_id)
        except agent_choice.AgentUnavailable as exc:
            raise Refused(str(exc)) from None
        allowed = agent_tools(agent, view_tools(self.user_id, view.server))
        if not any(tool.name == found.prefixed_name for tool in allowed):
            raise Refused(f'The agent of this conversation may not use "{found.prefixed_name}".')
        call = {
            "id": view.call_id,
            "name": found.prefixed_name,
            "server": view.server,
            "tool": name,
            "title": found.title,
            "from_view": True,
        }
        emit, conversation = group_emitter(self.conversation_id), self.conversation_id
        logger.info('conversation %s: the view of call %s calls "%s"', conversation, view.call_id, name)
        with asking(asker_for(conversation, call, emit)), approving(gate_for(conversation, call, emit)):
            result = await execute(
                found.prefixed_name,
                json.dumps(arguments, ensure_ascii=False),
                allowed,
                audit=AuditRecord("view", self.user_id, conversation, agent=agent.name),
            )
        return view_result(result)

    async def _read(self, view: View, params: dict[str, Any]) -> dict[str, Any]:
        uri = params.get("uri")
        if not isinstance(uri, str) or not 0 < len(uri) <= MAX_URI_CHARS:
            raise Refused(f'"uri" must be a resource URI of at most {MAX_URI_CHARS} characters.')
        hub = await person_hub(self.user_id)
        try:
            result = await hub.read_resource(view.server, uri, self.user_id)
        except ResourceError as exc:
            raise Refused(f"The resource could not be read: {exc}") from None
        return read_reply(result)

    async def _update_context(self, view: View, params: dict[str, Any]) -> dict[str, Any]:
        text = context_text(params)
        kept = {"text": text, "at": timezone.now().isoformat()} if text else None  # (empty: cleared)
        await db(_keep_context)(view.call_id, kept)
        return {}

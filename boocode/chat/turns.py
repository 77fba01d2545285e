"""The chat turn loop: one user message in; streamed text, tool calls and results out.

Start: ``registry.start(request, emit)`` runs :func:`run_turn` as an asyncio task kept in the
process-level :data:`registry` under the conversation id, at most one per conversation (a
second start raises :class:`TurnInProgress`). The task belongs to no websocket: every event
goes to ``emit`` (the consumer wires it to the conversation's channel-layer group), so a
dropped socket does not stop the turn and every open tab sees it.

Across web processes (Redis channel layer): the consumer starts turns with ``registry.begin``,
which first takes the conversation's Redis lock (:mod:`boocode.chat.locks`; a second start in
any process raises :class:`TurnInProgress`) and gives it back just before ``turn_end``.
``state``, ``stop`` and ``answer`` reach a turn of another process over the channel layer (its
live text and forms for a connecting tab, a cancel, a form or approval answer); a turn whose
process died is settled as ``failed`` ("interrupted") by whichever process sees it first.

Steps: read what the model request needs (re-read AGENTS.md if it changed, the
conversation's agent, the history) in one read-only database unit; store the user message
and the assistant message the first answer streams into in one write unit that runs while
the first model request goes out; make sure the MCP hub runs; apply the agent's glob policy
to the tools the registry has now (in memory); stream the model; run the tool calls of one
step concurrently through the registry; feed the results back and loop until the model
answers without tools. When the agent's ``max_tool_calls`` is used up, one last call is made
without tools and a notice says so. Console commands store the command first, then run.

Regenerate and edit: a request of kind ``regenerate`` first supersedes everything after the
last user message and answers that message again (no new user message); one of kind ``edit``
supersedes the user message it names and everything after it, then runs like a new message.
Superseded rows stay in the database; a ``superseded`` frame tells the tabs to remove them,
and the history read for the model leaves them out.

Prompts: a request of kind ``prompt`` first inserts the messages of an MCP prompt
(:func:`boocode.chat.prompting.insert_prompt`), then answers them like a user message; a prompt
that cannot be got ends the turn ``failed`` with a notice and nothing else stored.

After ``turn_end`` a ``conversation`` frame carries the conversation's title, model and usage.
With BOOCODE_TITLE_FROM_MODEL the first answer is followed by a short request for a title, run
as a task of its own after the turn has ended (the next message need not wait for it); its
result is stored and sent in another ``conversation`` frame, and any failure keeps the title
made from the first message.

Forms: each tool call runs with an asker for the conversation (:mod:`boocode.chat.elicitations`),
so a server that elicits during the call shows its form to this conversation's tabs only,
and with its progress shown on its card (:mod:`boocode.chat.progress`).
A call of a tool that needs approval waits for the owner's decision first
(:mod:`boocode.chat.approvals`); a stop ends that wait ``stopped``.

Stop: ``registry.cancel(conversation_id)`` answers the turn's open forms ``cancel``, then cancels
the task wherever it waits: in the model stream (the HTTP response is closed) or in the tool
calls (the task group cancels them and the hub cancels the MCP requests). The turn then saves
the partial text as ``stopped``, marks unfinished tool calls ``cancelled``, emits ``turn_end``
with status ``stopped`` and re-raises.

Failures: an :class:`~boocode.chat.llm.LLMError` (or any unexpected error, which is logged)
marks the message ``failed`` with a message for the user and ends the turn ``failed``;
everything stored before stays.

Persistence: each write is one short ``database_sync_to_async`` call on Channels' database
thread, and the model is never awaited inside one. The only unit before the first model
request is the read, and it runs on the loop's worker threads (``thread_sensitive=False``,
a connection of their own) so it never queues behind other turns' writes. No event of the
answer is handled before the write unit has finished, so frames and rows keep their order
(``message`` echo, ``message_start``, ``text_delta``...). Streamed text is saved every
:data:`SAVE_INTERVAL` seconds, so a page reloaded mid-turn shows it; a reconnecting page also
gets the live text (:func:`live_text`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Coroutine, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial
from typing import TYPE_CHECKING, Any

from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from django.conf import settings
from django.core.exceptions import ObjectDoesNotExist
from django.db import DatabaseError

from boocode.chat import llm as llm_client
from boocode.chat import services
from boocode.chat.approvals import BadDecision, UnknownApproval, approvals, gate_for
from boocode.chat.attachments import model_content, read_for_turn, unread
from boocode.chat.elicitations import BadAnswer, UnknownForm, asker_for, forms
from boocode.chat.llm import Completion, LLMError, LLMSettings, TextDelta, ToolCallRequest, stream_chat
from boocode.chat.locks import Holder, SharedTurns, TurnLocked, shared_turns
from boocode.chat.models import Message, ToolCall
from boocode.chat.progress import running as running_progress
from boocode.chat.progress import tracking
from boocode.chat.prompting import PromptRequest, insert_prompt
from boocode.chat.status import status_payload
from boocode.shutdown import on_server_shutdown
from boocode.tools.approval import approving
from mcpclient.elicitation import asking
from mcpclient.results import ToolResult

if TYPE_CHECKING:
    from agents.models import Agent

logger = logging.getLogger(__name__)

Emit = Callable[[dict[str, Any]], Awaitable[None]]

SAVE_INTERVAL = 0.25  # seconds between saves of the text being streamed
# Text arriving within this many seconds of the last frame waits and goes out with the next one:
# fewer frames for every open tab, no visible difference. The first text is never held back.
DELTA_INTERVAL = 0.03
MAX_MESSAGE_CHARS = 32_000
COMMANDS = ("/tools", "/call", "/help")
NOT_CONFIGURED = (
    "No model is configured: set BOOCODE_LLM_BASE_URL and BOOCODE_LLM_MODEL. "
    "The tool console still works: /tools lists the agent's tools, /call <tool> {json} runs one."
)
CONSOLE_HELP = (
    "**Tool console**\n\n"
    "- `/tools` lists the tools this conversation's agent may use\n"
    '- `/call <tool> {"argument": "value"}` runs one tool and shows its result\n'
    "- `/help` shows this help\n\n"
    "Anything else is sent to the model."
)
INTERNAL_ERROR = "Internal error while running this turn; the details are in the server log."
TITLE_PROMPT = (
    "Write a title of at most six words for the conversation below. Answer with the title only: "
    "plain text, no quotes, no Markdown, no final full stop."
)
TITLE_TIMEOUT = 30.0  # seconds a title request may take before the first message's title stays
QUOTES = "\"'\u201c\u201d\u2018\u2019"  # what models like to wrap a title in


class TurnInProgress(Exception):
    """A turn is already running in this conversation."""


@dataclass(frozen=True)
class TurnRequest:
    """What a user sent: the text of a message or a console command."""

    conversation_id: int
    text: str
    turn_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    # The conversation's owner: their own sessions ("perUser" servers) serve the turn's tools.
    user_id: int | None = None
    # "message" (text is new), "regenerate" (answer the last user message again; text unused)
    # or "edit" (text replaces the user message edit_id and everything after it).
    kind: str = "message"
    edit_id: int | None = None
    # Resources attached to the message ({server, uri}), read by the turn (boocode.chat.attachments).
    attachments: tuple[dict[str, str], ...] = ()
    # kind "prompt": the checked prompt frame (boocode.chat.prompting) whose messages are inserted.
    prompt: PromptRequest | None = None


@dataclass
class TurnContext:
    """What one turn works with: the agent, its tools right now and the history."""

    agent_name: str
    llm: LLMSettings
    tools: list[Any]  # boocode.tools.registry.Tool
    openai_tools: list[dict[str, Any]]
    messages: list[dict[str, Any]]
    temperature: float | None
    top_p: float | None
    max_tool_calls: int


def parse_command(text: str) -> tuple[str, str] | None:
    """``("/call", rest)`` for a console command, ``None`` for a message to the model."""
    stripped = text.strip()
    parts = stripped.split(None, 1)
    if parts and parts[0] in COMMANDS:
        return parts[0], parts[1].strip() if len(parts) > 1 else ""
    return None


def utf16_length(text: str) -> int:
    """Length in UTF-16 code units, the unit of ``text_delta.offset`` (JavaScript's ``length``)."""
    return len(text.encode("utf-16-le")) // 2


def _refresh_agents() -> None:
    try:
        from agents.services import refresh_agents_if_changed
    except ImportError:  # pragma: no cover - the agents app is part of the project
        return
    refresh_agents_if_changed()


def _read_for_model(conversation_id: int, text: str | None) -> tuple[Agent, str, list[dict[str, Any]]]:
    """The read before the model request: the agent, the conversation's model and the messages.

    Re-reads AGENTS.md if it changed. The history ends with ``text``, the message that is
    stored while the request goes out (``None``: the history already ends with it).
    """
    _refresh_agents()
    agent_name, model = services.conversation_choices(conversation_id)
    agent = services.resolve_agent(agent_name)
    history = services.llm_history(conversation_id, agent.prompt)
    if text is not None:
        history.append({"role": "user", "content": text})
    return agent, model, history


def _conversation_agent(conversation_id: int) -> Agent:
    """The conversation's agent (or the default), after re-reading AGENTS.md if it changed."""
    _refresh_agents()
    return services.resolve_agent(services.conversation_agent_name(conversation_id))


def _stale_agent_notice(agent: Agent) -> str:
    """Said when the agent's section in AGENTS.md is invalid and its last valid definition is used."""
    return (
        f'The agent "{agent.name}" has an error in AGENTS.md; its last valid definition is in use until '
        "an administrator fixes the file."
    )


def _context(
    agent: Agent, history: list[dict[str, Any]], user_id: int | None = None, model: str = ""
) -> TurnContext:
    """The turn's context; the tools are the registry's current ones (in memory, no query).

    ``model`` is the conversation's choice; empty means the agent's ``model:`` (or the default).
    """
    from boocode.tools.registry import agent_tools, openai_tools

    tools = agent_tools(agent, user_id=user_id)
    return TurnContext(
        agent_name=agent.name,
        llm=LLMSettings.from_settings(model or agent.model),
        tools=tools,
        openai_tools=openai_tools(tools),
        messages=history,
        temperature=agent.temperature,
        top_p=agent.top_p,
        max_tool_calls=agent.max_tool_calls,
    )


async def _execute(name: str, arguments: str, allowed: list[Any] | None) -> ToolResult:
    from boocode.tools.registry import execute_tool

    try:
        return await execute_tool(name, arguments, allowed=allowed)
    except Exception as exc:  # a tool's own bug must reach the model as text, not end the turn
        logger.exception("tool %s raised", name)
        return ToolResult(output=f"{name} failed: {type(exc).__name__}: {exc}", is_error=True)


async def _open_sessions(user_id: int | None, *, fresh: bool = False) -> None:
    """The hub (started, changes applied) with ``user_id``'s own sessions open.

    A model turn may reuse a check of other processes' changes made within the last
    ``TURN_CHECK_INTERVAL`` seconds; with ``fresh`` (the tool console) they are read now.
    An edited mcp.json is applied either way.
    """
    from mcpclient.runtime import TURN_CHECK_INTERVAL, ensure_hub
    from mcpclient.signin import open_sessions

    await open_sessions(await ensure_hub(max_age=0.0 if fresh else TURN_CHECK_INTERVAL), user_id)


def _eager[T](coroutine: Coroutine[Any, Any, T]) -> asyncio.Task[T]:
    """A task that runs ``coroutine`` now, up to its first real wait (saves a loop iteration)."""
    return asyncio.eager_task_factory(asyncio.get_running_loop(), coroutine)


db = database_sync_to_async
# Reads on the loop's worker threads: they do not wait behind the writes on the database thread.
db_read = partial(database_sync_to_async, thread_sensitive=False)


class _Turn:
    """The state of one running turn (see the module docstring)."""

    def __init__(self, request: TurnRequest, emit: Emit) -> None:
        self.request = request
        self.conversation_id = request.conversation_id
        self._emit_event = emit
        self.request_message_id: int | None = None  # the stored user message or console command
        self.message_id: int | None = None  # the assistant message being streamed
        self.message_created_at: datetime | None = None
        self.parts: list[str] = []  # its text so far
        self.unsent: list[str] = []  # text not yet sent in a text_delta
        self.sent = 0  # UTF-16 length of the text sent so far
        self.last_emit = 0.0
        self.cap_hit = False
        self.storing: asyncio.Task[None] | None = None  # the start being stored (first model request)
        self.model = ""  # the model asked for in this turn (stored on each answer)
        self.titled = False  # this turn's message named the conversation
        self.announcing: asyncio.Future[None] | None = None  # the conversation frame of a new title
        self.attachments: list[dict[str, Any]] = []  # the attached resources as read (stored)

    @property
    def text(self) -> str:
        return "".join(self.parts)

    async def emit(self, event: dict[str, Any]) -> None:
        try:
            await self._emit_event(event)
        except Exception:  # the channel layer is a boundary: a lost frame must not end the turn
            logger.exception("could not emit %s for conversation %s", event.get("type"), self.conversation_id)

    async def run(self) -> str:
        """Run to the end; returns ``complete`` or ``failed`` (re-raises ``CancelledError``)."""
        await self.emit(
            {"type": "turn_start", "turn_id": self.request.turn_id, "conversation": self.conversation_id}
        )
        status, error = "complete", ""
        try:
            typed = self.request.kind not in ("regenerate", "prompt")
            command = parse_command(self.request.text) if typed else None
            if command is not None:
                if self.request.kind == "edit":
                    await self._supersede()
                agent = await self._store_command()
                await self._console(agent, *command)
            elif self.request.kind == "prompt" and (error := await insert_prompt(self)):
                status = "failed"  # nothing inserted; the notice says why
            else:
                await self._converse()
        except asyncio.CancelledError:
            forms.stop(self.conversation_id)
            await self._stored()
            await self._stopped()
            await self._end("stopped", "")
            raise
        except LLMError as exc:
            status, error = "failed", str(exc)
            llm_client.note_error(exc)
            await self._stored()
            await self._failed(error)
        except services.AgentUnavailable as exc:
            status, error = "failed", str(exc)
            await self._stored()
            await self._failed(error)
        except (services.NothingToRegenerate, services.UnknownMessage):
            # Checked before the turn started; only another tab's edit in between gets here.
            status, error = "failed", "The message to answer again is gone (changed in another tab)."
        except Exception:  # the top of the turn task: the user gets a message, the log the traceback
            logger.exception("turn %s in conversation %s failed", self.request.turn_id, self.conversation_id)
            status, error = "failed", INTERNAL_ERROR
            await self._stored()
            await self._failed(error)
        await self._end(status, error)
        return status

    async def _store_command(self) -> Agent:
        """Store a console command (echoed to the clients); the conversation's agent."""
        payload, _, _ = await db(services.begin_turn)(
            self.conversation_id, Message.Role.CONSOLE, self.request.text
        )
        self.request_message_id = payload["id"]
        await self.emit({"type": "message", "message": payload})
        agent = await db_read(_conversation_agent)(self.conversation_id)
        if agent.error:
            await self._notice(_stale_agent_notice(agent))
        return agent

    async def _store_message(self, answer: bool) -> None:
        """Store the user's message (echoed) and, with ``answer``, open the answer's message.

        A regenerated answer has no new user message: only the answer's message is opened.
        """
        if self.request.kind in ("regenerate", "prompt"):  # the history already ends with the question
            if answer:
                await self._open_message(
                    await db(services.add_message)(
                        self.conversation_id,
                        Message.Role.ASSISTANT,
                        status=Message.Status.STREAMING,
                        model=self.model,
                    )
                )
            return
        payload, opened, self.titled = await db(services.begin_turn)(
            self.conversation_id,
            Message.Role.USER,
            self.request.text,
            open_answer=answer,
            model=self.model,
            attachments=self.attachments,
        )
        self.request_message_id = payload["id"]
        await self.emit({"type": "message", "message": payload})
        if opened is not None:
            await self._open_message(opened)
        if self.titled:
            # The new title goes out while the answer streams (its read waits on nothing here).
            self.announcing = asyncio.ensure_future(self._send_conversation())

    async def _supersede(self) -> None:
        """Regenerate or edit: mark what is replaced superseded and tell the tabs to remove it."""
        if self.request.kind == "regenerate":
            self.request_message_id, ids = await db(services.begin_regenerate)(self.conversation_id)
        else:
            assert self.request.edit_id is not None
            ids = await db(services.begin_edit)(self.conversation_id, self.request.edit_id)
        if ids:
            await self.emit({"type": "superseded", "message_ids": ids})

    async def _send_conversation(self) -> None:
        """The ``conversation`` frame: title, model and usage as stored now."""
        try:
            info = await db_read(services.conversation_info)(self.conversation_id)
        except (DatabaseError, ObjectDoesNotExist):
            logger.warning(
                "conversation %s: could not read it for its frame", self.conversation_id, exc_info=True
            )
            return
        await self.emit({"type": "conversation", "conversation": info})

    async def _stored(self) -> None:
        """Let the start being stored finish (before a turn ends, so it is settled and echoed)."""
        storing, self.storing = self.storing, None
        if storing is None:
            return
        try:
            await storing
        except Exception:  # the ending below reports the turn's failure; this is the detail
            logger.warning(
                "conversation %s: could not store the start of the turn", self.conversation_id, exc_info=True
            )

    # --- the conversation with the model -----------------------------------------------------
    async def _converse(self) -> None:
        if self.request.kind in ("regenerate", "edit"):
            await self._supersede()
        text = None if self.request.kind in ("regenerate", "prompt") else self.request.text
        try:
            agent, model, history = await db_read(_read_for_model)(self.conversation_id, text)
        except services.AgentUnavailable:
            self.storing = asyncio.ensure_future(self._store_message(answer=False))  # kept, never lost
            raise
        if self.request.attachments and text is not None:
            attached = list(self.request.attachments)
            earlier = []  # an edit keeps what the replaced message read if a server fails now
            if self.request.kind == "edit":
                stored = db_read(services.stored_attachments)
                earlier = await stored(self.conversation_id, self.request.edit_id)
            try:
                self.attachments = await read_for_turn(agent.tools, attached, self.request.user_id, earlier)
            except asyncio.CancelledError:  # stopped while reading: the message is kept all the same
                self.attachments = unread(attached, "stopped before it was read")
                self.storing = asyncio.ensure_future(self._store_message(answer=False))
                raise
            history[-1] = {"role": "user", "content": model_content(text, self.attachments)}
        llm = LLMSettings.from_settings(model or agent.model)
        self.model = llm.model
        configured = llm.configured
        if agent.error:  # rare: store first, so the notice follows the message it is about
            await self._store_message(answer=False)
            await self._notice(_stale_agent_notice(agent))
        else:
            self.storing = asyncio.ensure_future(self._store_message(answer=configured))
        # The first turn may wait here while the MCP servers start; the echo goes out meanwhile.
        await _open_sessions(self.request.user_id)
        context = _context(agent, history, self.request.user_id, model)
        if not context.llm.configured:
            raise LLMError(NOT_CONFIGURED, kind="not_configured")
        used = 0
        while True:
            offered = context.openai_tools if not self.cap_hit else None
            completion, calls = await self._stream_step(context, offered)
            llm_client.note_success()
            if not calls:
                break
            budget = max(context.max_tool_calls - used, 0)
            results = await self._run_calls(context, completion.tool_calls, calls, budget)
            used += min(len(calls), budget)
            context.messages.append(
                services.assistant_entry(
                    completion.text, ((c.id, c.name, c.arguments) for c in completion.tool_calls)
                )
            )
            context.messages.extend(
                services.tool_entry(request.id, result.output)
                for request, result in zip(completion.tool_calls, results, strict=True)
            )
            if used >= context.max_tool_calls:
                self.cap_hit = True
        if self.cap_hit:
            notice = (
                f"Tool call limit reached: agent {context.agent_name} may make {context.max_tool_calls} tool "
                "calls per turn, so the model was asked to answer without tools."
            )
            payload = await db(services.add_message)(self.conversation_id, Message.Role.NOTICE, notice)
            await self.emit({"type": "message", "message": payload})

    async def _stream_step(
        self, context: TurnContext, tools: list[dict[str, Any]] | None
    ) -> tuple[Completion, list[dict[str, Any]]]:
        """One model call, streamed into a new assistant message; returns it and its tool calls."""
        stream = stream_chat(
            context.messages,
            llm=context.llm,
            tools=tools,
            temperature=context.temperature,
            top_p=context.top_p,
        )
        completion: Completion | None = None
        async with contextlib.aclosing(stream):
            # Each next event is awaited as a task: the request goes out while the message rows
            # are written, and text waiting for its frame is flushed while the model is silent.
            # The tasks start eagerly (the request is on its way before the first one is
            # awaited; an event already received costs no loop iteration). The generator must
            # be idle again before aclosing() closes it.
            upcoming = _eager(anext(stream))
            try:
                if self.storing is not None:  # the first request: the start is being stored meanwhile
                    # Shielded: a stop now must not cancel the echo; the ending waits for it.
                    await asyncio.shield(self.storing)
                    self.storing = None
                if self.message_id is None:
                    await self._open_message(
                        await db(services.add_message)(
                            self.conversation_id,
                            Message.Role.ASSISTANT,
                            status=Message.Status.STREAMING,
                            model=context.llm.model,
                        )
                    )
                last_save = time.monotonic()
                while True:
                    if self.unsent:
                        wait = DELTA_INTERVAL - (time.monotonic() - self.last_emit)
                        if wait > 0:
                            await asyncio.wait([upcoming], timeout=wait)
                        if not upcoming.done():
                            await self._flush()
                    try:
                        event = await upcoming
                    except StopAsyncIteration:
                        break
                    if isinstance(event, TextDelta):
                        self.parts.append(event.text)
                        self.unsent.append(event.text)
                        if time.monotonic() - self.last_emit >= DELTA_INTERVAL:
                            await self._flush()
                        if time.monotonic() - last_save >= SAVE_INTERVAL:
                            await db(services.save_partial)(self.message_id, self.text)
                            last_save = time.monotonic()
                    else:
                        completion = event
                    upcoming = _eager(anext(stream))
            except BaseException:
                upcoming.cancel()
                await asyncio.wait([upcoming])
                if not upcoming.cancelled():
                    upcoming.exception()  # retrieved: the error that matters is the one raised here
                raise
            await self._flush()
        assert completion is not None  # stream_chat always ends with a Completion or raises
        requested = completion.tool_calls if tools else []
        identities = {
            call.name: services.tool_identity(call.name, self.request.user_id) for call in requested
        }
        final = await db(services.finish_message)(
            self.message_id,
            content=completion.text,
            status=Message.Status.COMPLETE,
            tool_calls=[(call.id, call.name, call.arguments) for call in requested],
            identities=identities,
            created_at=self.message_created_at,
            conversation_id=self.conversation_id,
            model=completion.model or context.llm.model,
            usage=completion.usage,
        )
        self.message_id = None
        await self.emit({"type": "message_complete", "message": final})
        return completion, final["tool_calls"]

    async def _open_message(self, payload: dict[str, Any]) -> None:
        """Start streaming into the assistant message ``payload`` (just created)."""
        self.message_id, self.parts, self.unsent, self.sent = payload["id"], [], [], 0
        self.message_created_at = datetime.fromisoformat(payload["created_at"])
        self.last_emit = 0.0  # the first text goes out at once
        await self.emit({"type": "message_start", "message": payload})

    async def _flush(self) -> None:
        """Send the text not yet sent as one ``text_delta`` (deltas are coalesced per DELTA_INTERVAL)."""
        if not self.unsent or self.message_id is None:
            return
        text = "".join(self.unsent)
        self.unsent.clear()
        offset = self.sent
        self.sent += utf16_length(text)
        self.last_emit = time.monotonic()
        await self.emit({"type": "text_delta", "message_id": self.message_id, "offset": offset, "text": text})

    @contextlib.contextmanager
    def _call_scope(self, call: dict[str, Any]) -> Iterator[None]:
        """A tool call of this conversation: its forms, its approval and its progress reach the tabs."""
        with (
            asking(asker_for(self.conversation_id, call, self.emit)),
            approving(gate_for(self.conversation_id, call, self.emit)),
            tracking(self.conversation_id, call, self.emit),
        ):
            yield

    async def _run_calls(
        self,
        context: TurnContext,
        requests: list[ToolCallRequest],
        calls: list[dict[str, Any]],
        budget: int,
    ) -> list[ToolResult]:
        """Run one step's tool calls concurrently; calls beyond ``budget`` are skipped."""
        for call in calls:
            await self.emit({"type": "tool_call", "call": call})

        async def run_one(request: ToolCallRequest, call: dict[str, Any], allowed: bool) -> ToolResult:
            if not allowed:
                result = ToolResult(
                    output=f"Not run: the limit of {context.max_tool_calls} tool calls per turn was reached.",
                    is_error=True,
                )
                final = await db(services.finish_tool_call)(call, result, 0, status=ToolCall.Status.SKIPPED)
            else:
                started = time.monotonic()
                with self._call_scope(call):
                    result = await _execute(request.name, request.arguments, context.tools)
                duration = int((time.monotonic() - started) * 1000)
                final = await db(services.finish_tool_call)(call, result, duration)
            await self.emit({"type": "tool_result", "call": final})
            return result

        async with asyncio.TaskGroup() as group:
            tasks = [
                group.create_task(run_one(request, call, index < budget))
                for index, (request, call) in enumerate(zip(requests, calls, strict=True))
            ]
        return [task.result() for task in tasks]

    # --- the tool console --------------------------------------------------------------------
    async def _console(self, agent: Agent, command: str, rest: str) -> None:
        from boocode.tools.registry import agent_tools

        if command == "/help":
            await self._notice(CONSOLE_HELP)
            return
        # What the console lists and runs follows mcp.json and AGENTS.md as they are now.
        await _open_sessions(self.request.user_id, fresh=True)
        tools = agent_tools(agent, user_id=self.request.user_id)
        if command == "/tools":
            await self._notice(_tools_listing(agent.name, tools))
            return
        words = rest.split(None, 1)  # the tool's name, then its JSON arguments (default {})
        if not words:
            await self._notice('Usage: `/call <tool> {"argument": "value"}` — `/tools` lists the tools.')
            return
        name = words[0]
        arguments = words[1].strip() if len(words) > 1 else "{}"
        call = await db(services.add_tool_call)(
            self.request_message_id,
            call_id=f"console_{uuid.uuid4().hex[:12]}",
            name=name,
            arguments=arguments,
            identity=services.tool_identity(name, self.request.user_id),
            conversation_id=self.conversation_id,
        )
        await self.emit({"type": "tool_call", "call": call})
        started = time.monotonic()
        with self._call_scope(call):
            result = await _execute(name, arguments, tools)
        duration = int((time.monotonic() - started) * 1000)
        final = await db(services.finish_tool_call)(call, result, duration)
        await self.emit({"type": "tool_result", "call": final})

    async def _notice(self, text: str) -> None:
        payload = await db(services.add_message)(self.conversation_id, Message.Role.NOTICE, text)
        await self.emit({"type": "message", "message": payload})

    # --- endings -----------------------------------------------------------------------------
    async def _stopped(self) -> None:
        await self._settle(Message.Status.STOPPED, "", services.CANCELLED_OUTPUT)

    async def _failed(self, error: str) -> None:
        await self._settle(Message.Status.FAILED, error, f"Not finished: {error}")

    async def _settle(self, status: str, error: str, call_output: str) -> None:
        """Store how the turn ended (text so far, unfinished calls) and tell the clients."""
        try:
            message, created, calls = await db(services.settle_turn)(
                self.conversation_id,
                self.message_id,
                content=self.text if self.message_id is not None else "",
                status=status,
                error=error,
                call_output=call_output,
            )
        except (DatabaseError, ObjectDoesNotExist):
            logger.warning(
                "conversation %s: could not save how the turn ended", self.conversation_id, exc_info=True
            )
            return
        self.message_id = None
        if message is not None:
            await self.emit({"type": "message" if created else "message_complete", "message": message})
        for call in calls:
            await self.emit({"type": "tool_result", "call": call})

    async def _end(self, status: str, error: str) -> None:
        # turn_end is the last frame of the turn proper; the status line is refreshed just before
        # it, and the conversation's title, model and usage follow it.
        if self.announcing is not None:
            await self.announcing
        await self.emit(status_payload())
        await self.emit(
            {
                "type": "turn_end",
                "turn_id": self.request.turn_id,
                "status": status,
                "error": error or None,
                "cap_hit": self.cap_hit,
            }
        )
        await self._send_conversation()
        if self.titled and status == "complete" and settings.TITLE_FROM_MODEL and self.model:
            _background(_title_from_model(self.conversation_id, self.model, self._emit_event))


_titling: set[asyncio.Task[None]] = set()  # title requests running after their turn ended


def _background(coroutine: Coroutine[Any, Any, None]) -> None:
    task = asyncio.ensure_future(coroutine)
    _titling.add(task)
    task.add_done_callback(_titling.discard)


def _title_request(conversation_id: int) -> tuple[str, list[dict[str, Any]]]:
    """The title now, and the request for a new one: the instruction, the first message and answer."""
    history = [
        {"role": entry["role"], "content": entry["content"]}
        for entry in services.llm_history(conversation_id)
        if entry["role"] in ("user", "assistant") and entry.get("content")
    ]
    title = services.conversation_title(conversation_id)
    return title, [{"role": "system", "content": TITLE_PROMPT}, *history[:2]]


async def _title_from_model(conversation_id: int, model: str, emit: Emit) -> None:
    """Ask ``model`` for a title after the first answer; store and announce it.

    Any failure (no answer in time, an error, an empty answer) keeps the title made from the
    first message, and is logged without the conversation's text. A title the user gave the
    conversation meanwhile is kept too. The tokens the request used (when the endpoint reports
    them) count in the conversation's totals whatever became of the title.
    """
    try:
        current, messages = await db_read(_title_request)(conversation_id)
        done: Completion | None = None
        async with asyncio.timeout(TITLE_TIMEOUT):
            stream = stream_chat(messages, llm=LLMSettings.from_settings(model))
            async with contextlib.aclosing(stream):
                async for event in stream:
                    if isinstance(event, Completion):
                        done = event
        title = (done.text if done else "").strip().strip(QUOTES).strip()
        counted = done is not None and done.usage is not None
        if done is not None and done.usage is not None:
            await db(services.record_title_usage)(conversation_id, done.usage)
        # A title the user gave meanwhile (a rename) stays: set_title refuses to replace it.
        named = bool(title) and await db(services.set_title)(conversation_id, title, replacing=current)
        if not named and not counted:
            return
        info = await db_read(services.conversation_info)(conversation_id)
    except (LLMError, TimeoutError, DatabaseError, ObjectDoesNotExist) as exc:
        logger.warning("conversation %s: no title from the model (%s)", conversation_id, exc)
        return
    try:
        await emit({"type": "conversation", "conversation": info})
    except Exception:  # the channel layer is a boundary: a lost frame is not a lost title
        logger.exception("could not emit the title of conversation %s", conversation_id)


def _tools_listing(agent_name: str, tools: list[Any]) -> str:
    if not tools:
        return f"Agent **{agent_name}** has no tools right now (check the status line for MCP servers)."
    lines = [f"Agent **{agent_name}** may use {len(tools)} tool{'s' if len(tools) != 1 else ''}:", ""]
    for tool in tools:
        description = " ".join((tool.description or "").split())
        if len(description) > 160:
            description = description[:157] + "..."
        lines.append(f"- `{tool.name}` ({tool.source}){': ' + description if description else ''}")
    return "\n".join(lines)


async def run_turn(request: TurnRequest, emit: Emit) -> str:
    """Run one turn to its end (see the module docstring); returns its final status."""
    return await _Turn(request, emit).run()


class TurnRegistry:
    """The running turns of this process, one per conversation."""

    def __init__(self) -> None:
        self._tasks: dict[int, asyncio.Task[str]] = {}
        self._turns: dict[int, _Turn] = {}
        self._cancelled: set[asyncio.Task[str]] = set()
        self._swept: set[SharedTurns] = set()  # shared states whose sweep for dead turns runs

    def _live_task(self, conversation_id: int) -> asyncio.Task[str] | None:
        task = self._tasks.get(conversation_id)
        if task is None or task.done():
            return None
        try:
            if task.get_loop() is not asyncio.get_running_loop():
                return None  # left behind by a loop that is gone (tests run one loop per test)
        except RuntimeError:
            pass
        return task

    def running(self, conversation_id: int) -> bool:
        """Whether a turn is running in the conversation."""
        return self._live_task(conversation_id) is not None

    def turn_id(self, conversation_id: int) -> str | None:
        """The id of the running turn, if any."""
        turn = self._turns.get(conversation_id)
        return turn.request.turn_id if turn is not None and self.running(conversation_id) else None

    def start(self, request: TurnRequest, emit: Emit) -> asyncio.Task[str]:
        """Start a turn as a task on the running loop; raises :class:`TurnInProgress`."""
        conversation_id = request.conversation_id
        if self.running(conversation_id):
            raise TurnInProgress(conversation_id)
        turn = _Turn(request, emit)
        self._turns[conversation_id] = turn
        # Eager: the turn runs at once up to its first wait (the read before the model request).
        loop = asyncio.get_running_loop()
        task = asyncio.eager_task_factory(loop, turn.run(), name=f"turn-{conversation_id}")
        self._tasks[conversation_id] = task
        task.add_done_callback(partial(self._forget, conversation_id))
        return task

    def _forget(self, conversation_id: int, task: asyncio.Task[str]) -> None:
        if self._tasks.get(conversation_id) is task:
            del self._tasks[conversation_id]
            self._turns.pop(conversation_id, None)
        self._cancelled.discard(task)

    def cancel(self, conversation_id: int) -> bool:
        """Ask the running turn to stop; ``False`` if none runs. Repeated calls are harmless."""
        task = self._live_task(conversation_id)
        if task is None:
            return False
        if task not in self._cancelled:
            self._cancelled.add(task)
            forms.stop(conversation_id)  # before the calls are cancelled: the servers hear "cancel"
            task.cancel()
        return True

    async def wait(self, conversation_id: int) -> None:
        """Wait until the conversation's turn (if any) has ended (bound it with ``asyncio.timeout``)."""
        task = self._live_task(conversation_id)
        if task is not None:
            await asyncio.wait([task])

    def live_text(self, conversation_id: int) -> tuple[int, str] | None:
        """``(message id, text so far)`` of the message being streamed, if any."""
        turn = self._turns.get(conversation_id)
        if turn is None or turn.message_id is None or not self.running(conversation_id):
            return None
        return turn.message_id, turn.text

    # --- across processes (Redis channel layer; see boocode.chat.locks) ----------------------

    def _shared(self) -> SharedTurns | None:
        """The lock and control channel shared with other processes; None in the embedded mode."""
        shared = shared_turns(self._control)
        if shared is not None and shared not in self._swept:
            self._swept.add(shared)
            shared.on_lost(self.cancel)
            _background(self._sweep(shared))
            # Ctrl-C / SIGTERM: stop this process's turns so their locks go back at once
            # (otherwise the other processes would wait for the TTL and call them interrupted).
            on_server_shutdown(self.stop_all)
        return shared

    async def stop_all(self) -> None:
        """Stop every turn of this process and wait (at most :data:`SHUTDOWN_WAIT`) for them to end."""
        tasks = [task for key in list(self._tasks) if (task := self._live_task(key)) is not None]
        for conversation_id in list(self._tasks):
            self.cancel(conversation_id)
        if tasks:
            await asyncio.wait(tasks, timeout=SHUTDOWN_WAIT)

    async def begin(self, request: TurnRequest, emit: Emit) -> asyncio.Task[str]:
        """:meth:`start` after taking the conversation's lock across processes (Redis layer only).

        Raises :class:`TurnInProgress` when a turn runs here or in another process. A lock left
        by a process that died mid-turn is taken over: that turn is settled first. The lock is
        given back just before ``turn_end`` goes out, so a tab may start the next turn at once.
        """
        conversation_id = request.conversation_id
        shared = self._shared()
        if shared is None:
            return self.start(request, emit)
        if self.running(conversation_id):
            raise TurnInProgress(conversation_id)
        try:
            claim = await shared.acquire(conversation_id, request.turn_id)
        except TurnLocked:
            raise TurnInProgress(conversation_id) from None
        released = False

        async def release() -> None:
            nonlocal released
            if not released:
                released = True
                await shared.release(conversation_id, claim, request.turn_id)

        async def emit_releasing(event: dict[str, Any]) -> None:
            if event.get("type") == "turn_end" and event.get("turn_id") == request.turn_id:
                try:
                    await release()
                except Exception:  # Redis away: the lock expires after its TTL; the tabs still hear
                    logger.exception("conversation %s: could not give the turn lock back", conversation_id)
            await emit(event)

        try:
            if claim.interrupted:
                await self._settle(conversation_id, claim.interrupted)
            task = self.start(request, emit_releasing)
        except BaseException:
            await release()
            raise
        task.add_done_callback(lambda _task: _background(release()))
        return task

    async def state(self, conversation_id: int) -> TurnState:
        """The conversation's turn as a connecting tab needs it, wherever it runs.

        A turn of another process is asked for its live text, open forms, approvals and progress
        over the channel layer; a conversation whose turn's process died is settled now.
        """
        shared = None if self.running(conversation_id) else self._shared()
        if shared is None:
            return self._local_state(conversation_id)
        holder = await shared.holder(conversation_id)
        if holder is None:
            return TurnState(settled=await self._settle_dead(shared, conversation_id))
        if holder.turn_id.startswith(SETTLING):
            return TurnState()
        reply = await shared.request(
            holder.channel, {"type": "turn.snapshot", "conversation": conversation_id}, SNAPSHOT_TIMEOUT
        )
        if reply is None:  # the owner is busy or dying: the stored text and running state
            return TurnState(running=True, turn_id=holder.turn_id)
        live = reply.get("live")
        return TurnState(
            running=bool(reply.get("running")),
            turn_id=reply.get("turn_id"),
            live=(live[0], live[1]) if live else None,
            elicitations=reply.get("elicitations") or [],
            progress=reply.get("progress") or [],
            approvals=reply.get("approvals") or [],
        )

    def _local_state(self, conversation_id: int) -> TurnState:
        return TurnState(
            running=self.running(conversation_id),
            turn_id=self.turn_id(conversation_id),
            live=self.live_text(conversation_id),
            elicitations=forms.pending(conversation_id),
            progress=running_progress(conversation_id),
            approvals=approvals.pending(conversation_id),
        )

    async def stop(self, conversation_id: int) -> bool:
        """:meth:`cancel`, also of a turn running in another process; ``False`` if none runs."""
        if self.cancel(conversation_id):
            return True
        holder = await self._remote_holder(conversation_id)
        if holder is None:
            return False
        await holder[0].send(holder[1].channel, {"type": "turn.cancel", "conversation": conversation_id})
        return True

    async def answer(
        self, conversation_id: int, frame: dict[str, Any], *, user_id: int | None, reply_to: str
    ) -> tuple[str, str, Any] | None:
        """Apply an ``elicitation_answer`` or ``approval_answer`` frame where the turn runs.

        Here: the error to send back (code, message, form id), or None. In another process the
        frame goes to it with the same checks, and an error comes back to ``reply_to`` as a
        ``chat.answer_error`` message.
        """
        holder = None if self.running(conversation_id) else await self._remote_holder(conversation_id)
        if holder is None:
            return answer_here(conversation_id, frame, user_id)
        message = {
            "type": "turn.answer",
            "conversation": conversation_id,
            "frame": frame,
            "user_id": user_id,
            "reply_to": reply_to,
        }
        await holder[0].send(holder[1].channel, message)
        return None

    async def _remote_holder(self, conversation_id: int) -> tuple[SharedTurns, Holder] | None:
        shared = self._shared()
        if shared is None:
            return None
        holder = await shared.holder(conversation_id)
        if holder is None or holder.turn_id.startswith(SETTLING):
            return None
        return shared, holder

    async def _control(self, message: dict[str, Any]) -> None:
        """A message from another process about a turn of this one (see :mod:`boocode.chat.locks`)."""
        conversation_id = message.get("conversation")
        if not isinstance(conversation_id, int):
            return
        kind = message.get("type")
        if kind == "turn.cancel":
            self.cancel(conversation_id)
        elif kind == "turn.snapshot" and isinstance(message.get("reply"), str):
            state = self._local_state(conversation_id)
            answer = {"type": "turn.reply", "request": message.get("request"), **state.wire()}
            await get_channel_layer().send(message["reply"], answer)
        elif kind == "turn.answer" and isinstance(message.get("frame"), dict):
            error = answer_here(conversation_id, message["frame"], message.get("user_id"))
            if error is not None and isinstance(message.get("reply_to"), str):
                code, text, form_id = error
                reply = {"type": "chat.answer_error", "code": code, "message": text, "id": form_id}
                await get_channel_layer().send(message["reply_to"], reply)

    async def _settle(self, conversation_id: int, turn_id: str) -> None:
        """Settle what a dead process's turn left (under the lock) and end that turn in every tab."""
        from boocode.chat.events import group_emitter

        await db(services.close_interrupted)(conversation_id)
        logger.warning(
            "conversation %s: turn %s was interrupted by a process that died", conversation_id, turn_id
        )
        end = {"type": "turn_end", "turn_id": turn_id, "status": "failed", "error": services.INTERRUPTED}
        try:
            await group_emitter(conversation_id)({**end, "cap_hit": False})
        except Exception:  # the rows are settled; a tab that missed this sees them on reload
            logger.exception("could not announce the end of interrupted turn %s", turn_id)

    async def _settle_dead(self, shared: SharedTurns, conversation_id: int) -> bool:
        """Settle the conversation if its turn's process died holding it; whether it did."""
        claimed = await shared.claim_interrupted(conversation_id)
        if claimed is None:
            return False
        claim, dead = claimed
        try:
            await self._settle(conversation_id, dead)
        finally:
            await shared.release(conversation_id, claim, dead)
        return True

    async def _sweep(self, shared: SharedTurns) -> None:
        """Settle conversations whose turn's process died, every half TTL, in every process."""
        while True:
            try:
                for conversation_id in await shared.interrupted():
                    await self._settle_dead(shared, conversation_id)
            except Exception:  # Redis or the database away: look again next time
                logger.exception("could not look for interrupted turns")
            await asyncio.sleep(shared.ttl / 2)


SETTLING = "settling-"  # the turn id in a lock taken only to settle a dead process's turn
SNAPSHOT_TIMEOUT = 2.0  # seconds a connecting tab waits for another process's running turn
SHUTDOWN_WAIT = 5.0  # seconds a stopping server gives its turns to save and give their locks back


@dataclass
class TurnState:
    """A conversation's turn as the ``history`` frame shows it (:meth:`TurnRegistry.state`)."""

    running: bool = False
    turn_id: str | None = None
    live: tuple[int, str] | None = None  # (message id, text so far) of the message being streamed
    elicitations: list[dict[str, Any]] = field(default_factory=list)
    progress: list[dict[str, Any]] = field(default_factory=list)
    approvals: list[dict[str, Any]] = field(default_factory=list)
    settled: bool = False  # a dead process's turn was settled just now (re-read the history)

    def wire(self) -> dict[str, Any]:
        """As sent between processes (no tuples)."""
        return {
            "running": self.running,
            "turn_id": self.turn_id,
            "live": list(self.live) if self.live else None,
            "elicitations": self.elicitations,
            "progress": self.progress,
            "approvals": self.approvals,
        }


def answer_here(
    conversation_id: int, frame: dict[str, Any], user_id: int | None
) -> tuple[str, str, Any] | None:
    """Apply an answer frame to this process's open forms or approvals; the error to send, or None."""
    if frame.get("type") == "elicitation_answer":
        form_id = frame.get("id")
        try:
            forms.answer(conversation_id, form_id, frame.get("action"), frame.get("content"))
        except UnknownForm:
            return "unknown_elicitation", "No open form with this id in this conversation.", None
        except BadAnswer as exc:
            return "bad_answer", str(exc), form_id
        return None
    try:
        approvals.answer(
            conversation_id, frame.get("id"), frame.get("decision"), frame.get("remember"), user_id=user_id
        )
    except UnknownApproval:
        return "unknown_approval", "No pending approval with this id in this conversation.", None
    except BadDecision as exc:
        return "bad_approval", str(exc), None
    return None


registry = TurnRegistry()


def merge_live_text(
    history: list[dict[str, Any]], conversation_id: int, live: tuple[int, str] | None = None
) -> list[dict[str, Any]]:
    """Replace the saved text of the message being streamed with the live text (reconnects).

    ``live`` as :meth:`TurnRegistry.state` found it (another process's turn); else this process's.
    """
    live = live or registry.live_text(conversation_id)
    if live is not None:
        message_id, text = live
        for message in history:
            if message["id"] == message_id:
                message["content"] = text
    return history

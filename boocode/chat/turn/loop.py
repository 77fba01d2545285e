"""One chat turn: a message (or a regenerate, an edit, a prompt, a console command) in;
streamed text, tool calls and their results out.

Ownership: a turn runs as a task of the turn registry (:mod:`boocode.chat.turn.registry`), at
most one per conversation, and belongs to no websocket. Every event goes to its ``emit`` (the
conversation's group), so a dropped socket does not stop it and every open tab sees it.

Order: what the user sent is stored in one write unit while the first model request goes out,
and no event of the answer is handled before that unit has finished, so frames and rows keep
their order (``message`` echo, ``message_start``, ``reasoning_delta``, ``text_delta``...). The
tool calls of one step run concurrently (:mod:`boocode.chat.turn.tool_step`) and go back to the
model in the order it asked for them; they go out while the answer and their rows are written
(one write, which may wait behind other turns' writes on the database thread), and what the tabs hear of them
(``message_complete``, ``tool_call``, then their approvals, questions, progress and results)
follows that write. ``turn_end`` is the last frame of the turn proper: the status line is refreshed
just before it and a ``conversation`` frame follows it. Regenerated and edited messages are
superseded (a ``superseded`` frame), never deleted.

Bounds: at most the agent's ``max_tool_calls`` tool calls run per turn; then the model is asked
once more without tools and a notice says so. Each write is one short
``database_sync_to_async`` call and the model is never awaited inside one; the one read before
the first model request runs on the loop's worker threads (``thread_sensitive=False``), so it
never queues behind other turns' writes. The answer being streamed, its pace of frames and
saves and its HTML, is :mod:`boocode.chat.turn.answer`.

Cancellation: a stop (:meth:`~boocode.chat.turn.registry.TurnRegistry.cancel`) cancels the task
wherever it waits: in the model stream (the HTTP response is closed) or in the tool calls (the
task group cancels them and the hub the MCP requests). The turn then saves the partial text as
``stopped``, marks unfinished tool calls ``cancelled``, emits ``turn_end`` with status
``stopped`` and re-raises.

Failures: an :class:`~boocode.chat.llm.client.LLMError` (or any unexpected error, which is logged)
marks the message ``failed`` with a message for the user and ends the turn ``failed``;
everything stored before stays. A prompt that cannot be got ends it ``failed`` with a notice.
A person whose daily token budget is spent (:mod:`boocode.chat.ledger.budgets`, checked in the read
before the model request, and before every model request with the requests in flight counted)
gets the turn ended ``failed`` with code ``budget_spent``, what they sent stored and that model
request not made. A request's hold on the budget (:mod:`boocode.chat.turn.budget_hold`) is
released with the write that counts its answer, or when the turn ends without it
(:meth:`Turn._settle`).

Context: what the turn gathers before its model request (the read, the agent's tools, the
history, the window the request is fitted to) is :mod:`boocode.chat.turn.context`; the tool step
(one answer's calls, run concurrently) is :mod:`boocode.chat.turn.tool_step`; summarising the
earlier turns (before a request, or ``/compact``) is :mod:`boocode.chat.turn.compacting`.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from channels.db import database_sync_to_async
from django.conf import settings
from django.core.exceptions import ObjectDoesNotExist
from django.db import DatabaseError

from agents.models import Agent
from boocode.chat.calls.execution import prepare_hub
from boocode.chat.calls.questions import forms
from boocode.chat.ledger import budgets
from boocode.chat.ledger import metrics as chat_metrics
from boocode.chat.llm import client as llm_client
from boocode.chat.llm import windows
from boocode.chat.llm.client import Completion, LLMError, LLMSettings, stream_chat
from boocode.chat.llm.model_windows import server_window
from boocode.chat.llm.request_budget import calibration
from boocode.chat.llm.status import status_payload
from boocode.chat.models import Message
from boocode.chat.turn import agent_choice, conversations, titles
from boocode.chat.turn import history as model_history
from boocode.chat.turn.agent_skills import start_with_skills
from boocode.chat.turn.answer import Answer
from boocode.chat.turn.budget_hold import BudgetHold
from boocode.chat.turn.compacting import compact, compact_command
from boocode.chat.turn.console import parse_command, run_command
from boocode.chat.turn.context import (
    NOT_CONFIGURED,
    Read,
    TurnContext,
    admitted_read,
    fit_request,
    read_for_model,
    refit,
    refused_again,
    tools_left_out_notice,
    turn_context,
)
from boocode.chat.turn.prompt_insertion import PromptRequest, insert_prompt
from boocode.chat.turn.tool_step import ToolCalls, run_calls
from boocode.chat.wire import payloads
from boocode.chat.wire.attachments import model_content, read_for_turn, unread
from boocode.chat.wire.events import Emit
from mcpclient.runtime import WorkerUnavailable
from mcpclient.telemetry import tracing

logger = logging.getLogger(__name__)

MAX_MESSAGE_CHARS = 32_000
INTERNAL_ERROR = "Internal error while running this turn; the details are in the server log."
EMPTY_AT_LENGTH = (
    'The model stopped at its length limit (finish_reason "length") before it wrote any answer: the '
    "request and the answer did not fit its context window, or the server's limit on answer tokens "
    "is too small. Ask again, or start a new conversation; an administrator can set the model's "
    "window (the agent's context: key or BOOCODE_LLM_CONTEXT_TOKENS)."
)


def _future() -> asyncio.Future[bool | None]:
    return asyncio.get_running_loop().create_future()


@dataclass(frozen=True)
class Admission:
    """The sending socket's session check, run by the turn before it has any effect.

    ``check`` (a blocking function: the session still logs the user in) runs in the turn's first
    database hop; for a plain message that hop is also the read before the model request, so
    the check costs no hop of its own. ``verdict`` tells the socket the outcome: ``False`` and
    the turn ends at once, having sent, stored and asked nothing; ``None``: stopped before the
    check ended (the socket checks for itself).
    """

    check: Callable[[], bool]
    verdict: asyncio.Future[bool | None] = field(default_factory=_future)


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
    # Resources attached to the message ({server, uri}), read by the turn (boocode.chat.wire.attachments).
    attachments: tuple[dict[str, str], ...] = ()
    # kind "prompt": the checked prompt frame (boocode.chat.turn.prompt_insertion) whose messages
    # are inserted.
    prompt: PromptRequest | None = None
    # The socket's session, checked by the turn itself (None: checked before, or no socket).
    admission: Admission | None = None


def _stale_agent_notice(agent: Agent) -> str:
    """Said when the agent's section in AGENTS.md is invalid and its last valid definition is used."""
    return (
        f'The agent "{agent.name}" has an error in AGENTS.md; its last valid definition is in use until '
        "an administrator fixes the file."
    )


def _only_thinking_notice(completion: Completion) -> str:
    """Said when the model's answer was all thinking (shown folded above) and no text."""
    if completion.finish_reason == "length":
        return (
            "The model used up its answer's length thinking and gave no answer (its thinking is shown "
            "above). Ask again, or ask for something smaller."
        )
    return "The model only thought and gave no answer (its thinking is shown above). Ask again to get one."


db = database_sync_to_async
# Reads on the loop's worker threads: they do not wait behind the writes on the database thread.
db_read = partial(database_sync_to_async, thread_sensitive=False)


class Turn:
    """The state of one running turn (see the module docstring)."""

    def __init__(self, request: TurnRequest, emit: Emit) -> None:
        self.request = request
        self.conversation_id = request.conversation_id
        self._emit_event = emit
        self.request_message_id: int | None = None  # the stored user message or console command
        self.answer = Answer(self.emit)  # the assistant message being streamed (the registry reads it)
        self.cap_hit = False
        self.interrupted = ""  # why the server stopped the turn (registry.cancel with a reason)
        self.storing: asyncio.Task[None] | None = None  # the start being stored (first model request)
        self.model = ""  # the model asked for in this turn (stored on each answer)
        self.titled = False  # this turn's message named the conversation
        self.announcing: asyncio.Future[None] | None = None  # the conversation frame of a new title
        self.attachments: list[dict[str, Any]] = []  # the attached resources as read (stored)
        self.prefetched: Read | None = None  # the read before the model request, done by the admission
        self.hold = BudgetHold()  # the owner's budget: whose usage counts, what a request holds
        self.code = ""  # why the turn failed, for clients (turn_end's code): "budget_spent"

    async def emit(self, event: dict[str, Any]) -> None:
        try:
            await self._emit_event(event)
        except Exception:  # the channel layer is a boundary: a lost frame must not end the turn
            logger.exception("could not emit %s for conversation %s", event.get("type"), self.conversation_id)

    async def run(self) -> str:
        """Run to the end; returns ``complete``, ``failed`` or ``refused`` (the session is gone:
        nothing was sent or stored); re-raises ``CancelledError``.

        The turn is the root span of its trace (``turn``) and counts in ``boocode_turns_total``
        and ``boocode_turn_duration_seconds`` (:mod:`boocode.chat.ledger.metrics`; a refused turn does not).
        """
        attributes = {
            "boocode.conversation.id": self.conversation_id,
            "boocode.turn.id": self.request.turn_id,
            "boocode.turn.kind": self.request.kind,
        }
        started, status = time.monotonic(), "failed"
        with tracing.span("turn", attributes=attributes) as span:
            try:
                status = await self._run()
            except asyncio.CancelledError:
                status = "failed" if self.interrupted else "stopped"
                raise
            finally:
                if status != "refused":
                    chat_metrics.TURNS.labels(status).inc()
                    chat_metrics.TURN_SECONDS.observe(time.monotonic() - started)
                error = "failed" if status == "failed" else ""
                tracing.outcome(span, error, **{"boocode.turn.status": status})
        return status

    async def _run(self) -> str:
        typed = self.request.kind not in ("regenerate", "prompt")
        command = parse_command(self.request.text) if typed else None
        if not await self._admit(command is None and self.request.kind == "message"):
            return "refused"
        await self.emit(
            {"type": "turn_start", "turn_id": self.request.turn_id, "conversation": self.conversation_id}
        )
        status, error = "complete", ""
        try:
            if command is not None:
                if self.request.kind == "edit":
                    await self._supersede()
                agent = await self._store_command()
                if command[0] == "/compact":
                    await compact_command(self.conversation_id, self.request.user_id, self.emit, self._notice)
                else:
                    await run_command(
                        *command,
                        agent=agent,
                        conversation_id=self.conversation_id,
                        user_id=self.request.user_id,
                        message_id=self.request_message_id,
                        emit=self.emit,
                        notice=self._notice,
                    )
            elif self.request.kind == "prompt" and (error := await self._insert_prompt()):
                status = "failed"  # nothing inserted; the notice says why
            else:
                await self._converse()
        except asyncio.CancelledError:
            forms.stop(self.conversation_id)
            await self._stored()
            if self.interrupted:  # stopped by the server, for a reason (not by a person)
                await self._failed(self.interrupted)
                await self._end("failed", self.interrupted)
            else:
                await self._stopped()
                await self._end("stopped", "")
            raise
        except WorkerUnavailable as exc:
            status, error = "failed", f"The MCP servers cannot be reached: {exc}."
            await self._stored()
            await self._failed(error)
        except LLMError as exc:
            status, error = "failed", str(exc)
            llm_client.note_error(exc)
            await self._stored()
            await self._failed(error)
        except agent_choice.AgentUnavailable as exc:
            status, error = "failed", str(exc)
            await self._stored()
            await self._failed(error)
        except budgets.BudgetSpent as exc:  # no model request was made; what was sent is stored
            status, error, self.code = "failed", str(exc), "budget_spent"
            await self._stored()
            await self._failed(error)
        except (conversations.NothingToRegenerate, conversations.UnknownMessage):
            # Checked before the turn started; only another tab's edit in between gets here.
            status, error = "failed", "The message to answer again is gone (changed in another tab)."
        except Exception:  # the top of the turn task: the user gets a message, the log the traceback
            logger.exception("turn %s in conversation %s failed", self.request.turn_id, self.conversation_id)
            status, error = "failed", INTERNAL_ERROR
            await self._stored()
            await self._failed(error)
        await self._end(status, error)
        return status

    async def _admit(self, message: bool) -> bool:
        """Run the request's :class:`Admission` (with the model read of a plain ``message``)."""
        admission = self.request.admission
        if admission is None:
            return True
        try:
            admitted, self.prefetched = await db_read(admitted_read)(
                admission.check, self.conversation_id, self.request.text if message else None
            )
        except agent_choice.AgentUnavailable:  # admitted; the turn reads again and says so
            admitted = True
        except asyncio.CancelledError:
            admission.verdict.set_result(None)
            raise
        except Exception as exc:  # the socket raises it, as its own check would have
            admission.verdict.set_exception(exc)
            return False
        admission.verdict.set_result(admitted)
        return admitted

    async def _insert_prompt(self) -> str:
        """Insert the request's prompt and announce its messages; ``""``, or why nothing was inserted."""
        assert self.request.prompt is not None
        inserted = await insert_prompt(self.request.prompt, self.conversation_id, self.request.user_id)
        if inserted.error:
            await self._notice(f"The prompt was not inserted: {inserted.error}")
            return inserted.error
        for payload in inserted.payloads:
            await self.emit({"type": "message", "message": payload})
        if inserted.titled:
            self.titled = True
            self.announcing = asyncio.ensure_future(self._send_conversation())
        return ""

    async def _store_command(self) -> Agent:
        """Store a console command (echoed to the clients); the conversation's agent."""
        payload, _, titled = await db(conversations.begin_turn)(
            self.conversation_id, Message.Role.CONSOLE, self.request.text
        )
        self.request_message_id = payload["id"]
        await self.emit({"type": "message", "message": payload})
        if titled:  # (named after the command until the first message: no model title for it)
            self.announcing = asyncio.ensure_future(self._send_conversation())
        agent = await db_read(agent_choice.conversation_agent)(self.conversation_id)
        if agent.error:
            await self._notice(_stale_agent_notice(agent))
        return agent

    async def _store_message(self, answer: bool) -> None:
        """Store the user's message (echoed) and, with ``answer``, open the answer's message.

        A regenerated answer has no new user message: only the answer's message is opened.
        """
        if self.request.kind in ("regenerate", "prompt"):  # the history already ends with the question
            if answer:
                await self.answer.open(
                    await db(conversations.add_message)(
                        self.conversation_id,
                        Message.Role.ASSISTANT,
                        status=Message.Status.STREAMING,
                        model=self.model,
                    )
                )
            return
        payload, opened, self.titled = await db(conversations.begin_turn)(
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
            await self.answer.open(opened)
        if self.titled:
            # The new title goes out while the answer streams (its read waits on nothing here).
            self.announcing = asyncio.ensure_future(self._send_conversation())

    async def _supersede(self) -> None:
        """Regenerate or edit: mark what is replaced superseded and tell the tabs to remove it."""
        if self.request.kind == "regenerate":
            self.request_message_id, ids = await db(conversations.begin_regenerate)(self.conversation_id)
        else:
            assert self.request.edit_id is not None
            ids = await db(conversations.begin_edit)(self.conversation_id, self.request.edit_id)
        if ids:
            await self.emit({"type": "superseded", "message_ids": ids})

    async def _send_conversation(self) -> None:
        """The ``conversation`` frame: title, model and usage as stored now."""
        try:
            info = await db_read(payloads.conversation_info)(self.conversation_id)
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
        if self.request.kind == "regenerate":
            # Checked before the answer is superseded: a refused regenerate leaves the page as it was.
            _, _, standing = await db_read(budgets.conversation_standing)(self.conversation_id)
            if standing.exhausted:
                raise budgets.BudgetSpent(budgets.refusal(standing))
        if self.request.kind in ("regenerate", "edit"):
            await self._supersede()
        text = None if self.request.kind in ("regenerate", "prompt") else self.request.text
        try:
            read, self.prefetched = self.prefetched, None
            read = read or await db_read(read_for_model)(self.conversation_id, text)
            agent, model, history, standing, prior = read
        except agent_choice.AgentUnavailable:
            self.storing = asyncio.ensure_future(self._store_message(answer=False))  # kept, never lost
            raise
        if self.request.attachments and text is not None:
            attached = list(self.request.attachments)
            earlier = []  # an edit keeps what the replaced message read if a server fails now
            if self.request.kind == "edit":
                stored = db_read(conversations.stored_attachments)
                earlier = await stored(self.conversation_id, self.request.edit_id)
            try:
                self.attachments = await read_for_turn(agent.tools, attached, self.request.user_id, earlier)
            except asyncio.CancelledError:  # stopped while reading: the message is kept all the same
                self.attachments = unread(attached, "stopped before it was read")
                self.storing = asyncio.ensure_future(self._store_message(answer=False))
                raise
            history[-1] = {"role": "user", "content": model_content(text, self.attachments)}
        self.hold.start(standing)
        if standing.exhausted:  # the model is not asked; the message (and what it attached) is kept
            self.storing = asyncio.ensure_future(self._store_message(answer=False))
            raise budgets.BudgetSpent(budgets.refusal(standing))
        llm = LLMSettings.from_settings(model or agent.model)
        self.model = llm.model
        tracing.annotate(**{"gen_ai.agent.name": agent.name, "gen_ai.request.model": llm.model})
        configured = llm.configured
        if agent.error:  # rare: store first, so the notice follows the message it is about
            await self._store_message(answer=False)
            await self._notice(_stale_agent_notice(agent))
        else:
            self.storing = asyncio.ensure_future(self._store_message(answer=configured))
        # The first turn may wait here while the MCP servers start; the echo goes out meanwhile.
        for refusal in await prepare_hub(self.request.user_id):
            await self._notice(refusal)
        # AGENTS.md skills: (boocode.chat.turn.agent_skills) go after the system prompt, read each turn.
        before = len(history)
        skills_notice = await start_with_skills(agent, history, self.request.user_id)
        window = await windows.window_for(agent, llm.model, await server_window(llm, llm.model))
        context = turn_context(agent, history, self.request.user_id, model, window, self.conversation_id)
        context.keep = len(history) - before
        context.ids = [*prior.ids[:1], *([0] * context.keep), *prior.ids[1:]] if context.keep else prior.ids
        context.summary = prior.summary
        if not context.llm.configured:
            raise LLMError(NOT_CONFIGURED, kind="not_configured")
        problem = windows.window_problem(
            llm.model,
            window,
            context.counter.of(history[0]) if agent.prompt.strip() else 0,
            context.counter.of_tools(context.offered()),
            agent.name,
        )
        if problem:
            await self._notice(problem)
        if context.tools_left_out:
            await self._notice(tools_left_out_notice(context))
        if skills_notice:
            await self._notice(skills_notice)
        if context.deferred is not None:
            context.deferred.warm()  # its index is ready (or nearly) when the model searches
        await compact(context, context.offered() if not self.cap_hit else None, self.emit)
        used = 0
        refused: LLMError | None = None
        while True:
            offered = context.offered() if not self.cap_hit else None
            try:
                completion, calls = await self._stream_step(context, offered)
            except LLMError as exc:
                if exc.kind != "context_length":
                    raise
                if refused is not None:
                    raise LLMError(refused_again(exc, context), kind="context_length") from None
                refused = exc
                await self._notice(refit(context, exc))
                await compact(context, context.offered() if not self.cap_hit else None, self.emit)
                continue
            llm_client.note_success()
            if calls is None:
                break
            budget = max(context.max_tool_calls - used, 0)
            results = await run_calls(
                context,
                completion.tool_calls,
                calls,
                budget,
                conversation_id=self.conversation_id,
                user_id=self.request.user_id,
                emit=self.emit,
                stream_ended=self.answer.stream_ended,
            )
            used += min(len(calls.rows), budget)
            if context.deferred is not None:
                context.deferred.called([call.name for call in completion.tool_calls])
            context.messages.append(
                model_history.assistant_entry(
                    completion.text, ((c.id, c.name, c.arguments) for c in completion.tool_calls)
                )
            )
            context.messages.extend(
                model_history.tool_entry(request.id, result.output)
                for request, result in zip(completion.tool_calls, results, strict=True)
            )
            if used >= context.max_tool_calls:
                self.cap_hit = True
        if completion.reasoning and not completion.text.strip():
            await self._notice(_only_thinking_notice(completion))
        if self.cap_hit:
            notice = (
                f"Tool call limit reached: agent {context.agent_name} may make {context.max_tool_calls} tool "
                "calls per turn, so the model was asked to answer without tools."
            )
            payload = await db(conversations.add_message)(self.conversation_id, Message.Role.NOTICE, notice)
            await self.emit({"type": "message", "message": payload})

    async def _stream_step(
        self, context: TurnContext, tools: list[dict[str, Any]] | None
    ) -> tuple[Completion, ToolCalls | None]:
        """One model call, streamed into a new assistant message; returns it and the tool calls it
        asked for (None: none), whose rows are being written (:meth:`_announce`)."""
        fitted = fit_request(context, tools)
        # What the request needs of the window, its answer's room included: the budget holds it,
        # and Ollama's num_ctx is sized to it.
        needed = fitted.tokens + windows.answer_tokens(fitted.window)
        await self.hold.reserve(needed)
        stream = stream_chat(
            fitted.messages,
            llm=context.llm,
            tools=fitted.tools,
            temperature=context.temperature,
            top_p=context.top_p,
            num_ctx=needed,
        )
        completion = await self.answer.receive(stream, partial(self._ready, context.llm.model))
        empty = not completion.text.strip() and not completion.tool_calls
        if completion.finish_reason == "length" and empty and not completion.reasoning.strip():
            raise LLMError(EMPTY_AT_LENGTH, kind="length")  # (all thinking: its notice says why)
        if completion.usage is not None:  # what the server counts for what was estimated
            calibration(context.conversation_id, context.llm.base_url, context.llm.model).observe(
                fitted.estimated, completion.usage[0]
            )
        requested = completion.tool_calls if tools else []
        identities = {
            call.name: conversations.tool_identity(call.name, self.request.user_id) for call in requested
        }
        record = db(conversations.finish_message)(
            self.answer.message_id,
            content=completion.text,
            status=Message.Status.COMPLETE,
            tool_calls=[(call.id, call.name, call.arguments) for call in requested],
            identities=identities,
            created_at=self.answer.created_at,
            conversation_id=self.conversation_id,
            model=completion.model or context.llm.model,
            usage=completion.usage,
            counted_for=self.hold.spender,
            reasoning=completion.reasoning,
            released=self.hold.given_back(),  # given back by that write
        )
        if not requested:
            await self._announce(record, [])
            return completion, None
        # The calls go out while the answer and their rows are written (the server does not wait
        # for the database); what the tabs hear of them follows the rows (ToolCalls).
        calls = ToolCalls([{} for _ in requested])
        calls.recorded = self.storing = asyncio.ensure_future(self._announce(record, calls.rows))
        return completion, calls

    async def _ready(self, model: str) -> None:
        """The first model request is on its way: let the start being stored finish, and open
        the answer's message if none is open."""
        if self.storing is not None:  # the first request: the start is being stored meanwhile
            # Shielded: a stop now must not cancel the echo; the ending waits for it.
            await asyncio.shield(self.storing)
            self.storing = None
        if self.answer.message_id is None:
            await self.answer.open(
                await db(conversations.add_message)(
                    self.conversation_id, Message.Role.ASSISTANT, status=Message.Status.STREAMING, model=model
                )
            )

    async def _announce(self, record: Awaitable[dict[str, Any]], rows: list[dict[str, Any]]) -> None:
        """Wait for the answer's final write, fill in its calls' ``rows``, then tell the tabs:
        ``message_complete`` and a ``tool_call`` for each."""
        final = await record
        self.answer.message_id = None
        for row, call in zip(rows, final["tool_calls"], strict=True):
            row.update(call)
        await self.emit({"type": "message_complete", "message": final})
        for row in rows:
            await self.emit({"type": "tool_call", "call": dict(row)})

    async def _notice(self, text: str) -> None:
        payload = await db(conversations.add_message)(self.conversation_id, Message.Role.NOTICE, text)
        await self.emit({"type": "message", "message": payload})

    # --- endings -----------------------------------------------------------------------------
    async def _stopped(self) -> None:
        await self._settle(Message.Status.STOPPED, "", conversations.CANCELLED_OUTPUT)

    async def _failed(self, error: str) -> None:
        await self._settle(Message.Status.FAILED, error, f"Not finished: {error}")

    async def _settle(self, status: str, error: str, call_output: str) -> None:
        """Store how the turn ended (text so far, unfinished calls) and tell the clients."""
        self.answer.end_live_html()
        await self.hold.release()
        try:
            message, created, calls = await db(conversations.settle_turn)(
                self.conversation_id,
                self.answer.message_id,
                content=self.answer.text if self.answer.message_id is not None else "",
                reasoning=self.answer.reasoning if self.answer.message_id is not None else "",
                status=status,
                error=error,
                call_output=call_output,
            )
        except (DatabaseError, ObjectDoesNotExist):
            logger.warning(
                "conversation %s: could not save how the turn ended", self.conversation_id, exc_info=True
            )
            return
        self.answer.message_id = None
        if message is not None:
            await self.emit({"type": "message" if created else "message_complete", "message": message})
        for call in calls:
            await self.emit({"type": "tool_result", "call": call})

    async def _end(self, status: str, error: str) -> None:
        # turn_end is the last frame of the turn proper; the status line is refreshed just before
        # it, and the conversation's title, model and usage follow it.
        if self.announcing is not None:
            await self.announcing
        await self.emit(status_payload(self.request.user_id))
        await self.emit(
            {
                "type": "turn_end",
                "turn_id": self.request.turn_id,
                "status": status,
                "error": error or None,
                "code": self.code or None,
                "cap_hit": self.cap_hit,
            }
        )
        await self._send_conversation()
        if self.titled and status == "complete" and settings.TITLE_FROM_MODEL and self.model:
            titles.ask_model_later(self.conversation_id, self.model, self._emit_event)


async def run_turn(request: TurnRequest, emit: Emit) -> str:
    """Run one turn to its end (see the module docstring); returns its final status."""
    return await Turn(request, emit).run()

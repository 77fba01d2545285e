"""Elicitation in form mode: a server asks, during a tool call, the person who made the call.

The hub's ``Client`` (see :func:`mcpclient.protocol.open_client`) passes :func:`answer` to the
SDK as its ``elicitation_callback`` and advertises ``elicitation: {"form": {}}`` only. Both
protocol revisions end up in :func:`answer`: on 2025-11-25 the server sends an
``elicitation/create`` request while its ``tools/call`` is in flight; on 2026-07-28 the call
returns an ``InputRequiredResult`` and the SDK's ``Client.call_tool`` calls the same callback
for each embedded request, then retries the call with ``inputResponses``.

Lifecycle
---------
A tool call runs inside :func:`tool_call` (the hub's ``Client.call_tool``): a
:class:`CallScope` records the call's tool, its session, the person to ask (the
:data:`asker <asking>` the chat put in the context, or none) and the registry's
:class:`TimeBudget`, and is registered on its session until the call returns, fails or is
cancelled. Leaving it cancels the forms still open for the call (the callback then answers
``cancel``), so no form outlives its call.

:func:`answer` refuses URL mode and schemas that are not a flat object of primitives with a
``-32602`` error naming the reason, finds the call the request belongs to (below) and then:

* no call found: ``decline`` (never a guess);
* a call with no person attached (``manage.py mcp_call``, the conformance client, any caller
  that set no asker): ``accept`` with the schema's defaults when every required field has one,
  else ``decline``;
* a call made for a person: the asker shows the form and waits. Meanwhile neither the SDK's
  request timeout (``waiting_on_a_person``) nor the registry's :class:`TimeBudget` runs; the
  asker bounds the wait itself (the chat: ``BOOCODE_ELICITATION_TIMEOUT``, then ``decline``).
  The answer is completed with the schema's defaults and checked against the schema
  (SEP-1034, :mod:`mcpclient.elicitation_schema`) before it is sent.

Routing: whose call is it?
--------------------------
An elicitation must only ever reach the person whose call caused it. The SDK runs the callback
in a context that tells, or does not:

1. **The call's own context.** On 2026-07-28 the callback runs in the caller's task during
   ``call_tool``. On 2025-11-25 over Streamable HTTP a request the server sends on the
   ``tools/call`` POST's SSE stream (``related_request_id``) is dispatched in the context of
   the task that sent that POST (the transport keeps the sender's context per message). Either
   way the context holds the call's :class:`CallScope`, which must still be open and belong
   to the same session.
2. **Otherwise** (2025-11-25 over stdio or legacy SSE, where messages carry no context, and
   Streamable HTTP requests sent on the standalone GET stream), the request came from the
   session: it is attributed to the session's only tool call in flight, and declined when
   there are several (or none). A server that sends a request for an earlier call after that
   call ended, while exactly one other call is in flight, would be misattributed: nothing on
   the wire tells them apart, which is why several calls in flight always decline.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import dataclasses
import logging
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import Any, Literal

import anyio
import mcp.types as types
from mcp.client.session import ClientRequestContext, ClientSession
from mcp.shared._request_clock import waiting_on_a_person
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from mcpclient.elicitation_schema import (
    AnswerError,
    Form,
    FormError,
    complete_answer,
    defaults_answer,
    parse_form,
)

logger = logging.getLogger(__name__)

Action = Literal["accept", "decline", "cancel"]


@dataclass(frozen=True)
class Answer:
    """What the person (or the defaults) said: ``accept`` with content, ``decline`` or ``cancel``."""

    action: Action
    content: dict[str, Any] | None = None


Asker = Callable[[Form], Awaitable[Answer]]
"""Shows a form to the person behind the current call and returns their answer (the chat's)."""

_asker: contextvars.ContextVar[Asker | None] = contextvars.ContextVar("elicitation_asker", default=None)
_budget: contextvars.ContextVar[TimeBudget | None] = contextvars.ContextVar("elicitation_time", default=None)
_scope: contextvars.ContextVar[CallScope | None] = contextvars.ContextVar("elicitation_scope", default=None)
# The tool calls in flight per session (``id(ClientSession)``), for requests without a context.
_in_flight: dict[int, list[CallScope]] = {}


@contextlib.contextmanager
def asking(asker: Asker) -> Iterator[None]:
    """Tool calls started in this block ask ``asker`` when their server elicits (the chat's person)."""
    token = _asker.set(asker)
    try:
        yield
    finally:
        _asker.reset(token)


class TimeBudget:
    """A time budget in seconds that is not spent while a person is being asked.

    The registry waits for an MCP call with one (:meth:`wait`); :func:`answer` pauses it while
    a form is open, so the person's time does not count against the tool.
    """

    def __init__(self, seconds: float) -> None:
        self._loop = asyncio.get_running_loop()
        self._left = seconds
        self._since = self._loop.time()
        self._pauses = 0
        self._changed = asyncio.Event()

    def pause(self) -> None:
        """Stop spending (nested pauses count)."""
        if not self._pauses:
            self._left -= self._loop.time() - self._since
        self._pauses += 1
        self._changed.set()

    def resume(self) -> None:
        """Spend again once every pause has ended."""
        self._pauses -= 1
        if not self._pauses:
            self._since = self._loop.time()
        self._changed.set()

    def remaining(self) -> float | None:
        """Seconds left, or ``None`` while paused."""
        if self._pauses:
            return None
        return max(0.0, self._left - (self._loop.time() - self._since))

    async def wait(self, task: asyncio.Future[Any]) -> bool:
        """Wait for ``task``: ``True`` once it is done, ``False`` when the budget ran out first."""
        while not task.done():
            self._changed.clear()
            left = self.remaining()
            if left is not None and left <= 0:
                return False
            changed = asyncio.ensure_future(self._changed.wait())
            try:
                await asyncio.wait({task, changed}, timeout=left, return_when=asyncio.FIRST_COMPLETED)
            finally:
                changed.cancel()
        return True


@contextlib.contextmanager
def timed_by(budget: TimeBudget) -> Iterator[None]:
    """Tool calls started in this block pause ``budget`` while they wait on a person."""
    token = _budget.set(budget)
    try:
        yield
    finally:
        _budget.reset(token)


class CallScope:
    """One tool call in flight: where its elicitations go and what they pause."""

    def __init__(self, session: ClientSession, tool: str) -> None:
        self.session = session
        self.tool = tool
        self.asker = _asker.get()
        self.budget = _budget.get()
        task = asyncio.current_task()
        # The calling task's own context (not a copy): the SDK's request clock of this call
        # lives there, paused from outside when the request arrives without it (rule 2).
        self.context = task.get_context() if task is not None else None
        self.open = True
        self._forms: set[anyio.CancelScope] = set()

    def close(self) -> None:
        """The call is over: forms still open for it are withdrawn (answered ``cancel``)."""
        self.open = False
        for form in list(self._forms):
            form.cancel()


@contextlib.contextmanager
def tool_call(session: ClientSession, *, tool: str) -> Iterator[CallScope]:
    """Run a ``tools/call`` on ``session`` as a call whose elicitations can be attributed to it."""
    scope = CallScope(session, tool)
    calls = _in_flight.setdefault(id(session), [])
    calls.append(scope)
    token = _scope.set(scope)
    try:
        yield scope
    finally:
        _scope.reset(token)
        scope.close()
        calls.remove(scope)
        if not calls:
            _in_flight.pop(id(session), None)


def _attribute(context: ClientRequestContext) -> tuple[CallScope, bool] | None:
    """The call a request belongs to and whether the callback runs in that call's context."""
    scope = _scope.get()
    if scope is not None and scope.open and scope.session is context.session:
        logger.debug('elicitation for tool "%s" attributed by the call\'s own context', scope.tool)
        return scope, True
    if context.session.protocol_version in MODERN_PROTOCOL_VERSIONS:
        return None  # 2026-07-28 requests come through call_tool (rule 1), never on their own
    calls = _in_flight.get(id(context.session), [])
    if len(calls) == 1 and calls[0].session is context.session:
        logger.debug('elicitation for tool "%s" attributed to the only call in flight', calls[0].tool)
        return calls[0], False
    return None


@contextlib.contextmanager
def _paused_in(context: contextvars.Context) -> Iterator[None]:
    """``waiting_on_a_person()`` for the request whose clock lives in ``context`` (another task's)."""
    pause = waiting_on_a_person()
    try:
        context.run(pause.__enter__)
    except RuntimeError:  # the context is running right now (it cannot be, but never crash a call)
        yield
        return
    try:
        yield
    finally:
        with contextlib.suppress(RuntimeError):
            context.run(pause.__exit__, None, None, None)


@contextlib.contextmanager
def _off_the_clock(scope: CallScope, direct: bool) -> Iterator[None]:
    """Stop the call's SDK request timeout and the registry's time budget while the person answers."""
    with contextlib.ExitStack() as stack:
        if scope.budget is not None:
            scope.budget.pause()
            stack.callback(scope.budget.resume)
        if direct:
            stack.enter_context(waiting_on_a_person())
        elif scope.context is not None:
            stack.enter_context(_paused_in(scope.context))
        yield


def _refused(reason: str) -> types.ErrorData:
    return types.ErrorData(code=types.INVALID_PARAMS, message=reason)


async def answer(
    context: ClientRequestContext, params: types.ElicitRequestParams
) -> types.ElicitResult | types.ErrorData:
    """The hub's ``elicitation_callback`` (the SDK's ``ElicitationFnT``); see the module docstring."""
    if isinstance(params, types.ElicitRequestURLParams):
        logger.info("refused a URL-mode elicitation: only form mode is supported")
        return _refused("URL-mode elicitation is not supported: this client (BooCode) asks in form mode only")
    try:
        form = parse_form(params.requested_schema, message=params.message)
    except FormError as exc:
        logger.info("refused an elicitation whose schema is not a flat object of primitives: %s", exc)
        return _refused(f"Elicitation refused: {exc}")
    found = _attribute(context)
    if found is None:
        logger.warning(
            "declined an elicitation that cannot be tied to exactly one tool call of its session "
            "(none or several in flight)"
        )
        return types.ElicitResult(action="decline")
    scope, direct = found
    form = dataclasses.replace(form, tool=scope.tool)
    if scope.asker is None:
        content = defaults_answer(form)
        if content is None:
            why = "no person to ask, a required field has no default"
            logger.info('tool "%s": declined an elicitation (%s)', scope.tool, why)
            return types.ElicitResult(action="decline")
        logger.info('tool "%s": accepted an elicitation with its defaults (no person to ask)', scope.tool)
        return types.ElicitResult(action="accept", content=content)
    reply = await _ask(scope, direct, form)
    if reply.action != "accept":
        return types.ElicitResult(action=reply.action)
    try:
        return types.ElicitResult(action="accept", content=complete_answer(form, reply.content))
    except AnswerError as exc:  # the asker checks answers first; this is the last line
        logger.warning('tool "%s": an answer did not match the form (%s); declined instead', scope.tool, exc)
        return types.ElicitResult(action="decline")


async def _ask(scope: CallScope, direct: bool, form: Form) -> Answer:
    """Ask the call's person, off the clock; ``cancel`` when the call ends first."""
    assert scope.asker is not None
    reply = Answer("cancel")
    with _off_the_clock(scope, direct), anyio.CancelScope() as cancel:
        if not scope.open:
            cancel.cancel()
        scope._forms.add(cancel)
        try:
            reply = await scope.asker(form)
        finally:
            scope._forms.discard(cancel)
    return reply


def advertise_form_only(session: ClientSession) -> ClientSession:
    """Make ``session`` advertise ``elicitation: {"form": {}}`` (the SDK adds ``url`` too).

    The SDK builds one capability set per wire version in ``ClientSession._build_capabilities``
    (the ``initialize`` handshake, ``server/discover`` and the 2026-07-28 per-request ``_meta``);
    wrapping it there keeps every path the same.
    """
    build = session._build_capabilities

    def form_only(version: str) -> types.ClientCapabilities:
        capabilities = build(version)
        if capabilities.elicitation is None:
            return capabilities
        form = types.ElicitationCapability(form=types.FormElicitationCapability())
        return capabilities.model_copy(update={"elicitation": form})

    session._build_capabilities = form_only  # type: ignore[method-assign]
    return session

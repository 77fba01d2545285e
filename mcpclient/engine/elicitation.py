"""Elicitation: a server asks, during a tool call, the person who made the call (form and URL mode).

Invariants. A request reaches only the person whose call caused it: the call of the callback's own
context (still open, on the same session), else on 2025-11-25 the session's only call in flight;
with none or several it is declined, never guessed. A :class:`CallScope` is registered on its
session exactly while its ``tools/call`` runs; leaving it withdraws the forms still open (answered
``cancel``) and ends the links still waiting (``completed`` if the call returned, else
``withdrawn``): nothing outlives its call. While a person answers, and after they consented to a
link until it finishes, neither the SDK's request clock nor the registry's :class:`TimeBudget`
runs; the asker bounds the wait. Without an asker a form gets its defaults only when every required
field has one, and a link is declined. A completion notice finishes only a link of its own session.
Sampling is never advertised, and refused with a reason.

The tour (both revisions, routing, the ``-32042`` retry, time limits, outcomes): docs/elicitation.md.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import dataclasses
import logging
import re
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import anyio
import mcp.types as types
import pydantic
from mcp import MCPError, UrlElicitationRequiredError
from mcp.client.session import ClientRequestContext, ClientSession
from mcp.shared._request_clock import waiting_on_a_person
from mcp_types import URL_ELICITATION_REQUIRED
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from mcpclient.core.elicitation import Answer, Asker, Link
from mcpclient.core.elicitation_form import (
    AnswerError,
    Form,
    FormError,
    complete_answer,
    defaults_answer,
    parse_form,
)

logger = logging.getLogger(__name__)


# A URL longer than this is refused: it is shown in full, and no real page needs more.
MAX_URL = 4096
# The characters RFC 3986 allows in a URI (unreserved, reserved, "%" of an escape).
_RFC3986 = re.compile(r"[A-Za-z0-9\-._~:/?#\[\]@!$&'()*+,;=%]+")
_BAD_ESCAPE = re.compile(r"%(?![0-9A-Fa-f]{2})")


_asker: contextvars.ContextVar[Asker | None] = contextvars.ContextVar("elicitation_asker", default=None)
_budget: contextvars.ContextVar[TimeBudget | None] = contextvars.ContextVar("elicitation_time", default=None)
_scope: contextvars.ContextVar[CallScope | None] = contextvars.ContextVar("elicitation_scope", default=None)
# The tool calls in flight per session (``id(ClientSession)``), for requests without a context.
_in_flight: dict[int, list[CallScope]] = {}
# Links waiting for notifications/elicitation/complete, by (``id(ClientSession)``, elicitationId).
_awaiting: dict[tuple[int, str], Link] = {}


def url_problem(url: Any) -> str | None:
    """Why BooCode will not show ``url`` to a person (``None`` when it may be shown and opened)."""
    if not isinstance(url, str) or not url:
        return "the URL is empty"
    if len(url) > MAX_URL:
        return f"the URL is longer than {MAX_URL} characters"
    if any(ord(char) < 33 or ord(char) == 127 for char in url):
        return "the URL contains spaces or control characters"
    if not _RFC3986.fullmatch(url):
        # e.g. a backslash before an "@": Python reads the host after the "@", a browser before
        # the backslash; what RFC 3986 allows, both read alike.
        return "the URL has characters RFC 3986 does not allow (non-ASCII text must be percent-encoded)"
    if _BAD_ESCAPE.search(url):
        return 'the URL has a "%" not followed by two hexadecimal digits'
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError for a port that is not a number
    except ValueError:
        return "the URL cannot be parsed"
    if parts.scheme.lower() not in ("http", "https"):
        scheme = f"{parts.scheme}:" if parts.scheme else "no scheme"
        return f"BooCode opens only http and https URLs, not {scheme}"
    if not parts.hostname:
        return "the URL has no host"
    if "@" in parts.netloc:
        return "the URL carries a user name before its host (a way to disguise the site)"
    return None


@contextlib.contextmanager
def asking(asker: Asker) -> Iterator[None]:
    """Tool calls started in this block ask ``asker`` when their server elicits (the chat's person)."""
    token = _asker.set(asker)
    try:
        yield
    finally:
        _asker.reset(token)


def current_asker() -> Asker | None:
    """The asker of the calling context (the hub worker's client forwards its questions to it)."""
    return _asker.get()


def current_budget() -> TimeBudget | None:
    """The registry's time budget of the calling context (paused while a forwarded form is open)."""
    return _budget.get()


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
        self.links: set[Link] = set()  # consented links still waiting for the server

    def close(self, returned: bool = False) -> None:
        """The call is over: forms still open for it are withdrawn (answered ``cancel``), and
        links still waiting end ``completed`` when the call ``returned`` a result, else ``withdrawn``."""
        self.open = False
        for form in list(self._forms):
            form.cancel()
        for link in list(self.links):
            link.finish("completed" if returned else "withdrawn")

    def hold(self, link: Link, direct: bool) -> None:
        """Keep the call off the clock until ``link`` is finished (the person is on the server's page).

        On 2025-11-25 the call's own request waits for the server meanwhile, so its SDK clock is
        paused too; on 2026-07-28 the retried request is a new one (timed by the server's
        ``timeout``) and only the registry's budget waits.
        """
        stack = contextlib.ExitStack()
        if self.budget is not None:
            self.budget.pause()
            stack.callback(self.budget.resume)
        if self.session.protocol_version not in MODERN_PROTOCOL_VERSIONS:
            if direct:  # running in the call's context: its clock is this context's
                stack.enter_context(waiting_on_a_person())
            elif self.context is not None:
                stack.enter_context(_paused_in(self.context))
        self.links.add(link)

        def release(_: object) -> None:
            self.links.discard(link)
            if link.elicitation_id is not None:
                key = (id(self.session), link.elicitation_id)
                if _awaiting.get(key) is link:
                    del _awaiting[key]
            stack.close()

        link.finished.add_done_callback(release)
        if not self.open:  # the call ended while the person was clicking
            link.finish("withdrawn")


@contextlib.contextmanager
def tool_call(session: ClientSession, *, tool: str) -> Iterator[CallScope]:
    """Run a ``tools/call`` on ``session`` as a call whose elicitations can be attributed to it."""
    scope = CallScope(session, tool)
    calls = _in_flight.setdefault(id(session), [])
    calls.append(scope)
    token = _scope.set(scope)
    returned = False
    try:
        yield scope
        returned = True
    finally:
        _scope.reset(token)
        scope.close(returned)
        calls.remove(scope)
        if not calls:
            _in_flight.pop(id(session), None)


def completed(session: ClientSession, elicitation_id: Any) -> None:
    """``notifications/elicitation/complete`` from ``session``: finish the link it names.

    Unknown or already finished ids are ignored (the spec's rule), and so is an id another
    session's server chose: a server can only complete its own links.
    """
    link = _awaiting.pop((id(session), elicitation_id), None) if isinstance(elicitation_id, str) else None
    if link is None:
        logger.debug("ignored the completion of an unknown URL elicitation %r", elicitation_id)
        return
    logger.info('tool "%s": the server reported the URL elicitation completed', link.tool)
    link.finish("completed")


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
    """The hub's ``elicitation_callback`` (the SDK's ``ElicitationFnT``); see docs/elicitation.md."""
    if isinstance(params, types.ElicitRequestURLParams):
        return await _answer_link(context, params)
    found = _attribute(context)  # before anything is built from the request
    if found is None:
        logger.warning(
            "declined an elicitation that cannot be tied to exactly one tool call of its session "
            "(none or several in flight)"
        )
        return types.ElicitResult(action="decline")
    try:
        form = parse_form(params.requested_schema, message=params.message)
    except FormError as exc:
        logger.info("refused an elicitation whose schema is not a flat object of primitives: %s", exc)
        return _refused(f"Elicitation refused: {exc}")
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


async def _ask(scope: CallScope, direct: bool, form: Form | Link) -> Answer:
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


async def _answer_link(
    context: ClientRequestContext, params: types.ElicitRequestURLParams
) -> types.ElicitResult | types.ErrorData:
    """A URL-mode request: the person consents (``accept``) or not; see docs/elicitation.md."""
    problem = url_problem(params.url)
    if problem is not None:
        logger.info("refused a URL-mode elicitation: %s", problem)
        return _refused(f"URL-mode elicitation refused: {problem}")
    modern = context.session.protocol_version in MODERN_PROTOCOL_VERSIONS
    if not modern and not params.elicitation_id:
        return _refused("URL-mode elicitation refused: elicitationId is required (protocol 2025-11-25)")
    found = _attribute(context)
    if found is None:
        logger.warning(
            "declined a URL-mode elicitation that cannot be tied to exactly one tool call of its session"
        )
        return types.ElicitResult(action="decline")
    scope, direct = found
    if scope.asker is None:
        logger.info('tool "%s": declined a URL-mode elicitation (no person to open it)', scope.tool)
        return types.ElicitResult(action="decline")
    link = Link(message=params.message, url=params.url, tool=scope.tool, elicitation_id=params.elicitation_id)
    if link.elicitation_id is not None:
        key = (id(context.session), link.elicitation_id)
        if key in _awaiting:
            return _refused(f"URL-mode elicitation refused: elicitationId {link.elicitation_id!r} is in use")
        _awaiting[key] = link  # before asking: the completion may come right after the consent
    reply = Answer("cancel")
    try:
        reply = await _ask(scope, direct, link)
    finally:
        if reply.action == "accept":
            scope.hold(link, direct)
        else:
            link.finish("withdrawn")  # nothing to wait for; frees the id
            if link.elicitation_id is not None:
                _awaiting.pop((id(context.session), link.elicitation_id), None)
    return types.ElicitResult(action=reply.action)


def _describe_links(links: list[types.ElicitRequestURLParams]) -> str:
    return "; ".join(f"{link.message!r} at {link.url}" for link in links)


def _required(text: str) -> MCPError:
    return MCPError(code=URL_ELICITATION_REQUIRED, message=text)


async def complete_required(scope: CallScope, error: types.ErrorData) -> None:
    """A ``-32042`` error ended the call: have the person complete its links, one after the other.

    Returns once every link is completed (the caller retries the call once); otherwise raises
    an :class:`MCPError` whose message tells the model what the server wanted and why it did
    not happen (no person, declined, not completed in time, a URL BooCode does not open).
    """
    try:
        links = UrlElicitationRequiredError.from_error(error).elicitations
    except (ValueError, pydantic.ValidationError):
        links = []
    if not links:
        raise _required(f"the server requires a web page to be opened but named none: {error.message}")
    wanted = _describe_links(links)
    for params in links:
        problem = url_problem(params.url)
        if problem is not None:
            raise _required(f"the server requires opening {params.url!r}, refused: {problem}")
    if scope.asker is None:
        raise _required(f"the server requires a person to open {wanted}; this call has no person to ask")
    budget = scope.budget
    if budget is not None:
        budget.pause()  # the person's time does not count against the tool
    try:
        for params in links:
            await _complete_one(scope, params, wanted)
    finally:
        if budget is not None:
            budget.resume()


async def _complete_one(scope: CallScope, params: types.ElicitRequestURLParams, wanted: str) -> None:
    link = Link(
        message=params.message,
        url=params.url,
        tool=scope.tool,
        elicitation_id=params.elicitation_id,
        required=True,
    )
    key = (id(scope.session), link.elicitation_id) if link.elicitation_id else None
    if key is not None:
        _awaiting[key] = link
    try:
        reply = await _ask(scope, False, link)
        if reply.action != "accept":
            said = "declined" if reply.action == "decline" else "cancelled"
            raise _required(f"the server requires the person to open {wanted}; they {said}")
        scope.links.add(link)
        outcome = await asyncio.shield(link.finished)
        if outcome not in ("completed", "done"):
            why = {"expired": "it was not completed in time", "stopped": "the turn was stopped"}
            raise _required(f"the server requires the person to open {wanted}; {why.get(outcome, outcome)}")
    finally:
        scope.links.discard(link)
        link.finish("withdrawn")
        if key is not None and _awaiting.get(key) is link:
            del _awaiting[key]


async def refuse_sampling(
    context: ClientRequestContext, params: types.CreateMessageRequestParams
) -> types.ErrorData:
    """The answer to ``sampling/createMessage`` (2025-11-25) and to sampling inputs (2026-07-28).

    BooCode never advertises sampling; a server that asks anyway is told why, and on
    2026-07-28 that reason ends the call as the tool error the model reads.
    """
    logger.info("refused a sampling request: BooCode does not offer sampling")
    return types.ErrorData(
        code=types.INVALID_REQUEST,
        message=(
            "Sampling refused: this client (BooCode) does not support sampling/createMessage and never "
            "advertises it (sampling is deprecated in MCP 2026-07-28); the tool must work without it"
        ),
    )


def advertise(session: ClientSession) -> ClientSession:
    """Make ``session`` advertise ``elicitation: {"form": {}, "url": {}}`` and no sampling.

    The SDK builds one capability set per wire version in ``ClientSession._build_capabilities``
    (the ``initialize`` handshake, ``server/discover`` and the 2026-07-28 per-request ``_meta``);
    wrapping it there keeps every path the same. The SDK would advertise sampling as soon as a
    sampling callback is set, so the refusal (:func:`refuse_sampling`, clearer than the SDK's
    "Sampling not supported") is installed here and the capability removed.
    """
    build = session._build_capabilities
    session._sampling_callback = refuse_sampling

    def ours(version: str) -> types.ClientCapabilities:
        capabilities = build(version)
        both = types.ElicitationCapability(
            form=types.FormElicitationCapability(), url=types.UrlElicitationCapability()
        )
        return capabilities.model_copy(update={"elicitation": both, "sampling": None})

    session._build_capabilities = ours  # type: ignore[method-assign]
    return session

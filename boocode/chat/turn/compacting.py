"""A turn summarising the earlier turns of its conversation (:mod:`boocode.chat.llm.compaction`).

Before a model request (:func:`compact`): when the request would pass its share of the window
(``LLM_COMPACT_PERCENT``) or leave turns out, what a request of half the window would leave out
is summarised, so the next turns have room; a summary that fails leaves the oldest turns out with
a note instead. ``/compact`` (:func:`compact_command`, run by the turn for the tool console)
summarises everything before the newest question now and says what was done. Either stores the
summary and sends a ``context_summary`` frame; the page keeps every message.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any

from channels.db import database_sync_to_async
from django.conf import settings

from boocode.chat.llm import compaction, windows
from boocode.chat.llm.client import LLMError, LLMSettings
from boocode.chat.llm.model_windows import server_window
from boocode.chat.llm.request_budget import Counter, TooLarge, calibration, fit
from boocode.chat.turn.context import NOT_CONFIGURED, TurnContext, fit_request, read_for_model, turn_context
from boocode.chat.wire.events import Emit

logger = logging.getLogger(__name__)

db = database_sync_to_async
# Reads on the loop's worker threads: they do not wait behind the writes on the database thread.
db_read = partial(database_sync_to_async, thread_sensitive=False)


async def compact_command(
    conversation_id: int, user_id: int | None, emit: Emit, notice: Callable[[str], Awaitable[None]]
) -> None:
    """``/compact``: summarise everything before the newest question now, and say what was done."""
    agent, model, history, _, prior = await db_read(read_for_model)(conversation_id, None)
    llm = LLMSettings.from_settings(model or agent.model)
    if not llm.configured:
        raise LLMError(NOT_CONFIGURED, kind="not_configured")
    window = await windows.window_for(agent, llm.model, await server_window(llm, llm.model))
    context = turn_context(agent, history, user_id, model, window, conversation_id)
    context.ids, context.summary = prior.ids, prior.summary
    try:
        payload = await compact(context, context.offered(), emit, asked=True)
    except LLMError as exc:
        await notice(f"Nothing was summarised: {exc}")
        return
    if payload is None:
        await notice("Nothing to summarise: the earlier messages are summarised already, or there are none.")
        return
    await notice(
        f"The {payload['messages']:,} earlier messages are summarised for the model, which reads the "
        "summary instead of them from now on; the page keeps them all (the divider shows the summary)."
    )


async def compact(
    context: TurnContext, tools: list[dict[str, Any]] | None, emit: Emit, *, asked: bool = False
) -> dict[str, Any] | None:
    """Summarise the earlier turns when the next request (offering ``tools``) would pass its share
    of the window or leave turns out (with ``asked``: whatever it would do); the stored summary's
    frame object, or ``None`` (nothing summarised)."""
    fitted = fit_request(context, tools)
    share = context.window.tokens * settings.LLM_COMPACT_PERCENT // 100
    if not asked and fitted.tokens <= share and not fitted.left_out:
        return None
    # What a request of half the window would leave out is summarised: the next turns have room.
    calibrated = calibration(context.conversation_id, context.llm.base_url, context.llm.model)
    half = windows.Window(max(context.window.tokens // 2, 1024), context.window.source)
    try:
        plan = fit(context.messages, fitted.tools, half, calibrated, Counter(), keep=context.keep)
        count = plan.left_out
    except TooLarge:
        count = fitted.left_out
    start = (1 if context.messages and context.messages[0].get("role") == "system" else 0) + context.keep
    sources = context.ids[start:]
    if asked:  # everything before the newest question
        count = max((i for i, m in enumerate(context.messages[start:]) if m.get("role") == "user"), default=0)
    while count and (count >= len(sources) or sources[count - 1] == 0):
        count -= 1  # only stored messages are summarised
    if count <= 0:
        return None
    up_to = sources[count - 1]
    if context.summary is not None and context.summary.up_to >= up_to:
        return None  # the summary in use covers them already
    done = context.summarised()
    previous = context.summary.text if context.summary is not None else ""
    body = context.messages[start:]
    try:
        text, usage = await compaction.summarise(context.llm, previous, body[done:count], context.window)
    except LLMError as exc:  # the oldest turns are left out with a note instead
        logger.warning("conversation %s: no summary of the earlier turns (%s)", context.conversation_id, exc)
        if asked:
            raise
        return None
    payload = await db(compaction.store_summary)(
        context.conversation_id, up_to, count, context.llm.model, text, usage
    )
    context.summary = compaction.Summary(text, up_to)
    await emit({"type": "context_summary", "conversation": context.conversation_id, "summary": payload})
    return payload

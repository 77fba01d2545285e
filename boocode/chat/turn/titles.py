"""Conversation titles: made from the first user message, or asked of the model after the first answer.

A conversation that still has the default title is named after the first user message when
that message is stored (:func:`auto_title`, called inside the same write). With
BOOCODE_TITLE_FROM_MODEL the turn then asks the model for a title in a task of its own, after
``turn_end`` (:func:`ask_model_later`): the next message never waits for it. A title is only
replaced while it is still the one the request started from, so a rename by the person always
wins; any failure keeps the title made from the first message.

The title request is a model request like the turn's (docs/models.md): it fits the model's
window (:func:`title_messages`: the first message and answer are each cut to their share of the
room left beside the instruction and the space kept for the answer, counted with the turn's
estimator and calibration), and it counts against the person's daily token budget
(:mod:`boocode.chat.ledger.budgets`): it is held before it goes out (a person whose budget is spent, or
whose requests in flight hold what is left of it, gets no title from the model), and the hold is
released in the write that counts its usage, or when it fails.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass
from functools import partial
from typing import Any

from channels.db import database_sync_to_async
from django.core.exceptions import ObjectDoesNotExist
from django.db import DatabaseError, transaction
from django.db.models import F

from agents.models import Agent
from agents.roster import default_agent, get_agent
from boocode.chat.ledger import budgets, daily_usage
from boocode.chat.llm import windows
from boocode.chat.llm.client import Completion, LLMError, LLMSettings, Usage, stream_chat
from boocode.chat.llm.model_windows import server_window
from boocode.chat.llm.request_budget import MARGIN, Calibration, calibration
from boocode.chat.models import DEFAULT_TITLE, Conversation
from boocode.chat.turn.history import llm_history
from boocode.chat.wire.events import Emit
from boocode.chat.wire.payloads import conversation_info
from boocode.chat.wire.rendering import markdown_text, shorten
from boocode.tools.token_estimate import MESSAGE_OVERHEAD, estimate, prefix_within

logger = logging.getLogger(__name__)

AUTO_TITLE_CHARS = 60
# Enough of a message for its title: a title never needs the Markdown of a 32 000-character text.
TITLE_SOURCE_CHARS = 2000
TITLE_PROMPT = (
    "Write a title of at most six words for the conversation below. Answer with the title only: "
    "plain text, no quotes, no Markdown, no final full stop."
)
TITLE_TIMEOUT = 30.0  # seconds a title request may take before the first message's title stays
# The most of each of the first message and answer a title request carries (estimated tokens):
# a title needs their gist, and a small window gives them less (title_messages).
TITLE_SOURCE_TOKENS = 1000
QUOTES = "\"'\u201c\u201d\u2018\u2019"  # what models like to wrap a title in

db = database_sync_to_async
db_read = partial(database_sync_to_async, thread_sensitive=False)


def auto_title(text: str) -> str:
    """A conversation title from a message: its Markdown as plain text, at most 60 characters."""
    source = text[:TITLE_SOURCE_CHARS]
    plain = markdown_text(source) or " ".join(source.split())
    return shorten(plain, AUTO_TITLE_CHARS) if plain else DEFAULT_TITLE


def clean_title(text: str) -> str:
    """A title as stored: one line of plain text (Markdown left out), at most 60 characters."""
    return auto_title(text)


def set_title(conversation_id: int, title: str, *, replacing: str) -> bool:
    """Store a title made for the conversation (the model's) if its title is still ``replacing``.

    A title the user chose meanwhile (a rename) is never overwritten. Returns whether it was stored.
    """
    cleaned = clean_title(title)
    return bool(Conversation.objects.filter(pk=conversation_id, title=replacing).update(title=cleaned))


def conversation_title(conversation_id: int) -> str:
    """The conversation's title (``Conversation.DoesNotExist`` if it is gone)."""
    return Conversation.objects.values_list("title", flat=True).get(pk=conversation_id)


def record_title_usage(
    conversation_id: int, usage: Usage, *, owner: int | None = None, released: int = 0
) -> None:
    """Add the tokens of a title request (BOOCODE_TITLE_FROM_MODEL) to the conversation's totals
    and to its owner's usage of the day (no answer: a title is not one); ``released``: the tokens
    the request held on the owner's budget (:func:`boocode.chat.ledger.budgets.reserve`), given back in
    the same write. ``owner``: the conversation's owner when the caller knows it."""
    prompt, completion = usage
    with transaction.atomic():
        Conversation.objects.filter(pk=conversation_id).update(
            title_prompt_tokens=F("title_prompt_tokens") + (prompt or 0),
            title_completion_tokens=F("title_completion_tokens") + (completion or 0),
        )
        if owner is None:
            owner = Conversation.objects.filter(pk=conversation_id).values_list("owner_id", flat=True).first()
        if owner is not None:
            daily_usage.record(
                owner, prompt_tokens=prompt or 0, completion_tokens=completion or 0, released=released
            )


_titling: set[asyncio.Task[None]] = set()  # title requests running after their turn ended


def ask_model_later(conversation_id: int, model: str, emit: Emit) -> None:
    """Run :func:`title_from_model` in a task of its own (kept here until it ends)."""
    task = asyncio.ensure_future(title_from_model(conversation_id, model, emit))
    _titling.add(task)
    task.add_done_callback(_titling.discard)


def _text(content: Any) -> str:
    """The text of a message's content (a list of parts: its text parts; images say nothing)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(part.get("text") or "") for part in content if isinstance(part, dict))
    return ""


def title_messages(
    entries: list[tuple[str, str]], window: windows.Window, calibrated: Calibration
) -> tuple[list[dict[str, Any]], int]:
    """The title request for ``window``: the instruction, then ``entries`` (role, text: the first
    message and answer), each cut to its share; and the request's estimated tokens, which
    ``calibrated.tokens()`` (the turn's count) keeps within the window with the answer's space.

    The room is the window less the space kept for the answer
    (:func:`boocode.chat.llm.windows.answer_tokens`); beside the instruction, each entry gets an equal
    share of it, at most :data:`TITLE_SOURCE_TOKENS`, and is cut at its end.
    """
    room = window.tokens - windows.answer_tokens(window)
    fixed = estimate(TITLE_PROMPT) + (len(entries) + 1) * MESSAGE_OVERHEAD
    available = int((room - 1) / (calibrated.ratio * MARGIN)) - fixed  # in estimated tokens
    share = min(TITLE_SOURCE_TOKENS, max(available, 0) // max(len(entries), 1))
    messages = [{"role": "system", "content": TITLE_PROMPT}]
    total = fixed
    for role, text in entries:
        kept = prefix_within(text, share)
        if estimate(kept) > share:  # (a few passes may leave it over: 4 tokens a character at most)
            kept = kept[: max(share // 4 - 1, 0)]
        messages.append({"role": role, "content": kept})
        total += estimate(kept)
    return messages, total


@dataclass
class TitleRequest:
    """What a title request reads before it goes out (one read, off the database thread)."""

    title: str  # the title now (replaced only while it is still this)
    entries: list[tuple[str, str]]  # the first message and answer: (role, text)
    agent: Agent | None  # the conversation's agent (its context: key is a window)
    standing: budgets.Standing  # the owner's tokens of the day and budget


def _title_request(conversation_id: int) -> TitleRequest:
    """The title now, the first message and answer, the agent and its owner's budget."""
    entries = [
        (entry["role"], _text(entry["content"]))
        for entry in llm_history(conversation_id)
        if entry["role"] in ("user", "assistant") and entry.get("content")
    ]
    agent_name, _model, standing = budgets.conversation_standing(conversation_id)
    agent = get_agent(agent_name) if agent_name else default_agent()
    return TitleRequest(conversation_title(conversation_id), entries[:2], agent, standing)


async def title_from_model(conversation_id: int, model: str, emit: Emit) -> None:
    """Ask ``model`` for a title after the first answer; store and announce it.

    The request fits the model's window and is held on the owner's daily token budget first
    (module docstring): with the budget spent, no title is asked. Any failure (no answer in
    time, an error, an empty answer) keeps the title made from the first message, and is logged
    without the conversation's text. A title the user gave the conversation meanwhile is kept
    too. The tokens the request used (when the endpoint reports them) count in the
    conversation's totals and the owner's usage of the day whatever became of the title.
    """
    held = 0
    owner: int | None = None
    try:
        read = await db_read(_title_request)(conversation_id)
        owner = read.standing.user_id
        llm = LLMSettings.from_settings(model)
        window = await windows.window_for(read.agent, llm.model, await server_window(llm, llm.model))
        calibrated = calibration(conversation_id, llm.base_url, llm.model)
        messages, estimated = title_messages(read.entries, window, calibrated)
        needed = calibrated.tokens(estimated) + windows.answer_tokens(window)
        if read.standing.budget > 0:
            refused = await db_read(budgets.reserve)(read.standing, needed)
            if refused is not None:
                logger.info("conversation %s: no title from the model (daily token budget)", conversation_id)
                return
            held = needed
        done: Completion | None = None
        async with asyncio.timeout(TITLE_TIMEOUT):
            stream = stream_chat(messages, llm=llm, num_ctx=needed)
            async with contextlib.aclosing(stream):
                async for event in stream:
                    if isinstance(event, Completion):
                        done = event
        title = (done.text if done else "").strip().strip(QUOTES).strip()
        counted = done is not None and done.usage is not None
        if done is not None and done.usage is not None:
            calibrated.observe(estimated, done.usage[0])
            await db(record_title_usage)(conversation_id, done.usage, owner=owner, released=held)
            held = 0  # given back by that write
        # A title the user gave meanwhile (a rename) stays: set_title refuses to replace it.
        named = bool(title) and await db(set_title)(conversation_id, title, replacing=read.title)
        if not named and not counted:
            return
        info = await db_read(conversation_info)(conversation_id)
    except (LLMError, TimeoutError, DatabaseError, ObjectDoesNotExist) as exc:
        logger.warning("conversation %s: no title from the model (%s)", conversation_id, exc)
        return
    finally:
        if held and owner is not None:  # not counted (failed, no usage, stopped): given back
            await _release(owner, held)
    try:
        await emit({"type": "conversation", "conversation": info})
    except Exception:  # the channel layer is a boundary: a lost frame is not a lost title
        logger.exception("could not emit the title of conversation %s", conversation_id)


async def _release(owner: int, held: int) -> None:
    """Give back a title request's hold (it stops counting on its own if this fails)."""
    try:
        await asyncio.shield(db(budgets.release)(owner, held))
    except DatabaseError:
        logger.warning("could not release %s held tokens (user %s)", held, owner, exc_info=True)

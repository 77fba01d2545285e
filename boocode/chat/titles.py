"""Conversation titles: made from the first user message, or asked of the model after the first answer.

A conversation that still has the default title is named after the first user message when
that message is stored (:func:`auto_title`, called inside the same write). With
BOOCODE_TITLE_FROM_MODEL the turn then asks the model for a title in a task of its own, after
``turn_end`` (:func:`ask_model_later`): the next message never waits for it. A title is only
replaced while it is still the one the request started from, so a rename by the person always
wins; any failure keeps the title made from the first message.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from functools import partial
from typing import Any

from channels.db import database_sync_to_async
from django.core.exceptions import ObjectDoesNotExist
from django.db import DatabaseError, transaction
from django.db.models import F

from boocode.chat import daily_usage
from boocode.chat.events import Emit
from boocode.chat.llm import Completion, LLMError, LLMSettings, Usage, stream_chat
from boocode.chat.model_history import llm_history
from boocode.chat.models import DEFAULT_TITLE, Conversation
from boocode.chat.payloads import conversation_info
from boocode.chat.rendering import markdown_text, shorten

logger = logging.getLogger(__name__)

AUTO_TITLE_CHARS = 60
# Enough of a message for its title: a title never needs the Markdown of a 32 000-character text.
TITLE_SOURCE_CHARS = 2000
TITLE_PROMPT = (
    "Write a title of at most six words for the conversation below. Answer with the title only: "
    "plain text, no quotes, no Markdown, no final full stop."
)
TITLE_TIMEOUT = 30.0  # seconds a title request may take before the first message's title stays
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


def record_title_usage(conversation_id: int, usage: Usage) -> None:
    """Add the tokens of a title request (BOOCODE_TITLE_FROM_MODEL) to the conversation's totals
    and to its owner's usage of the day (no answer: a title is not one)."""
    prompt, completion = usage
    with transaction.atomic():
        Conversation.objects.filter(pk=conversation_id).update(
            title_prompt_tokens=F("title_prompt_tokens") + (prompt or 0),
            title_completion_tokens=F("title_completion_tokens") + (completion or 0),
        )
        owner = Conversation.objects.filter(pk=conversation_id).values_list("owner_id", flat=True).first()
        if owner is not None:
            daily_usage.record(owner, prompt_tokens=prompt or 0, completion_tokens=completion or 0)


_titling: set[asyncio.Task[None]] = set()  # title requests running after their turn ended


def ask_model_later(conversation_id: int, model: str, emit: Emit) -> None:
    """Run :func:`title_from_model` in a task of its own (kept here until it ends)."""
    task = asyncio.ensure_future(title_from_model(conversation_id, model, emit))
    _titling.add(task)
    task.add_done_callback(_titling.discard)


def _title_request(conversation_id: int) -> tuple[str, list[dict[str, Any]]]:
    """The title now, and the request for a new one: the instruction, the first message and answer."""
    history = [
        {"role": entry["role"], "content": entry["content"]}
        for entry in llm_history(conversation_id)
        if entry["role"] in ("user", "assistant") and entry.get("content")
    ]
    title = conversation_title(conversation_id)
    return title, [{"role": "system", "content": TITLE_PROMPT}, *history[:2]]


async def title_from_model(conversation_id: int, model: str, emit: Emit) -> None:
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
            await db(record_title_usage)(conversation_id, done.usage)
        # A title the user gave meanwhile (a rename) stays: set_title refuses to replace it.
        named = bool(title) and await db(set_title)(conversation_id, title, replacing=current)
        if not named and not counted:
            return
        info = await db_read(conversation_info)(conversation_id)
    except (LLMError, TimeoutError, DatabaseError, ObjectDoesNotExist) as exc:
        logger.warning("conversation %s: no title from the model (%s)", conversation_id, exc)
        return
    try:
        await emit({"type": "conversation", "conversation": info})
    except Exception:  # the channel layer is a boundary: a lost frame is not a lost title
        logger.exception("could not emit the title of conversation %s", conversation_id)

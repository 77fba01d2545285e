"""Compaction: the conversation's earlier messages summarised by its own model, for the model.

When a turn's request would pass ``BOOCODE_LLM_COMPACT_PERCENT`` of the window, or leave
earlier turns out, or a person asks with ``/compact``, the turn asks the conversation's model
(no tools) to summarise the messages that a request of half the window would leave out,
following the summary before it if there is one. The summary is stored as a
:class:`~boocode.chat.models.ContextSummary` standing for the messages up to an id; every
later request reads it instead of them (:func:`boocode.chat.llm.request_budget.fit`) until a newer
one is made, so it is paid for once. The messages are never changed; the page shows a divider
after the last message a summary stands for, with the summary one click away.

A summary that covers a message superseded after it was written (an edit, a regenerate) is
stale and not used. When summarising fails (the model errs, or says nothing), nothing is
stored and the oldest turns are left out with a note instead; the turn goes on.
"""

from __future__ import annotations

import contextlib
import logging
from dataclasses import dataclass
from typing import Any

from boocode.chat.ledger import daily_usage
from boocode.chat.llm.client import Completion, LLMError, LLMSettings, stream_chat
from boocode.chat.llm.windows import Window, answer_tokens
from boocode.chat.models import ContextSummary, Conversation, Message
from boocode.tools.token_estimate import estimate, suffix_within

__all__ = ["SUMMARY_PROMPT", "Summary", "current_summary", "store_summary", "summarise", "summary_payload"]

logger = logging.getLogger(__name__)

SUMMARY_PROMPT = (
    "You keep a long conversation between a person and an assistant that uses tools within the "
    "assistant's memory. Summarise the conversation below for the assistant, who will read your "
    "summary instead of it: what the person wants and decided, the facts found (names, paths, "
    "numbers, identifiers of tool calls whose results matter), what was done and what is still "
    "open. Be complete but brief, in plain sentences and lists; do not address the person."
)
RESULT_CHARS = 1500  # of each tool result in what the model summarises


@dataclass(frozen=True)
class Summary:
    """A stored summary as a request uses it: its text and the last message id it stands for."""

    text: str
    up_to: int


def current_summary(conversation_id: int) -> Summary | None:
    """The conversation's newest summary that is still true (no message it covers superseded since)."""
    row = ContextSummary.objects.filter(conversation_id=conversation_id).order_by("-id").first()
    if row is None:
        return None
    stale = Message.objects.filter(
        conversation_id=conversation_id, id__lte=row.up_to, superseded_at__gt=row.created_at
    ).exists()
    return None if stale else Summary(row.text, row.up_to)


def summary_payload(row: ContextSummary) -> dict[str, Any]:
    """A summary as the page shows it (the ``context_summary`` frame and the conversation's load)."""
    return {
        "id": row.pk,
        "up_to": row.up_to,
        "messages": row.messages,
        "model": row.model,
        "text": row.text,
        "created_at": row.created_at.isoformat(),
    }


def store_summary(
    conversation_id: int, up_to: int, messages: int, model: str, text: str, usage: tuple[int, int] | None
) -> dict[str, Any]:
    """Store a new summary; its tokens count in the owner's usage of the day. Its payload."""
    row = ContextSummary.objects.create(
        conversation_id=conversation_id,
        up_to=up_to,
        messages=messages,
        model=model,
        text=text,
        prompt_tokens=usage[0] if usage else None,
        completion_tokens=usage[1] if usage else None,
    )
    if usage is not None:
        owner = Conversation.objects.filter(pk=conversation_id).values_list("owner_id", flat=True).first()
        if owner is not None:
            daily_usage.record(owner, prompt_tokens=usage[0], completion_tokens=usage[1])
    return summary_payload(row)


def transcript(messages: list[dict[str, Any]]) -> str:
    """The messages as the summarising model reads them (each tool result's first characters)."""
    lines = []
    for message in messages:
        role, content = message.get("role"), message.get("content")
        if isinstance(content, list):
            content = " ".join(str(part.get("text") or "") for part in content if isinstance(part, dict))
        text = str(content or "")
        if role == "tool":
            shown = text[:RESULT_CHARS] + (
                f" [... {len(text) - RESULT_CHARS:,} more characters]" if len(text) > RESULT_CHARS else ""
            )
            lines.append(f"Tool result ({message.get('tool_call_id')}): {shown}")
            continue
        for call in message.get("tool_calls") or ():
            function = call.get("function") or {}
            lines.append(
                f"Assistant calls {function.get('name')} ({call.get('id')}): {function.get('arguments')}"
            )
        if text:
            lines.append(f"{'Person' if role == 'user' else 'Assistant'}: {text}")
    return "\n\n".join(lines)


async def summarise(
    llm: LLMSettings, previous: str, messages: list[dict[str, Any]], window: Window
) -> tuple[str, tuple[int, int] | None]:
    """The summary of ``messages`` (after the summary ``previous``) by ``llm``'s model, and the
    request's usage; raises :class:`LLMError`. What the window cannot hold of them is the oldest
    part of their transcript, left to ``previous``."""
    room = window.tokens - answer_tokens(window) - estimate(SUMMARY_PROMPT) - estimate(previous) - 200
    text = suffix_within(transcript(messages), max(room, 256))
    if previous:
        text = f"[The summary of what came before]\n{previous}\n\n[The conversation since]\n{text}"
    request = [{"role": "system", "content": SUMMARY_PROMPT}, {"role": "user", "content": text}]
    done: Completion | None = None
    stream = stream_chat(request, llm=llm)
    async with contextlib.aclosing(stream):
        async for event in stream:
            if isinstance(event, Completion):
                done = event
    summary = (done.text if done is not None else "").strip()
    if not summary:
        raise LLMError("the model gave an empty summary", kind="malformed")
    return summary, done.usage if done is not None else None

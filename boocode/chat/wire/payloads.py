"""Wire payloads: the JSON objects of docs/protocol.md's frames, built from rows.

Builds the **message** object (frames ``message``, ``message_start``, ``message_complete``
and the ``history`` frame's ``messages``), the **tool call** object (``tool_call``,
``tool_result``) and the ``conversation`` object (the ``conversation`` frame and the
``history`` frame's ``conversation_info``). The same dicts go to the websocket and into the
``history`` frame, so a reloaded page and a live one render identically. Model and tool text
goes out as sanitized HTML and previews (:mod:`boocode.chat.wire.rendering`), never as markup
from the source.

Objects are built whole; :mod:`boocode.chat.wire.sizes` bounds them where they go into a frame
(:func:`_pages_back` for ``history``, the turn's emitter for the rest), and the page reads a
``large`` one whole at its ``body_url`` / ``call_url``.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from typing import Any

from django.conf import settings
from django.core import signing
from django.db import connection
from django.db.models import Count, Q, Sum

from agents.roster import get_agent, list_agents
from boocode.chat.ledger import budgets
from boocode.chat.llm.compaction import summary_payload
from boocode.chat.llm.windows import answer_tokens, configured_window
from boocode.chat.models import ContextSummary, Conversation, Message, ToolCall
from boocode.chat.wire import attachments
from boocode.chat.wire.rendering import images_for, preview, render_markdown
from boocode.chat.wire.sizes import (
    HISTORY_BYTES,
    MESSAGE_INLINE_BYTES,
    PAGE_BYTES,
    bounded_message,
    encoded_size,
)

HISTORY_LIMIT = 200  # messages sent to a (re)connecting page, and per page of older ones


def call_url(conversation_id: int, call_id: int) -> str:
    """Where the whole tool call object is (JSON, owner only)."""
    return f"/c/{conversation_id}/calls/{call_id}/"


def message_url(conversation_id: int, message_id: int) -> str:
    """Where the whole message object is, with its tool calls (JSON, owner only)."""
    return f"/c/{conversation_id}/messages/{message_id}/"


def output_url(conversation_id: int, call_id: int) -> str:
    """Where the whole output of a tool call is (``text/plain``, owner only)."""
    return f"/c/{conversation_id}/calls/{call_id}/output/"


VIEW_TOKEN_SALT = "boocode.chat.view"


def view_url(conversation_id: int, call_id: int) -> str:
    """Where the view of a tool call is (its MCP Apps document, for a sandboxed frame; owner only).

    With ``BOOCODE_APPS_ORIGIN``, on that origin, under a signed token naming the call (the
    session cookie does not go there; :func:`boocode.chat.web.app_views.origin_view` checks it).
    """
    if settings.MCP_APPS_ORIGIN:
        token = signing.dumps([conversation_id, call_id], salt=VIEW_TOKEN_SALT, compress=True)
        return f"{settings.MCP_APPS_ORIGIN}/apps/views/{token}/"
    return f"/c/{conversation_id}/calls/{call_id}/view/"


def tool_call_payload(call: ToolCall, conversation_id: int) -> dict[str, Any]:
    """A tool call as sent to clients: arguments and output previews, safe image URLs."""
    arguments, _ = preview(call.arguments)
    output, truncated = preview(call.output)
    images, left_out = images_for(call.parts)
    return {
        "id": call.pk,
        "message_id": call.message_id,
        "call_id": call.call_id,
        "name": call.name,
        "title": call.title,
        "server": call.server,
        "tool": call.tool or call.name,
        "arguments": arguments,
        "status": str(call.status),
        "output": output,
        "output_truncated": truncated,
        "output_length": len(call.output),
        "output_url": output_url(conversation_id, call.pk),
        "structured": call.structured,
        "is_error": call.is_error,
        "duration_ms": call.duration_ms,
        "images": images,
        "images_left_out": left_out,
        "resources": attachments.linked_resources(call.parts),
        "call_url": call_url(conversation_id, call.pk),
        "view": call.view,  # the tool's ui:// view ("" for none): docs/apps.md
        "view_url": view_url(conversation_id, call.pk) if call.view else None,
        "large": False,
    }


def message_payload(
    message: Message, calls: Iterable[ToolCall] = (), *, whole: bool = False
) -> dict[str, Any]:
    """A message as sent to clients; ``html`` is sanitized Markdown (empty while streaming).

    A text over :data:`~boocode.chat.wire.sizes.MESSAGE_INLINE_BYTES` goes out as a summary
    (:func:`~boocode.chat.wire.sizes.bounded_message`), so its HTML is made only when ``whole``
    (the page's read of the whole message).
    """
    rendered = (
        message.role in (Message.Role.ASSISTANT, Message.Role.NOTICE)
        and message.status != Message.Status.STREAMING
        and bool(message.content)
        # A text this long goes out as a summary anyway: its HTML is made for the whole read only.
        and (whole or len(message.content) <= MESSAGE_INLINE_BYTES)
    )
    return {
        "id": message.pk,
        "role": str(message.role),
        "status": str(message.status),
        "content": message.content,
        "reasoning": message.reasoning,
        "html": render_markdown(message.content) if rendered else "",
        "error": message.error,
        "tool_calls": [tool_call_payload(call, message.conversation_id) for call in calls],
        "created_at": message.created_at.isoformat() if message.created_at else None,
        "model": message.model,
        "usage": message.usage if message.role == Message.Role.ASSISTANT else None,
        "attachments": attachments.public(message.attachments),
        "body_url": message_url(message.conversation_id, message.pk),
        "large": False,
    }


def _pages_back(conversation_id: int, before: int | None, budget: int) -> tuple[list[dict[str, Any]], bool]:
    """Current messages before ``before`` (or the newest), newest first, within ``budget`` bytes."""
    rows = Message.objects.filter(conversation_id=conversation_id, superseded_at__isnull=True)
    if before is not None:
        rows = rows.filter(id__lt=before)
    messages = list(rows.order_by("-id")[: HISTORY_LIMIT + 1].prefetch_related("tool_calls"))
    more = len(messages) > HISTORY_LIMIT
    taken: list[dict[str, Any]] = []
    used = 0
    for message in messages[:HISTORY_LIMIT]:
        payload = bounded_message(message_payload(message, message.tool_calls.all()))
        size = encoded_size(payload)
        if taken and used + size > budget:
            more = True
            break
        taken.append(payload)
        used += size
    taken.reverse()
    return taken, more


def history_payload(conversation_id: int) -> tuple[list[dict[str, Any]], bool]:
    """The ``history`` frame's messages, oldest first, and whether older ones exist.

    The newest current messages (superseded left out), at most :data:`HISTORY_LIMIT` and
    :data:`HISTORY_BYTES` (at least one message, which is itself bounded).
    """
    return _pages_back(conversation_id, None, HISTORY_BYTES)


def messages_page(conversation_id: int, before: int) -> tuple[list[dict[str, Any]], bool]:
    """The current messages older than message ``before``, oldest first, and whether there are more.

    At most :data:`HISTORY_LIMIT` messages and :data:`PAGE_BYTES` (at least one).
    """
    return _pages_back(conversation_id, before, PAGE_BYTES)


def whole_message(conversation_id: int, message_id: int) -> dict[str, Any] | None:
    """The whole message object (HTML and tool calls, never a summary), or ``None``."""
    rows = Message.objects.filter(pk=message_id, conversation_id=conversation_id)
    message = rows.prefetch_related("tool_calls").first()
    return None if message is None else message_payload(message, message.tool_calls.all(), whole=True)


def whole_call(conversation_id: int, call_id: int) -> dict[str, Any] | None:
    """The whole tool call object (structured content, images, resource links), or ``None``."""
    call = ToolCall.objects.filter(pk=call_id, message__conversation_id=conversation_id).first()
    return None if call is None else tool_call_payload(call, conversation_id)


_COMPLETE = Q(role=Message.Role.ASSISTANT, status=Message.Status.COMPLETE)
_WITHOUT_USAGE = _COMPLETE & Q(prompt_tokens__isnull=True, completion_tokens__isnull=True)


def _spent() -> dict[str, Any]:
    """The aggregates of :func:`conversation_usage`, over a conversation's assistant messages."""
    return {
        "spent_prompt": Sum("prompt_tokens"),
        "spent_completion": Sum("completion_tokens"),
        "answers": Count("id", filter=_COMPLETE),
        "without": Count("id", filter=_WITHOUT_USAGE),
    }


def _usage(row: dict[str, Any], titles: tuple[int | None, int | None]) -> dict[str, int]:
    title_prompt, title_completion = titles
    return {
        "prompt_tokens": (row["spent_prompt"] or 0) + (title_prompt or 0),
        "completion_tokens": (row["spent_completion"] or 0) + (title_completion or 0),
        "answers": row["answers"] or 0,
        "answers_without_usage": row["without"] or 0,
    }


def conversation_usage(conversation_id: int, titles: tuple[int, int] | None = None) -> dict[str, int]:
    """Tokens the conversation's answers and title requests used, and how many answers came without usage.

    Superseded answers count: their tokens were spent. An answer is an assistant message the
    model completed; stopped and failed ones are not counted as answers. Title requests
    (BOOCODE_TITLE_FROM_MODEL) are no answers: their tokens are kept on the conversation.
    """
    spent = Message.objects.filter(conversation_id=conversation_id, role=Message.Role.ASSISTANT)
    totals = spent.aggregate(**_spent())
    if titles is None:  # (the conversation's row was not read already)
        titles = Conversation.objects.filter(pk=conversation_id).values_list(
            "title_prompt_tokens", "title_completion_tokens"
        ).first() or (0, 0)
    return _usage(totals, titles)


def conversation_info(conversation: Conversation | int) -> dict[str, Any]:
    """The ``conversation`` object of docs/protocol.md: id, title, model, usage, the owner's daily
    budget, context, summaries.

    Sent at the end of every turn, so read in one statement (:func:`_info_statement`) and the
    owner's standing in another (:func:`boocode.chat.ledger.budgets.conversation_standing`, the turn's own
    read); the agent comes from the roster's cached rows, and the summaries are read only for a
    conversation that has some. ``Conversation.DoesNotExist`` if it is gone.
    """
    pk = conversation.pk if isinstance(conversation, Conversation) else conversation
    assistant, complete = Message.Role.ASSISTANT, Message.Status.COMPLETE
    with connection.cursor() as cursor:
        cursor.execute(_info_statement(), [complete, complete, pk, assistant, pk, assistant, pk])
        found = cursor.fetchone()
    if found is None:
        raise Conversation.DoesNotExist(f"conversation {pk} does not exist")
    row = dict(zip(_INFO_COLUMNS, found, strict=True))
    summaries: list[dict[str, Any]] = []
    if row["summarised"]:
        newest = ContextSummary.objects.filter(conversation_id=pk).order_by("-id")[:MAX_SUMMARIES]
        summaries = [summary_payload(summary) for summary in newest][::-1]
    last = (row["last_prompt"], row["last_completion"]) if row["last_prompt"] is not None else None
    _, _, standing = budgets.conversation_standing(pk)
    return {
        "id": pk,
        "title": row["title"],
        "model": row["model"],
        "usage": _usage(row, (row["title_prompt_tokens"], row["title_completion_tokens"])),
        "budget": budget_use(standing),
        "context": context_use(row["agent_name"], row["model"], last),
        "summaries": summaries,
    }


def budget_use(standing: budgets.Standing) -> dict[str, int] | None:
    """The owner's tokens of the day (UTC) and their daily budget; ``None`` when none applies."""
    if standing.budget <= 0:
        return None
    return {"used": standing.spent, "tokens_per_day": standing.budget}


MAX_SUMMARIES = 20  # the newest, for the page's dividers
_INFO_COLUMNS = (
    "title",
    "model",
    "agent_name",
    "title_prompt_tokens",
    "title_completion_tokens",
    "spent_prompt",
    "spent_completion",
    "answers",
    "without",
    "last_prompt",
    "last_completion",
    "summarised",
)


@functools.cache
def _info_statement() -> str:
    """The conversation's row, its answers' totals (:func:`conversation_usage`), the last counted
    answer's tokens (:func:`context_use`) and whether it has summaries: one plain statement, as
    the ORM's subqueries cost more to build than to run."""
    quote = connection.ops.quote_name
    conversations, messages = quote(Conversation._meta.db_table), quote(Message._meta.db_table)
    summaries = quote(ContextSummary._meta.db_table)
    status, role, owner = quote("status"), quote("role"), quote("conversation_id")
    prompt, completion = quote("prompt_tokens"), quote("completion_tokens")
    done = f"{status} = %s"
    return (
        f"SELECT c.{quote('title')}, c.{quote('model')}, c.{quote('agent_name')}, "
        f"c.{quote('title_prompt_tokens')}, c.{quote('title_completion_tokens')}, "
        "s.p, s.c, s.a, s.w, l.p, l.c, "
        f"EXISTS (SELECT 1 FROM {summaries} x WHERE x.{owner} = c.{quote('id')}) "
        f"FROM {conversations} c "
        f"CROSS JOIN (SELECT SUM({prompt}) AS p, SUM({completion}) AS c, "
        f"SUM(CASE WHEN {done} THEN 1 ELSE 0 END) AS a, "
        f"SUM(CASE WHEN {done} AND {prompt} IS NULL AND {completion} IS NULL THEN 1 ELSE 0 END) AS w "
        f"FROM {messages} WHERE {owner} = %s AND {role} = %s) s "
        f"LEFT JOIN (SELECT {prompt} AS p, {completion} AS c FROM {messages} "
        f"WHERE {owner} = %s AND {role} = %s AND {quote('superseded_at')} IS NULL AND {prompt} IS NOT NULL "
        f"ORDER BY {quote('id')} DESC LIMIT 1) l ON 1 = 1 "
        f"WHERE c.{quote('id')} = %s"
    )


def context_use(agent_name: str, model: str, last: tuple[int, int | None] | None) -> dict[str, Any]:
    """How full the model's window was at the last answer: the tokens its server counted for it
    (``last``: its prompt and answer; ``None`` before any), the window and where it came from, and
    the share past which the earlier turns are summarised (docs/models.md). The agent is the
    roster's (cached rows); a conversation without an agent's name has the default one's."""
    agent = get_agent(agent_name) if agent_name else next(iter(list_agents()), None)
    window = configured_window(agent, model)
    return {
        "used": (last[0] + (last[1] or 0)) if last else None,
        "window": window.tokens,
        "source": window.source,
        "compact_percent": settings.LLM_COMPACT_PERCENT,
        # The tokens past which it is near its end: the compaction share, or what a request may
        # take beside the answer's space if that is less.
        "near": min(
            window.tokens * settings.LLM_COMPACT_PERCENT // 100, window.tokens - answer_tokens(window)
        ),
    }

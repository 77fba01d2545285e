"""Wire payloads: the JSON objects of docs/protocol.md's frames, built from rows.

Builds the **message** object (frames ``message``, ``message_start``, ``message_complete``
and the ``history`` frame's ``messages``), the **tool call** object (``tool_call``,
``tool_result``) and the ``conversation`` object (the ``conversation`` frame and the
``history`` frame's ``conversation_info``). The same dicts go to the websocket and into the
``history`` frame, so a reloaded page and a live one render identically. Model and tool text
goes out as sanitized HTML and previews (:mod:`boocode.chat.rendering`), never as markup
from the source.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.db.models import Count, Q, Sum

from boocode.chat import attachments
from boocode.chat.models import Conversation, Message, ToolCall
from boocode.chat.rendering import images_for, preview, render_markdown

HISTORY_LIMIT = 200  # messages sent to a (re)connecting page


def output_url(conversation_id: int, call_id: int) -> str:
    """Where the whole output of a tool call is (``text/plain``, owner only)."""
    return f"/c/{conversation_id}/calls/{call_id}/output/"


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
    }


def message_payload(message: Message, calls: Iterable[ToolCall] = ()) -> dict[str, Any]:
    """A message as sent to clients; ``html`` is sanitized Markdown (empty while streaming)."""
    rendered = (
        message.role in (Message.Role.ASSISTANT, Message.Role.NOTICE)
        and message.status != Message.Status.STREAMING
        and bool(message.content)
    )
    return {
        "id": message.pk,
        "role": str(message.role),
        "status": str(message.status),
        "content": message.content,
        "html": render_markdown(message.content) if rendered else "",
        "error": message.error,
        "tool_calls": [tool_call_payload(call, message.conversation_id) for call in calls],
        "created_at": message.created_at.isoformat() if message.created_at else None,
        "model": message.model,
        "usage": message.usage if message.role == Message.Role.ASSISTANT else None,
        "attachments": attachments.public(message.attachments),
    }


def history_payload(conversation_id: int, limit: int = HISTORY_LIMIT) -> list[dict[str, Any]]:
    """The last ``limit`` current messages with their tool calls, oldest first (superseded left out)."""
    messages = list(
        Message.objects.filter(conversation_id=conversation_id, superseded_at__isnull=True)
        .order_by("-id")[:limit]
        .prefetch_related("tool_calls")
    )
    messages.reverse()
    return [message_payload(message, message.tool_calls.all()) for message in messages]


def conversation_usage(conversation_id: int) -> dict[str, int]:
    """Tokens the conversation's answers and title requests used, and how many answers came without usage.

    Superseded answers count: their tokens were spent. An answer is an assistant message the
    model completed; stopped and failed ones are not counted as answers. Title requests
    (BOOCODE_TITLE_FROM_MODEL) are no answers: their tokens are kept on the conversation.
    """
    complete = Q(role=Message.Role.ASSISTANT, status=Message.Status.COMPLETE)
    spent = Message.objects.filter(conversation_id=conversation_id, role=Message.Role.ASSISTANT)
    totals = spent.aggregate(
        prompt=Sum("prompt_tokens"),
        completion=Sum("completion_tokens"),
        answers=Count("id", filter=complete),
        without=Count("id", filter=complete & Q(prompt_tokens__isnull=True, completion_tokens__isnull=True)),
    )
    titles = Conversation.objects.filter(pk=conversation_id).values_list(
        "title_prompt_tokens", "title_completion_tokens"
    )
    title_prompt, title_completion = titles.first() or (0, 0)
    return {
        "prompt_tokens": (totals["prompt"] or 0) + title_prompt,
        "completion_tokens": (totals["completion"] or 0) + title_completion,
        "answers": totals["answers"],
        "answers_without_usage": totals["without"],
    }


def conversation_info(conversation: Conversation | int) -> dict[str, Any]:
    """The ``conversation`` object of docs/protocol.md: id, title, model, usage."""
    if not isinstance(conversation, Conversation):
        conversation = Conversation.objects.only("id", "title", "model").get(pk=conversation)
    return {
        "id": conversation.pk,
        "title": conversation.title,
        "model": conversation.model,
        "usage": conversation_usage(conversation.pk),
    }

"""One conversation as a file: Markdown to read, JSON to process.

Both hold the current conversation as the page shows it: superseded messages are left out,
tool calls carry their whole arguments and output (not the page's previews), a message's
attached resources are listed (JSON also has the text the model read of each). What users and
models wrote is exported as written (it is their data); the views serve the files as
attachments that browsers never render (``Content-Disposition: attachment``, ``nosniff`` and a
sandboxing Content-Security-Policy).
"""

from __future__ import annotations

import json
import re
from typing import Any

from django.utils import timezone
from django.utils.text import slugify

from boocode.chat.models import Conversation, Message
from boocode.chat.wire.payloads import conversation_usage

FORMAT = "boocode.conversation/1"
ROLE_HEADINGS = {
    Message.Role.USER: "You",
    Message.Role.ASSISTANT: "Assistant",
    Message.Role.CONSOLE: "Tool console",
    Message.Role.NOTICE: "Notice",
}
_BACKTICKS = re.compile(r"`{3,}")


def _messages(conversation: Conversation) -> list[Message]:
    return list(
        conversation.messages.filter(superseded_at__isnull=True).order_by("id").prefetch_related("tool_calls")
    )


def filename(conversation: Conversation, extension: str) -> str:
    """``<title as a slug>-<id>.<extension>`` (ASCII, no path characters)."""
    slug = slugify(conversation.title)[:60].strip("-") or "conversation"
    return f"{slug}-{conversation.pk}.{extension}"


def as_json(conversation: Conversation) -> dict[str, Any]:
    """The conversation, its current messages and their tool calls as one JSON document."""
    messages = []
    for message in _messages(conversation):
        messages.append(
            {
                "id": message.pk,
                "role": str(message.role),
                "status": str(message.status),
                "content": message.content,
                "reasoning": message.reasoning,
                "error": message.error,
                "model": message.model,
                "usage": message.usage if message.role == Message.Role.ASSISTANT else None,
                "created_at": message.created_at.isoformat(),
                "attachments": _attachments(message),
                "tool_calls": [
                    {
                        "id": call.pk,
                        "call_id": call.call_id,
                        "name": call.name,
                        "server": call.server,
                        "tool": call.tool or call.name,
                        "title": call.title,
                        "arguments": call.arguments,
                        "status": str(call.status),
                        "is_error": call.is_error,
                        "output": call.output,
                        "structured": call.structured,
                        "duration_ms": call.duration_ms,
                        # MCP Apps: the view its result is shown in, and what the view last gave
                        # the model (its arguments and result above are what the view is given).
                        "view": call.view,
                        "view_context": (call.view_context or {}).get("text", ""),
                    }
                    for call in message.tool_calls.all()
                ],
            }
        )
    return {
        "format": FORMAT,
        "exported_at": timezone.now().isoformat(),
        "conversation": {
            "id": conversation.pk,
            "title": conversation.title,
            "agent": conversation.agent_name,
            "model": conversation.model,
            "created_at": conversation.created_at.isoformat(),
            "updated_at": conversation.updated_at.isoformat(),
            "usage": conversation_usage(conversation.pk),
        },
        "messages": messages,
    }


def _attachments(message: Message) -> list[dict[str, str]]:
    """The resources (and skills: ``kind``) attached to a message: what identifies each and the
    text the model read."""
    stored = message.attachments if isinstance(message.attachments, list) else []
    keys = ("uri", "server", "name", "mimeType", "text", "note")
    return [
        {key: str(item.get(key) or "") for key in keys}
        | ({"kind": "skill"} if item.get("kind") == "skill" else {})
        for item in stored
        if isinstance(item, dict)
    ]


def json_text(conversation: Conversation) -> str:
    """:func:`as_json` serialised (indented, UTF-8 characters kept)."""
    return json.dumps(as_json(conversation), indent=2, ensure_ascii=False) + "\n"


def _fence(text: str, info: str = "") -> str:
    """``text`` in a code fence longer than any run of backticks inside it."""
    longest = max((len(run) for run in _BACKTICKS.findall(text)), default=2)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{info}\n{text}{'' if text.endswith(chr(10)) else chr(10)}{fence}"


def _plain(text: str) -> str:
    """Plain text (a title) written so that Markdown shows it as it is."""
    escaped = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return re.sub(r"([\\`*_\[\]#|])", r"\\\1", escaped)


def _when(message: Message) -> str:
    return timezone.localtime(message.created_at).strftime("%Y-%m-%d %H:%M %Z")


def _quote(text: str) -> str:
    """``text`` as a Markdown block quote (its own lines kept)."""
    return "\n".join(f"> {line}".rstrip() for line in text.splitlines())


def markdown_text(conversation: Conversation) -> str:
    """The conversation as a Markdown document: a section per message, tool calls as fenced blocks."""
    lines = [f"# {_plain(conversation.title)}", ""]
    details = [f"Exported from BooCode on {timezone.localtime().strftime('%Y-%m-%d %H:%M %Z')}"]
    if conversation.agent_name:
        details.append(f"agent {_plain(conversation.agent_name)}")
    if conversation.model:
        details.append(f"model {_plain(conversation.model)}")
    lines += ["*" + " · ".join(details) + "*", ""]
    for message in _messages(conversation):
        heading = [ROLE_HEADINGS.get(message.role, str(message.role)), _when(message)]
        if message.role == Message.Role.ASSISTANT:
            if message.model:
                heading.append(_plain(message.model))
            usage = message.usage
            if usage is not None:
                heading.append(f"{usage['prompt_tokens']} + {usage['completion_tokens']} tokens")
        lines += ["## " + " · ".join(heading), ""]
        if message.reasoning:  # labelled, apart from the answer's text
            lines += ["**Thinking:**", "", _quote(message.reasoning), ""]
        if message.role == Message.Role.CONSOLE:
            lines += [_fence(message.content), ""]
        elif message.content:
            lines += [message.content, ""]
        attached = _attachments(message)
        if attached:
            lines += ["Attached resources:", ""]
            for item in attached:
                kind = f", {_plain(item['mimeType'])}" if item["mimeType"] else ""
                note = f" — {_plain(item['note'])}" if item["note"] else ""
                skill = " (skill)" if item.get("kind") == "skill" else ""
                name = _plain(item["name"] or item["uri"]) + skill
                lines.append(f"- {name}: {_plain(item['uri'])} (server {_plain(item['server'])}{kind}){note}")
            lines.append("")
        if message.status in (Message.Status.STOPPED, Message.Status.FAILED):
            reason = f": {message.error}" if message.error else ""
            lines += [f"*({message.status}{_plain(reason)})*", ""]
        for call in message.tool_calls.all():
            name = _plain(call.name)
            where = f" on {_plain(call.server)}" if call.server else ""
            lines += [f"**Tool call** {name}{where} — {call.status}", ""]
            lines += [_fence(_pretty(call.arguments), "json"), ""]
            if call.output:
                lines += ["Output:", "", _fence(call.output), ""]
            if call.view:
                lines += [f"Shown in the view {_plain(call.view)} (MCP Apps).", ""]
                context = (call.view_context or {}).get("text", "")
                if context:
                    lines += ["What the view gave the model:", "", _fence(context), ""]
    return "\n".join(lines).rstrip() + "\n"


def _pretty(arguments: str) -> str:
    try:
        return json.dumps(json.loads(arguments or "{}"), indent=2, ensure_ascii=False)
    except ValueError:
        return arguments

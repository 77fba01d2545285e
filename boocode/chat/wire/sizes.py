"""How big a frame may get: every object sent over the chat websocket is bounded here.

Daphne closes a socket that is sent a frame over 1 MiB (code 1011), and a page that can never
receive its ``history`` can never open its conversation. So no object a frame carries grows
with what the model, a server or a prompt put in it (docs/protocol.md, *Sizes*):

- a message or tool call over its inline budget goes out as a summary marked ``large``; the
  page reads the whole object over HTTP (``body_url``, ``call_url``);
- the ``history`` frame holds the newest messages up to :data:`HISTORY_BYTES`; older ones are
  read page by page over HTTP;
- a streamed answer's text goes out in pieces of at most :data:`DELTA_CHARS`;
- an approval's arguments over :data:`APPROVAL_ARGUMENTS_BYTES` are shown as their beginning.

Pure functions on the wire dicts of :mod:`boocode.chat.wire.payloads`: no database, no I/O.
"""

from __future__ import annotations

import json
from typing import Any

# Sizes as a frame goes out: JSON with ASCII escapes, as Channels' send_json writes it.
MESSAGE_INLINE_BYTES = 128 * 1024  # a larger message object is sent as a summary (large: true)
CALL_INLINE_BYTES = 128 * 1024  # ... and a larger tool call object
HISTORY_BYTES = 512 * 1024  # the messages of a history frame; older ones are read over HTTP
PAGE_BYTES = 4 * 1024 * 1024  # the messages of one page of older ones (HTTP)
SUMMARY_CHARS = 2_000  # of a large message's text, shown until the whole message arrives
DELTA_CHARS = 32 * 1024  # of one text_delta (at most 6 bytes each once escaped)
APPROVAL_ARGUMENTS_BYTES = 64 * 1024
APPROVAL_PREVIEW_CHARS = 16_000
# What the consumer sends at most (Daphne's limit is 1 MiB); the budgets above keep every frame
# far below it, so this is the last guard, not the rule.
MAX_SENT_FRAME_BYTES = 1_000_000


def encoded_size(value: Any) -> int:
    """Bytes of ``value`` as JSON in a frame."""
    return len(json.dumps(value))


def utf16_length(text: str) -> int:
    """Length in UTF-16 code units (JavaScript's ``length``, the unit of ``text_delta.offset``)."""
    return len(text.encode("utf-16-le")) // 2


def bounded_call(call: dict[str, Any]) -> dict[str, Any]:
    """A tool call object, or (over :data:`CALL_INLINE_BYTES`) without its structured content,
    images and resource links, marked ``large``; its text previews are bounded already."""
    if encoded_size(call) <= CALL_INLINE_BYTES:
        return call
    return {**call, "structured": None, "images": [], "resources": [], "large": True}


def bounded_message(message: dict[str, Any]) -> dict[str, Any]:
    """A message object, or (over :data:`MESSAGE_INLINE_BYTES`) its summary.

    Its tool calls are bounded first (:func:`bounded_call`). The summary keeps the first
    :data:`SUMMARY_CHARS` of the text, no HTML and no tool calls, and says ``large``;
    ``content_length`` is the whole text's length in UTF-16 code units. A streamed message's
    HTML so far (``text_html``) is left out first.
    """
    content, html = message.get("content") or "", message.get("html") or ""
    reasoning = message.get("reasoning") or ""
    if message.get("text_html") and encoded_size(message) > MESSAGE_INLINE_BYTES:
        # A streamed message's HTML so far goes first: the page shows its text instead.
        message = {**message, "text_html": None}
    if message.get("tool_calls"):
        message = {**message, "tool_calls": [bounded_call(call) for call in message["tool_calls"]]}
    # Short text decides it without encoding anything; long text without encoding either.
    chars = len(content) + len(html) + len(reasoning)
    if chars > MESSAGE_INLINE_BYTES or (
        (chars > MESSAGE_INLINE_BYTES // 6 or message.get("tool_calls"))
        and encoded_size(message) > MESSAGE_INLINE_BYTES
    ):
        return {
            **message,
            "content": content[:SUMMARY_CHARS],
            "reasoning": reasoning[:SUMMARY_CHARS],
            "html": "",
            "tool_calls": [],
            "large": True,
            "content_length": utf16_length(content),
        }
    return message


def bounded_approval(approval: dict[str, Any]) -> dict[str, Any]:
    """An approval object whose arguments (over :data:`APPROVAL_ARGUMENTS_BYTES`) are replaced
    by the beginning of their JSON text, with ``arguments_length`` (characters) saying so."""
    arguments = approval.get("arguments")
    text = json.dumps(arguments, ensure_ascii=False, indent=2)
    if len(text) <= APPROVAL_ARGUMENTS_BYTES // 6 or encoded_size(arguments) <= APPROVAL_ARGUMENTS_BYTES:
        return approval
    return {**approval, "arguments": text[:APPROVAL_PREVIEW_CHARS], "arguments_length": len(text)}


def bounded_frame(frame: dict[str, Any]) -> dict[str, Any]:
    """A turn's event with the objects it carries bounded (see the module's docstring)."""
    kind = frame.get("type")
    if kind in ("message", "message_start", "message_complete") and isinstance(frame.get("message"), dict):
        return {**frame, "message": bounded_message(frame["message"])}
    if kind in ("tool_call", "tool_result") and isinstance(frame.get("call"), dict):
        return {**frame, "call": bounded_call(frame["call"])}
    if kind == "approval" and isinstance(frame.get("approval"), dict):
        return {**frame, "approval": bounded_approval(frame["approval"])}
    return frame


def delta_pieces(text: str) -> list[str]:
    """``text`` in pieces of at most :data:`DELTA_CHARS` characters (one text_delta each)."""
    return [text[start : start + DELTA_CHARS] for start in range(0, len(text), DELTA_CHARS)] or [""]

"""The conversation as the model reads it: Chat Completions messages built from the rows.

Only ``user`` and ``assistant`` messages that are not superseded go to the model (console and
notice rows never do), in id order, each assistant message followed by its tool calls' results
in the order the model asked for them. Attached resources reach the model inside the user
message they belong to (:func:`boocode.chat.attachments.model_content`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from django.db import connection

from boocode.chat import attachments
from boocode.chat.models import Message

# Stored on what a process that died left streaming or running, and read by the model as the
# output of a call that never finished.
INTERRUPTED = "Interrupted: the server stopped before this finished."


def assistant_entry(content: str, calls: Iterable[tuple[str, str, str]]) -> dict[str, Any]:
    """An assistant message for the model; ``calls`` are (call id, name, arguments text).

    Arguments that are not JSON are replaced by ``{}``: several servers parse them and would
    reject the whole request; the tool's error result already told the model what went wrong.
    """
    entry: dict[str, Any] = {"role": "assistant", "content": content or None}
    tool_calls = []
    for call_id, name, arguments in calls:
        try:
            json.loads(arguments or "{}")
        except ValueError:
            arguments = "{}"
        tool_calls.append(
            {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments or "{}"}}
        )
    if tool_calls:
        entry["tool_calls"] = tool_calls
    return entry


def tool_entry(call_id: str, output: str) -> dict[str, Any]:
    """A tool result message for the model."""
    return {"role": "tool", "tool_call_id": call_id, "content": output}


# Each message with its tool calls in order: one row per call, the call columns NULL without.
# Plain SQL: this runs between the user's message and the model request of every turn, and
# the ORM spends about 1 ms of Python building the join (SQLite runs it in 0.05 ms).
HISTORY_SQL = """
    SELECT m.id, m.role, m.content, c.call_id, c.name, c.arguments, c.output, m.attachments
    FROM chat_message m LEFT JOIN chat_toolcall c ON c.message_id = m.id
    WHERE m.conversation_id = %s AND m.role IN (%s, %s) AND m.superseded_at IS NULL
    ORDER BY m.id, c."index", c.id
"""


def llm_history(conversation_id: int, system_prompt: str = "") -> list[dict[str, Any]]:
    """The conversation as Chat Completions messages (console, notice and superseded entries left out)."""
    messages: list[dict[str, Any]] = []
    if system_prompt.strip():
        messages.append({"role": "system", "content": system_prompt})
    with connection.cursor() as cursor:
        cursor.execute(HISTORY_SQL, [conversation_id, Message.Role.USER, Message.Role.ASSISTANT])
        rows = cursor.fetchall()
    entries: list[tuple[str, str, list[tuple[str, str, str, str]]]] = []  # role, content, calls
    last_id = None
    for message_id, role, content, call_id, name, arguments, output, attached in rows:
        if message_id != last_id:
            last_id = message_id
            # Attached resources reach the model inside the user message, each with its URI.
            entries.append((role, attachments.model_content(content, attached) if attached else content, []))
        if call_id is not None:
            entries[-1][2].append((call_id, name, arguments, output))
    for role, content, calls in entries:
        if role == Message.Role.USER:
            messages.append({"role": "user", "content": content})
            continue
        if not content and not calls:
            continue
        messages.append(assistant_entry(content, ((c[0], c[1], c[2]) for c in calls)))
        messages.extend(tool_entry(call_id, output or INTERRUPTED) for call_id, _, _, output in calls)
    return messages

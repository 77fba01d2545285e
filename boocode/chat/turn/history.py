"""The conversation as the model reads it: Chat Completions messages built from the rows.

Only ``user`` and ``assistant`` messages that are not superseded go to the model (console and
notice rows never do), in id order, each assistant message followed by its tool calls' results
in the order the model asked for them. Attached resources reach the model inside the user
message they belong to (:func:`boocode.chat.wire.attachments.model_content`). What the views of the
conversation's tool calls last gave the model to read (MCP Apps' ``ui/update-model-context``,
:mod:`boocode.chat.web.view_requests`) is added to the last user message, newest first, within
:data:`MAX_VIEW_CONTEXTS_BYTES`.

A tool result longer than twice ``result_chars`` is read as its first and last ``result_chars``
characters and its length (an :class:`~boocode.tools.token_estimate.Excerpt`): the request
gives the model no more of it (:func:`boocode.chat.llm.request_budget.cut_result`), and a
conversation with megabytes of results is not read whole at every turn.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from django.db import connection

from boocode.chat.models import Message
from boocode.chat.wire import attachments
from boocode.tools.token_estimate import Excerpt

# Stored on what a process that died left streaming or running, and read by the model as the
# output of a call that never finished.
INTERRUPTED = "Interrupted: the server stopped before this finished."
MAX_VIEW_CONTEXTS_BYTES = 32 * 1024  # of all views' contexts in one request (each is at most 16 KB)


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
    SELECT m.id, m.role, m.content, c.call_id, c.name, c.arguments,
        CASE WHEN length(c.output) > %s THEN substr(c.output, 1, %s) ELSE c.output END,
        CASE WHEN length(c.output) > %s THEN substr(c.output, length(c.output) - %s + 1) END,
        length(c.output), m.attachments
    FROM chat_message m LEFT JOIN chat_toolcall c ON c.message_id = m.id
    WHERE m.conversation_id = %s AND m.role IN (%s, %s) AND m.superseded_at IS NULL
    ORDER BY m.id, c."index", c.id
"""


# The views' contexts (a few per conversation at most; the column is NULL for every other call).
VIEW_CONTEXTS_SQL = """
    SELECT c.name, c.server, c.view_context
    FROM chat_toolcall c JOIN chat_message m ON c.message_id = m.id
    WHERE m.conversation_id = %s AND m.superseded_at IS NULL AND c.view_context IS NOT NULL
    ORDER BY c.id DESC
"""


def view_contexts(rows: Iterable[tuple[str, str, Any]]) -> str:
    """The views' contexts as the model reads them (``rows``: name, server, stored context; newest first)."""
    sections, used = [], 0
    for name, server, stored in rows:
        context = json.loads(stored) if isinstance(stored, str) else stored
        text = context.get("text") if isinstance(context, dict) else None
        if not isinstance(text, str) or not text:
            continue
        section = f"[What the view of the {name} call ({server}) shows now]\n{text}"
        used += len(section.encode("utf-8"))
        if used > MAX_VIEW_CONTEXTS_BYTES:
            sections.append("[Older views' contexts left out: over the size limit]")
            break
        sections.append(section)
    return "\n\n".join(sections)


# Results read whole however long (no window given): the column's own limit.
WHOLE = 2**31 - 1


def llm_history(
    conversation_id: int,
    system_prompt: str = "",
    then: str | None = None,
    result_chars: int | None = None,
    ids: list[int] | None = None,
) -> list[dict[str, Any]]:
    """The conversation as Chat Completions messages (console, notice and superseded entries left out).

    ``then``: a user message that is being stored now, added at the end. ``result_chars``: a
    result longer than twice this is read as its beginning and end (see the module docstring).
    ``ids``: filled with the id of the stored message each returned message comes from (0 for
    the system prompt and ``then``; a tool result has its assistant message's).
    """
    edge = result_chars if result_chars is not None else WHOLE
    over = 2 * edge if result_chars is not None else WHOLE
    messages: list[dict[str, Any]] = []
    if system_prompt.strip():
        messages.append({"role": "system", "content": system_prompt})
    with connection.cursor() as cursor:
        cursor.execute(
            HISTORY_SQL, [over, edge, over, edge, conversation_id, Message.Role.USER, Message.Role.ASSISTANT]
        )
        rows = cursor.fetchall()
        cursor.execute(VIEW_CONTEXTS_SQL, [conversation_id])
        contexts = view_contexts(cursor.fetchall())
    entries: list[tuple[str, str, list[tuple[str, str, str, str]]]] = []  # role, content, calls
    entry_ids: list[int] = []
    last_id = None
    for message_id, role, content, call_id, name, arguments, output, tail, length, attached in rows:
        if message_id != last_id:
            last_id = message_id
            # Attached resources reach the model inside the user message, each with its URI.
            # (An empty list is stored as "[]": no JSON to parse for the messages without attachments.)
            attached = None if attached in ("[]", []) else attached
            entries.append((role, attachments.model_content(content, attached) if attached else content, []))
            entry_ids.append(message_id)
        if call_id is not None:
            if tail is not None:
                output = Excerpt(output, tail, length)
            entries[-1][2].append((call_id, name, arguments, output))
    sources = [0] * len(messages)
    for (role, content, calls), message_id in zip(entries, entry_ids, strict=True):
        if role == Message.Role.USER:
            messages.append({"role": "user", "content": content})
            sources.append(message_id)
            continue
        if not content and not calls:
            continue
        messages.append(assistant_entry(content, ((c[0], c[1], c[2]) for c in calls)))
        messages.extend(tool_entry(call_id, output or INTERRUPTED) for call_id, _, _, output in calls)
        sources.extend([message_id] * (1 + len(calls)))
    if then is not None:
        messages.append({"role": "user", "content": then})
        sources.append(0)
    if ids is not None:
        ids[:] = sources
    if contexts:
        last_user = next((m for m in reversed(messages) if m["role"] == "user"), None)
        if last_user is not None and isinstance(last_user["content"], list):
            last_user["content"] = [*last_user["content"], {"type": "text", "text": contexts}]
        elif last_user is not None:
            last_user["content"] = f"{last_user['content']}\n\n{contexts}"
    return messages

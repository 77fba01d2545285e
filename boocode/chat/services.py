"""Chat services and selectors: plain synchronous ORM code, one unit of work per function.

Views call these directly; the async turn loop calls them through ``database_sync_to_async``
(each call is short and never waits on the network). Payload builders here produce the
JSON shapes of ``docs/protocol.md``: the same dicts go to the websocket and into the
history frame, so a reloaded page and a live one render identically.

Every write passes its text through :func:`~boocode.chat.text.storable`: what a model or a
tool produces may hold NUL characters or unpaired surrogates, which the database refuses;
they are stored as U+FFFD rather than failing the turn. (What users type is refused before.)
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from django.db import connection, transaction
from django.db.models import QuerySet
from django.utils import timezone

from boocode.chat.models import DEFAULT_TITLE, TITLE_MAX_LENGTH, Conversation, Message, ToolCall
from boocode.chat.rendering import images_for, preview, render_markdown
from boocode.chat.text import storable, storable_json
from mcpclient.results import ToolResult

HISTORY_LIMIT = 200  # messages sent to a (re)connecting page
AUTO_TITLE_CHARS = 60
INTERRUPTED = "Interrupted: the server stopped before this finished."
CANCELLED_OUTPUT = "Cancelled by the user before the tool finished."


# --- conversations ---------------------------------------------------------------------------
def conversations_for(user: Any) -> QuerySet[Conversation]:
    """The user's conversations, most recently active first."""
    return Conversation.objects.filter(owner=user)


def owned_conversation(user_id: int, conversation_id: int) -> Conversation | None:
    """The conversation if ``user_id`` owns it, else ``None``."""
    return Conversation.objects.filter(pk=conversation_id, owner_id=user_id).first()


def create_conversation(*, owner: Any, agent_name: str = "") -> Conversation:
    """A new empty conversation."""
    return Conversation.objects.create(owner=owner, agent_name=agent_name)


def rename_conversation(*, conversation: Conversation, title: str) -> Conversation:
    """Set the title (trimmed; empty means the default title)."""
    conversation.title = " ".join(storable(title).split())[:TITLE_MAX_LENGTH] or DEFAULT_TITLE
    conversation.save(update_fields=["title", "updated_at"])
    return conversation


def set_conversation_agent(*, conversation: Conversation, agent_name: str) -> Conversation:
    """Choose the agent that answers the next turns (empty: the default agent)."""
    conversation.agent_name = agent_name
    conversation.save(update_fields=["agent_name", "updated_at"])
    return conversation


def agent_names() -> list[str]:
    """The agents a conversation can pick, in file order."""
    from agents.services import list_agents, refresh_agents_if_changed

    refresh_agents_if_changed()
    return [agent.name for agent in list_agents()]


class AgentUnavailable(Exception):
    """The conversation's agent is no longer defined; ``str()`` is a message for the user."""


def resolve_agent(name: str) -> Any:
    """The agent row called ``name`` (``""``: the default agent).

    Raises :class:`AgentUnavailable` when ``name`` is gone from AGENTS.md: falling back to
    another agent could hand the conversation more tools than its own agent allowed.
    """
    from agents.services import default_agent, get_agent

    if not name:
        return default_agent()
    agent = get_agent(name)
    if agent is None:
        raise AgentUnavailable(
            f'The agent "{name}" of this conversation is no longer defined in AGENTS.md, so nothing '
            "was sent to the model and no tool ran. Choose another agent to continue."
        )
    return agent


# --- payloads (protocol shapes) ---------------------------------------------------------------
def tool_call_payload(call: ToolCall) -> dict[str, Any]:
    """A tool call as sent to clients: arguments and output previews, safe image URLs."""
    arguments, _ = preview(call.arguments)
    output, truncated = preview(call.output)
    images, left_out = images_for(call.parts)
    return {
        "id": call.pk,
        "message_id": call.message_id,
        "call_id": call.call_id,
        "name": call.name,
        "arguments": arguments,
        "status": str(call.status),
        "output": output,
        "output_truncated": truncated,
        "output_length": len(call.output),
        "is_error": call.is_error,
        "duration_ms": call.duration_ms,
        "images": images,
        "images_left_out": left_out,
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
        "tool_calls": [tool_call_payload(call) for call in calls],
        "created_at": message.created_at.isoformat() if message.created_at else None,
    }


def history_payload(conversation_id: int, limit: int = HISTORY_LIMIT) -> list[dict[str, Any]]:
    """The last ``limit`` messages with their tool calls, oldest first."""
    messages = list(
        Message.objects.filter(conversation_id=conversation_id)
        .order_by("-id")[:limit]
        .prefetch_related("tool_calls")
    )
    messages.reverse()
    return [message_payload(message, message.tool_calls.all()) for message in messages]


def tool_output(user_id: int, call_id: int) -> ToolCall | None:
    """A tool call of one of the user's conversations (for the full-output view)."""
    return ToolCall.objects.filter(pk=call_id, message__conversation__owner_id=user_id).first()


# --- the model's view of the history ---------------------------------------------------------
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


def conversation_agent_name(conversation_id: int) -> str:
    """The agent a conversation has picked ("" for the default); ``Conversation.DoesNotExist`` if gone."""
    with connection.cursor() as cursor:  # plain SQL: read before every model request
        cursor.execute("SELECT agent_name FROM chat_conversation WHERE id = %s", [conversation_id])
        row = cursor.fetchone()
    if row is None:
        raise Conversation.DoesNotExist(f"conversation {conversation_id} does not exist")
    return row[0]


# Each message with its tool calls in order: one row per call, the call columns NULL without.
# Plain SQL: this runs between the user's message and the model request of every turn, and
# the ORM spends about 1 ms of Python building the join (SQLite runs it in 0.05 ms).
HISTORY_SQL = """
    SELECT m.id, m.role, m.content, c.call_id, c.name, c.arguments, c.output
    FROM chat_message m LEFT JOIN chat_toolcall c ON c.message_id = m.id
    WHERE m.conversation_id = %s AND m.role IN (%s, %s)
    ORDER BY m.id, c."index", c.id
"""


def llm_history(conversation_id: int, system_prompt: str = "") -> list[dict[str, Any]]:
    """The conversation as Chat Completions messages (console and notice entries left out)."""
    messages: list[dict[str, Any]] = []
    if system_prompt.strip():
        messages.append({"role": "system", "content": system_prompt})
    with connection.cursor() as cursor:
        cursor.execute(HISTORY_SQL, [conversation_id, Message.Role.USER, Message.Role.ASSISTANT])
        rows = cursor.fetchall()
    entries: list[tuple[str, str, list[tuple[str, str, str, str]]]] = []  # role, content, calls
    last_id = None
    for message_id, role, content, call_id, name, arguments, output in rows:
        if message_id != last_id:
            last_id = message_id
            entries.append((role, content, []))
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


# --- writes made by a turn -------------------------------------------------------------------
def add_message(
    conversation_id: int,
    role: str,
    content: str = "",
    *,
    status: str = Message.Status.COMPLETE,
    error: str = "",
) -> dict[str, Any]:
    """Store a message from the app (what the user sends goes through :func:`begin_turn`); its payload."""
    message = Message.objects.create(
        conversation_id=conversation_id,
        role=role,
        content=storable(content),
        status=status,
        error=storable(error),
    )
    return message_payload(message)


def auto_title(text: str) -> str:
    """A conversation title from the first line of the first user message."""
    first_line = text.strip().splitlines()[0]
    return first_line[:AUTO_TITLE_CHARS] + ("…" if len(first_line) > AUTO_TITLE_CHARS else "")


_settled: set[int] = set()  # conversations checked for a dead process's leftovers since start


TOUCH_SQL = """
    UPDATE chat_conversation SET updated_at = %s, title = CASE WHEN title = %s THEN %s ELSE title END
    WHERE id = %s
"""


def begin_turn(
    conversation_id: int, role: str, text: str, *, open_answer: bool = False
) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """Store what the user sent (a message or a console command), in one transaction.

    Returns its payload and, with ``open_answer``, the payload of a new streaming assistant
    message for the answer. First settles, once per process, what a dead one left. What the
    user sends moves the conversation to the top of the list, and the first user message names
    a conversation that still has the default title. ``Conversation.DoesNotExist`` if it is gone.

    Plain SQL and one INSERT for both messages: this runs in every turn, alongside its first
    model request.
    """
    text = storable(text)
    messages = [Message(conversation_id=conversation_id, role=role, content=text)]
    if open_answer:
        messages.append(
            Message(
                conversation_id=conversation_id, role=Message.Role.ASSISTANT, status=Message.Status.STREAMING
            )
        )
    title = auto_title(text) if role == Message.Role.USER and text.strip() else DEFAULT_TITLE
    with transaction.atomic():
        # The update comes first: it locks the row (PostgreSQL) and says whether it still exists.
        with connection.cursor() as cursor:  # plain SQL: the ORM's CASE costs ~0.5 ms per turn
            now = connection.ops.adapt_datetimefield_value(timezone.now())
            cursor.execute(TOUCH_SQL, [now, DEFAULT_TITLE, title, conversation_id])
            if cursor.rowcount == 0:
                raise Conversation.DoesNotExist(f"conversation {conversation_id} does not exist")
        if conversation_id not in _settled:
            close_interrupted(conversation_id)
            _settled.add(conversation_id)
        stored = Message.objects.bulk_create(messages)  # one INSERT; the ids come back in order
    answer = message_payload(stored[1]) if open_answer else None
    return message_payload(stored[0]), answer


def settle_turn(
    conversation_id: int,
    message_id: int | None,
    *,
    content: str,
    status: str,
    error: str,
    call_output: str,
) -> tuple[dict[str, Any] | None, bool, list[dict[str, Any]]]:
    """End a stopped or failed turn: ``(message payload, created, ended tool call payloads)``.

    The streamed message keeps its text with the final status; a failure before any message
    gets a new failed assistant message carrying the error. Any other message still streaming
    (one whose creation raced with the cancellation) and unfinished tool calls are closed too.
    """
    with transaction.atomic():
        Message.objects.filter(conversation_id=conversation_id, status=Message.Status.STREAMING).exclude(
            pk=message_id
        ).update(status=status, error=storable(error) or INTERRUPTED)
        calls = end_running_calls(conversation_id, output=call_output)
        if message_id is not None:
            message = finish_message(message_id, content=content, status=status, error=error)
            return message, False, calls
        if status == Message.Status.FAILED:
            return (
                add_message(conversation_id, Message.Role.ASSISTANT, status=status, error=error),
                True,
                calls,
            )
        return None, False, calls


def save_partial(message_id: int, content: str) -> None:
    """Save the text streamed so far (a reload mid-turn shows it)."""
    Message.objects.filter(pk=message_id).update(content=storable(content), updated_at=timezone.now())


def finish_message(
    message_id: int,
    *,
    content: str,
    status: str,
    error: str = "",
    tool_calls: Iterable[tuple[str, str, str]] = (),
    created_at: datetime | None = None,
) -> dict[str, Any]:
    """Store a streamed message's final text and status, and the tool calls it requested; its payload.

    The calls are created running. ``created_at`` (the caller knows it from ``message_start``)
    saves reading the row back.
    """
    now = timezone.now()
    content, error = storable(content), storable(error)
    with transaction.atomic():
        if not Message.objects.filter(pk=message_id).update(
            content=content, status=status, error=error, updated_at=now
        ):
            raise Message.DoesNotExist(f"message {message_id} does not exist")
        role = Message.Role.ASSISTANT
        if created_at is None:
            role, created_at = Message.objects.filter(pk=message_id).values_list("role", "created_at").get()
        calls = [
            ToolCall(
                message_id=message_id,
                index=index,
                call_id=storable(call_id),
                name=storable(name),
                arguments=storable(arguments),
            )
            for index, (call_id, name, arguments) in enumerate(tool_calls)
        ]
        if calls:
            calls = ToolCall.objects.bulk_create(calls)  # primary keys come back (RETURNING)
    message = Message(pk=message_id, role=role, content=content, status=status, error=error)
    message.created_at, message.updated_at = created_at, now
    return message_payload(message, calls)


def add_tool_call(message_id: int, *, call_id: str, name: str, arguments: str) -> dict[str, Any]:
    """A running tool call on a console message; its payload."""
    call = ToolCall.objects.create(
        message_id=message_id, call_id=call_id, name=storable(name), arguments=storable(arguments)
    )
    return tool_call_payload(call)


def finish_tool_call(
    call: dict[str, Any], result: ToolResult, duration_ms: int, *, status: str = ""
) -> dict[str, Any]:
    """Store a tool's result on the call ``call`` (its payload); the updated payload."""
    row = ToolCall(
        pk=call["id"],
        message_id=call["message_id"],
        call_id=call["call_id"],
        name=call["name"],
        arguments=call["arguments"],
        status=status or (ToolCall.Status.ERROR if result.is_error else ToolCall.Status.DONE),
        output=storable(result.output),
        is_error=result.is_error,
        parts=storable_json(result.parts),
        duration_ms=duration_ms,
        finished_at=timezone.now(),
    )
    ToolCall.objects.filter(pk=row.pk).update(
        status=row.status,
        output=row.output,
        is_error=row.is_error,
        parts=row.parts,
        duration_ms=row.duration_ms,
        finished_at=row.finished_at,
    )
    return tool_call_payload(row)


def end_running_calls(conversation_id: int, *, output: str = CANCELLED_OUTPUT) -> list[dict[str, Any]]:
    """Mark the conversation's unfinished tool calls cancelled; their payloads."""
    now = timezone.now()
    output = storable(output)
    calls = list(
        ToolCall.objects.filter(message__conversation_id=conversation_id, status=ToolCall.Status.RUNNING)
    )
    for call in calls:
        call.status = ToolCall.Status.CANCELLED
        call.is_error = True
        call.output = output
        call.finished_at = now
        call.duration_ms = int((now - call.started_at).total_seconds() * 1000)
    ToolCall.objects.bulk_update(calls, ["status", "is_error", "output", "finished_at", "duration_ms"])
    return [tool_call_payload(call) for call in calls]


def close_interrupted(conversation_id: int) -> None:
    """Settle what a dead process left streaming or running (called when no turn is running)."""
    Message.objects.filter(conversation_id=conversation_id, status=Message.Status.STREAMING).update(
        status=Message.Status.STOPPED, error=INTERRUPTED
    )
    end_running_calls(conversation_id, output=INTERRUPTED)

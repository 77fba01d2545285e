"""Conversations, messages and tool calls: their writes and reads, one unit of work per function.

Plain synchronous ORM code. Views call it directly; the async turn loop calls it through
``database_sync_to_async`` (each call is short and never waits on the network). A write that
the tabs hear of returns its payload (:mod:`boocode.chat.wire.payloads`).

Every write passes its text through :func:`~boocode.chat.storable.storable`: what a model or a
tool produces may hold NUL characters or unpaired surrogates, which the database refuses;
they are stored as U+FFFD rather than failing the turn. (What users type is refused before.)

Regenerating an answer or editing a message never deletes: the replaced rows get
``superseded_at`` (:func:`begin_regenerate`, :func:`begin_edit`) and every read that feeds the
page or the model leaves them out. What a process that died left streaming or running is
settled once per process and conversation, before its next write (:func:`close_interrupted`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any, Protocol

from django.db import connection, transaction
from django.db.backends.utils import CursorWrapper
from django.db.models import QuerySet
from django.utils import timezone

from boocode.chat.ledger import daily_usage
from boocode.chat.llm.client import Usage
from boocode.chat.models import (
    DEFAULT_TITLE,
    MODEL_NAME_LENGTH,
    TITLE_MAX_LENGTH,
    Conversation,
    Message,
    Preference,
    ToolApproval,
    ToolCall,
)
from boocode.chat.storable import storable, storable_json
from boocode.chat.turn.history import INTERRUPTED
from boocode.chat.turn.titles import auto_title
from boocode.chat.wire.payloads import message_payload, tool_call_payload
from mcpclient.core.results import MAX_OUTPUT_BYTES, ToolResult
from mcpclient.runtime import hub_tools

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


def set_conversation_model(*, conversation: Conversation, model: str) -> Conversation:
    """Choose the model of the next turns (empty: the agent's ``model:`` or BOOCODE_LLM_MODEL).

    The caller checks the name against the server's model list when it has one.
    """
    conversation.model = " ".join(model.split())[:MODEL_NAME_LENGTH]
    conversation.save(update_fields=["model", "updated_at"])
    return conversation


# --- preferences -----------------------------------------------------------------------------
def user_theme(user: Any) -> str:
    """The user's theme: ``system`` (follow the browser), ``light`` or ``dark``."""
    if not getattr(user, "is_authenticated", False):
        return Preference.Theme.SYSTEM
    theme = Preference.objects.filter(user=user).values_list("theme", flat=True).first()
    return theme or Preference.Theme.SYSTEM


def set_user_theme(*, user: Any, theme: str) -> str:
    """Remember the user's theme; ``ValueError`` for a value that is not one of the choices."""
    if theme not in Preference.Theme.values:
        raise ValueError(f"theme must be one of {', '.join(Preference.Theme.values)}")
    Preference.objects.update_or_create(user=user, defaults={"theme": theme})
    return theme


def conversation_groups(conversations: Iterable[Conversation]) -> list[dict[str, Any]]:
    """The conversations (latest first) under Today, Yesterday, Last 7 days and Older.

    Days are those of the server's time zone (TIME_ZONE); empty groups are left out.
    """
    today = timezone.localdate()
    groups: dict[str, list[Conversation]] = {label: [] for label in GROUP_LABELS}
    for conversation in conversations:
        age = (today - timezone.localdate(conversation.updated_at)).days
        label = "Today" if age <= 0 else "Yesterday" if age == 1 else "Last 7 days" if age <= 7 else "Older"
        groups[label].append(conversation)
    return [{"label": label, "conversations": items} for label, items in groups.items() if items]


GROUP_LABELS = ("Today", "Yesterday", "Last 7 days", "Older")


def tool_identity(name: str, user_id: int | None = None) -> Identity:
    """``(server, tool, title, view)`` of the tool the model calls ``name`` (from the live registry).

    ``view`` is the tool's MCP Apps view (a ``ui://`` URI; "" for none, or where views are off).
    A native tool, or one no server offers now, is ``("", name, "", "")``.
    """
    for hub_tool in hub_tools(user_id):
        if hub_tool.prefixed_name == name:
            return hub_tool.server, hub_tool.name, hub_tool.title, hub_tool.ui_resource_uri
    return "", name, "", ""


def tool_output(user_id: int, call_id: int) -> ToolCall | None:
    """A tool call of one of the user's conversations (for the full-output view)."""
    return ToolCall.objects.filter(pk=call_id, message__conversation__owner_id=user_id).first()


def conversation_agent_name(conversation_id: int) -> str:
    """The agent a conversation has picked ("" for the default); ``Conversation.DoesNotExist`` if gone."""
    return conversation_choices(conversation_id)[0]


def conversation_agent_and_owner(conversation_id: int) -> tuple[str, int]:
    """``(agent name, owner's user id)`` of a conversation; ``Conversation.DoesNotExist`` if gone."""
    return Conversation.objects.values_list("agent_name", "owner_id").get(pk=conversation_id)


def conversation_choices(conversation_id: int) -> tuple[str, str]:
    """``(agent name, model)`` the conversation has picked ("" for the defaults).

    ``Conversation.DoesNotExist`` if it is gone.
    """
    with connection.cursor() as cursor:  # plain SQL: read before every model request
        cursor.execute("SELECT agent_name, model FROM chat_conversation WHERE id = %s", [conversation_id])
        row = cursor.fetchone()
    if row is None:
        raise Conversation.DoesNotExist(f"conversation {conversation_id} does not exist")
    return row[0], row[1]


# --- writes made by a turn -------------------------------------------------------------------
Identity = tuple[str, str, str, str]  # (server, tool, title, view) of a tool call, see tool_identity()


def add_message(
    conversation_id: int,
    role: str,
    content: str = "",
    *,
    status: str = Message.Status.COMPLETE,
    error: str = "",
    model: str = "",
) -> dict[str, Any]:
    """Store a message from the app (what the user sends goes through :func:`begin_turn`); its payload."""
    message = Message.objects.create(
        conversation_id=conversation_id,
        role=role,
        content=storable(content),
        status=status,
        error=storable(error),
        model=storable(model)[:MODEL_NAME_LENGTH],
    )
    return message_payload(message)


_settled: set[int] = set()  # conversations checked for a dead process's leftovers since start


# RETURNING: SQLite from 3.35 (Django needs 3.37), PostgreSQL; the title comes back with the update.
TOUCH_SQL = "UPDATE chat_conversation SET updated_at = %s WHERE id = %s RETURNING title"
TITLE_SQL = "UPDATE chat_conversation SET title = %s WHERE id = %s"
FIRST_OF_ROLE_SQL = (
    "SELECT content FROM chat_message WHERE conversation_id = %s AND role = %s ORDER BY id LIMIT 1"
)


def _touch(conversation_id: int, title_from: str | None = None, *, command: bool = False) -> bool:
    """Move the conversation to the top of the list; name it after ``title_from`` if it is untitled.

    Returns whether the title was set. ``Conversation.DoesNotExist`` if the conversation is gone.
    Plain SQL: the ORM's version costs ~0.5 ms, and this runs in every turn; the title (Markdown
    parsed, ~0.1-0.8 ms) is made only for a conversation that still has the default title.

    A console ``command`` names an untitled conversation too (the command as typed, so that a
    conversation of console commands only is not one more "New conversation" in the list), but
    only until the person's first message: that names it instead, unless the title was changed
    since (:func:`_named_by_command`).
    """
    with connection.cursor() as cursor:
        # The update comes first: it locks the row (PostgreSQL) and says whether it still exists.
        now = connection.ops.adapt_datetimefield_value(timezone.now())
        cursor.execute(TOUCH_SQL, [now, conversation_id])
        touched = cursor.fetchone()
        if touched is None:
            raise Conversation.DoesNotExist(f"conversation {conversation_id} does not exist")
        if title_from is None:
            return False
        (current,) = touched
        if current != DEFAULT_TITLE and (command or not _named_by_command(cursor, conversation_id, current)):
            return False
        title = auto_title(title_from)
        if title == DEFAULT_TITLE:
            return False
        cursor.execute(TITLE_SQL, [title, conversation_id])
        return True


def _named_by_command(cursor: CursorWrapper, conversation_id: int, title: str) -> bool:
    """The conversation's title is the one its first console command gave it, and no message of
    the person's has named it yet (read only for a title that starts as a command does)."""
    if not title.startswith("/"):
        return False
    cursor.execute(FIRST_OF_ROLE_SQL, [conversation_id, Message.Role.USER])
    if cursor.fetchone() is not None:
        return False
    cursor.execute(FIRST_OF_ROLE_SQL, [conversation_id, Message.Role.CONSOLE])
    first = cursor.fetchone()
    return first is not None and auto_title(first[0]) == title


def _settle_once(conversation_id: int) -> None:
    if conversation_id not in _settled:
        close_interrupted(conversation_id)
        _settled.add(conversation_id)


def begin_turn(
    conversation_id: int,
    role: str,
    text: str,
    *,
    open_answer: bool = False,
    model: str = "",
    attachments: list[dict[str, Any]] | None = None,
) -> tuple[dict[str, Any], dict[str, Any] | None, bool]:
    """Store what the user sent (a message or a console command), in one transaction.

    Returns its payload, with ``open_answer`` the payload of a new streaming assistant message
    for the answer (``model``: the model asked), and whether the message named the conversation.
    First settles, once per process, what a dead one left. What the user sends moves the
    conversation to the top of the list, and a user message (or a console command, until the
    first message: :func:`_touch`) names a conversation that still has the default title.
    ``Conversation.DoesNotExist`` if it is gone.

    One INSERT for both messages: this runs in every turn, alongside its first model request.
    """
    text = storable(text)
    attached = attachments or []
    messages = [Message(conversation_id=conversation_id, role=role, content=text, attachments=attached)]
    if open_answer:
        messages.append(
            Message(
                conversation_id=conversation_id,
                role=Message.Role.ASSISTANT,
                status=Message.Status.STREAMING,
                model=storable(model)[:MODEL_NAME_LENGTH],
            )
        )
    names = role in (Message.Role.USER, Message.Role.CONSOLE) and text.strip()
    with transaction.atomic():
        titled = _touch(conversation_id, text if names else None, command=role == Message.Role.CONSOLE)
        _settle_once(conversation_id)
        stored = Message.objects.bulk_create(messages)  # one INSERT; the ids come back in order
    answer = message_payload(stored[1]) if open_answer else None
    return message_payload(stored[0]), answer, titled


class PromptMessage(Protocol):
    """One message of an MCP prompt as ``prompts/get`` gave it (``user`` or ``assistant``)."""

    @property
    def role(self) -> str: ...

    @property
    def text(self) -> str: ...


def store_prompt(
    conversation_id: int, mark: str, messages: Sequence[PromptMessage]
) -> tuple[list[dict[str, Any]], bool]:
    """Store the mark and the prompt's messages in one transaction: their payloads, and whether
    the first user message named the conversation. ``Conversation.DoesNotExist`` if it is gone."""
    rows = [Message(conversation_id=conversation_id, role=Message.Role.CONSOLE, content=storable(mark))]
    rows += [
        Message(
            conversation_id=conversation_id,
            role=Message.Role.ASSISTANT if message.role == "assistant" else Message.Role.USER,
            content=storable(message.text),
        )
        for message in messages
    ]
    first_user = next((m.text for m in messages if m.role == "user" and m.text.strip()), None)
    with transaction.atomic():
        titled = _touch(conversation_id, first_user)
        _settle_once(conversation_id)
        stored = Message.objects.bulk_create(rows)
    return [message_payload(row) for row in stored], titled


class NothingToRegenerate(Exception):
    """The conversation has no user message whose answer could be made again."""


class UnknownMessage(Exception):
    """The message is not a current user message of the conversation."""


def _current(conversation_id: int) -> QuerySet[Message]:
    return Message.objects.filter(conversation_id=conversation_id, superseded_at__isnull=True)


def regenerate_target(conversation_id: int) -> int | None:
    """The id of the last current user message (whose answer ``regenerate`` makes again), or ``None``."""
    return (
        _current(conversation_id)
        .filter(role=Message.Role.USER)
        .order_by("-id")
        .values_list("id", flat=True)
        .first()
    )


def is_editable(conversation_id: int, message_id: Any) -> bool:
    """Whether ``message_id`` is a current user message of the conversation (what ``edit`` may replace)."""
    if not isinstance(message_id, int) or isinstance(message_id, bool) or message_id <= 0:
        return False
    return _current(conversation_id).filter(pk=message_id, role=Message.Role.USER).exists()


def stored_attachments(conversation_id: int, message_id: Any) -> list[dict[str, Any]]:
    """The attachments stored on a message of the conversation (``[]`` if none or not its message)."""
    if not isinstance(message_id, int) or isinstance(message_id, bool):
        return []
    found = (
        Message.objects.filter(conversation_id=conversation_id, pk=message_id)
        .values_list("attachments", flat=True)
        .first()
    )
    return found if isinstance(found, list) else []


def _supersede(conversation_id: int, first_id: int) -> list[int]:
    """Mark current messages from ``first_id`` on superseded; their ids (kept, never deleted)."""
    rows = _current(conversation_id).filter(id__gte=first_id)
    ids = list(rows.order_by("id").values_list("id", flat=True))
    if ids:
        Message.objects.filter(pk__in=ids).update(superseded_at=timezone.now())
    return ids


def begin_regenerate(conversation_id: int) -> tuple[int, list[int]]:
    """Supersede everything after the last user message: ``(its id, the superseded ids)``.

    Raises :class:`NothingToRegenerate` when there is no user message, and
    ``Conversation.DoesNotExist`` when the conversation is gone.
    """
    with transaction.atomic():
        _touch(conversation_id)
        _settle_once(conversation_id)
        target = regenerate_target(conversation_id)
        if target is None:
            raise NothingToRegenerate(conversation_id)
        return target, _supersede(conversation_id, target + 1)


def begin_edit(conversation_id: int, message_id: int) -> list[int]:
    """Supersede the user message ``message_id`` and everything after it; the superseded ids.

    Raises :class:`UnknownMessage` unless it is a current user message of the conversation,
    and ``Conversation.DoesNotExist`` when the conversation is gone.
    """
    with transaction.atomic():
        _touch(conversation_id)
        _settle_once(conversation_id)
        if not is_editable(conversation_id, message_id):
            raise UnknownMessage(message_id)
        return _supersede(conversation_id, message_id)


def settle_turn(
    conversation_id: int,
    message_id: int | None,
    *,
    content: str,
    status: str,
    error: str,
    call_output: str,
    reasoning: str = "",
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
            message = finish_message(
                message_id, content=content, status=status, error=error, reasoning=reasoning
            )
            return message, False, calls
        if status == Message.Status.FAILED:
            return (
                add_message(conversation_id, Message.Role.ASSISTANT, status=status, error=error),
                True,
                calls,
            )
        return None, False, calls


def save_partial(message_id: int, content: str, reasoning: str = "") -> None:
    """Save the text and the thinking streamed so far (a reload mid-turn shows them)."""
    Message.objects.filter(pk=message_id).update(
        content=storable(content), reasoning=storable(reasoning), updated_at=timezone.now()
    )


def finish_message(
    message_id: int,
    *,
    content: str,
    status: str,
    error: str = "",
    tool_calls: Iterable[tuple[str, str, str]] = (),
    identities: dict[str, Identity] | None = None,
    created_at: datetime | None = None,
    conversation_id: int | None = None,
    model: str | None = None,
    usage: Usage | None = None,
    counted_for: int | None = None,
    reasoning: str = "",
    released: int = 0,
) -> dict[str, Any]:
    """Store a streamed message's final text and status, and the tool calls it requested; its payload.

    ``reasoning`` is the model's thinking, stored apart from the text.

    The calls are created running; ``identities`` maps a call's name to its (server, tool,
    title). ``model`` (the model that answered) and ``usage`` are stored when given. The turn
    passes ``created_at``, ``conversation_id`` and ``model`` (it knows them from
    ``message_start``), which saves reading the row back. ``counted_for``: the person whose usage
    of the day this completed answer adds to (its tokens and one answer, :mod:`.daily_usage`);
    ``released``: the tokens its request held on that day's row (:func:`.budgets.reserve`), given back.
    """
    now = timezone.now()
    content, error, reasoning = storable(content), storable(error), storable(reasoning)
    fields: dict[str, Any] = {
        "content": content,
        "reasoning": reasoning,
        "status": status,
        "error": error,
        "updated_at": now,
    }
    if model is not None:
        model = fields["model"] = storable(model)[:MODEL_NAME_LENGTH]
    if usage is not None:
        fields["prompt_tokens"], fields["completion_tokens"] = usage
    with transaction.atomic():
        if not Message.objects.filter(pk=message_id).update(**fields):
            raise Message.DoesNotExist(f"message {message_id} does not exist")
        if counted_for is not None:
            prompt, completion = usage or (0, 0)
            daily_usage.record(
                counted_for,
                at=now,
                prompt_tokens=prompt or 0,
                completion_tokens=completion or 0,
                answers=1,
                answers_without_usage=int(usage is None),
                released=released,
            )
        role = Message.Role.ASSISTANT
        if created_at is None or conversation_id is None or model is None:
            role, created_at, conversation_id, model, prompt, completion = (
                Message.objects.filter(pk=message_id)
                .values_list(
                    "role", "created_at", "conversation_id", "model", "prompt_tokens", "completion_tokens"
                )
                .get()
            )
            usage = None if prompt is None and completion is None else (prompt or 0, completion or 0)
        identities = identities or {}
        calls = []
        for index, (call_id, name, arguments) in enumerate(tool_calls):
            server, tool, title, view = identities.get(name, ("", name, "", ""))
            calls.append(
                ToolCall(
                    message_id=message_id,
                    index=index,
                    call_id=storable(call_id),
                    name=storable(name),
                    server=storable(server)[:100],
                    tool=storable(tool)[:255],
                    title=storable(title)[:255],
                    view=storable(view)[:2048],
                    arguments=storable(arguments),
                )
            )
        if calls:
            calls = ToolCall.objects.bulk_create(calls)  # primary keys come back (RETURNING)
    message = Message(
        pk=message_id,
        conversation_id=conversation_id,
        role=role,
        content=content,
        reasoning=reasoning,
        status=status,
        error=error,
        model=model or "",
        prompt_tokens=usage[0] if usage else None,
        completion_tokens=usage[1] if usage else None,
    )
    message.created_at, message.updated_at = created_at, now
    return message_payload(message, calls)


def add_tool_call(
    message_id: int,
    *,
    call_id: str,
    name: str,
    arguments: str,
    identity: Identity | None = None,
    conversation_id: int | None = None,
) -> dict[str, Any]:
    """A running tool call on a console message; its payload."""
    server, tool, title, view = identity or ("", name, "", "")
    call = ToolCall.objects.create(
        message_id=message_id,
        call_id=call_id,
        name=storable(name),
        server=storable(server)[:100],
        tool=storable(tool)[:255],
        title=storable(title)[:255],
        view=storable(view)[:2048],
        arguments=storable(arguments),
    )
    if conversation_id is None:
        conversation_id = Message.objects.values_list("conversation_id", flat=True).get(pk=message_id)
    return tool_call_payload(call, conversation_id)


def structured_content(value: Any) -> Any:
    """A result's structuredContent as stored: ``None`` when absent, unserialisable or over the cap."""
    if value is None:
        return None
    try:
        size = len(json.dumps(value, ensure_ascii=False).encode("utf-8", errors="replace"))
    except (TypeError, ValueError, RecursionError):
        return None
    return storable_json(value) if size <= MAX_OUTPUT_BYTES else None


def finish_tool_call(
    call: dict[str, Any], result: ToolResult, duration_ms: int, *, status: str = ""
) -> dict[str, Any]:
    """Store a tool's result on the call ``call`` (its payload); the updated payload."""
    row = ToolCall(
        pk=call["id"],
        message_id=call["message_id"],
        call_id=call["call_id"],
        name=call["name"],
        server=call.get("server", ""),
        tool=call.get("tool", ""),
        title=call.get("title", ""),
        view=call.get("view", ""),
        arguments=call["arguments"],
        status=status or (ToolCall.Status.ERROR if result.is_error else ToolCall.Status.DONE),
        output=storable(result.output),
        is_error=result.is_error,
        parts=storable_json(result.parts),
        structured=structured_content(getattr(result, "structured", None)),
        duration_ms=duration_ms,
        finished_at=timezone.now(),
    )
    ToolCall.objects.filter(pk=row.pk).update(
        status=row.status,
        output=row.output,
        is_error=row.is_error,
        parts=row.parts,
        structured=row.structured,
        duration_ms=row.duration_ms,
        finished_at=row.finished_at,
    )
    payload = tool_call_payload(row, 0)
    for key in ("output_url", "call_url", "view_url"):  # built when the call was created
        payload[key] = call.get(key, payload[key])
    return payload


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
    return [tool_call_payload(call, conversation_id) for call in calls]


def close_interrupted(conversation_id: int) -> None:
    """Settle what a dead process left streaming or running (called when no turn is running).

    The answer being streamed ends ``failed`` with :data:`INTERRUPTED` (its text so far kept).
    """
    Message.objects.filter(conversation_id=conversation_id, status=Message.Status.STREAMING).update(
        status=Message.Status.FAILED, error=INTERRUPTED
    )
    end_running_calls(conversation_id, output=INTERRUPTED)
    Decision = ToolApproval.Decision
    pending = ToolApproval.objects.filter(conversation_id=conversation_id, decision=Decision.PENDING)
    pending.update(decision=Decision.STOPPED, decided_at=timezone.now())

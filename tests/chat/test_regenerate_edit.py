"""Regenerating an answer and editing a message, over the real websocket stack.

The replaced rows stay in the database (superseded), leave the page, and never reach the model
again: the request bodies the scripted model server received are checked.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from boocode.chat.models import Message, ToolCall
from tests.support.accounts import conversation_of
from tests.support.llm import Call, ScriptedLLM, Stall, Text, ToolCalls
from tests.support.tabs import Tab, finished, logged_in_tab

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.processes]


@sync_to_async
def rows(conversation_id: int) -> list[tuple[int, str, str, bool]]:
    """(id, role, content, superseded) of every stored message, superseded ones included."""
    return [
        (m.pk, m.role, m.content, m.superseded_at is not None)
        for m in Message.objects.filter(conversation_id=conversation_id).order_by("id")
    ]


def sent_texts(request: dict[str, Any]) -> list[tuple[str, str]]:
    """(role, content) of what a model request carried, the system prompt left out."""
    return [(m["role"], m.get("content") or "") for m in request["messages"] if m["role"] != "system"]


async def chat(tab: Tab, text: str) -> None:
    await tab.send({"type": "user_message", "text": text})
    await finished(tab)


async def test_regenerate_supersedes_the_answer_and_asks_again(llm: ScriptedLLM, toolbox_hub: Any) -> None:
    tab = await logged_in_tab()
    conversation, cookie = tab.conversation_id, tab.cookie
    llm.script(Text("First answer."))
    await chat(tab, "Tell me a joke")
    llm.script(ToolCalls([Call("toolbox_echo", {"text": "knock"})]), Text("Second answer."))
    await chat(tab, "Another one")
    before = await rows(conversation)
    second_user = before[2][0]
    replaced = [row[0] for row in before[3:]]  # the tool-calling answer and the final one
    tab.frames.clear()

    llm.script(Text("A better answer."))
    await tab.send({"type": "regenerate"})
    info = await finished(tab)
    kinds = [frame["type"] for frame in tab.frames if frame["type"] != "status"]
    assert kinds[:3] == ["turn_start", "superseded", "message_start"]  # no new user message
    assert kinds[-2:] == ["turn_end", "conversation"]
    assert next(f for f in tab.frames if f["type"] == "superseded")["message_ids"] == replaced
    assert info["usage"]["answers"] == 4  # the superseded answers count: they were paid for

    # The replaced rows are kept, marked; the model saw the history without them.
    after = await rows(conversation)
    assert [(row[1], row[2], row[3]) for row in after[:3]] == [
        ("user", "Tell me a joke", False),
        ("assistant", "First answer.", False),
        ("user", "Another one", False),
    ]
    assert {row[0] for row in after if row[3]} == set(replaced)
    assert after[-1][1:] == ("assistant", "A better answer.", False)
    assert await sync_to_async(ToolCall.objects.filter(message_id__in=replaced).count)() == 1
    request = llm.requests[-1]
    assert sent_texts(request) == [
        ("user", "Tell me a joke"),
        ("assistant", "First answer."),
        ("user", "Another one"),
    ]
    assert "knock" not in json.dumps(request)  # nor the superseded tool call and its result
    assert after[2][0] == second_user

    # A new connection gets the current conversation only.
    again = Tab(conversation, cookie)
    history = await again.open()
    assert [m["content"] for m in history["messages"]] == [
        "Tell me a joke",
        "First answer.",
        "Another one",
        "A better answer.",
    ]
    await again.close()
    await tab.close()


async def test_edit_replaces_the_message_and_what_followed(llm: ScriptedLLM) -> None:
    first = await logged_in_tab()
    conversation = first.conversation_id
    second = Tab(conversation, first.cookie)
    await second.open()
    llm.script(Text("Paris is nice."), Text("Pack light."))
    await chat(first, "Plan a trip to Paris")
    await chat(first, "What should I pack?")
    stored = await rows(conversation)
    edited_id = stored[0][0]
    first.frames.clear()

    for _ in range(2):  # the second tab saw both turns
        await finished(second)
    second.frames.clear()
    llm.script(Text("Rome is lovely."))
    await first.send({"type": "edit", "message_id": edited_id, "text": "Plan a trip to Rome"})
    await finished(first)
    await finished(second)
    for tab in (first, second):  # every tab is told what to remove
        superseded = next(frame for frame in tab.frames if frame["type"] == "superseded")
        assert superseded["message_ids"] == [row[0] for row in stored]
    echo = next(frame for frame in first.frames if frame["type"] == "message")["message"]
    assert (echo["role"], echo["content"]) == ("user", "Plan a trip to Rome")

    after = await rows(conversation)
    assert [row[3] for row in after[:4]] == [True] * 4  # kept in the database, marked
    assert [(row[1], row[2], row[3]) for row in after[4:]] == [
        ("user", "Plan a trip to Rome", False),
        ("assistant", "Rome is lovely.", False),
    ]
    request = llm.requests[-1]
    assert sent_texts(request) == [("user", "Plan a trip to Rome")]
    assert "Paris" not in json.dumps(request) and "pack" not in json.dumps(request).lower()
    await first.close()
    await second.close()


async def test_edit_and_regenerate_errors(llm: ScriptedLLM) -> None:
    tab = await logged_in_tab()
    conversation = tab.conversation_id
    other = await conversation_of("alice")

    await tab.send({"type": "regenerate"})
    assert (await tab.next("error"))["code"] == "nothing_to_regenerate"

    llm.script(Text("Hello."))
    await chat(tab, "Hi")
    user_id, answer_id = (row[0] for row in await rows(conversation))
    # A message of another conversation, an answer, ids that are not ids: unknown_message.
    foreign = await sync_to_async(Message.objects.create)(conversation_id=other, role="user", content="x")
    for message_id in (foreign.pk, answer_id, 10_000, "1", None, True):
        await tab.send({"type": "edit", "message_id": message_id, "text": "new"})
        assert (await tab.next("error"))["code"] == "unknown_message", message_id
    cases = [
        ({"text": "   "}, "bad_frame"),
        ({"text": 5}, "bad_frame"),
        ({"text": "x" * 32_001}, "too_long"),
        ({"text": "a\u0000b"}, "bad_text"),
    ]
    for extra, code in cases:
        await tab.send({"type": "edit", "message_id": user_id, **extra})
        assert (await tab.next("error"))["code"] == code, extra

    # While a turn runs, neither may start another.
    llm.script(Stall(text="thinking"))
    await tab.send({"type": "user_message", "text": "a long question"})
    await tab.next("text_delta")
    await tab.send({"type": "regenerate"})
    assert (await tab.next("error"))["code"] == "turn_in_progress"
    await tab.send({"type": "edit", "message_id": user_id, "text": "changed"})
    assert (await tab.next("error"))["code"] == "turn_in_progress"
    await tab.send({"type": "cancel"})
    await tab.until_turn_end()

    assert [(row[1], row[3]) for row in await rows(conversation)] == [
        ("user", False),
        ("assistant", False),
        ("user", False),
        ("assistant", False),
    ]
    await tab.close()


async def test_a_superseded_message_cannot_be_edited_again(llm: ScriptedLLM) -> None:
    tab = await logged_in_tab()
    conversation = tab.conversation_id
    llm.script(Text("One."), Text("Two."))
    await chat(tab, "first")
    original = (await rows(conversation))[0][0]
    await tab.send({"type": "edit", "message_id": original, "text": "second"})
    await finished(tab)
    await tab.send({"type": "edit", "message_id": original, "text": "third"})
    assert (await tab.next("error"))["code"] == "unknown_message"
    await tab.close()

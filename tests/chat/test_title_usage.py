"""The tokens of the title request (BOOCODE_TITLE_FROM_MODEL) count in the conversation's totals:
in the ``conversation`` frame, after a reload (history), and in both exports; the request never
becomes a message anyone sees.

Against the scripted OpenAI-compatible server over HTTP and the real websocket stack.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth import get_user_model

from boocode.chat.ledger import daily_usage
from boocode.chat.llm.windows import Window, answer_tokens
from boocode.chat.models import Conversation, DailyUsage, Message
from boocode.chat.turn import titles as turns
from boocode.chat.web import exports
from tests.support.accounts import client_of, conversation_of
from tests.support.llm import MODEL, Error, ScriptedLLM, Text
from tests.support.tabs import Tab, finished, logged_in_tab

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("no_periodic_checks")]


async def _title_requests_done() -> None:
    async with asyncio.timeout(5):
        while turns._titling:  # the title request's task, running after the turn
            await asyncio.wait(set(turns._titling))


async def test_title_request_tokens_count_in_the_conversation_totals(
    models_llm: ScriptedLLM, settings: Any
) -> None:
    settings.TITLE_FROM_MODEL = True
    tab = await logged_in_tab()
    conversation, cookie = tab.conversation_id, tab.cookie
    models_llm.script(Text("Rome has the Colosseum.", usage=(40, 9)), Text("Visiting Rome", usage=(55, 3)))
    await tab.send({"type": "user_message", "text": "What should I see in Rome?"})
    info = await finished(tab)
    assert info["usage"] == {
        "prompt_tokens": 40,
        "completion_tokens": 9,
        "answers": 1,
        "answers_without_usage": 0,
    }

    # The title's frame: the new title and the totals with the title request's tokens in.
    titled = (await tab.next("conversation"))["conversation"]
    assert titled["title"] == "Visiting Rome"
    assert titled["usage"] == {
        "prompt_tokens": 95,
        "completion_tokens": 12,
        "answers": 1,  # the title request is not an answer
        "answers_without_usage": 0,
    }
    assert models_llm.requests[-1]["messages"][0]["content"] == turns.TITLE_PROMPT
    assert models_llm.requests[-1]["stream_options"] == {"include_usage": True}
    await tab.close()

    # Stored: a reload (history) and the exports carry the same totals; nobody sees the request.
    again = Tab(conversation, cookie)
    history = await again.open()
    assert history["conversation_info"]["usage"] == titled["usage"]
    assert [message["role"] for message in history["messages"]] == ["user", "assistant"]
    await again.close()
    stored = await Conversation.objects.aget(pk=conversation)
    document = await sync_to_async(exports.as_json)(stored)
    assert document["conversation"]["usage"] == titled["usage"]
    assert len(document["messages"]) == 2
    markdown = await sync_to_async(exports.markdown_text)(stored)
    assert "Title asked of the model" not in markdown
    client, _ = await sync_to_async(client_of)("alice")
    response = await sync_to_async(client.get)(f"/c/{conversation}/export.json")
    assert json.loads(response.content)["conversation"]["usage"]["prompt_tokens"] == 95
    stored = await Conversation.objects.aget(pk=conversation)
    assert (stored.title_prompt_tokens, stored.title_completion_tokens) == (55, 3)
    assert await Message.objects.filter(conversation_id=conversation).acount() == 2

    # The next turn's request does not carry it either.
    models_llm.script(Text("And the Pantheon."))
    tab = Tab(conversation, cookie)
    await tab.open()
    await tab.send({"type": "user_message", "text": "More?"})
    await finished(tab)
    assert [m["content"] for m in models_llm.requests[-1]["messages"] if m["role"] != "system"] == [
        "What should I see in Rome?",
        "Rome has the Colosseum.",
        "More?",
    ]
    await tab.close()


async def test_title_tokens_count_even_when_the_title_is_not_used(
    models_llm: ScriptedLLM, settings: Any
) -> None:
    settings.TITLE_FROM_MODEL = True
    tab = await logged_in_tab()
    cookie = tab.cookie
    # An empty title (only quotes): the first message's title stays, the tokens were spent anyway.
    models_llm.script(Text("Sure.", usage=(10, 2)), Text('""', usage=(30, 1)))
    await tab.send({"type": "user_message", "text": "Plan my week"})
    await finished(tab)
    frame = (await tab.next("conversation"))["conversation"]
    assert frame["title"] == "Plan my week"
    assert (frame["usage"]["prompt_tokens"], frame["usage"]["completion_tokens"]) == (40, 3)
    await _title_requests_done()
    await tab.close()

    # An endpoint without usage for the title request: nothing stored, nothing invented.
    other = await conversation_of("alice")
    tab = Tab(other, cookie)
    await tab.open()
    models_llm.script(Text("Fine.", usage=(10, 2)), Text("Weekly plan"))
    await tab.send({"type": "user_message", "text": "Plan my month"})
    await finished(tab)
    frame = (await tab.next("conversation"))["conversation"]
    assert frame["title"] == "Weekly plan"
    assert (frame["usage"]["prompt_tokens"], frame["usage"]["completion_tokens"]) == (10, 2)
    stored = await Conversation.objects.aget(pk=other)
    assert (stored.title_prompt_tokens, stored.title_completion_tokens) == (0, 0)
    await tab.close()


@sync_to_async
def _conversation(first: str, answer: str, spent: tuple[int, int] = (0, 0)) -> tuple[int, int]:
    """Alice's conversation with its first message and answer (and her tokens of the day so far)."""
    user, _ = get_user_model().objects.get_or_create(username="alice")
    conversation = Conversation.objects.create(owner=user, title=turns.auto_title(first))
    Message.objects.create(conversation=conversation, role=Message.Role.USER, content=first)
    Message.objects.create(conversation=conversation, role=Message.Role.ASSISTANT, content=answer)
    if any(spent):
        daily_usage.record(user.pk, prompt_tokens=spent[0], completion_tokens=spent[1])
    return conversation.pk, user.pk


@sync_to_async
def _usage_of(user_id: int) -> tuple[int, int, int]:
    row = DailyUsage.objects.get(user_id=user_id)
    return row.prompt_tokens, row.completion_tokens, row.reserved_tokens


async def test_a_huge_first_message_gets_a_title_request_within_the_window_counted_for_its_owner(
    llm: ScriptedLLM, settings: Any
) -> None:
    llm.window = settings.LLM_CONTEXT_TOKENS = 8192  # the model refuses a request past it
    settings.DAILY_TOKEN_BUDGET = 100_000  # held first, released by the write that counts it
    first = "Why does the payment service fail? Its log:\n" + "ERROR payments: timeout 4242\n" * 20_000
    answer = "The payment service times out talking to the bank. " * 400
    conversation, alice = await _conversation(first, answer)
    llm.script(Text("Payment service timeouts", usage=(900, 4)))
    frames: list[dict[str, Any]] = []

    async def emit(frame: dict[str, Any]) -> None:
        frames.append(frame)

    await turns.title_from_model(conversation, MODEL, emit)

    [request] = llm.requests
    assert llm.refusals == 0
    # By the model's own count, the request leaves the answer's room in the window.
    assert llm.prompt_counts[0] + answer_tokens(Window(8192, "")) <= 8192
    [instruction, question, reply] = request["messages"]
    assert instruction["content"] == turns.TITLE_PROMPT
    assert first.startswith(question["content"]) and 1000 < len(question["content"]) < len(first) // 20
    assert answer.startswith(reply["content"]) and len(reply["content"]) < len(answer)
    stored = await Conversation.objects.aget(pk=conversation)
    assert stored.title == "Payment service timeouts"
    assert frames[-1]["conversation"]["title"] == "Payment service timeouts"
    # The title's tokens are in her usage of the day, and its hold is given back.
    assert await _usage_of(alice) == (900, 4, 0)


async def test_no_title_is_asked_once_the_daily_budget_is_spent(llm: ScriptedLLM, settings: Any) -> None:
    settings.DAILY_TOKEN_BUDGET = 50
    conversation, alice = await _conversation("Plan my week", "Sure.", spent=(45, 10))
    llm.script(Text("Weekly plan", usage=(30, 2)))

    async def emit(frame: dict[str, Any]) -> None:
        raise AssertionError(f"nothing to announce: {frame}")

    await turns.title_from_model(conversation, MODEL, emit)

    assert llm.requests == []
    assert (await Conversation.objects.aget(pk=conversation)).title == "Plan my week"
    assert await _usage_of(alice) == (45, 10, 0)


async def test_a_failed_title_request_gives_its_hold_back(llm: ScriptedLLM, settings: Any) -> None:
    settings.DAILY_TOKEN_BUDGET = 10_000
    conversation, alice = await _conversation("Plan my week", "Sure.", spent=(5, 1))
    llm.script(Error(400, "the model refused it"))

    async def emit(frame: dict[str, Any]) -> None:
        raise AssertionError(f"nothing to announce: {frame}")

    await turns.title_from_model(conversation, MODEL, emit)

    assert len(llm.requests) == 1
    assert (await Conversation.objects.aget(pk=conversation)).title == "Plan my week"
    assert await _usage_of(alice) == (5, 1, 0)

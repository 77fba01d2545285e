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

from boocode.chat import exports
from boocode.chat import titles as turns
from boocode.chat.models import Conversation, Message
from tests.support.accounts import client_of, conversation_of, login
from tests.support.llm import ScriptedLLM, Text
from tests.support.tabs import Tab, finished

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("no_periodic_checks")]


async def _title_requests_done() -> None:
    async with asyncio.timeout(5):
        while turns._titling:  # the title request's task, running after the turn
            await asyncio.wait(set(turns._titling))


async def test_title_request_tokens_count_in_the_conversation_totals(
    models_llm: ScriptedLLM, settings: Any
) -> None:
    settings.TITLE_FROM_MODEL = True
    cookie = await login("alice")
    conversation = await conversation_of("alice")
    tab = Tab(conversation, cookie)
    await tab.open()
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
    cookie = await login("alice")
    conversation = await conversation_of("alice")
    tab = Tab(conversation, cookie)
    await tab.open()
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

"""A model's thinking (``reasoning_content``, ``reasoning``, a leading ``<think>`` block): read
from the stream, shown apart from the answer, stored apart, never sent back to the model, kept
out of titles and search snippets, labelled in the exports.

Against the scripted OpenAI-compatible server (tests/support/llm.py) and the real database.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth import get_user_model

from boocode.chat.llm.client import Completion, LLMSettings, ReasoningDelta, TextDelta, stream_chat
from boocode.chat.models import Conversation, Message
from boocode.chat.turn import titles
from boocode.chat.turn.loop import TurnRequest, run_turn
from boocode.chat.web import exports
from boocode.chat.web.search import search_conversations
from tests.support.llm import MODEL, Call, Raw, ScriptedLLM, Text, ToolCalls

THOUGHT = "The person greets me; a short greeting back will do."


async def read(server: ScriptedLLM) -> tuple[str, str, Completion]:
    """(text deltas joined, thinking deltas joined, the completion) of one request."""
    llm = LLMSettings(base_url=server.base_url, model=MODEL, timeout=5.0, max_retries=0)
    text, thought, completion = [], [], None
    async for event in stream_chat([{"role": "user", "content": "hi"}], llm=llm):
        if isinstance(event, TextDelta):
            text.append(event.text)
        elif isinstance(event, ReasoningDelta):
            thought.append(event.text)
        else:
            completion = event
    assert completion is not None
    return "".join(text), "".join(thought), completion


@pytest.mark.parametrize("dialect", ["reasoning_content", "reasoning", "think"])
@pytest.mark.parametrize("chunk_size", [1, 3, 50])
async def test_each_dialect_is_read_apart_from_the_answer(
    llm: ScriptedLLM, dialect: str, chunk_size: int
) -> None:
    # chunk_size 1 and 3 cut the <think> tags between chunks.
    llm.script(Text("Hello!", reasoning=THOUGHT, dialect=dialect, chunk_size=chunk_size))
    text, thought, completion = await read(llm)
    assert (text, thought) == ("Hello!", THOUGHT)
    assert (completion.text, completion.reasoning) == ("Hello!", THOUGHT)


async def test_a_think_tag_later_in_the_answer_is_the_answers_text(llm: ScriptedLLM) -> None:
    llm.script(Text("Use <think> tags like <think>this</think>.", chunk_size=2))
    text, thought, completion = await read(llm)
    assert text == completion.text == "Use <think> tags like <think>this</think>."
    assert thought == completion.reasoning == ""


async def test_an_unclosed_think_block_is_all_thinking(llm: ScriptedLLM) -> None:
    llm.script(Text("  <think>still going when the limit hit", chunk_size=5, finish="length"))
    text, thought, completion = await read(llm)
    assert (text, thought) == ("", "still going when the limit hit")
    assert completion.finish_reason == "length"


async def test_an_answer_that_only_looks_like_a_tag_is_kept_whole(llm: ScriptedLLM) -> None:
    llm.script(Text("<thin", chunk_size=2), Text("\n\n<b>bold</b>", chunk_size=1))
    assert (await read(llm))[0] == "<thin"
    assert (await read(llm))[0] == "\n\n<b>bold</b>"


async def test_a_server_sending_both_names_is_not_read_twice(llm: ScriptedLLM) -> None:
    chunk = '{"choices": [{"index": 0, "delta": {"reasoning_content": "hm", "reasoning": "hm"}}]}'
    end = '{"choices": [{"index": 0, "delta": {"content": "ok"}, "finish_reason": "stop"}]}'
    llm.script(Raw([chunk, end, "[DONE]"]))
    _, thought, _ = await read(llm)
    assert thought == "hm"


# --- the turn ----------------------------------------------------------------------------------
pytestmark_db = pytest.mark.django_db(transaction=True)


@sync_to_async
def new_conversation() -> tuple[int, int]:
    user, _ = get_user_model().objects.get_or_create(username="alice")
    return Conversation.objects.create(owner=user).pk, user.pk


async def turn(conversation_id: int, text: str) -> tuple[str, list[dict[str, Any]]]:
    events: list[dict[str, Any]] = []

    async def emit(event: dict[str, Any]) -> None:
        events.append(event)

    async with asyncio.timeout(20):
        status = await run_turn(TurnRequest(conversation_id, text), emit)
    return status, events


@pytestmark_db
@pytest.mark.processes
async def test_a_turns_thinking_is_streamed_stored_apart_and_never_sent_back(
    llm: ScriptedLLM, toolbox_hub: Any
) -> None:
    llm.script(
        ToolCalls(
            [Call("toolbox_echo", {"text": "ping"})], reasoning="I should echo first.", dialect="reasoning"
        ),
        Text("The server said ping.", reasoning=THOUGHT, dialect="think", chunk_size=3, usage=(50, 30)),
    )
    conversation, _ = await new_conversation()
    status, events = await turn(conversation, "echo ping")
    assert status == "complete"

    frames = [e for e in events if e["type"] == "reasoning_delta"]
    by_message: dict[int, str] = {}
    for frame in frames:  # in order, each at the offset its message's thinking had reached
        assert frame["offset"] == len(by_message.get(frame["message_id"], ""))
        by_message[frame["message_id"]] = by_message.get(frame["message_id"], "") + frame["text"]
    assert sorted(by_message.values()) == sorted(["I should echo first.", THOUGHT])
    texts = "".join(e["text"] for e in events if e["type"] == "text_delta")
    assert texts == "The server said ping."  # no tag, no thinking in the answer's text
    complete = [e["message"] for e in events if e["type"] == "message_complete"]
    assert [m["reasoning"] for m in complete] == ["I should echo first.", THOUGHT]
    assert complete[-1]["content"] == "The server said ping."
    assert "think" not in complete[-1]["html"]

    stored = await sync_to_async(list)(Message.objects.filter(conversation_id=conversation, role="assistant"))
    assert [(m.content, m.reasoning) for m in stored] == [
        ("", "I should echo first."),
        ("The server said ping.", THOUGHT),
    ]
    assert (stored[-1].prompt_tokens, stored[-1].completion_tokens) == (50, 30)  # thinking is in these

    # Nothing of the thinking goes back to the model: not in this turn's second request, nor later.
    llm.script(Text("Again."))
    await turn(conversation, "again")
    for request in llm.requests[1:]:
        sent = str(request["messages"])
        assert "echo first" not in sent and "greets me" not in sent and "<think>" not in sent


@pytestmark_db
async def test_an_answer_that_is_only_thinking_says_so(llm: ScriptedLLM) -> None:
    llm.script(Text("", reasoning=THOUGHT, finish="length"))
    conversation, _ = await new_conversation()
    status, events = await turn(conversation, "hi")
    assert status == "complete"
    notices = [
        e["message"]["content"] for e in events if e["type"] == "message" and e["message"]["role"] == "notice"
    ]
    assert len(notices) == 1 and "gave no answer" in notices[0] and "thinking" in notices[0]
    assert "used up its answer's length" in notices[0]  # finish_reason "length" says why


@pytestmark_db
async def test_titles_search_and_exports_keep_thinking_apart(llm: ScriptedLLM) -> None:
    conversation, user_id = await new_conversation()
    llm.script(Text("Rome has the Colosseum.", reasoning="zebra crossing thoughts", dialect="think"))
    await turn(conversation, "What should I see in Rome?")

    # The title: asked of a thinking model, its thinking is not the title.
    llm.script(Text("Visiting Rome", reasoning="A short title about Rome, then.", dialect="think"))

    async def emit(event: dict[str, Any]) -> None:
        pass

    await titles.title_from_model(conversation, MODEL, emit)
    stored = await Conversation.objects.aget(pk=conversation)
    assert stored.title == "Visiting Rome"

    # Search: a word of the thinking alone finds nothing; the answer's words do, snippet clean.
    assert await sync_to_async(search_conversations)(user_id, "zebra") == []
    found = await sync_to_async(search_conversations)(user_id, "Colosseum")
    assert found and "zebra" not in found[0]["snippet"] and "think" not in found[0]["snippet"]

    # Exports: the answer's text is the answer; the thinking is kept, labelled.
    document = await sync_to_async(exports.as_json)(stored)
    answer = document["messages"][-1]
    assert (answer["content"], answer["reasoning"]) == ("Rome has the Colosseum.", "zebra crossing thoughts")
    markdown = await sync_to_async(exports.markdown_text)(stored)
    assert "**Thinking:**\n\n> zebra crossing thoughts\n\nRome has the Colosseum." in markdown

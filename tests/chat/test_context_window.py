"""The turn against a model that enforces its window: the published filesystem server reading a
multi-megabyte log, a long conversation with tool calls, and a message that cannot fit.

The scripted model counts each prompt with a tokenizer of its own (tests/support/llm.py) and
refuses one over its window as OpenAI does; on a BooCode that sends every result whole, every
request after the log's read is refused.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from boocode.chat.llm.client import context_refusal
from boocode.chat.llm.compaction import SUMMARY_PROMPT
from boocode.chat.models import ContextSummary, Message, ToolCall
from boocode.chat.turn.loop import TurnRequest, run_turn
from mcpclient.engine.hub import Hub
from mcpclient.runtime import set_hub
from tests.support.accounts import new_conversation
from tests.support.hubs import make_config
from tests.support.llm import REFUSALS, Call, Error, Raw, Reply, ScriptedLLM, Text, ToolCalls
from tests.support.processes import NODE_DIR

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.processes]

LAST_LINE = "2026-12-07 23:59:59,999 ERROR payments: the LAST-LINE of the log, code 4242"


async def drop(event: dict[str, Any]) -> None:
    """The turn's frames are not what these tests look at."""


@sync_to_async
def stored(conversation_id: int) -> list[tuple[str, str, str, list[tuple[str, str]]]]:
    """Every stored message with its calls' ids and outputs (what no fitting may change)."""
    return [
        (m.role, m.status, m.content, [(c.call_id, c.output) for c in m.tool_calls.order_by("index")])
        for m in Message.objects.filter(conversation_id=conversation_id).order_by("id")
    ]


async def turn(conversation_id: int, text: str) -> str:
    async with asyncio.timeout(60):
        return await run_turn(TurnRequest(conversation_id, text), drop)


@pytest.fixture
async def filesystem_hub(hub: Hub, tmp_path: Path) -> Any:
    """The published filesystem server (tests/node), allowed ``tmp_path``, as server "fs"."""
    entry = {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", str(tmp_path)]}
    async with asyncio.timeout(90):
        await hub.start([make_config("fs", {**entry, "cwd": str(NODE_DIR)})])
    set_hub(hub)
    yield hub
    set_hub(None)


def write_log(path: Path) -> str:
    lines = [
        f"2026-12-07 {h:02d}:{m:02d}:{s:02d},{i % 1000:03d} INFO worker-{i % 8} GET /api/items/{i} 200 "
        f"in {i % 97} ms user={i % 31} trace={i * 7919:x}"
        for i, (h, m, s) in enumerate((i // 3600 % 24, i // 60 % 60, i % 60) for i in range(30_000))
    ]
    text = "\n".join([*lines, LAST_LINE]) + "\n"
    path.write_text(text)
    return text


async def test_a_multi_megabyte_result_is_paged_and_every_request_fits_a_32k_window(
    llm: ScriptedLLM, filesystem_hub: Hub, tmp_path: Path, settings: Any
) -> None:
    log = tmp_path / "payments.log"
    text = write_log(log)
    assert len(text) > 2_500_000
    llm.window = settings.LLM_CONTEXT_TOKENS = 32768
    llm.script(
        ToolCalls([Call("fs_read_text_file", {"path": str(log)}, id="call_read")]),
        ToolCalls([Call("read_result", {"call_id": "call_read", "pattern": "LAST-LINE"}, id="call_page")]),
        Text("The last line is an error of the payments service, code 4242."),
        Text("Yes: it is still the last line."),
    )
    conversation = await new_conversation()
    assert await turn(conversation, "What does the last line of payments.log say?") == "complete"
    assert await turn(conversation, "Is that still the last line?") == "complete"

    assert len(llm.requests) == 4 and max(llm.prompt_counts) <= 32768  # none refused
    after_read = llm.requests[1]
    cut = after_read["messages"][-1]["content"]
    assert after_read["messages"][-1]["tool_call_id"] == "call_read" and len(cut) < len(text) // 10
    assert "characters left out here" in cut and '"call_id": "call_read"' in cut
    assert "read_result" in {tool["function"]["name"] for tool in after_read["tools"]}
    # The model reached the last line through read_result.
    paged = llm.requests[2]["messages"][-1]
    assert paged["tool_call_id"] == "call_page" and LAST_LINE in paged["content"]
    # The follow-up carries the read cut again, and fits.
    follow_up = llm.requests[3]["messages"]
    assert follow_up[-1] == {"role": "user", "content": "Is that still the last line?"}
    assert any("characters left out here" in str(m.get("content")) for m in follow_up)
    # What was stored is whole: the person sees and downloads the full result.
    calls = {call_id: output for *_, entries in await stored(conversation) for call_id, output in entries}
    assert calls["call_read"] == text.rstrip("\n") or calls["call_read"] == text
    assert LAST_LINE in calls["call_page"]


def summaries_then(
    reply: Callable[[dict[str, Any]], Reply], summaries: list[dict[str, Any]]
) -> Callable[..., Reply]:
    """A responder: a summary for each summarising request (kept in ``summaries``), else ``reply``."""

    def respond(body: dict[str, Any]) -> Reply:
        if body["messages"][0]["content"] == SUMMARY_PROMPT:
            summaries.append(body)
            return Text(f"Summary {len(summaries)}: the person asked for echoes of data; each came back.")
        return reply(body)

    return respond


async def test_a_long_conversation_with_tool_calls_never_passes_the_window_and_is_compacted(
    llm: ScriptedLLM, toolbox_hub: Hub
) -> None:
    llm.window = 8192  # BooCode's default window: nothing is configured
    turns = 300

    def model(body: dict[str, Any]) -> Reply:
        last = body["messages"][-1]
        if last["role"] == "user":
            index = int(last["content"].split()[1].rstrip(":"))
            return ToolCalls(
                [Call("toolbox_echo", {"text": f"echo {index} " + "data " * 120}, id=f"call_{index}")]
            )
        return Text(f"Answer {last['tool_call_id']}: the echo came back.")

    summaries: list[dict[str, Any]] = []
    llm.responder = summaries_then(model, summaries)
    conversation = await new_conversation()
    for index in range(turns):
        status = await turn(conversation, f"Question {index}: echo some data.")
        assert status == "complete", (index, (await stored(conversation))[-1])

    assert len(llm.requests) == 2 * turns + len(summaries) and max(llm.prompt_counts) <= 8192
    # Compacted, again and again: each summary follows the one before it and is reused till the next.
    made = await sync_to_async(list)(
        ContextSummary.objects.filter(conversation_id=conversation).order_by("id")
    )
    assert len(made) == len(summaries) > 1 and len(summaries) < turns // 5
    assert [row.up_to for row in made] == sorted({row.up_to for row in made})
    assert "[The summary of what came before]\nSummary 1:" in summaries[1]["messages"][1]["content"]
    last = llm.requests[-1]["messages"]
    assert f"Summary {len(summaries)}: the person asked" in last[0]["content"]
    assert last[-2]["tool_calls"][0]["id"] == f"call_{turns - 1}"
    rows = await stored(conversation)
    assert len(rows) == 3 * turns  # the question, the call's step, the answer: none changed, none gone
    assert rows[1][3] == [("call_0", "echo 0 " + "data " * 120)]


async def test_a_message_too_long_for_the_window_is_refused_in_a_sentence_and_nothing_is_sent(
    llm: ScriptedLLM,
) -> None:
    llm.window = 8192
    conversation = await new_conversation()
    assert await turn(conversation, "please read this: " + "lorem ipsum dolor " * 4000) == "failed"
    assert llm.requests == []
    [question, answer] = await stored(conversation)
    assert question[0] == "user" and question[2].startswith("please read this: ")  # kept, never lost
    assert answer[:2] == ("assistant", "failed")
    failed = await sync_to_async(Message.objects.get)(conversation_id=conversation, role="assistant")
    assert "Your message is too long for the model" in failed.error and "Nothing was sent" in failed.error
    assert await sync_to_async(ToolCall.objects.count)() == 0


@sync_to_async
def earlier_turns(conversation_id: int, turns: int, words: int) -> None:
    """Stored turns of a conversation (questions and answers), as a long conversation has them."""
    for index in range(turns):
        Message.objects.create(conversation_id=conversation_id, role="user", content=f"Question {index}?")
        Message.objects.create(
            conversation_id=conversation_id, role="assistant", content=f"Answer {index}: " + "words " * words
        )


@pytest.mark.parametrize("dialect", sorted(REFUSALS))
async def test_a_refusal_for_length_is_answered_by_a_smaller_request_once(
    llm: ScriptedLLM, settings: Any, dialect: str
) -> None:
    llm.window, llm.refusal = 6000, dialect
    settings.LLM_CONTEXT_TOKENS = 32768  # what BooCode was told is larger than what the server has
    conversation = await new_conversation()
    await earlier_turns(conversation, 40, 200)
    before = await stored(conversation)
    llm.responder = summaries_then(lambda body: Text("Here is the answer."), [])
    assert await turn(conversation, "And now?") == "complete"

    asked = [n for body, n in zip(llm.requests, llm.prompt_counts, strict=True) if "tools" in body]
    assert len(asked) == 2 and asked[0] > 6000 >= asked[1] and max(llm.prompt_counts[1:]) <= 6000
    rows = await stored(conversation)
    assert rows[: len(before)] == before  # nothing stored changed
    question, answer, notice = rows[len(before) :]  # the answer's row was open when it was refused
    assert question[:3] == ("user", "complete", "And now?")
    assert notice[0] == "notice"
    assert "refused the request as longer than the model's context window" in notice[2]
    assert answer[:3] == ("assistant", "complete", "Here is the answer.")


async def test_a_second_refusal_for_length_tells_the_person_and_is_not_repeated(llm: ScriptedLLM) -> None:
    refusal = '{"error": {"message": "too long", "code": "context_length_exceeded"}}'
    llm.script(Error(400, raw_body=refusal), Error(400, raw_body=refusal), Text("never asked"))
    conversation = await new_conversation()
    assert await turn(conversation, "Hello?") == "failed"
    assert len(llm.requests) == 2
    failed = await sync_to_async(Message.objects.get)(conversation_id=conversation, role="assistant")
    assert (
        failed.status == "failed"
        and "refused the request as longer than the model's context window twice" in failed.error
    )


async def test_an_empty_answer_cut_at_the_length_limit_says_so(llm: ScriptedLLM) -> None:
    chunk = {
        "id": "c",
        "object": "chat.completion.chunk",
        "model": "m",
        "choices": [{"index": 0, "delta": {}, "finish_reason": "length"}],
    }
    llm.script(Raw([json.dumps(chunk), "[DONE]"]))
    conversation = await new_conversation()
    assert await turn(conversation, "Hello?") == "failed"
    failed = await sync_to_async(Message.objects.get)(conversation_id=conversation, role="assistant")
    assert failed.status == "failed" and 'finish_reason "length"' in failed.error


@pytest.mark.parametrize(
    ("dialect", "figures"),
    [
        ("openai", (6000, 7000)),
        ("vllm", (6000, 7000)),
        ("llamacpp", (6000, 7000)),
        ("anthropic", (6000, 7000)),
    ],
)
def test_each_servers_refusal_is_recognised_with_its_figures(dialect: str, figures: tuple[int, int]) -> None:
    _, body = REFUSALS[dialect](6000, 7000)
    assert context_refusal(json.dumps(body)) == figures


@pytest.mark.parametrize(
    "body",
    [
        '{"error": {"message": "Invalid value for messages: the context is malformed"}}',
        '{"error": {"message": "max_tokens is too large: 9000, at most 4096"}}',
        '{"error": {"message": "The prompt is too long for a title"}}',
    ],
)
def test_other_refusals_are_not_taken_for_length(body: str) -> None:
    assert context_refusal(body) is None


async def test_compact_summarises_the_earlier_messages_when_a_person_asks(llm: ScriptedLLM) -> None:
    conversation = await new_conversation()
    await earlier_turns(conversation, 6, 20)
    before = await stored(conversation)
    summaries: list[dict[str, Any]] = []
    llm.responder = summaries_then(lambda body: Text("Noted."), summaries)
    assert await turn(conversation, "/compact") == "complete"
    assert await turn(conversation, "Go on.") == "complete"

    assert len(summaries) == 1 and "Question 0?" in summaries[0]["messages"][1]["content"]
    assert "Question 5?" not in summaries[0]["messages"][1]["content"]  # the newest question stays
    [summary] = await sync_to_async(list)(ContextSummary.objects.filter(conversation_id=conversation))
    assert summary.messages == 10 and summary.up_to == (
        await sync_to_async(
            lambda: (
                Message.objects.filter(conversation_id=conversation, content__startswith="Answer 4").get().pk
            )
        )()
    )
    notice = (await stored(conversation))[len(before) + 1]
    assert notice[0] == "notice" and "The 10 earlier messages are summarised for the model" in notice[2]
    sent = llm.requests[-1]["messages"]
    assert "Summary 1:" in sent[0]["content"] and sent[1] == {"role": "user", "content": "Question 5?"}
    assert (await stored(conversation))[: len(before)] == before

"""Ollama's own API: found at ``/api/version`` (once per base URL), chatted with over
``/api/chat`` with ``options.num_ctx`` sized to the request, so nothing is cut off the front of
the prompt; tool calls, thinking, usage and errors as the OpenAI route gives them.

Against the scripted server in Ollama mode (tests/support/llm.py), which cuts the front of a
prompt past ``num_ctx`` without a word, as Ollama does.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from boocode.chat.llm import client as llm_client
from boocode.chat.llm import ollama
from boocode.chat.llm.client import Completion, LLMError, LLMSettings, ReasoningDelta, TextDelta, stream_chat
from boocode.chat.models import Message
from boocode.chat.turn.loop import TurnRequest, run_turn
from tests.support.accounts import new_conversation
from tests.support.llm import MODEL, Call, Error, Raw, ScriptedLLM, Text, ToolCalls, estimate_tokens

SMALL_DEFAULT = 256  # the server's default window: far too small for a system prompt and tools


@pytest.fixture
def server(settings: Any) -> Iterator[ScriptedLLM]:
    llm_client.forget_models()
    with ScriptedLLM(
        models=(MODEL,), ollama=True, ollama_default_ctx=SMALL_DEFAULT, thinking=True
    ) as scripted:
        settings.LLM_BASE_URL = scripted.base_url  # ".../v1", as the README's example
        settings.LLM_MODEL = MODEL
        settings.LLM_API_KEY = ""
        settings.LLM_TIMEOUT = 5.0
        settings.LLM_MAX_RETRIES = 1
        yield scripted
        scripted.release()
    llm_client.forget_models()


def settings_of(server: ScriptedLLM) -> LLMSettings:
    return LLMSettings(base_url=server.base_url, model=MODEL, timeout=5.0, max_retries=1)


async def collect(server: ScriptedLLM, **kwargs: Any) -> tuple[str, str, Completion]:
    messages = kwargs.pop("messages", [{"role": "user", "content": "hi"}])
    text, thought, completion = [], [], None
    async for event in stream_chat(messages, llm=settings_of(server), **kwargs):
        if isinstance(event, TextDelta):
            text.append(event.text)
        elif isinstance(event, ReasoningDelta):
            thought.append(event.text)
        else:
            completion = event
    assert completion is not None
    return "".join(text), "".join(thought), completion


async def test_text_thinking_and_usage_come_over_the_native_route(server: ScriptedLLM) -> None:
    server.script(Text("Hello there", reasoning="Greet back.", usage=(0, 7)), Text("Again"))
    text, thought, completion = await collect(server, temperature=0.2, top_p=0.9)
    assert (text, thought) == ("Hello there", "Greet back.")
    assert (completion.text, completion.reasoning, completion.finish_reason) == (
        "Hello there",
        "Greet back.",
        "stop",
    )
    assert completion.usage is not None and completion.usage[1] == 7
    assert completion.usage[0] == estimate_tokens(server.seen[0])  # prompt_eval_count: what was read
    assert completion.model == MODEL
    body = server.native_requests[0]
    assert body["stream"] is True and body["think"] is True  # the model can think (/api/show)
    assert body["options"]["temperature"] == 0.2 and body["options"]["top_p"] == 0.9
    assert body["options"]["num_ctx"] % ollama.NUM_CTX_STEP == 0
    await collect(server)
    assert server.version_requests == 1  # found once for this base URL
    assert server.show_requests == 1
    assert len(server.requests) == 2 == len(server.native_requests)  # nothing went to /v1/chat/completions


async def test_num_ctx_is_sized_to_the_request_and_bounded(
    server: ScriptedLLM, settings: Any, caplog: pytest.LogCaptureFixture
) -> None:
    server.model_context = 40960
    server.script(Text("a"), Text("b"), Text("c"), Text("d"))
    await collect(server)  # small: estimated, at least Ollama's own default
    assert server.native_requests[-1]["options"]["num_ctx"] == 8192
    big = [{"role": "user", "content": "word " * 30_000}]  # ~150 KB: about 50,000 tokens
    await collect(server, messages=big, num_ctx=None)
    settings_cap = settings.OLLAMA_MAX_CTX
    assert server.native_requests[-1]["options"]["num_ctx"] == min(40960, settings_cap)
    assert "Ollama drops its beginning" in caplog.text  # too big for the window it may have: said
    await collect(server, num_ctx=10_000)  # the caller's count: rounded up to a step
    assert server.native_requests[-1]["options"]["num_ctx"] == 16384
    settings.OLLAMA_MAX_CTX = 65536
    await collect(server, num_ctx=60_000)  # never past the model's own window
    assert server.native_requests[-1]["options"]["num_ctx"] == 40960


async def test_tool_calls_are_given_as_the_openai_route_gives_them(server: ScriptedLLM) -> None:
    server.script(ToolCalls([Call("toolbox_echo", {"text": "hi"}), Call("toolbox_add", {"a": 1, "b": 2})]))
    tools = [{"type": "function", "function": {"name": "toolbox_echo", "parameters": {"type": "object"}}}]
    _, _, completion = await collect(server, tools=tools)
    assert [c.name for c in completion.tool_calls] == ["toolbox_echo", "toolbox_add"]
    assert [json.loads(c.arguments) for c in completion.tool_calls] == [{"text": "hi"}, {"a": 1, "b": 2}]
    ids = [c.id for c in completion.tool_calls]
    assert all(ids) and len(set(ids)) == 2  # Ollama gave none: made, unique
    assert completion.finish_reason == "tool_calls"
    assert server.native_requests[0]["tools"] == tools


async def test_errors_are_the_openai_routes(server: ScriptedLLM) -> None:
    with pytest.raises(LLMError) as caught:
        async for _ in stream_chat([], llm=LLMSettings(base_url=server.base_url, model="nope", timeout=5.0)):
            pass
    assert caught.value.kind == "model" and "not found" in str(caught.value)

    server.script(Error(500, "boom"), Text("after a retry"))
    assert (await collect(server))[0] == "after a retry"

    server.script(Raw(['{"model": "m", "message": {"role": "assistant", "content": "par"}, "done": false}']))
    with pytest.raises(LLMError) as caught:
        await collect(server)
    assert caught.value.kind == "disconnected"

    server.script(Raw(['{"error": "out of memory"}']))
    with pytest.raises(LLMError) as caught:
        await collect(server)
    assert caught.value.kind == "server" and "out of memory" in str(caught.value)

    server.script(Raw(["{not json"]))
    with pytest.raises(LLMError) as caught:
        await collect(server)
    assert caught.value.kind == "malformed"


async def test_another_server_keeps_the_openai_route() -> None:
    with ScriptedLLM(models=(MODEL,)) as plain:
        plain.script(Text("plain"))
        llm = LLMSettings(base_url=plain.base_url, model=MODEL, timeout=5.0)
        events = [
            event async for event in stream_chat([{"role": "user", "content": "hi"}], llm=llm, num_ctx=9000)
        ]
        assert isinstance(events[-1], Completion) and events[-1].text == "plain"
        assert "options" not in plain.requests[0] and "num_ctx" not in json.dumps(plain.requests[0])
        assert plain.connections == 1  # the probe and the request share the kept-alive connection


# --- a turn --------------------------------------------------------------------------------------
@pytest.mark.django_db(transaction=True)
@pytest.mark.processes
async def test_a_turn_with_a_tool_call_over_api_chat_keeps_its_whole_prompt(
    server: ScriptedLLM, toolbox_hub: Any
) -> None:
    server.script(
        ToolCalls([Call("toolbox_echo", {"text": "ping"})], reasoning="Echo it."),
        Text("The server said ping.", usage=(0, 12)),
    )
    conversation = await new_conversation()
    events: list[dict[str, Any]] = []

    async def emit(event: dict[str, Any]) -> None:
        events.append(event)

    async with asyncio.timeout(20):
        assert await run_turn(TurnRequest(conversation, "echo ping"), emit) == "complete"

    assert len(server.native_requests) == 2 and len(server.requests) == 2
    first, second = server.native_requests
    # Sized: the system prompt and the tools reached the model (at the server's default they would not).
    for body, seen in zip(server.native_requests, server.seen, strict=True):
        assert body["options"]["num_ctx"] >= ollama.estimate_tokens(body["messages"], body.get("tools"))
        assert seen.startswith("tools: ") and "system: " in seen
    assert ollama.estimate_tokens(first["messages"], first["tools"]) > SMALL_DEFAULT
    # The result goes back as Ollama wants it: the call's arguments an object, the result naming its tool.
    assistant = next(m for m in second["messages"] if m.get("tool_calls"))
    assert assistant["tool_calls"][0]["function"] == {"name": "toolbox_echo", "arguments": {"text": "ping"}}
    result = next(m for m in second["messages"] if m["role"] == "tool")
    assert result["tool_name"] == "toolbox_echo" and "ping" in result["content"]
    assert "Echo it." not in json.dumps(second)  # thinking is not sent back

    stored = await sync_to_async(list)(
        Message.objects.filter(conversation_id=conversation, role="assistant").order_by("id")
    )
    assert [m.reasoning for m in stored] == ["Echo it.", ""]
    assert stored[-1].content == "The server said ping."
    assert (
        stored[-1].completion_tokens == 12
        and stored[-1].prompt_tokens
        and stored[-1].prompt_tokens > SMALL_DEFAULT
    )
    assert [e["call"]["status"] for e in events if e["type"] == "tool_result"] == ["done"]


async def test_inline_thinking_from_an_older_ollama_is_split_off(server: ScriptedLLM) -> None:
    line = '{{"model": "m", "message": {{"role": "assistant", "content": {}}}, "done": false}}'
    pieces = ["<thi", "nk>Plan it.</th", "ink>\n\nDone."]
    end = (
        '{"model": "m", "message": {"role": "assistant", "content": ""}, "done": true, "done_reason": "stop"}'
    )
    server.script(Raw([line.format(json.dumps(piece)) for piece in pieces] + [end]))
    text, thought, completion = await collect(server)
    assert (text, thought) == ("Done.", "Plan it.")
    assert (completion.text, completion.reasoning) == ("Done.", "Plan it.")

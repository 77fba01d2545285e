"""The streaming LLM client against the scripted OpenAI-compatible server."""

from __future__ import annotations

import json
from typing import Any

import pytest

from boocode.chat.llm import client as llm_client
from boocode.chat.llm import streams
from boocode.chat.llm.client import Completion, LLMError, LLMSettings, TextDelta, stream_chat
from tests.support.llm import Bytes, Call, Drop, Error, Raw, ScriptedLLM, Stall, Text, ToolCalls
from tests.support.processes import free_port

MODEL = "test-model"


def settings_for(server: ScriptedLLM, **overrides: Any) -> LLMSettings:
    values: dict[str, Any] = {"base_url": server.base_url, "model": MODEL, "timeout": 5.0, "max_retries": 2}
    values.update(overrides)
    return LLMSettings(**values)


async def collect(llm: LLMSettings, **kwargs: Any) -> tuple[list[str], Completion]:
    messages = kwargs.pop("messages", [{"role": "user", "content": "hi"}])
    deltas: list[str] = []
    completion: Completion | None = None
    async for event in stream_chat(messages, llm=llm, **kwargs):
        if isinstance(event, TextDelta):
            deltas.append(event.text)
        else:
            completion = event
    assert completion is not None
    return deltas, completion


@pytest.fixture
def server() -> Any:
    with ScriptedLLM(models=(MODEL,)) as scripted:
        yield scripted
        scripted.release()


async def test_text_is_streamed_in_pieces_and_assembled(server: ScriptedLLM) -> None:
    server.script(Text("Hello, streaming world", chunk_size=5))
    deltas, completion = await collect(settings_for(server), tools=[], temperature=0.2, top_p=0.9)
    assert len(deltas) == 5
    assert "".join(deltas) == completion.text == "Hello, streaming world"
    assert completion.tool_calls == []
    body = server.requests[0]
    assert body["stream"] is True and body["model"] == MODEL
    assert "tools" not in body  # an empty tool list sends no key at all
    assert body["temperature"] == 0.2 and body["top_p"] == 0.9


async def test_parallel_tool_calls_are_assembled_from_split_deltas(server: ScriptedLLM) -> None:
    server.script(
        ToolCalls(
            [Call("toolbox_echo", {"text": "a long argument value"}), Call("toolbox_add", {"a": 2, "b": 40})],
            text="Let me check.",
            split=3,
        )
    )
    tools = [{"type": "function", "function": {"name": "toolbox_echo", "parameters": {"type": "object"}}}]
    deltas, completion = await collect(settings_for(server), tools=tools)
    assert "".join(deltas) == "Let me check."
    assert [call.name for call in completion.tool_calls] == ["toolbox_echo", "toolbox_add"]
    assert json.loads(completion.tool_calls[0].arguments) == {"text": "a long argument value"}
    assert json.loads(completion.tool_calls[1].arguments) == {"a": 2, "b": 40}
    assert completion.finish_reason == "tool_calls"
    assert server.requests[0]["tools"] == tools


async def test_missing_tool_call_ids_are_generated_unique(server: ScriptedLLM) -> None:
    server.script(ToolCalls([Call("x", {}), Call("y", {})], omit_ids=True))
    _, completion = await collect(settings_for(server))
    ids = [call.id for call in completion.tool_calls]
    assert all(ids) and len(set(ids)) == 2


async def test_connection_refused_names_the_url() -> None:
    url = f"http://127.0.0.1:{free_port()}/v1"
    with pytest.raises(LLMError) as caught:
        await collect(LLMSettings(base_url=url, model=MODEL))
    assert caught.value.kind == "connect"
    assert url in str(caught.value) and "BOOCODE_LLM_BASE_URL" in str(caught.value)


async def test_wrong_api_key_is_reported_with_the_variable() -> None:
    with ScriptedLLM(api_key="right") as server:
        with pytest.raises(LLMError) as caught:
            await collect(settings_for(server, api_key="wrong"))
        assert caught.value.kind == "auth" and caught.value.status == 401
        assert "BOOCODE_LLM_API_KEY" in str(caught.value)
        server.script(Text("ok"))
        _, completion = await collect(settings_for(server, api_key="right"))
        assert completion.text == "ok"
    assert len(server.requests) == 2  # 401 is not retried


async def test_unknown_model_is_named(server: ScriptedLLM) -> None:
    with pytest.raises(LLMError) as caught:
        await collect(settings_for(server, model="no-such-model"))
    assert caught.value.kind == "model"
    assert "no-such-model" in str(caught.value) and "does not exist" in str(caught.value)


async def test_429_and_5xx_are_retried_before_the_first_token(server: ScriptedLLM) -> None:
    server.script(
        Error(429, "slow down", headers={"retry-after": "0"}), Error(503, "overloaded"), Text("finally")
    )
    _, completion = await collect(settings_for(server))
    assert completion.text == "finally"
    assert len(server.requests) == 3


async def test_persistent_server_errors_fail_after_the_retries(server: ScriptedLLM) -> None:
    server.script(*[Error(500, "boom")] * 3)
    with pytest.raises(LLMError) as caught:
        await collect(settings_for(server, max_retries=2))
    assert caught.value.kind == "server"
    assert (
        "HTTP 500" in str(caught.value) and "boom" in str(caught.value) and "3 attempts" in str(caught.value)
    )


async def test_bad_request_is_not_retried(server: ScriptedLLM) -> None:
    server.script(Error(400, "context length exceeded"))
    with pytest.raises(LLMError, match="context length exceeded") as caught:
        await collect(settings_for(server))
    assert caught.value.kind == "request"
    assert len(server.requests) == 1


async def test_malformed_stream(server: ScriptedLLM) -> None:
    server.script(Raw(["{this is not json"]))
    with pytest.raises(LLMError) as caught:
        await collect(settings_for(server))
    assert caught.value.kind == "malformed"


async def test_error_object_mid_stream(server: ScriptedLLM) -> None:
    server.script(Raw(['{"error": {"message": "upstream provider failed"}}']))
    with pytest.raises(LLMError, match="upstream provider failed"):
        await collect(settings_for(server))


async def test_stall_longer_than_the_timeout(server: ScriptedLLM) -> None:
    server.script(Stall(text="thinking", seconds=10))
    deltas: list[str] = []
    with pytest.raises(LLMError) as caught:
        async for event in stream_chat([], llm=settings_for(server, timeout=1.0)):
            if isinstance(event, TextDelta):
                deltas.append(event.text)
    assert caught.value.kind == "timeout" and "BOOCODE_LLM_TIMEOUT" in str(caught.value)
    assert "".join(deltas) == "thinking"  # what came before the stall was delivered


async def test_connection_closed_mid_answer(server: ScriptedLLM) -> None:
    chunk = {"choices": [{"index": 0, "delta": {"content": "half an ans"}, "finish_reason": None}]}
    server.script(Raw([json.dumps(chunk)], close=True), Text("never replayed"))
    deltas: list[str] = []
    with pytest.raises(LLMError) as caught:
        async for event in stream_chat([], llm=settings_for(server)):
            if isinstance(event, TextDelta):
                deltas.append(event.text)
    assert caught.value.kind == "disconnected"
    assert deltas == ["half an ans"]
    assert len(server.requests) == 1  # a started answer is never retried


async def test_dropped_connection_before_any_answer_is_retried(server: ScriptedLLM) -> None:
    server.script(Drop(), Text("second try"))
    _, completion = await collect(settings_for(server))
    assert completion.text == "second try"


async def test_connections_are_reused_between_calls(server: ScriptedLLM) -> None:
    server.script(Text("one"), Text("two"), Text("three"))
    for _ in range(3):
        await collect(settings_for(server))
    assert server.connections == 1


async def test_not_configured() -> None:
    with pytest.raises(LLMError) as caught:
        await collect(LLMSettings(base_url="", model=""))
    assert caught.value.kind == "not_configured"
    assert "BOOCODE_LLM_BASE_URL" in str(caught.value) and "BOOCODE_LLM_MODEL" in str(caught.value)


def chunk(content: str) -> str:
    return json.dumps(
        {"choices": [{"index": 0, "delta": {"content": content}, "finish_reason": None}]}, ensure_ascii=False
    )


async def test_lines_split_anywhere_with_any_line_ending(server: ScriptedLLM) -> None:
    # CRLF, CR and LF endings, a CRLF cut between its two bytes, a line and a multi-byte
    # character cut across writes: each piece arrives on its own.
    body = (
        f"data: {chunk('Grüße, ')}\r\n\r\n"
        f"data: {chunk('wörld')}\r\r"
        f": keep-alive\n\ndata: {chunk(' ✓')}\n\n"
        "data: [DONE]\r\n\r\n"
    ).encode()
    cut_crlf = body.index(b"\r\n") + 1
    cut_char = body.index("ö".encode()) + 1
    cut_line = body.index(b"keep-alive") + 4
    pieces = [body[:cut_crlf], body[cut_crlf:cut_char], body[cut_char:cut_line], body[cut_line:]]
    server.script(Bytes(pieces))
    deltas, completion = await collect(settings_for(server))
    assert deltas == ["Grüße, ", "wörld", " ✓"]
    assert completion.text == "Grüße, wörld ✓"


async def test_a_line_that_never_ends_is_a_malformed_stream(
    server: ScriptedLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(streams, "MAX_LINE_CHARS", 1000)  # the real limit is 16 MiB
    server.script(Bytes([b"data: " + b"x" * 600, b"y" * 600]))
    with pytest.raises(LLMError) as caught:
        await collect(settings_for(server))
    assert caught.value.kind == "malformed" and "1000 characters" in str(caught.value)


async def test_the_proxy_from_the_environment_is_used(
    server: ScriptedLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The scripted server answers absolute-URI requests too, so it can play the proxy for a
    # model host that does not resolve.
    llm_client.proxy_for.cache_clear()
    monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{server.port}")
    monkeypatch.setenv("NO_PROXY", "")
    server.script(Text("via the proxy"))
    try:
        _, completion = await collect(settings_for(server, base_url="http://model.invalid/v1"))
        assert completion.text == "via the proxy"

        monkeypatch.setenv("NO_PROXY", "model.invalid")
        llm_client.proxy_for.cache_clear()
        with pytest.raises(LLMError) as caught:
            await collect(settings_for(server, base_url="http://model.invalid/v1"))
        assert caught.value.kind == "connect" and "model.invalid" in str(caught.value)
    finally:
        llm_client.proxy_for.cache_clear()


# --- usage and the model list ---------------------------------------------------------------
async def test_usage_and_the_answering_model_are_read_from_the_stream(server: ScriptedLLM) -> None:
    server.script(Text("Counted.", usage=(42, 7)), Text("Not counted."))
    _, completion = await collect(settings_for(server))
    assert (completion.usage, completion.model) == ((42, 7), MODEL)
    assert server.requests[0]["stream_options"] == {"include_usage": True}
    _, completion = await collect(settings_for(server))
    assert completion.usage is None


@pytest.mark.parametrize(
    ("usage", "read"),
    [
        ({"prompt_tokens": 5}, (5, 0)),
        ({"prompt_tokens": -1, "completion_tokens": "9"}, None),
        ({"prompt_tokens": True, "completion_tokens": 3}, (0, 3)),
        ({"prompt_tokens": 10**30, "completion_tokens": 1}, (2_147_483_647, 1)),
        ("lots", None),
    ],
)
async def test_odd_usage_values_are_read_safely(server: ScriptedLLM, usage: Any, read: Any) -> None:
    server.script(
        Raw(
            [
                json.dumps({"choices": [{"delta": {"content": "x"}, "finish_reason": "stop"}]}),
                json.dumps({"choices": [], "usage": usage}),
                "[DONE]",
            ]
        )
    )
    _, completion = await collect(settings_for(server))
    assert completion.usage == read


async def test_model_list_is_read_with_the_credentials(settings: Any) -> None:
    with ScriptedLLM(models=("a", "b"), api_key="sk-right") as scripted:
        assert await llm_client.fetch_models(settings_for(scripted, api_key="sk-right")) == ["a", "b"]
        assert scripted.model_list_headers[0]["authorization"] == "Bearer sk-right"
        with pytest.raises(LLMError) as refused:
            await llm_client.fetch_models(settings_for(scripted, api_key="sk-wrong"))
        assert refused.value.kind == "auth" and "BOOCODE_LLM_API_KEY" in str(refused.value)
        assert "sk-wrong" not in str(refused.value)


async def test_model_list_failures_are_clear() -> None:
    with pytest.raises(LLMError) as refused:
        await llm_client.fetch_models(LLMSettings(base_url=f"http://127.0.0.1:{free_port()}/v1", model="m"))
    assert refused.value.kind == "connect" and "connection refused" in str(refused.value)
    with ScriptedLLM() as scripted:
        scripted.models_status = 500
        with pytest.raises(LLMError) as failed:
            await llm_client.fetch_models(settings_for(scripted))
        assert failed.value.kind == "server" and "no models today" in str(failed.value)


async def test_a_server_refusing_stream_options_is_asked_again_without(server: ScriptedLLM) -> None:
    llm_client.forget_models()
    refusal = "Unrecognized request argument supplied: stream_options"
    server.script(Error(400, refusal), Text("Fine."), Text("Again."))
    try:
        _, completion = await collect(settings_for(server, max_retries=0))
        assert completion.text == "Fine." and completion.usage is None
        assert "stream_options" in server.requests[0] and "stream_options" not in server.requests[1]
        await collect(settings_for(server, max_retries=0))
        assert "stream_options" not in server.requests[2]  # remembered for this server
        assert len(server.requests) == 3
    finally:
        llm_client.forget_models()


async def test_other_bad_requests_are_not_retried(server: ScriptedLLM) -> None:
    server.script(Error(400, "messages: field required"))
    with pytest.raises(LLMError) as failed:
        await collect(settings_for(server))
    assert failed.value.kind == "request" and len(server.requests) == 1

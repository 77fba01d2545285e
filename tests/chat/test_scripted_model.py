"""The scripted model server behaves as the servers people run do (tests/support/llm.py).

Read over plain HTTP, not through BooCode's client: these are the shapes the client must meet.
"""

from __future__ import annotations

import http.client
import json
from typing import Any

import pytest

from tests.support.llm import (
    OLLAMA_VERSION,
    Call,
    ScriptedLLM,
    Text,
    ToolCalls,
    estimate_tokens,
    rendered_prompt,
)

LONG = [
    {"role": "system", "content": "SYSTEM-PROMPT " + "x" * 2000},
    {"role": "user", "content": "the question"},
]


def request(server: ScriptedLLM, method: str, path: str, body: Any = None) -> tuple[int, bytes]:
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=5)
    try:
        payload = None if body is None else json.dumps(body)
        connection.request(method, path, body=payload, headers={"content-type": "application/json"})
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


def sse(raw: bytes) -> list[dict[str, Any]]:
    lines = [line[6:] for line in raw.decode().split("\n") if line.startswith("data: ")]
    return [json.loads(line) for line in lines if line != "[DONE]"]


@pytest.mark.parametrize(
    ("refusal", "words"),
    [
        ("openai", "This model's maximum context length is 100 tokens. However, your messages resulted in"),
        ("vllm", "maximum context length is 100 tokens"),
        ("llamacpp", "exceeds the available context size (100 tokens)"),
        ("anthropic", "tokens > 100 maximum"),
    ],
)
def test_a_request_over_the_window_is_refused_in_each_servers_words(refusal: str, words: str) -> None:
    with ScriptedLLM(window=100, refusal=refusal) as server:
        status, raw = request(server, "POST", "/v1/chat/completions", {"model": "m", "messages": LONG})
        assert status == 400
        body = json.loads(raw)
        assert words in body["error"]["message"]
        assert server.refusals == 1
        if refusal == "openai":
            assert body["error"]["code"] == "context_length_exceeded"
            assert body["error"]["type"] == "invalid_request_error"
        if refusal == "llamacpp":
            assert body["error"]["type"] == "exceed_context_size_error" and body["error"]["n_ctx"] == 100
        if refusal == "anthropic":
            assert body["error"]["type"] == "invalid_request_error" and body["type"] == "error"
        # A request that fits is answered.
        server.script(Text("fine"))
        small = [{"role": "user", "content": "hi"}]
        status, raw = request(server, "POST", "/v1/chat/completions", {"model": "m", "messages": small})
        assert status == 200 and "fine" in "".join(
            c["choices"][0]["delta"].get("content") or "" for c in sse(raw) if c["choices"]
        )


def test_the_answer_the_window_would_take_counts_too() -> None:
    with ScriptedLLM(window=100, refusal="vllm") as server:
        body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 200}
        status, raw = request(server, "POST", "/v1/chat/completions", body)
        assert status == 400 and b"200 in the completion" in raw


@pytest.mark.parametrize("dialect", ["reasoning_content", "reasoning", "think"])
def test_reasoning_is_streamed_in_each_dialect(dialect: str) -> None:
    with ScriptedLLM() as server:
        server.script(Text("The answer.", reasoning="Let me think.", dialect=dialect, finish="length"))
        _, raw = request(server, "POST", "/v1/chat/completions", {"model": "m", "messages": LONG})
        chunks = sse(raw)
        deltas = [c["choices"][0]["delta"] for c in chunks if c["choices"]]
        content = "".join(d.get("content") or "" for d in deltas)
        if dialect == "think":
            assert content == "<think>Let me think.</think>\n\nThe answer."
        else:
            assert "".join(d.get(dialect) or "" for d in deltas) == "Let me think."
            assert content == "The answer."
        assert chunks[-1]["choices"][0]["finish_reason"] == "length"


def test_ollama_says_who_it_is_and_what_a_model_holds() -> None:
    with ScriptedLLM(ollama=True, models=("qwen3:8b",), model_context=40960, model_num_ctx=8192) as server:
        status, raw = request(server, "GET", "/api/version")
        assert status == 200 and json.loads(raw) == {"version": OLLAMA_VERSION}
        status, raw = request(server, "POST", "/api/show", {"model": "qwen3:8b"})
        shown = json.loads(raw)
        assert shown["model_info"]["qwen3.context_length"] == 40960
        assert "num_ctx 8192" in shown["parameters"]
        status, raw = request(server, "POST", "/api/show", {"model": "nope"})
        assert status == 404 and "not found" in json.loads(raw)["error"]


def test_ollama_cuts_the_front_of_a_prompt_past_num_ctx_without_a_word() -> None:
    with ScriptedLLM(ollama=True, ollama_default_ctx=100) as server:
        server.script(Text("cut", reasoning="hm"), Text("whole"))
        body = {"model": "m", "messages": LONG, "stream": True}
        status, raw = request(server, "POST", "/api/chat", body)
        assert status == 200
        lines = [json.loads(line) for line in raw.decode().splitlines()]
        assert "".join(line["message"].get("thinking", "") for line in lines) == "hm"
        assert "".join(line["message"]["content"] for line in lines) == "cut"
        end = lines[-1]
        assert end["done"] is True and end["done_reason"] == "stop"
        assert end["prompt_eval_count"] == 100  # the truth: what was read, not what was sent
        assert "SYSTEM-PROMPT" not in server.seen[0] and server.seen[0].endswith("user: the question")
        # Sized by the request, the whole prompt is read.
        whole = estimate_tokens(rendered_prompt(body))
        _, raw = request(server, "POST", "/api/chat", {**body, "options": {"num_ctx": 4096}})
        assert json.loads(raw.decode().splitlines()[-1])["prompt_eval_count"] == whole
        assert server.seen[1].startswith("system: SYSTEM-PROMPT")


def test_ollamas_openai_route_ignores_num_ctx() -> None:
    with ScriptedLLM(ollama=True, ollama_default_ctx=100) as server:
        server.script(Text("cut"))
        body = {"model": "m", "messages": LONG, "options": {"num_ctx": 8192}, "num_ctx": 8192}
        status, _ = request(server, "POST", "/v1/chat/completions", body)
        assert status == 200
        assert "SYSTEM-PROMPT" not in server.seen[0]


def test_ollama_tool_calls_carry_their_arguments_as_objects() -> None:
    with ScriptedLLM(ollama=True) as server:
        server.script(ToolCalls([Call("toolbox_echo", {"text": "hi"})]))
        _, raw = request(server, "POST", "/api/chat", {"model": "m", "messages": LONG})
        lines = [json.loads(line) for line in raw.decode().splitlines()]
        calls = [call for line in lines for call in line["message"].get("tool_calls", [])]
        assert calls == [{"function": {"index": 0, "name": "toolbox_echo", "arguments": {"text": "hi"}}}]
        assert lines[-1]["eval_count"] > 0


def test_other_servers_say_their_window_where_they_do() -> None:
    routes = {"/props": {"default_generation_settings": {"n_ctx": 8192}}}
    with ScriptedLLM(routes=routes, model_fields={"max_model_len": 32768}) as server:
        assert json.loads(request(server, "GET", "/props")[1])["default_generation_settings"]["n_ctx"] == 8192
        assert json.loads(request(server, "GET", "/v1/models")[1])["data"][0]["max_model_len"] == 32768

"""A scripted OpenAI-compatible Chat Completions server for tests and benchmarks.

It is a real HTTP/1.1 server on 127.0.0.1 running its own event loop in a background thread,
so sync tests, async tests (any loop) and a Daphne subprocess can all talk to it. Each
``POST /v1/chat/completions`` takes the next scripted reply from a queue (or asks the
``responder`` callable when the queue is empty) and streams it as server-sent events with
chunked transfer encoding; connections are kept alive like a real server's.

    with ScriptedLLM() as llm:
        llm.script(Text("Hello"), ToolCalls([Call("toolbox_echo", {"text": "hi"})]))
        ...  # point BOOCODE_LLM_BASE_URL at llm.base_url
        llm.requests[0]["messages"]

Replies: :class:`Text`, :class:`ToolCalls`, :class:`Error`, :class:`Stall`, :class:`Raw`,
:class:`Bytes`, :class:`Drop`. ``Text``, ``ToolCalls`` and ``Stall`` take ``usage=(prompt,
completion)`` to end the stream with a usage chunk (``choices: []``), as OpenAI does when the
request asks with ``stream_options.include_usage``. ``GET /v1/models`` lists ``models`` (answered
with ``models_status`` instead when a test sets it; ``model_list_requests`` counts them). Run
``python tests/support/llm.py --port N`` to serve a fixed echo script by hand.

Limits, as the servers people run have them (all off by default: the server then takes any
request, as it always did):

- ``window=N``: requests whose prompt tokens (:func:`prompt_tokens`, a tokenizer of its own, not
  BooCode's estimate; ``prompt_counts`` keeps each request's figure) plus ``max_tokens`` pass
  ``N`` are refused in the wording of ``refusal`` (:data:`REFUSALS`): ``"openai"`` (400,
  ``context_length_exceeded``), ``"vllm"`` (400, "maximum context length is N tokens"),
  ``"llamacpp"`` (400, ``exceed_context_size_error``, "exceeds the available context size") or
  ``"anthropic"`` (400, "prompt is too long: M tokens > N maximum"). ``refusals`` counts them.
  Replies that report no usage are given the counted figure, as a server that counts does.
- ``Text(finish="length")`` ends an answer cut by the server's token limit.
- ``reasoning=`` on ``Text``/``ToolCalls`` streams the model's thinking first, in the ``dialect``
  of its server: ``"reasoning_content"`` (DeepSeek, vLLM, llama.cpp), ``"reasoning"``
  (OpenRouter, Ollama's OpenAI route) or ``"think"`` (inline ``<think>...</think>`` at the start of
  the content, as qwen3/QwQ on servers that do not split it; the tags are cut across chunks
  like any text).
- ``ollama=True``: Ollama. ``GET /api/version``; ``POST /api/show`` (``model_info`` with
  ``<arch>.context_length`` = ``model_context``, ``parameters`` with ``num_ctx`` when
  ``model_num_ctx`` is set, ``capabilities`` with ``"thinking"`` when ``thinking``);
  ``POST /api/chat`` streaming NDJSON (``message.content``, ``message.thinking``,
  ``message.tool_calls`` with arguments as objects, ``done``, ``done_reason``,
  ``prompt_eval_count``, ``eval_count``). Past ``options.num_ctx`` (``ollama_default_ctx`` when
  the request gives none) the front of the prompt is dropped without a word and
  ``prompt_eval_count`` says how much was read; ``/v1/chat/completions`` ignores any num_ctx and
  cuts at ``ollama_default_ctx`` the same way. ``seen`` holds, per chat request, the prompt
  text the model was left with (the whole rendered prompt when nothing was cut).
- ``routes={"/props": {...}}`` answers other ``GET`` paths with JSON (llama.cpp's ``/props``,
  LM Studio's ``/api/v0/models``); ``model_fields`` adds fields to every ``/v1/models`` entry
  (vLLM's ``max_model_len``, OpenRouter's ``context_length``).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import re
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "MODEL",
    "MODELS",
    "OLLAMA_VERSION",
    "REFUSALS",
    "Bytes",
    "Call",
    "Drop",
    "Error",
    "Raw",
    "Reply",
    "ScriptedLLM",
    "Stall",
    "Text",
    "ToolCalls",
    "estimate_tokens",
    "prompt_tokens",
    "rendered_prompt",
]

MODEL = "test-model"  # the model the chat tests' settings name and their scripted server offers
MODELS = (MODEL, "big-model")  # what the chat tests' two-model server offers, the first the default
OLLAMA_VERSION = "0.12.6"  # what GET /api/version says in Ollama mode
DIALECTS = ("reasoning_content", "reasoning", "think")

# One streamed action: bytes to write, a float of seconds to sleep, or _WAIT to block until released.
_WAIT = object()
Action = bytes | float | object


def _event(payload: dict[str, Any] | str) -> bytes:
    data = payload if isinstance(payload, str) else json.dumps(payload)
    return f"data: {data}\n\n".encode()


def _chunk(model: str, delta: dict[str, Any], finish: str | None = None) -> bytes:
    return _event(
        {
            "id": "chatcmpl-scripted",
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }
    )


def _usage_chunk(model: str, usage: tuple[int, int] | None) -> list[bytes]:
    """The usage chunk (OpenAI's shape: no choices), or nothing."""
    if usage is None:
        return []
    prompt, completion = usage
    return [
        _event(
            {
                "id": "chatcmpl-scripted",
                "object": "chat.completion.chunk",
                "created": int(time.time()),
                "model": model,
                "choices": [],
                "usage": {
                    "prompt_tokens": prompt,
                    "completion_tokens": completion,
                    "total_tokens": prompt + completion,
                },
            }
        )
    ]


# A byte-pair tokenizer's shape: a word piece of up to 8 letters, up to 3 digits or one symbol,
# each with the space before it; runs of other whitespace on their own.
_TOKEN = re.compile(r" ?[A-Za-z]{1,8}| ?[0-9]{1,3}| ?[^\sA-Za-z0-9]|\s+")


def _text_tokens(text: str) -> int:
    return sum(1 for _ in _TOKEN.finditer(text))


def prompt_tokens(body: dict[str, Any]) -> int:
    """The prompt tokens of a chat request as the scripted server counts them: each message's
    text, its tool calls and 4 tokens of template, and the tool definitions as JSON."""
    total = 0
    for message in body.get("messages") or ():
        content = message.get("content")
        if isinstance(content, list):
            content = " ".join(str(part.get("text") or "") for part in content if isinstance(part, dict))
        total += 4 + _text_tokens(str(content or ""))
        for call in message.get("tool_calls") or ():
            total += 8 + _text_tokens(json.dumps(call.get("function") or {}))
    if body.get("tools"):
        total += _text_tokens(json.dumps(body["tools"]))
    return total


# Each server's refusal of a prompt over the window, as (window, prompt tokens, answer tokens) ->
# (status, body), in their documented shapes and words.
def _openai_refusal(window: int, count: int, answer: int = 0) -> tuple[int, dict[str, Any]]:
    message = (
        f"This model's maximum context length is {window} tokens. However, your messages resulted in "
        f"{count} tokens. Please reduce the length of the messages."
    )
    error = {"message": message, "type": "invalid_request_error", "param": "messages"}
    return 400, {"error": {**error, "code": "context_length_exceeded"}}


def _vllm_refusal(window: int, count: int, answer: int = 0) -> tuple[int, dict[str, Any]]:
    message = (
        f"This model's maximum context length is {window} tokens. However, you requested "
        f"{count + answer} tokens ({count} in the messages, {answer} in the completion). "
        "Please reduce the length of the messages or completion."
    )
    return 400, {"error": {"message": message, "type": "BadRequestError", "param": None, "code": 400}}


def _llamacpp_refusal(window: int, count: int, answer: int = 0) -> tuple[int, dict[str, Any]]:
    error = {
        "code": 400,
        "message": f"request ({count} tokens) exceeds the available context size ({window} tokens)",
        "type": "exceed_context_size_error",
        "n_prompt_tokens": count,
        "n_ctx": window,
    }
    return 400, {"error": error}


def _anthropic_refusal(window: int, count: int, answer: int = 0) -> tuple[int, dict[str, Any]]:
    message = f"prompt is too long: {count} tokens > {window} maximum"
    return 400, {"type": "error", "error": {"type": "invalid_request_error", "message": message}}


REFUSALS: dict[str, Callable[..., tuple[int, dict[str, Any]]]] = {
    "openai": _openai_refusal,
    "vllm": _vllm_refusal,
    "llamacpp": _llamacpp_refusal,
    "anthropic": _anthropic_refusal,
}


def _pieces(text: str, size: int) -> list[str]:
    if size <= 0 or not text:
        return [text] if text else []
    return [text[i : i + size] for i in range(0, len(text), size)]


def rendered_prompt(body: dict[str, Any]) -> str:
    """The prompt a server builds from a chat request, roughly: tools first, then each message."""
    parts = []
    if body.get("tools"):
        parts.append("tools: " + json.dumps(body["tools"]))
    for message in body.get("messages") or []:
        content = message.get("content")
        if isinstance(content, list):
            content = " ".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
        parts.append(f"{message.get('role', '')}: {content or ''}")
        if message.get("tool_calls"):
            parts.append(json.dumps(message["tool_calls"]))
    return "\n".join(parts)


def estimate_tokens(text: str) -> int:
    """Tokens of ``text`` as this server counts them: UTF-8 bytes / 4, rounded up."""
    return -(-len(text.encode()) // 4)


def _front_cut(text: str, tokens: int) -> str:
    """``text`` without its front, so that at most ``tokens`` tokens remain (Ollama's silent cut)."""
    data = text.encode()
    keep = tokens * 4
    return data[-keep:].decode("utf-8", errors="ignore") if len(data) > keep else text


def _ollama_line(model: str, message: dict[str, Any], **extra: Any) -> bytes:
    line = {
        "model": model,
        "created_at": time.strftime("%Y-%m-%dT%H:%M:%S.000000Z", time.gmtime()),
        "message": {"role": "assistant", **message},
        "done": False,
        **extra,
    }
    return json.dumps(line).encode() + b"\n"


def _ollama_done(model: str, reason: str, prompt_tokens: int, completion_tokens: int) -> bytes:
    return _ollama_line(
        model,
        {"content": ""},
        done=True,
        done_reason=reason,
        total_duration=1_000_000,
        load_duration=100_000,
        prompt_eval_count=prompt_tokens,
        prompt_eval_duration=300_000,
        eval_count=completion_tokens,
        eval_duration=600_000,
    )


def _reasoning_chunks(model: str, reasoning: str, dialect: str, size: int) -> Iterator[bytes]:
    """The thinking of an OpenAI-route answer in its server's dialect (``think`` goes in the content)."""
    if dialect not in DIALECTS:
        raise ValueError(f"unknown reasoning dialect {dialect!r}: one of {DIALECTS}")
    if dialect == "think" or not reasoning:
        return
    for piece in _pieces(reasoning, size):
        yield _chunk(model, {"content": None, dialect: piece})


def _content_text(text: str, reasoning: str, dialect: str) -> str:
    """The content stream: inline ``<think>`` reasoning first when the server does not split it."""
    if dialect == "think" and reasoning:
        return f"<think>{reasoning}</think>\n\n{text}"
    return text


class Reply:
    """A scripted answer to one request."""

    status = 200
    headers: dict[str, str] = {}

    def actions(self, model: str) -> Iterator[Action]:
        """The stream: bytes to send, floats to sleep, ``_WAIT`` to stall until released."""
        raise NotImplementedError

    def body(self) -> bytes | None:
        """A non-streamed body (error replies), or ``None`` to stream."""
        return None

    def ollama_actions(self, model: str, prompt_tokens: int) -> Iterator[Action]:
        """The stream as Ollama's ``/api/chat`` sends it (NDJSON lines)."""
        raise NotImplementedError(f"{type(self).__name__} has no Ollama form")

    def ollama_body(self) -> bytes | None:
        """A non-streamed body in Ollama's error shape, or ``None`` to stream."""
        return None


@dataclass
class Text(Reply):
    """Stream ``text`` in chunks of ``chunk_size`` characters, then ``finish_reason: stop``."""

    text: str
    chunk_size: int = 4
    first_delay: float = 0.0
    delay: float = 0.0
    done: bool = True
    usage: tuple[int, int] | None = None
    finish: str = "stop"  # "length": the server's token limit cut the answer
    reasoning: str = ""  # the model's thinking, streamed before the text
    dialect: str = "reasoning_content"  # how the server streams it (DIALECTS)

    def actions(self, model: str) -> Iterator[Action]:
        if self.first_delay:
            yield float(self.first_delay)
        yield _chunk(model, {"role": "assistant", "content": ""})
        yield from _reasoning_chunks(model, self.reasoning, self.dialect, self.chunk_size)
        content = _content_text(self.text, self.reasoning, self.dialect)
        for index, piece in enumerate(_pieces(content, self.chunk_size)):
            if index and self.delay:
                yield float(self.delay)
            yield _chunk(model, {"content": piece})
        yield _chunk(model, {}, self.finish)
        yield from _usage_chunk(model, self.usage)
        if self.done:
            yield _event("[DONE]")

    def ollama_actions(self, model: str, prompt_tokens: int) -> Iterator[Action]:
        if self.first_delay:
            yield float(self.first_delay)
        for piece in _pieces(self.reasoning, self.chunk_size):
            yield _ollama_line(model, {"content": "", "thinking": piece})
        for index, piece in enumerate(_pieces(self.text, self.chunk_size)):
            if index and self.delay:
                yield float(self.delay)
            yield _ollama_line(model, {"content": piece})
        if self.done:
            completion = self.usage[1] if self.usage else estimate_tokens(self.reasoning + self.text)
            yield _ollama_done(model, self.finish, prompt_tokens, completion)


@dataclass
class Call:
    """One tool call of a :class:`ToolCalls` reply; ``arguments`` may be a dict or raw text."""

    name: str
    arguments: dict[str, Any] | str = field(default_factory=dict)
    id: str | None = None

    def argument_text(self) -> str:
        return self.arguments if isinstance(self.arguments, str) else json.dumps(self.arguments)


@dataclass
class ToolCalls(Reply):
    """Optional text, then tool calls whose arguments are split into ``split``-character deltas.

    Deltas of parallel calls are interleaved (index-based), as real servers do.
    """

    calls: list[Call]
    text: str = ""
    split: int = 3
    first_delay: float = 0.0
    omit_ids: bool = False
    usage: tuple[int, int] | None = None
    reasoning: str = ""  # the model's thinking, streamed before the text and the calls
    dialect: str = "reasoning_content"

    def actions(self, model: str) -> Iterator[Action]:
        if self.first_delay:
            yield float(self.first_delay)
        yield _chunk(model, {"role": "assistant", "content": None})
        yield from _reasoning_chunks(model, self.reasoning, self.dialect, 4)
        for piece in _pieces(_content_text(self.text, self.reasoning, self.dialect), 4):
            yield _chunk(model, {"content": piece})
        streams = []
        for index, call in enumerate(self.calls):
            head: dict[str, Any] = {
                "index": index,
                "type": "function",
                "function": {"name": call.name, "arguments": ""},
            }
            if not self.omit_ids:
                head["id"] = call.id or f"call_{index}_{call.name}"[:40]
            pieces = [
                {"index": index, "function": {"arguments": p}}
                for p in _pieces(call.argument_text(), self.split)
            ]
            streams.append([head, *pieces])
        for round_ in itertools.zip_longest(*streams):
            for delta in round_:
                if delta is not None:
                    yield _chunk(model, {"tool_calls": [delta]})
        yield _chunk(model, {}, "tool_calls")
        yield from _usage_chunk(model, self.usage)
        yield _event("[DONE]")

    def ollama_actions(self, model: str, prompt_tokens: int) -> Iterator[Action]:
        # Ollama sends the calls whole, in one message, their arguments as objects.
        if self.first_delay:
            yield float(self.first_delay)
        for piece in _pieces(self.reasoning, 4):
            yield _ollama_line(model, {"content": "", "thinking": piece})
        for piece in _pieces(self.text, 4):
            yield _ollama_line(model, {"content": piece})
        calls = []
        for index, call in enumerate(self.calls):
            arguments = call.arguments if isinstance(call.arguments, dict) else json.loads(call.arguments)
            entry: dict[str, Any] = {"function": {"index": index, "name": call.name, "arguments": arguments}}
            if call.id and not self.omit_ids:
                entry["id"] = call.id
            calls.append(entry)
        yield _ollama_line(model, {"content": "", "tool_calls": calls})
        completion = self.usage[1] if self.usage else estimate_tokens(self.reasoning + self.text) + 10
        yield _ollama_done(model, "stop", prompt_tokens, completion)


@dataclass
class Error(Reply):
    """An HTTP error with a JSON body (``{"error": {"message": ...}}`` unless ``body`` is given)."""

    status: int = 500
    message: str = "internal error"
    headers: dict[str, str] = field(default_factory=dict)
    raw_body: str | None = None

    def body(self) -> bytes:
        if self.raw_body is not None:
            return self.raw_body.encode()
        return json.dumps({"error": {"message": self.message, "type": "server_error"}}).encode()

    def ollama_body(self) -> bytes:
        if self.raw_body is not None:
            return self.raw_body.encode()
        return json.dumps({"error": self.message}).encode()


@dataclass
class Stall(Reply):
    """Stream ``text`` then stop sending until :meth:`ScriptedLLM.release` (or ``seconds``)."""

    text: str = ""
    seconds: float = 30.0
    after: str = ""
    usage: tuple[int, int] | None = None

    def actions(self, model: str) -> Iterator[Action]:
        yield _chunk(model, {"role": "assistant", "content": ""})
        for piece in _pieces(self.text, 4):
            yield _chunk(model, {"content": piece})
        yield _WAIT
        for piece in _pieces(self.after, 4):
            yield _chunk(model, {"content": piece})
        yield _chunk(model, {}, "stop")
        yield from _usage_chunk(model, self.usage)
        yield _event("[DONE]")

    def ollama_actions(self, model: str, prompt_tokens: int) -> Iterator[Action]:
        for piece in _pieces(self.text, 4):
            yield _ollama_line(model, {"content": piece})
        yield _WAIT
        for piece in _pieces(self.after, 4):
            yield _ollama_line(model, {"content": piece})
        completion = self.usage[1] if self.usage else estimate_tokens(self.text + self.after)
        yield _ollama_done(model, "stop", prompt_tokens, completion)


@dataclass
class Raw(Reply):
    """Send these SSE data payloads verbatim (each becomes ``data: <line>``); then maybe hang up."""

    lines: list[str]
    close: bool = False

    def actions(self, model: str) -> Iterator[Action]:
        for line in self.lines:
            yield f"data: {line}\n\n".encode()

    def ollama_actions(self, model: str, prompt_tokens: int) -> Iterator[Action]:
        for line in self.lines:  # NDJSON: one line each
            yield f"{line}\n".encode()


@dataclass
class Bytes(Reply):
    """Write these pieces of the body verbatim, ``gap`` seconds apart (so each arrives on its own)."""

    pieces: list[bytes]
    gap: float = 0.02

    def actions(self, model: str) -> Iterator[Action]:
        for index, piece in enumerate(self.pieces):
            if index:
                yield float(self.gap)
            yield piece

    def ollama_actions(self, model: str, prompt_tokens: int) -> Iterator[Action]:
        return self.actions(model)


@dataclass
class Drop(Reply):
    """Close the connection without answering."""

    def actions(self, model: str) -> Iterator[Action]:
        return iter(())

    def ollama_actions(self, model: str, prompt_tokens: int) -> Iterator[Action]:
        return iter(())


class ScriptedLLM:
    """The server. ``requests`` holds every request body received, in order."""

    def __init__(
        self,
        *,
        api_key: str | None = None,
        models: tuple[str, ...] | None = None,
        responder: Callable[[dict[str, Any]], Reply] | None = None,
        on_request: Callable[[dict[str, Any]], None] | None = None,
        on_first_chunk: Callable[[dict[str, Any]], None] | None = None,
        on_last_chunk: Callable[[dict[str, Any]], None] | None = None,
        port: int = 0,
        window: int | None = None,
        refusal: str = "openai",
        ollama: bool = False,
        ollama_default_ctx: int = 4096,
        model_context: int = 40960,
        model_num_ctx: int | None = None,
        thinking: bool = False,
        routes: dict[str, Any] | None = None,
        model_fields: dict[str, Any] | None = None,
    ) -> None:
        if refusal not in REFUSALS:
            raise ValueError(f"unknown refusal {refusal!r}: one of {REFUSALS}")
        self.window = window  # the context window the OpenAI route enforces (None: any request)
        self.refusal = refusal  # whose wording a refusal for length takes
        self.ollama = ollama
        self.ollama_default_ctx = ollama_default_ctx  # the server's default num_ctx
        self.model_context = model_context  # the model's own window (/api/show model_info)
        self.model_num_ctx = model_num_ctx  # a num_ctx in the model's Modelfile parameters
        self.thinking = thinking  # the model can think (/api/show capabilities)
        self.routes = dict(routes or {})  # other GET paths answered with this JSON
        self.model_fields = dict(model_fields or {})  # extra fields of each /v1/models entry
        self.seen: list[str] = []  # per chat request: the prompt the model was left with
        self.refusals = 0  # requests refused for length
        self.native_requests: list[dict[str, Any]] = []  # bodies of POST /api/chat
        self.show_requests = 0  # POST /api/show received
        self.version_requests = 0  # GET /api/version received
        self.api_key = api_key
        self.models = models
        self.responder = responder
        self.on_request = on_request  # called (server thread) with each chat request's body on arrival
        self.on_first_chunk = on_first_chunk  # called (server thread) when a stream's first bytes go out
        self.on_last_chunk = on_last_chunk  # called (server thread) once a stream's end went out
        self.requests: list[dict[str, Any]] = []
        self.aborted_streams = 0  # streams the client closed before the end (a cancelled turn)
        self.model_list_requests = 0  # GET /v1/models received
        self.models_status = 200  # what GET /v1/models answers (set 404, 500 ... to make it fail)
        self.model_list_headers: list[dict[str, str]] = []  # the headers of each GET /v1/models
        self.connections = 0  # TCP connections accepted (keep-alive reuse keeps this low)
        self.prompt_counts: list[int] = []  # prompt_tokens() of each chat request, with a window
        self._queue: deque[Reply] = deque()
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._port = port
        self._loop: asyncio.AbstractEventLoop | None = None
        self._release: asyncio.Event | None = None
        self._server: asyncio.Server | None = None
        self._thread: threading.Thread | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self._stopping = False

    # --- lifecycle -------------------------------------------------------------------------
    def start(self) -> ScriptedLLM:
        """Start serving in a background thread; returns once the port is bound."""
        ready = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(ready,), name="scripted-llm", daemon=True)
        self._thread.start()
        if not ready.wait(10):
            raise RuntimeError("scripted LLM server did not start")
        return self

    def stop(self) -> None:
        """Stop the server and close open connections."""
        if self._loop is not None and self._server is not None:
            self._loop.call_soon_threadsafe(self._shutdown)
        if self._thread is not None:
            self._thread.join(10)

    def __enter__(self) -> ScriptedLLM:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        assert self._server is not None
        return self._server.sockets[0].getsockname()[1]

    @property
    def base_url(self) -> str:
        """What ``BOOCODE_LLM_BASE_URL`` should be."""
        return f"http://127.0.0.1:{self.port}/v1"

    # --- scripting -------------------------------------------------------------------------
    def script(self, *replies: Reply) -> None:
        """Queue replies; each request consumes one."""
        with self._lock:
            self._queue.extend(replies)

    def release(self) -> None:
        """Let stalled streams continue, and every later ``Stall`` too (for good: shutting down)."""
        if self._loop is not None and self._release is not None:
            self._loop.call_soon_threadsafe(self._release.set)

    def release_stalled(self) -> None:
        """Let the streams stalled now continue; the next ``Stall`` stalls again.

        (Both steps run in order on the server's loop: the waiting streams are already woken
        when the event is cleared.)
        """
        if self._loop is not None and self._release is not None:
            self._loop.call_soon_threadsafe(self._release.set)
            self._loop.call_soon_threadsafe(self._release.clear)

    def wait_until(self, predicate: Callable[[ScriptedLLM], bool], timeout: float = 5.0) -> None:
        """Block (sync callers) until ``predicate(self)`` holds; raises ``TimeoutError``."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while not predicate(self):
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError("scripted LLM: condition not met in time")
                self._changed.wait(remaining)

    async def until(self, predicate: Callable[[ScriptedLLM], bool], within: float = 5.0) -> None:
        """Wait (async callers) until ``predicate(self)`` holds; raises ``TimeoutError``."""
        await asyncio.to_thread(self.wait_until, predicate, within)

    def _notify(self) -> None:
        with self._changed:
            self._changed.notify_all()

    # --- serving ---------------------------------------------------------------------------
    def _run(self, ready: threading.Event) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        asyncio.set_event_loop(loop)

        async def main() -> None:
            self._release = asyncio.Event()
            self._server = await asyncio.start_server(self._handle, "127.0.0.1", self._port, backlog=512)
            ready.set()
            try:
                await self._server.serve_forever()
            except asyncio.CancelledError:
                pass  # close() from _shutdown
            self._server.close()
            await self._server.wait_closed()

        try:
            loop.run_until_complete(main())
        finally:
            loop.close()

    def _shutdown(self) -> None:
        """Release stalls and close every connection, so handlers end on their own; stop listening."""
        assert self._server is not None and self._release is not None
        self._stopping = True
        self._release.set()
        for writer in list(self._writers):
            writer.close()
        self._server.close()

    def _next_reply(self, body: dict[str, Any]) -> Reply:
        with self._lock:
            if self._queue:
                return self._queue.popleft()
        if self.responder is not None:
            return self.responder(body)
        return Error(500, "scripted LLM: no reply scripted for this request")

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with self._changed:
            self.connections += 1
        self._writers.add(writer)
        try:
            while not self._stopping and await self._handle_one(reader, writer):
                pass
        except (ConnectionError, asyncio.IncompleteReadError, ValueError):
            pass
        finally:
            self._writers.discard(writer)
            writer.close()

    async def _handle_one(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        request_line = await reader.readline()
        if not request_line:
            return False
        method, target, _ = request_line.decode("latin1").split(" ", 2)
        headers: dict[str, str] = {}
        while (line := await reader.readline()) not in (b"\r\n", b"\n", b""):
            name, _, value = line.decode("latin1").partition(":")
            headers[name.strip().lower()] = value.strip()
        length = int(headers.get("content-length", "0") or 0)
        raw = await reader.readexactly(length) if length else b""

        path = target.split("?", 1)[0].rstrip("/")
        if method == "GET" and path in self.routes:
            await self._send(writer, 200, json.dumps(self.routes[path]).encode())
            return True
        if self.ollama and path.startswith("/api/"):
            return await self._ollama(reader, writer, method, path, raw)
        if method == "GET" and target.rstrip("/").endswith("/models"):
            with self._changed:
                self.model_list_requests += 1
                self.model_list_headers.append(headers)
                self._changed.notify_all()
            if self.api_key is not None and headers.get("authorization") != f"Bearer {self.api_key}":
                await self._send(writer, 401, b'{"error": {"message": "Incorrect API key provided"}}')
                return True
            if self.models_status != 200:
                await self._send(writer, self.models_status, b'{"error": {"message": "no models today"}}')
                return True
            listed = [
                {"id": name, "object": "model", **self.model_fields}
                for name in (self.models or ("scripted",))
            ]
            await self._send(writer, 200, json.dumps({"object": "list", "data": listed}).encode())
            return True
        if method != "POST" or not target.rstrip("/").endswith("/chat/completions"):
            await self._send(writer, 404, b'{"error": {"message": "not found"}}')
            return True
        try:
            body = json.loads(raw)
        except ValueError:
            await self._send(writer, 400, b'{"error": {"message": "invalid JSON body"}}')
            return True
        if self.on_request is not None:
            self.on_request(body)
        with self._changed:
            self.requests.append(body)
            self._changed.notify_all()
        if self.api_key is not None and headers.get("authorization") != f"Bearer {self.api_key}":
            await self._send(writer, 401, b'{"error": {"message": "Incorrect API key provided"}}')
            return True
        model = str(body.get("model", ""))
        if self.models is not None and model not in self.models:
            message = json.dumps(
                {"error": {"message": f"The model `{model}` does not exist", "code": "model_not_found"}}
            )
            await self._send(writer, 404, message.encode())
            return True
        prompt = rendered_prompt(body)
        if self.ollama:  # the OpenAI route of Ollama: num_ctx is not read, the default window cuts
            self._saw(_front_cut(prompt, self.ollama_default_ctx))
        elif self.window is not None:
            count = prompt_tokens(body)
            answer = int(body.get("max_completion_tokens") or body.get("max_tokens") or 0)
            with self._changed:
                self.prompt_counts.append(count)
            if count + answer > self.window:
                with self._changed:
                    self.refusals += 1
                    self._changed.notify_all()
                status, refusal = REFUSALS[self.refusal](self.window, count, answer)
                await self._send(writer, status, json.dumps(refusal).encode())
                return True
            self._saw(prompt)
        else:
            self._saw(prompt)
        reply = self._next_reply(body)
        if self.window is not None and not self.ollama and getattr(reply, "usage", False) is None:
            reply.usage = (count, 1)  # type: ignore[attr-defined]
        error_body = reply.body()
        if error_body is not None:
            await self._send(writer, reply.status, error_body, reply.headers)
            return True
        if isinstance(reply, Drop):
            return False
        writer.write(
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\n"
            b"transfer-encoding: chunked\r\n\r\n"
        )
        finished = await self._stream(reply, body, reply.actions(model or "scripted"), reader, writer)
        if not finished:
            with self._changed:
                self.aborted_streams += 1
                self._changed.notify_all()
            return False
        if isinstance(reply, Raw) and reply.close:
            await writer.drain()
            return False
        writer.write(b"0\r\n\r\n")
        await writer.drain()
        if self.on_last_chunk is not None:
            self.on_last_chunk(body)
        return True

    def _saw(self, prompt: str) -> None:
        with self._changed:
            self.seen.append(prompt)

    async def _ollama(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, method: str, path: str, raw: bytes
    ) -> bool:
        """Ollama's native API: ``/api/version``, ``/api/show`` and ``/api/chat`` (streamed NDJSON)."""
        if method == "GET" and path == "/api/version":
            with self._changed:
                self.version_requests += 1
            await self._send(writer, 200, json.dumps({"version": OLLAMA_VERSION}).encode())
            return True
        if method != "POST" or path not in ("/api/show", "/api/chat"):
            await self._send(writer, 404, b"404 page not found")
            return True
        try:
            body = json.loads(raw)
        except ValueError:
            await self._send(writer, 400, b'{"error": "invalid character in request body"}')
            return True
        model = str(body.get("model", ""))
        if self.models is not None and model not in self.models:
            await self._send(writer, 404, json.dumps({"error": f"model '{model}' not found"}).encode())
            return True
        if path == "/api/show":
            with self._changed:
                self.show_requests += 1
            await self._send(writer, 200, json.dumps(self._show(model)).encode())
            return True
        if self.on_request is not None:
            self.on_request(body)
        with self._changed:
            self.requests.append(body)
            self.native_requests.append(body)
            self._changed.notify_all()
        options = body.get("options") or {}
        num_ctx = options.get("num_ctx") or self.ollama_default_ctx
        prompt = rendered_prompt(body)
        kept = _front_cut(prompt, int(num_ctx))  # silently: the front of the prompt is gone
        self._saw(kept)
        reply = self._next_reply(body)
        error_body = reply.ollama_body()
        if error_body is not None:
            await self._send(writer, reply.status, error_body, reply.headers)
            return True
        if isinstance(reply, Drop):
            return False
        writer.write(
            b"HTTP/1.1 200 OK\r\ncontent-type: application/x-ndjson\r\ntransfer-encoding: chunked\r\n\r\n"
        )
        actions = reply.ollama_actions(model, estimate_tokens(kept))
        finished = await self._stream(reply, body, actions, reader, writer)
        if not finished:
            with self._changed:
                self.aborted_streams += 1
                self._changed.notify_all()
            return False
        writer.write(b"0\r\n\r\n")
        await writer.drain()
        if self.on_last_chunk is not None:
            self.on_last_chunk(body)
        return True

    def _show(self, model: str) -> dict[str, Any]:
        """``POST /api/show``: what Ollama says of a model (details, parameters, model_info)."""
        parameters = 'stop "<|im_end|>"\ntemperature 0.6\ntop_k 20'
        if self.model_num_ctx is not None:
            parameters = f"num_ctx {self.model_num_ctx}\n{parameters}"
        capabilities = ["completion", "tools", *(["thinking"] if self.thinking else [])]
        return {
            "license": "Apache License",
            "modelfile": f"FROM {model}\n",
            "parameters": parameters,
            "template": "{{ .Prompt }}",
            "details": {
                "format": "gguf",
                "family": "qwen3",
                "parameter_size": "8.2B",
                "quantization_level": "Q4_K_M",
            },
            "model_info": {
                "general.architecture": "qwen3",
                "general.parameter_count": 8190735360,
                "qwen3.context_length": self.model_context,
                "qwen3.embedding_length": 4096,
            },
            "capabilities": capabilities,
        }

    async def _stream(
        self,
        reply: Reply,
        body: dict[str, Any],
        actions: Iterator[Action],
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
    ) -> bool:
        """Write the reply's actions; ``False`` if the client went away first."""
        assert self._release is not None
        first = True
        for action in actions:
            if isinstance(action, bytes):
                if first and self.on_first_chunk is not None:
                    self.on_first_chunk(body)
                first = False
                writer.write(b"%x\r\n%s\r\n" % (len(action), action))
                try:
                    await writer.drain()
                except ConnectionError:
                    return False
            elif isinstance(action, float):
                if await self._client_gone(reader, action):
                    return False
            elif action is _WAIT:
                seconds = reply.seconds if isinstance(reply, Stall) else 30.0
                release = asyncio.ensure_future(self._release.wait())
                gone = asyncio.ensure_future(reader.read(1))
                done, _ = await asyncio.wait(
                    {release, gone}, timeout=seconds, return_when=asyncio.FIRST_COMPLETED
                )
                release.cancel()
                gone.cancel()
                # Wait for the cancelled read to unwind: the connection's next request reads again.
                await asyncio.gather(release, gone, return_exceptions=True)
                if gone in done:
                    return False
        return True

    async def _client_gone(self, reader: asyncio.StreamReader, seconds: float) -> bool:
        """Sleep ``seconds``; ``True`` if the client closed the connection meanwhile."""
        try:
            await asyncio.wait_for(reader.read(1), seconds)
        except TimeoutError:
            return False
        return True

    async def _send(
        self, writer: asyncio.StreamWriter, status: int, body: bytes, headers: dict[str, str] | None = None
    ) -> None:
        extra = "".join(f"{k}: {v}\r\n" for k, v in (headers or {}).items())
        writer.write(
            f"HTTP/1.1 {status} Scripted\r\ncontent-type: application/json\r\ncontent-length: {len(body)}\r\n"
            f"{extra}\r\n".encode()
            + body
        )
        await writer.drain()


def main() -> None:
    """Serve a fixed reply forever (for trying the UI by hand)."""
    parser = argparse.ArgumentParser(description="scripted OpenAI-compatible server")
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--text", default="Hello from the scripted model.")
    options = parser.parse_args()
    server = ScriptedLLM(responder=lambda body: Text(options.text, delay=0.05), port=options.port).start()
    print(f"serving {server.base_url}", flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        server.stop()


if __name__ == "__main__":
    main()

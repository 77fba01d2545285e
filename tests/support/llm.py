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

A context window: with ``window`` set, each chat request's prompt is counted by
:func:`prompt_tokens` (a tokenizer of its own, not BooCode's estimate) and ``prompt_counts``
keeps the figures; a request over the window is refused with the ``refusal`` wording of
:data:`REFUSALS` (OpenAI, vLLM, llama.cpp, Anthropic) and replies that report no usage are given
the counted figure, as a server that counts does.
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
    "prompt_tokens",
]

MODEL = "test-model"  # the model the chat tests' settings name and their scripted server offers
MODELS = (MODEL, "big-model")  # what the chat tests' two-model server offers, the first the default

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


# Each server's refusal of a prompt over the window: status and body (their documented shapes).
REFUSALS: dict[str, Callable[[int, int], tuple[int, dict[str, Any]]]] = {
    "openai": lambda window, count: (
        400,
        {
            "error": {
                "message": f"This model's maximum context length is {window} tokens. However, your "
                f"messages resulted in {count} tokens. Please reduce the length of the messages.",
                "type": "invalid_request_error",
                "param": "messages",
                "code": "context_length_exceeded",
            }
        },
    ),
    "vllm": lambda window, count: (
        400,
        {
            "object": "error",
            "message": f"This model's maximum context length is {window} tokens. However, you requested "
            f"{count} tokens in the messages, Please reduce the length of the messages.",
            "type": "BadRequestError",
            "param": None,
            "code": 400,
        },
    ),
    "llamacpp": lambda window, count: (
        400,
        {
            "error": {
                "code": 400,
                "message": "the request exceeds the available context size, try increasing it",
                "type": "exceed_context_size_error",
                "n_prompt_tokens": count,
                "n_ctx": window,
            }
        },
    ),
    "anthropic": lambda window, count: (
        400,
        {
            "type": "error",
            "error": {
                "type": "invalid_request_error",
                "message": f"prompt is too long: {count} tokens > {window} maximum",
            },
        },
    ),
}


def _pieces(text: str, size: int) -> list[str]:
    if size <= 0 or not text:
        return [text] if text else []
    return [text[i : i + size] for i in range(0, len(text), size)]


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


@dataclass
class Text(Reply):
    """Stream ``text`` in chunks of ``chunk_size`` characters, then ``finish_reason: stop``."""

    text: str
    chunk_size: int = 4
    first_delay: float = 0.0
    delay: float = 0.0
    done: bool = True
    usage: tuple[int, int] | None = None

    def actions(self, model: str) -> Iterator[Action]:
        if self.first_delay:
            yield float(self.first_delay)
        yield _chunk(model, {"role": "assistant", "content": ""})
        for index, piece in enumerate(_pieces(self.text, self.chunk_size)):
            if index and self.delay:
                yield float(self.delay)
            yield _chunk(model, {"content": piece})
        yield _chunk(model, {}, "stop")
        yield from _usage_chunk(model, self.usage)
        if self.done:
            yield _event("[DONE]")


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

    def actions(self, model: str) -> Iterator[Action]:
        if self.first_delay:
            yield float(self.first_delay)
        yield _chunk(model, {"role": "assistant", "content": None})
        for piece in _pieces(self.text, 4):
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


@dataclass
class Raw(Reply):
    """Send these SSE data payloads verbatim (each becomes ``data: <line>``); then maybe hang up."""

    lines: list[str]
    close: bool = False

    def actions(self, model: str) -> Iterator[Action]:
        for line in self.lines:
            yield f"data: {line}\n\n".encode()


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


@dataclass
class Drop(Reply):
    """Close the connection without answering."""

    def actions(self, model: str) -> Iterator[Action]:
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
    ) -> None:
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
        self.window: int | None = None  # prompt tokens accepted (None: any prompt)
        self.refusal = "openai"  # how a prompt over the window is refused (a key of REFUSALS)
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
            listed = [{"id": name, "object": "model"} for name in (self.models or ("scripted",))]
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

        if self.window is not None:
            count = prompt_tokens(body)
            with self._changed:
                self.prompt_counts.append(count)
            if count > self.window:
                status, refusal = REFUSALS[self.refusal](self.window, count)
                await self._send(writer, status, json.dumps(refusal).encode())
                return True
        reply = self._next_reply(body)
        if self.window is not None and getattr(reply, "usage", False) is None:
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
        finished = await self._stream(reply, body, model or "scripted", reader, writer)
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

    async def _stream(
        self,
        reply: Reply,
        body: dict[str, Any],
        model: str,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
    ) -> bool:
        """Write the reply's actions; ``False`` if the client went away first."""
        assert self._release is not None
        first = True
        for action in reply.actions(model):
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

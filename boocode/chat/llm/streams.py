"""The model's streamed answer read: server-sent events (or Ollama's NDJSON) into events.

:func:`parse_stream` reads a Chat Completions stream line by line until ``[DONE]`` and yields
the text and the thinking as they come (:class:`~boocode.chat.llm.types.TextDelta`,
:class:`~boocode.chat.llm.types.ReasoningDelta`) and, last, the
:class:`~boocode.chat.llm.types.Completion` with the tool calls assembled from their deltas and
the usage. Bounds: one line is at most :data:`MAX_LINE_CHARS`; everything stored is
:func:`~boocode.chat.storable.storable`. A broken or malformed stream is raised as an
:class:`~boocode.chat.llm.types.LLMError` the person can read. The request, its retries and the
model server's state are :mod:`boocode.chat.llm.client`'s.
"""

from __future__ import annotations

import codecs
import contextlib
import json
import re
import uuid
from collections.abc import AsyncGenerator, Callable
from typing import Any

import aiohttp

from boocode.chat.llm import ollama
from boocode.chat.llm.thinking import ThinkSplitter, split_thinking
from boocode.chat.llm.types import (
    Completion,
    LLMError,
    LLMSettings,
    ReasoningDelta,
    TextDelta,
    ToolCallRequest,
)
from boocode.chat.storable import storable

MAX_LINE_CHARS = 16 * 1024 * 1024  # one server-sent-events line; longer is a broken stream
_LINE_BREAK = re.compile(r"\r\n|\r|\n")  # the SSE line ends (not str.splitlines' Unicode ones)
MAX_TOKENS_STORED = 2_147_483_647  # the database column's limit


def error_detail(text: str) -> str:
    """The human message inside an error body (OpenAI, Ollama and plain-text shapes)."""
    try:
        data = json.loads(text)
    except ValueError:
        return text.strip()[:300]
    if isinstance(data, dict):
        error = data.get("error", data)
        if isinstance(error, dict):
            message = error.get("message") or error.get("detail") or ""
            return str(message)[:300] if message else json.dumps(error)[:300]
        if error:
            return str(error)[:300]
        for key in ("message", "detail"):
            if data.get(key):
                return str(data[key])[:300]
    return text.strip()[:300]


class _ToolCallBuilder:
    """Assembles tool calls from streamed deltas, keyed by their ``index``."""

    def __init__(self) -> None:
        self.calls: dict[int, dict[str, Any]] = {}

    def add(self, deltas: list[Any]) -> None:
        for position, delta in enumerate(deltas):
            if not isinstance(delta, dict):
                raise ValueError(f"tool call delta is not an object: {delta!r}")
            index = delta.get("index")
            if not isinstance(index, int):
                # Some servers omit the index: a new id starts a new call, otherwise continue the last.
                if delta.get("id") and all(c["id"] != delta["id"] for c in self.calls.values()):
                    index = len(self.calls) + position
                else:
                    index = max(self.calls, default=0)
            call = self.calls.setdefault(index, {"id": "", "name": "", "arguments": []})
            if delta.get("id"):
                call["id"] = str(delta["id"])
            function = delta.get("function") or {}
            name = function.get("name")
            if name and name != call["name"]:
                call["name"] += storable(name)
            arguments = function.get("arguments")
            if isinstance(arguments, dict):
                arguments = json.dumps(arguments)
            if arguments:
                call["arguments"].append(storable(arguments))

    def build(self) -> list[ToolCallRequest]:
        return [
            ToolCallRequest(
                id=call["id"] or f"call_{uuid.uuid4().hex[:16]}",
                name=call["name"],
                arguments="".join(call["arguments"]),
            )
            for _, call in sorted(self.calls.items())
        ]


async def _lines(response: aiohttp.ClientResponse) -> AsyncGenerator[str]:
    """The body's lines, split at CRLF, LF or CR (a CR ending one chunk may pair with the next LF)."""
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    pending = ""
    async for chunk in response.content.iter_any():
        text = pending + decoder.decode(chunk)
        held = text.endswith("\r")
        lines = _LINE_BREAK.split(text[:-1] if held else text)
        pending = lines.pop() + ("\r" if held else "")
        if len(pending) > MAX_LINE_CHARS:
            raise ValueError(f"a line longer than {MAX_LINE_CHARS} characters")
        for line in lines:
            yield line
    pending += decoder.decode(b"", final=True)
    for line in _LINE_BREAK.split(pending):
        if line:
            yield line


async def parse_stream(
    response: aiohttp.ClientResponse,
    llm: LLMSettings,
    first_token: Callable[[], None] | None = None,
    *,
    native: bool = False,
) -> AsyncGenerator[TextDelta | ReasoningDelta | Completion]:
    """Read server-sent events until ``[DONE]``; yield text, thinking and, last, the completion.

    ``first_token()`` is called once, at the first piece of text, thinking or a tool call.
    ``native``: Ollama's NDJSON instead (:func:`boocode.chat.llm.ollama.events`).
    """
    if native:
        async for event in _native_stream(response, llm, first_token):
            yield event
        return
    text: list[str] = []
    reasoning: list[str] = []
    splitter = ThinkSplitter()
    tools = _ToolCallBuilder()
    finish_reason: str | None = None
    usage: tuple[int, int] | None = None
    model = ""
    done = False
    lines = _lines(response)
    try:
        async for line in lines:
            # After [DONE] the body is read to its end (not abandoned) so the connection is reused.
            if done or not line.startswith("data:"):
                continue  # also blank separators, comments (": keep-alive"), event:/id: fields
            data = line[5:].strip()
            if data == "[DONE]":
                done = True
                continue
            if not data:
                continue
            try:
                chunk = json.loads(data)
                if not isinstance(chunk, dict):
                    raise ValueError("not an object")
                if chunk.get("error"):
                    raise LLMError(
                        f"The model server reported an error mid-stream: {error_detail(data)}", kind="server"
                    )
                if chunk.get("usage") is not None:
                    usage = _usage(chunk["usage"]) or usage
                if not model and isinstance(chunk.get("model"), str):
                    model = storable(chunk["model"][:200])
                for choice in chunk.get("choices") or []:
                    delta = choice.get("delta") or {}
                    content = delta.get("content")
                    # One of the two, not both: some servers send the same thinking under each name.
                    thought = delta.get("reasoning_content") or delta.get("reasoning")
                    if first_token is not None and (content or thought or delta.get("tool_calls")):
                        first_token()
                        first_token = None
                    if thought:
                        if not isinstance(thought, str):
                            raise ValueError("reasoning is not a string")
                        thought = storable(thought)
                        reasoning.append(thought)
                        yield ReasoningDelta(thought)
                    if content:
                        if not isinstance(content, str):
                            raise ValueError("content is not a string")
                        content = storable(content)  # a "\ud800" escape cannot be encoded anywhere
                        for event in split_thinking(splitter.feed(content), text, reasoning):
                            yield event
                    if delta.get("tool_calls"):
                        tools.add(delta["tool_calls"])
                    if choice.get("finish_reason"):
                        finish_reason = str(choice["finish_reason"])
            except (ValueError, TypeError, AttributeError, RecursionError) as exc:  # hostile JSON too
                raise LLMError(
                    f"The model server sent a malformed stream ({exc}): {data[:200]!r}", kind="malformed"
                ) from None
    except (ValueError, aiohttp.ClientError) as exc:
        raise _stream_failure(exc, llm) from None
    finally:
        await lines.aclose()
    if not done and finish_reason is None:
        raise LLMError("The model server's stream ended before the answer was complete.", kind="disconnected")
    for event in split_thinking(splitter.finish(), text, reasoning):
        yield event
    yield Completion(
        text="".join(text),
        tool_calls=tools.build(),
        finish_reason=finish_reason,
        usage=usage,
        model=model,
        reasoning="".join(reasoning),
    )


def _stream_failure(exc: ValueError | aiohttp.ClientError, llm: LLMSettings) -> LLMError:
    """A stream that broke, as the person reads it: a line with no end in sight (``_lines``'s
    ValueError), the model's silence past ``BOOCODE_LLM_TIMEOUT``, or the connection lost."""
    if isinstance(exc, ValueError):
        return LLMError(f"The model server sent a malformed stream ({exc}).", kind="malformed")
    if isinstance(exc, aiohttp.ServerTimeoutError):
        return LLMError(
            f"The model stopped sending for {llm.timeout:g} s (BOOCODE_LLM_TIMEOUT).", kind="timeout"
        )
    return LLMError(
        "The connection to the model server closed in the middle of the answer.", kind="disconnected"
    )


async def _native_stream(
    response: aiohttp.ClientResponse, llm: LLMSettings, first_token: Callable[[], None] | None
) -> AsyncGenerator[TextDelta | ReasoningDelta | Completion]:
    """Ollama's ``/api/chat`` stream, its failures told as the OpenAI route tells them."""
    lines = _lines(response)
    try:
        async with contextlib.aclosing(ollama.events(lines, first_token)) as events:
            async for event in events:
                yield event
    except (ValueError, aiohttp.ClientError) as exc:
        raise _stream_failure(exc, llm) from None
    finally:
        await lines.aclose()


def _usage(value: Any) -> tuple[int, int] | None:
    """``(prompt tokens, completion tokens)`` from a ``usage`` object, or ``None`` if it has neither."""
    if not isinstance(value, dict):
        return None
    counts: list[int | None] = []
    for key in ("prompt_tokens", "completion_tokens"):
        number = value.get(key)
        if isinstance(number, int) and not isinstance(number, bool) and number >= 0:
            counts.append(min(number, MAX_TOKENS_STORED))
        else:
            counts.append(None)
    if counts[0] is None and counts[1] is None:
        return None
    return counts[0] or 0, counts[1] or 0


# --- the model list and the health check ----------------------------------------------------

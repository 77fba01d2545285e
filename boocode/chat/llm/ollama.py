"""Ollama's native chat API (``POST /api/chat``): the request and its streamed answer.

Ollama's OpenAI route (``/v1/chat/completions``) ignores ``num_ctx``: a prompt longer than the
window the server was started with (4,096 tokens by default on smaller machines) loses its
front without a word, system prompt and tool definitions first. Its native route takes
``options.num_ctx`` per request, so BooCode talks to Ollama there (:mod:`boocode.chat.llm.client`
picks the route once it knows the server, :func:`boocode.chat.llm.server.is_ollama`).

The answer is newline-delimited JSON: each line a ``message`` piece (``content``,
``thinking``, ``tool_calls`` whole with their arguments as objects), the last one ``done:
true`` with ``done_reason``, ``prompt_eval_count`` and ``eval_count``. :func:`events` turns it
into the same :class:`~boocode.chat.llm.types.TextDelta`, ``ReasoningDelta`` and
``Completion`` (arguments as JSON text, ids made when Ollama gives none) as the OpenAI route.

``num_ctx`` is sized to the request (:func:`sized_num_ctx`): rounded up to a step of
:data:`NUM_CTX_STEP` tokens (a new num_ctx makes Ollama load the model again, so it should not
change with every message) and bounded by the model's own window and ``BOOCODE_OLLAMA_MAX_CTX``.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from typing import Any

from boocode.chat.llm.thinking import ThinkSplitter, split_thinking
from boocode.chat.llm.types import Completion, LLMError, ReasoningDelta, TextDelta, ToolCallRequest
from boocode.chat.storable import storable

NUM_CTX_STEP = 8192  # num_ctx is a multiple of this
MIN_NUM_CTX = 4096  # never less than Ollama's own default
ANSWER_ROOM = 4096  # tokens kept for the answer when BooCode sizes the window itself
BYTES_PER_TOKEN = 3  # a cautious estimate for JSON, code and prose (fewer bytes: more tokens)
MAX_TOKENS = 2_147_483_647


def native_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Chat Completions messages as Ollama's: tool call arguments as objects, a tool result
    naming its tool (``tool_name``), images of content parts in ``images``."""
    names: dict[str, str] = {}
    native = []
    for message in messages:
        entry: dict[str, Any] = {"role": message.get("role", "user")}
        content = message.get("content")
        if isinstance(content, list):
            texts, images = [], []
            for part in content:
                if not isinstance(part, dict):
                    continue
                if part.get("type") == "text":
                    texts.append(str(part.get("text", "")))
                elif part.get("type") == "image_url":
                    url = str((part.get("image_url") or {}).get("url", ""))
                    if url.startswith("data:") and "," in url:
                        images.append(url.split(",", 1)[1])  # Ollama takes the base64 alone
            content = "\n\n".join(texts)
            if images:
                entry["images"] = images
        entry["content"] = content or ""
        calls = []
        for call in message.get("tool_calls") or []:
            function = call.get("function") or {}
            names[str(call.get("id", ""))] = str(function.get("name", ""))
            calls.append({"function": {"name": function.get("name", ""), "arguments": _arguments(function)}})
        if calls:
            entry["tool_calls"] = calls
        if entry["role"] == "tool":
            entry["tool_name"] = names.get(str(message.get("tool_call_id", "")), "")
        native.append(entry)
    return native


def _arguments(function: dict[str, Any]) -> dict[str, Any]:
    """A call's arguments as the object Ollama wants (text that is no JSON object: ``{}``)."""
    arguments = function.get("arguments")
    if isinstance(arguments, dict):
        return arguments
    try:
        parsed = json.loads(arguments or "{}")
    except (TypeError, ValueError):
        return {}
    return parsed if isinstance(parsed, dict) else {}


def native_body(
    messages: list[dict[str, Any]],
    *,
    model: str,
    num_ctx: int,
    tools: list[dict[str, Any]] | None = None,
    temperature: float | None = None,
    top_p: float | None = None,
    think: bool = False,
) -> dict[str, Any]:
    """The JSON body of ``POST /api/chat``; ``think`` only for a model that can (else Ollama refuses)."""
    options: dict[str, Any] = {"num_ctx": num_ctx}
    if temperature is not None:
        options["temperature"] = temperature
    if top_p is not None:
        options["top_p"] = top_p
    body: dict[str, Any] = {
        "model": model,
        "messages": native_messages(messages),
        "stream": True,
        "options": options,
    }
    if tools:
        body["tools"] = tools
    if think:
        body["think"] = True
    return body


def estimate_tokens(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> int:
    """A cautious count of a request's prompt tokens (:data:`BYTES_PER_TOKEN`)."""
    size = len(json.dumps(messages, ensure_ascii=False).encode()) + len(json.dumps(tools or []).encode())
    return -(-size // BYTES_PER_TOKEN)


def sized_num_ctx(
    wanted: int | None,
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]] | None,
    *,
    window: int | None,
    cap: int,
) -> int:
    """The ``num_ctx`` of a request: ``wanted`` (the caller's count of what the request needs,
    the answer's room included), else an estimate plus :data:`ANSWER_ROOM`; rounded up to
    :data:`NUM_CTX_STEP`, at least :data:`MIN_NUM_CTX`, at most the model's ``window`` and ``cap``."""
    needed = wanted if wanted is not None else estimate_tokens(messages, tools) + ANSWER_ROOM
    size = max(MIN_NUM_CTX, -(-needed // NUM_CTX_STEP) * NUM_CTX_STEP)
    limit = min(cap, window) if window else cap
    return max(1, min(size, limit))


def context_length(shown: dict[str, Any] | None) -> int | None:
    """The model's own window from ``/api/show``: ``model_info["<architecture>.context_length"]``."""
    if not shown:
        return None
    info = shown.get("model_info")
    if not isinstance(info, dict):
        return None
    architecture = info.get("general.architecture")
    value = info.get(f"{architecture}.context_length") if isinstance(architecture, str) else None
    if value is None:
        value = next(
            (v for k, v in info.items() if isinstance(k, str) and k.endswith(".context_length")), None
        )
    return _tokens(value)


def modelfile_num_ctx(shown: dict[str, Any] | None) -> int | None:
    """A ``num_ctx`` the model's Modelfile sets (``parameters``, one ``name value`` a line)."""
    parameters = (shown or {}).get("parameters")
    if not isinstance(parameters, str):
        return None
    for line in parameters.splitlines():
        name, _, value = line.strip().partition(" ")
        if name == "num_ctx":
            try:
                return _tokens(int(value.strip()))
            except ValueError:
                return None
    return None


def can_think(shown: dict[str, Any] | None) -> bool:
    """Whether ``/api/show`` lists ``thinking`` among the model's capabilities."""
    capabilities = (shown or {}).get("capabilities")
    return isinstance(capabilities, list) and "thinking" in capabilities


def _tokens(value: Any) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool) and 0 < value <= MAX_TOKENS:
        return value
    return None


async def events(
    lines: AsyncIterator[str], first_token: Callable[[], None] | None = None
) -> AsyncGenerator[TextDelta | ReasoningDelta | Completion]:
    """Read ``/api/chat``'s NDJSON until ``done``; yield text, thinking and, last, the completion.

    Raises :class:`LLMError` (``malformed``, ``server`` for an error line, ``disconnected``
    when the stream ends before ``done``). ``first_token()`` is called once, at the first piece.
    """
    text: list[str] = []
    reasoning: list[str] = []
    splitter = ThinkSplitter()  # a model Ollama does not split (older versions) thinks inline
    calls: list[ToolCallRequest] = []
    finish_reason: str | None = None
    usage: tuple[int, int] | None = None
    model = ""
    done = False
    async for line in lines:
        if done or not line.strip():
            continue  # after done the body is read to its end, so the connection is kept
        try:
            chunk = json.loads(line)
            if not isinstance(chunk, dict):
                raise ValueError("not an object")
            if chunk.get("error"):
                raise LLMError(
                    f"The model server reported an error mid-stream: {str(chunk['error'])[:300]}",
                    kind="server",
                )
            if not model and isinstance(chunk.get("model"), str):
                model = storable(chunk["model"][:200])
            message = chunk.get("message") or {}
            if not isinstance(message, dict):
                raise ValueError("message is not an object")
            content, thought = message.get("content"), message.get("thinking")
            if first_token is not None and (content or thought or message.get("tool_calls")):
                first_token()
                first_token = None
            if thought:
                if not isinstance(thought, str):
                    raise ValueError("thinking is not a string")
                reasoning.append(storable(thought))
                yield ReasoningDelta(reasoning[-1])
            if content:
                if not isinstance(content, str):
                    raise ValueError("content is not a string")
                for event in split_thinking(splitter.feed(storable(content)), text, reasoning):
                    yield event
            for call in message.get("tool_calls") or []:
                calls.append(_call(call))
            if chunk.get("done"):
                done = True
                finish_reason = str(chunk.get("done_reason") or "stop")
                usage = _usage(chunk)
        except (ValueError, TypeError, AttributeError, RecursionError) as exc:  # hostile JSON too
            raise LLMError(
                f"The model server sent a malformed stream ({exc}): {line[:200]!r}", kind="malformed"
            ) from None
    if not done:
        raise LLMError("The model server's stream ended before the answer was complete.", kind="disconnected")
    for event in split_thinking(splitter.finish(), text, reasoning):
        yield event
    if calls and finish_reason == "stop":
        finish_reason = "tool_calls"  # as the OpenAI route says it (Ollama says "stop")
    yield Completion(
        text="".join(text),
        tool_calls=calls,
        finish_reason=finish_reason,
        usage=usage,
        model=model,
        reasoning="".join(reasoning),
    )


def _call(call: Any) -> ToolCallRequest:
    """One of Ollama's tool calls as the OpenAI route gives it (arguments as JSON text)."""
    if not isinstance(call, dict) or not isinstance(call.get("function"), dict):
        raise ValueError(f"tool call is not an object with a function: {call!r}"[:200])
    function = call["function"]
    arguments = function.get("arguments")
    text = json.dumps(arguments) if isinstance(arguments, dict | list) else str(arguments or "{}")
    return ToolCallRequest(
        id=storable(str(call.get("id") or f"call_{uuid.uuid4().hex[:16]}")),
        name=storable(str(function.get("name") or "")),
        arguments=storable(text),
    )


def _usage(chunk: dict[str, Any]) -> tuple[int, int] | None:
    """``(prompt_eval_count, eval_count)``, or ``None`` when the line has neither."""
    counts: list[int | None] = []
    for key in ("prompt_eval_count", "eval_count"):
        value = chunk.get(key)
        valid = isinstance(value, int) and not isinstance(value, bool) and value >= 0
        counts.append(min(value, MAX_TOKENS) if isinstance(value, int) and valid else None)
    if counts[0] is None and counts[1] is None:
        return None
    return counts[0] or 0, counts[1] or 0

"""Streaming client for OpenAI-compatible Chat Completions (Ollama, llama.cpp, vLLM, OpenAI, ...).

``stream_chat()`` is an async generator: it yields :class:`TextDelta` as text arrives,
:class:`ReasoningDelta` as the model's thinking arrives, and one final :class:`Completion`
carrying the full text, the thinking apart from it, the tool calls assembled from their deltas
(index-based, arguments split across chunks, several calls in parallel), the token usage when
the server reports it (the request asks for it with ``stream_options.include_usage``) and the
name of the model that answered.

Thinking comes in three dialects, all read: ``delta.reasoning_content`` (DeepSeek, vLLM,
llama.cpp), ``delta.reasoning`` (OpenRouter, Ollama's OpenAI route) and a ``<think>...</think>``
block at the very start of the content (qwen3, QwQ, DeepSeek-R1 on servers that do not split
it; the tags may be cut anywhere between chunks, :class:`ThinkSplitter`). It is never part of
the answer's text, so it never goes back to the model as one (DeepSeek's rule: do not send
``reasoning_content`` back); its tokens are in the server's ``completion_tokens``.

``model_list()`` reads the server's ``GET /models`` (cached for :data:`MODELS_CACHE_SECONDS`);
``check_server()`` is the status line's health check: it reads the list afresh and records
in :data:`last_error` whether the server answered.

Every failure is raised as :class:`LLMError`, whose message is written for the user and names
the URL or the variable to check. The base URL is the administrator's; a redirect is the model
server's word and is not followed (the error says where it leads). 429, 5xx and connections
dropped before a response are retried with backoff, but only before the first token: a
half-streamed answer is never replayed. Cancelling the consumer closes the HTTP response, so
the server sees the connection go away.

When the server is Ollama (it says so at ``/api/version``, asked once per base URL) the call
goes to its own ``/api/chat`` instead, with ``options.num_ctx`` sized to the request
(:mod:`boocode.chat.llm.ollama`, docs/models.md): its OpenAI route cuts a long prompt silently.
Same events, same errors.

One ``aiohttp.ClientSession`` is kept per event loop (:mod:`boocode.chat.llm.server`) so
connections are reused between turns (aiohttp rather than the MCP SDK's httpx2: with dozens
of kept-alive connections its pool hands one out without probing every other, and a streamed
answer costs about a quarter of the CPU; see docs/benchmarks.md).
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import json
import logging
import random
import re
import time
from collections.abc import AsyncGenerator, Callable
from typing import Any
from urllib.parse import urlsplit

import aiohttp
from django.conf import settings
from opentelemetry.trace import Span

from boocode.chat.ledger import metrics as chat_metrics
from boocode.chat.llm import ollama
from boocode.chat.llm import server as model_server
from boocode.chat.llm.server import close_http_session as close_http_session
from boocode.chat.llm.server import http_session, proxy_for
from boocode.chat.llm.streams import error_detail, parse_stream
from boocode.chat.llm.types import Completion as Completion
from boocode.chat.llm.types import LLMError as LLMError
from boocode.chat.llm.types import LLMSettings as LLMSettings
from boocode.chat.llm.types import ReasoningDelta as ReasoningDelta
from boocode.chat.llm.types import TextDelta as TextDelta
from boocode.chat.llm.types import ToolCallRequest as ToolCallRequest
from boocode.chat.llm.types import Usage as Usage
from boocode.chat.llm.types import without_userinfo
from boocode.chat.storable import storable
from mcpclient.telemetry import tracing

logger = logging.getLogger(__name__)

RETRY_BASE_DELAY = 0.5  # seconds; doubled per attempt, plus jitter
RETRY_AFTER_CAP = 20.0  # never wait longer than this for a Retry-After header
ERROR_BODY_LIMIT = 64 * 1024

# The last connection-level failure seen in this process (None after a success), for the status line.
last_error: str | None = None
last_error_kind: str | None = None  # the LLMError kind of last_error
# Failures a working GET /models does not disprove: the model name or the request itself.
_NOT_CLEARED_BY_CHECK = frozenset({"model", "request"})
MODELS_CACHE_SECONDS = 60.0
MAX_LISTED_MODELS = 1000


def note_error(exc: LLMError) -> None:
    """Remember a failure to reach the model for the status line (not "not configured")."""
    global last_error, last_error_kind
    if exc.kind not in ("not_configured", "too_large", "context_length", "length"):
        last_error, last_error_kind = str(exc), exc.kind


def note_success() -> None:
    """The model answered: the status line shows no error."""
    global last_error, last_error_kind
    last_error = last_error_kind = None


def build_request(
    messages: list[dict[str, Any]],
    *,
    model: str,
    tools: list[dict[str, Any]] | None = None,
    temperature: float | None = None,
    top_p: float | None = None,
) -> dict[str, Any]:
    """The JSON body; no ``tools`` key at all when there are no tools (some servers reject [])."""
    body: dict[str, Any] = {"model": model, "messages": messages, "stream": True}
    if settings.LLM_STREAM_USAGE:
        body["stream_options"] = {"include_usage": True}
    if tools:
        body["tools"] = tools
    if temperature is not None:
        body["temperature"] = temperature
    if top_p is not None:
        body["top_p"] = top_p
    return body


async def stream_chat(
    messages: list[dict[str, Any]],
    *,
    llm: LLMSettings,
    tools: list[dict[str, Any]] | None = None,
    temperature: float | None = None,
    top_p: float | None = None,
    num_ctx: int | None = None,
) -> AsyncGenerator[TextDelta | ReasoningDelta | Completion]:
    """Stream one Chat Completions call: text and thinking deltas, then one ``Completion``.

    When the server is Ollama (:func:`boocode.chat.llm.server.is_ollama`) the call goes to its
    native ``/api/chat`` (:mod:`boocode.chat.llm.ollama`) with ``options.num_ctx`` sized to
    ``num_ctx`` (the tokens the request needs, its answer's room included; ``None``: estimated
    here), bounded by the model's window and ``BOOCODE_OLLAMA_MAX_CTX``. Every other server gets
    Chat Completions, where ``num_ctx`` means nothing.

    Raises :class:`LLMError`. Use with ``contextlib.aclosing`` so an early exit closes the stream.
    The request is a span (``chat <model>``, child of the turn's) and counts in
    ``boocode_model_requests_total`` and ``boocode_model_first_token_seconds``
    (:mod:`boocode.chat.ledger.metrics`).
    """
    started = time.monotonic()
    span = _request_span(llm) if tracing.enabled() else None

    def first_token() -> None:
        chat_metrics.FIRST_TOKEN.observe(time.monotonic() - started)
        if span is not None:
            span.add_event("gen_ai.first_token")

    outcome, completion = "cancelled", None  # (a consumer that stops reading closes the stream)
    try:
        # aclosing: a consumer that stops reading closes the HTTP response now, not at collection.
        request = _stream_chat(messages, llm, tools, temperature, top_p, num_ctx, first_token)
        async with contextlib.aclosing(request) as events:
            async for event in events:
                if isinstance(event, Completion):
                    completion = event
                yield event
        outcome = "ok"
    except LLMError as exc:
        outcome = exc.kind
        raise
    except Exception:
        outcome = "error"
        raise
    finally:
        chat_metrics.MODEL_REQUESTS.labels(outcome).inc()
        if span is not None:
            if completion is not None:
                span.set_attributes(_answer_attributes(completion))
            tracing.outcome(span, "" if outcome == "ok" else outcome, **{"boocode.outcome": outcome})
            span.end()


def _request_span(llm: LLMSettings) -> Span | None:
    """A model request's span (gen_ai semantic conventions), child of the current one."""
    attributes = {
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": llm.model,
        "server.address": urlsplit(llm.base_url).hostname or "",
    }
    return tracing.start(f"chat {llm.model}", kind="client", attributes=attributes)


def _answer_attributes(completion: Completion) -> dict[str, Any]:
    """What a model request's span says of its answer (gen_ai semantic conventions)."""
    attributes: dict[str, Any] = {"gen_ai.response.model": completion.model}
    if completion.finish_reason:
        attributes["gen_ai.response.finish_reasons"] = (completion.finish_reason,)
    if completion.usage is not None:
        attributes["gen_ai.usage.input_tokens"], attributes["gen_ai.usage.output_tokens"] = completion.usage
    return attributes


async def _stream_chat(
    messages: list[dict[str, Any]],
    llm: LLMSettings,
    tools: list[dict[str, Any]] | None,
    temperature: float | None,
    top_p: float | None,
    num_ctx: int | None,
    first_token: Callable[[], None],
) -> AsyncGenerator[TextDelta | ReasoningDelta | Completion]:
    """:func:`stream_chat`'s request, its retries and its stream (``first_token()`` at the first token)."""
    if not llm.configured:
        raise LLMError(
            "No model is configured: set BOOCODE_LLM_BASE_URL and BOOCODE_LLM_MODEL.", kind="not_configured"
        )
    native = await model_server.is_ollama(llm, shared=True)
    if native:
        shown = await model_server.ollama_show(llm, llm.model, shared=True)
        size = ollama.sized_num_ctx(
            num_ctx,
            messages,
            tools,
            window=ollama.context_length(shown) or ollama.modelfile_num_ctx(shown),
            cap=settings.OLLAMA_MAX_CTX,
        )
        estimate = ollama.estimate_tokens(messages, tools)
        if estimate > size:  # the budget is the caller's; this says when it was not kept
            logger.warning(
                "a request of about %d tokens goes to Ollama with num_ctx %d (the model's window or "
                "BOOCODE_OLLAMA_MAX_CTX): Ollama drops its beginning",
                estimate,
                size,
            )
        body = ollama.native_body(
            messages,
            model=llm.model,
            num_ctx=size,
            tools=tools,
            temperature=temperature,
            top_p=top_p,
            think=ollama.can_think(shown),
        )
        url, headers = f"{llm.root_url}/api/chat", {"accept": "application/x-ndjson", **llm.auth_headers()}
    else:
        body = build_request(messages, model=llm.model, tools=tools, temperature=temperature, top_p=top_p)
        if llm.base_url in _usage_refused:
            body.pop("stream_options", None)
        url, headers = llm.url, {"accept": "text/event-stream", **llm.auth_headers()}
    # sock_read bounds the wait for the answer and every silence in it; connect includes the
    # wait for a free connection of the pool.
    timeout = aiohttp.ClientTimeout(
        total=None, connect=llm.timeout, sock_connect=min(llm.timeout, 10.0), sock_read=llm.timeout
    )
    session = http_session()

    dropped = 0  # 1 once the request was sent again without stream_options: that try is free
    for index in range(llm.max_retries + 2):
        attempt = index - dropped
        retry_delay: float | None = None
        try:
            async with session.post(
                url,
                json=body,
                headers=headers,
                timeout=timeout,
                proxy=proxy_for(url),
                allow_redirects=False,
            ) as response:
                if response.status != 200:
                    error = await _status_error(response, llm)
                    if not dropped and _refuses_usage(error, body):
                        # An older server that does not know the option: ask again without it,
                        # and never again for this server (its answers then carry no usage).
                        body.pop("stream_options")
                        _usage_refused.add(llm.base_url)
                        dropped = 1
                        logger.warning("the model server refused stream_options; asking without usage")
                        continue
                    if error.kind not in ("rate_limit", "server") or attempt >= llm.max_retries:
                        if attempt:
                            error.args = (f"{error} (after {attempt + 1} attempts)",)
                        raise error
                    retry_delay = _retry_delay(response, attempt)
                    logger.warning("LLM %s; retrying in %.1f s", error, retry_delay)
                else:
                    async for event in parse_stream(response, llm, first_token, native=native):
                        yield event
                    return
        except aiohttp.ConnectionTimeoutError:
            raise LLMError(
                f"Timed out connecting to the model server at {llm.display_url} (BOOCODE_LLM_BASE_URL).",
                kind="timeout",
            ) from None
        except aiohttp.ServerTimeoutError:
            raise LLMError(
                f"The model did not answer within {llm.timeout:g} s (BOOCODE_LLM_TIMEOUT).", kind="timeout"
            ) from None
        except (aiohttp.ClientConnectorError, aiohttp.InvalidURL) as exc:
            raise _cannot_connect(llm, exc) from None
        except aiohttp.ServerDisconnectedError as exc:
            # A kept-alive connection the server had already closed: nothing was received, so retry.
            if attempt >= llm.max_retries:
                raise LLMError(
                    f"The model server at {llm.display_url} closed the connection without answering ({exc}).",
                    kind="disconnected",
                ) from None
            retry_delay = 0.0 if attempt == 0 else _backoff(attempt)
        except aiohttp.ClientResponseError as exc:
            raise LLMError(
                f"The model server at {llm.display_url} sent an invalid HTTP response ({exc.message}).",
                kind="malformed",
            ) from None
        except aiohttp.ClientError as exc:
            raise LLMError(
                f"The connection to the model server at {llm.display_url} failed "
                f"({str(exc) or type(exc).__name__}).",
                kind="disconnected",
            ) from None
        if retry_delay:
            await asyncio.sleep(retry_delay)


_usage_refused: set[str] = set()  # base URLs whose server rejected stream_options


def _refuses_usage(error: LLMError, body: dict[str, Any]) -> bool:
    """Whether ``error`` is a server refusing the ``stream_options`` the request carried."""
    text = str(error).lower()
    return (
        "stream_options" in body
        and error.kind == "request"
        and ("stream_options" in text or "include_usage" in text)
    )


def _cannot_connect(llm: LLMSettings, exc: Exception) -> LLMError:
    return LLMError(
        f"Cannot connect to the model server at {llm.display_url} ({_reason(exc)}). "
        "Check BOOCODE_LLM_BASE_URL and that the server is running.",
        kind="connect",
    )


def _reason(exc: Exception) -> str:
    if isinstance(exc, aiohttp.ClientConnectorError) and exc.os_error.errno == errno.ECONNREFUSED:
        return "connection refused"
    if isinstance(exc, aiohttp.ClientConnectorError):
        return exc.os_error.strerror or str(exc.os_error) or type(exc.os_error).__name__
    return str(exc) or type(exc).__name__


def _backoff(attempt: int) -> float:
    return RETRY_BASE_DELAY * (2**attempt) * (0.75 + random.random() / 2)


def _retry_delay(response: aiohttp.ClientResponse, attempt: int) -> float:
    value = response.headers.get("retry-after", "")
    try:
        return max(0.0, min(float(value), RETRY_AFTER_CAP))
    except ValueError:
        return _backoff(attempt)


async def _status_error(response: aiohttp.ClientResponse, llm: LLMSettings) -> LLMError:
    """An ``LLMError`` for a non-200 answer, quoting the server's own message."""
    raw = b""
    try:
        async for chunk in response.content.iter_chunked(ERROR_BODY_LIMIT):
            raw += chunk
            if len(raw) >= ERROR_BODY_LIMIT:
                break
    except aiohttp.ClientError:
        pass  # the status says enough; the body was a courtesy
    detail = error_detail(raw.decode("utf-8", errors="replace"))
    status = response.status
    suffix = f": {detail}" if detail else ""
    if 300 <= status < 400:
        # The base URL is the administrator's; where the server sends BooCode instead is its word.
        location = response.headers.get("location", "")[:300] or "nowhere"
        return LLMError(
            f"The model server at {llm.display_url} redirects (HTTP {status}) to {location}; "
            "BooCode does not follow a model server's redirects: set BOOCODE_LLM_BASE_URL to where it leads.",
            kind="request",
            status=status,
        )
    if status in (401, 403):
        return LLMError(
            f"The model server at {llm.display_url} refused the credentials (HTTP {status}){suffix}. "
            "Check BOOCODE_LLM_API_KEY.",
            kind="auth",
            status=status,
        )
    if status == 404:
        return LLMError(
            f'Model "{llm.model}" was not found at {llm.display_url} (HTTP 404){suffix}. '
            "Check BOOCODE_LLM_MODEL (or the agent's model) and BOOCODE_LLM_BASE_URL.",
            kind="model",
            status=status,
        )
    if status == 429:
        return LLMError(
            f"The model server is rate limiting requests (HTTP 429){suffix}.",
            kind="rate_limit",
            status=status,
        )
    if status >= 500:
        return LLMError(f"The model server failed (HTTP {status}){suffix}.", kind="server", status=status)
    refusal = context_refusal(raw.decode("utf-8", errors="replace")) if status in (400, 413) else None
    if refusal is not None:
        window, prompt_tokens = refusal
        return LLMError(
            f"The model server refused the request as longer than the model's context window (HTTP "
            f"{status}){suffix}.",
            kind="context_length",
            status=status,
            window=window,
            prompt_tokens=prompt_tokens,
        )
    return LLMError(
        f"The model server rejected the request (HTTP {status}){suffix}.", kind="request", status=status
    )


# Each server's refusal of a prompt over the window, matched narrowly (a refusal for anything
# else is the request's own error): OpenAI's code, vLLM's, llama.cpp's and Anthropic's wording.
_CONTEXT_REFUSALS = (
    re.compile(r'"code"\s*:\s*"context_length_exceeded"'),
    re.compile(r"maximum context length is \d+ tokens"),
    re.compile(r"exceeds the available context size"),
    re.compile(r"prompt is too long: \d+ tokens > \d+"),
)
# The figures they give: (window, prompt tokens).
_CONTEXT_FIGURES = (
    re.compile(
        r"maximum context length is (?P<window>\d+) tokens\. However, "
        r"(?:your messages resulted in|you requested) (?P<prompt>\d+) tokens"
    ),
    re.compile(r"prompt is too long: (?P<prompt>\d+) tokens > (?P<window>\d+) maximum"),
    re.compile(r'"n_prompt_tokens"\s*:\s*(?P<prompt>\d+)\s*,\s*"n_ctx"\s*:\s*(?P<window>\d+)'),
)


def context_refusal(body: str) -> tuple[int | None, int | None] | None:
    """``(window, prompt tokens)`` (each ``None`` when not given) if ``body`` is a server's refusal
    of a prompt longer than the model's window, else ``None``."""
    if not any(pattern.search(body) for pattern in _CONTEXT_REFUSALS):
        return None
    for pattern in _CONTEXT_FIGURES:
        found = pattern.search(body)
        if found is not None:
            return int(found["window"]), int(found["prompt"])
    found = re.search(r"maximum context length is (\d+) tokens", body)
    return (int(found[1]) if found else None), None


_models_cache: dict[tuple[str, str], tuple[float, list[str], str]] = {}


async def fetch_models(llm: LLMSettings) -> list[str]:
    """The ids of ``GET <base URL>/models``, in the server's order; raises :class:`LLMError`.

    A session of its own (closed at once): this runs every few seconds at most, from views and
    the status check, on whatever loop they have.
    """
    if not llm.base_url:
        raise LLMError("No model server is configured: set BOOCODE_LLM_BASE_URL.", kind="not_configured")
    url = f"{without_userinfo(llm.base_url)}/models"
    timeout = aiohttp.ClientTimeout(total=min(llm.timeout, 10.0))
    try:
        async with (
            aiohttp.ClientSession(cookie_jar=aiohttp.DummyCookieJar()) as session,
            session.get(
                url, headers=llm.auth_headers(), timeout=timeout, proxy=proxy_for(url), allow_redirects=False
            ) as response,
        ):
            if response.status != 200:
                error = await _status_error(response, llm)
                if response.status == 404:
                    error = LLMError(
                        f"The model server at {llm.display_url} offers no model list "
                        "(GET /models: HTTP 404).",
                        kind="request",
                        status=404,
                    )
                raise error
            raw = await response.content.read(ERROR_BODY_LIMIT * 16)
    except TimeoutError:
        raise LLMError(
            f"The model server at {llm.display_url} did not answer GET /models in time.", kind="timeout"
        ) from None
    except (aiohttp.ClientConnectorError, aiohttp.InvalidURL) as exc:
        raise _cannot_connect(llm, exc) from None
    except aiohttp.ClientError as exc:
        raise LLMError(
            f"The connection to the model server at {llm.display_url} failed "
            f"({str(exc) or type(exc).__name__}).",
            kind="disconnected",
        ) from None
    return _model_ids(raw, llm)


def _model_ids(raw: bytes, llm: LLMSettings) -> list[str]:
    try:
        data = json.loads(raw)
        entries = data.get("data", data.get("models")) if isinstance(data, dict) else None
        if not isinstance(entries, list):
            raise ValueError('no "data" list')
    except (ValueError, RecursionError) as exc:
        raise LLMError(
            f"The model server at {llm.display_url} sent a model list that cannot be read ({exc}).",
            kind="malformed",
        ) from None
    ids: list[str] = []
    for entry in entries[:MAX_LISTED_MODELS]:
        name = entry.get("id") if isinstance(entry, dict) else entry
        if isinstance(name, str) and name.strip() and name not in ids:
            ids.append(storable(name.strip()[:200]))
    return ids


async def model_list(llm: LLMSettings, *, max_age: float = MODELS_CACHE_SECONDS) -> tuple[list[str], str]:
    """``(model ids, error)`` of the server: the list read within ``max_age`` seconds, else afresh.

    ``error`` is ``""`` on success, else a message for the user (the list is then ``[]``).
    """
    key = (llm.base_url, llm.api_key)
    cached = _models_cache.get(key)
    if cached is not None and time.monotonic() - cached[0] < max_age:
        return list(cached[1]), cached[2]
    try:
        models, error = await fetch_models(llm), ""
    except LLMError as exc:
        models, error = [], str(exc)
    _models_cache[key] = (time.monotonic(), models, error)
    return list(models), error


def forget_models() -> None:
    """Drop the cached model lists, which servers refused usage and what they said of themselves (tests)."""
    _models_cache.clear()
    _usage_refused.clear()
    model_server.forget()


async def check_server(llm: LLMSettings) -> str | None:
    """Read the model list afresh and record the outcome for the status line; the error, if any.

    A failure replaces :data:`last_error`. A success clears it, unless it was about the model
    name or the request (``model``, ``request``): a working model list does not disprove those.
    """
    global last_error, last_error_kind
    try:
        models = await fetch_models(llm)
    except LLMError as exc:
        note_error(exc)
        return str(exc)
    _models_cache[(llm.base_url, llm.api_key)] = (time.monotonic(), models, "")
    if last_error_kind not in _NOT_CLEARED_BY_CHECK:
        last_error = last_error_kind = None
    return None

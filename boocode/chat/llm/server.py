"""The model server as a peer: the HTTP session every request to it shares, the proxy the
environment names, and short probes of what the server says of itself.

Probes (:func:`is_ollama`, :func:`ollama_show`, :func:`read_json`; ``shared=True`` from the
chat request's loop, which keeps the connection for the request) are bounded: one request,
at most :data:`PROBE_TIMEOUT` seconds and a byte limit read, and they never raise: a server
that does not answer, answers an error or something unreadable gives ``None`` (or ``False``).
What a server said is cached per base URL (and model) for :data:`PROBE_CACHE_SECONDS`; no
answer at all is not cached, so a server that was down is asked again next time.

One ``aiohttp.ClientSession`` is kept per event loop so connections are reused between turns
(and a probe rides the connection the chat request takes next); it is closed at server
shutdown (:func:`close_http_session`).
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import time
import weakref
from typing import Any
from urllib.parse import urlsplit
from urllib.request import getproxies, proxy_bypass

import aiohttp

from boocode.chat.llm.types import LLMSettings
from mcpclient.runtime.shutdown import on_server_shutdown

logger = logging.getLogger(__name__)

PROBE_TIMEOUT = 5.0  # seconds, at most (less when BOOCODE_LLM_TIMEOUT is shorter)
PROBE_BYTES = 1024 * 1024  # what a probe reads of an answer, at most
PROBE_CACHE_SECONDS = 600.0

_sessions: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, aiohttp.ClientSession] = (
    weakref.WeakKeyDictionary()
)
_NO_ANSWER = object()
_kinds: dict[str, tuple[float, bool]] = {}  # base URL -> (when, is Ollama)
_shown: dict[tuple[str, str], tuple[float, dict[str, Any] | None]] = {}  # (base URL, model) -> /api/show
# (base URL, model) -> (when, window): kept by boocode.chat.llm.model_windows, forgotten with the rest.
windows: dict[tuple[str, str], tuple[float, int | None]] = {}


def http_session() -> aiohttp.ClientSession:
    """The shared session of the running event loop (created on first use).

    No cookies are kept, so nothing one turn's server set travels with another's request.
    Proxies come from :func:`proxy_for`, not from aiohttp's ``trust_env`` (which reads
    ``~/.netrc`` in a worker thread on every request).
    """
    loop = asyncio.get_running_loop()
    session = _sessions.get(loop)
    if session is None or session.closed:
        session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=200, keepalive_timeout=60.0),
            cookie_jar=aiohttp.DummyCookieJar(),
        )
        _sessions[loop] = session
        on_server_shutdown(close_http_session)
    return session


@functools.lru_cache(maxsize=32)
def proxy_for(url: str) -> str | None:
    """The proxy the environment names for ``url`` (``HTTP_PROXY``/``HTTPS_PROXY``, ``NO_PROXY``)."""
    parts = urlsplit(url)
    if parts.hostname is None or proxy_bypass(parts.hostname):
        return None
    return getproxies().get(parts.scheme)


async def close_http_session() -> None:
    """Close the running loop's session, if any (server shutdown, tests)."""
    session = _sessions.pop(asyncio.get_running_loop(), None)
    if session is not None and not session.closed:
        await session.close()


async def _probe(
    llm: LLMSettings, url: str, *, body: Any = None, limit: int = PROBE_BYTES, shared: bool = False
) -> Any:
    """The JSON of one GET (or POST of ``body``) to ``url``: ``None`` for an answer that is not
    a 200 with JSON within ``limit`` bytes, ``_NO_ANSWER`` when the server did not answer.

    ``shared``: on the loop's kept session (the chat request's own loop); else a session of
    its own, closed at once (views run on loops of their own).
    """
    if shared:
        return await _probe_with(http_session(), llm, url, body, limit)
    async with aiohttp.ClientSession(cookie_jar=aiohttp.DummyCookieJar()) as session:
        return await _probe_with(session, llm, url, body, limit)


async def _probe_with(
    session: aiohttp.ClientSession, llm: LLMSettings, url: str, body: Any, limit: int
) -> Any:
    timeout = aiohttp.ClientTimeout(total=min(llm.timeout, PROBE_TIMEOUT))
    try:
        async with session.request(
            "GET" if body is None else "POST",
            url,
            json=body,
            headers=llm.auth_headers(),
            timeout=timeout,
            proxy=proxy_for(url),
            allow_redirects=False,
        ) as response:
            raw = b""  # read to its end (within the limit) so the connection is kept for the next request
            async for chunk in response.content.iter_chunked(64 * 1024):
                raw += chunk
                if len(raw) > limit:
                    break
            if response.status != 200 or len(raw) > limit:
                if len(raw) > limit:
                    logger.info("%s answered more than %d bytes; not read", url, limit)
                return None
    except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
        logger.debug("no answer from %s: %s", url, exc)
        return _NO_ANSWER
    try:
        return json.loads(raw)
    except (ValueError, RecursionError):
        return None


async def read_json(llm: LLMSettings, url: str, *, body: Any = None, limit: int = PROBE_BYTES) -> Any:
    """The JSON a bounded GET (POST with ``body``) of ``url`` answers, or ``None``; never raises."""
    data = await _probe(llm, url, body=body, limit=limit)
    return None if data is _NO_ANSWER else data


async def is_ollama(llm: LLMSettings, *, shared: bool = False) -> bool:
    """Whether the model server is Ollama: its ``GET /api/version`` answers ``{"version": ...}``.

    Asked once per base URL (again after :data:`PROBE_CACHE_SECONDS`, or next time when the
    server did not answer).
    """
    if not llm.base_url:
        return False
    cached = _kinds.get(llm.base_url)
    if cached is not None and time.monotonic() - cached[0] < PROBE_CACHE_SECONDS:
        return cached[1]
    data = await _probe(llm, f"{llm.root_url}/api/version", limit=4096, shared=shared)
    if data is _NO_ANSWER:
        return False
    found = isinstance(data, dict) and isinstance(data.get("version"), str)
    _kinds[llm.base_url] = (time.monotonic(), found)
    if found:
        logger.info(
            "the model server at %s is Ollama %s: chatting over /api/chat", llm.display_url, data["version"]
        )
    return found


async def ollama_show(llm: LLMSettings, model: str, *, shared: bool = False) -> dict[str, Any] | None:
    """What Ollama's ``POST /api/show`` says of ``model`` (model_info, parameters, capabilities)."""
    key = (llm.base_url, model)
    cached = _shown.get(key)
    if cached is not None and time.monotonic() - cached[0] < PROBE_CACHE_SECONDS:
        return cached[1]
    data = await _probe(llm, f"{llm.root_url}/api/show", body={"model": model}, shared=shared)
    if data is _NO_ANSWER:
        return None
    shown = data if isinstance(data, dict) else None
    _shown[key] = (time.monotonic(), shown)
    return shown


def forget() -> None:
    """Drop what the probes learned (tests)."""
    _kinds.clear()
    _shown.clear()
    windows.clear()

"""How the hub reaches a server: stdio child processes, Streamable HTTP and legacy SSE.

Lifecycle
---------
:func:`open_streams` is an async context manager yielding the ``(read, write)`` streams the
SDK's ``Client`` runs on. The hub's owner task enters and exits it (anyio requires a
transport to be closed in the task that opened it) and nobody else touches it.

* **stdio**: :func:`mcpclient.engine.stdio.stdio_streams` starts the child without a shell,
  from the checked command and argument list, in a process group of its own (under bubblewrap
  for a sandboxed server: :mod:`mcpclient.engine.sandbox`), reads its lines within bounds and
  watches it. Its stderr goes to a pipe read by a task of its own; every
  line reaches ``on_stderr`` (the hub keeps a bounded tail for the admin). Leaving closes
  stdin, then SIGTERM to the group, then SIGKILL; the reader gets a second to drain what the
  child wrote last.
* **Streamable HTTP**: one httpx2 client per connection (redirects off, the entry's headers,
  the connection's OAuth provider as its ``auth``), every answer bounded
  (:class:`~mcpclient.engine.inbound.BoundedBodies`: bodies and events). A
  :class:`FirstAnswer` hook may record how the server answered, for the hub's legacy SSE
  fallback; a :class:`ServerStream` hook tells when the stream for the server's own messages
  (the GET the SDK opens after ``initialized``) has been answered.
  Its connection pool sits behind a :class:`DeliveryGuard`: one failed POST is that request's
  error (readable), not the end of the session. It connects through the egress policy
  (:mod:`mcpclient.engine.egress`): the server's own host and port as declared, any other host
  checked.
* **SSE** (legacy): the SDK's ``sse_client`` with the same headers and auth, on a bounded client
  with the same egress policy.

:class:`EndWatcher` wraps a receive stream so the hub learns at once when it ends (child
exited, connection lost).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
from collections.abc import AsyncIterator, Callable, Collection
from typing import Any

import anyio
import httpx2
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import MCP_DEFAULT_SSE_READ_TIMEOUT, MCP_DEFAULT_TIMEOUT

from mcpclient.config.model import SSE, STDIO, ResolvedServer
from mcpclient.core import egress
from mcpclient.core.egress import Endpoint
from mcpclient.engine.egress import EgressTransport
from mcpclient.engine.inbound import (
    KEEPALIVE,
    MAX_MESSAGE_BYTES,
    AnswerRefused,
    BoundedBodies,
    bounded_client,
    posted,
)
from mcpclient.engine.sandbox import bwrap_argv
from mcpclient.engine.stdio import stdio_streams

logger = logging.getLogger("mcpclient.hub")

# What a server that only speaks legacy SSE answers a Streamable HTTP POST with (the spec's
# backwards-compatibility section names 404 and 405; some answer 400).
SSE_FALLBACK_STATUSES = frozenset({400, 404, 405})
STREAMABLE_HTTP_TYPES = ("application/json", "text/event-stream")
# A stderr line longer than this is kept cut (the tail is for people to read).
MAX_STDERR_LINE = 2000
# The JSON-RPC error code (implementation-defined server error range) of a request whose HTTP
# exchange broke after it was sent: it may or may not have run on the server.
HTTP_EXCHANGE_FAILED = -32099
# Requests that only read: one whose exchange broke is sent once more (nothing it does can run
# twice). Everything else (a tool call above all) is answered with HTTP_EXCHANGE_FAILED.
READ_ONLY_METHODS = frozenset(
    {
        "ping",
        "server/discover",
        "tools/list",
        "prompts/list",
        "prompts/get",
        "resources/list",
        "resources/templates/list",
        "resources/read",
        "completion/complete",
        "skills/list",  # the skills extension's (mcpclient.engine.skills)
        "skills/get",
    }
)


class FallbackFailed(Exception):
    """Neither Streamable HTTP nor the legacy SSE fallback connected; ``str()`` tells both."""


class FirstAnswer:
    """An httpx2 response hook remembering how the server answered the first handshake-era POST.

    The SDK turns an HTTP error into a JSON-RPC error and keeps the status to itself; the SSE
    fallback needs the status to tell "this server speaks legacy SSE" from "this server is down
    or refused us". The ``server/discover`` probe that comes first is skipped: a 2025 server
    refuses it even when it speaks Streamable HTTP, so what counts is its answer to
    ``initialize`` (or, on a 2026-07-28 server, to the first request after the probe).
    """

    def __init__(self) -> None:
        self.status: int | None = None
        self.content_type = ""

    async def __call__(self, response: httpx2.Response) -> None:
        """Record the status and content type of the first POST after the probe (the hook's signature)."""
        request = response.request
        if (
            self.status is None
            and request.method == "POST"
            and (request.headers.get("mcp-method") != "server/discover")
        ):
            self.status = response.status_code
            self.content_type = response.headers.get("content-type", "").partition(";")[0].strip().lower()

    @property
    def not_streamable_http(self) -> bool:
        """True when the answer says the URL does not speak Streamable HTTP (so SSE may)."""
        if self.status in SSE_FALLBACK_STATUSES:
            return True
        return (
            self.status is not None
            and 200 <= self.status < 300
            and self.status != 202
            and (self.content_type not in STREAMABLE_HTTP_TYPES)
        )

    def describe(self) -> str:
        """The answer in a few words, for logs and errors."""
        if self.status is not None and 200 <= self.status < 300:
            return f"Streamable HTTP got a {self.content_type or 'untyped'} answer"
        return f"Streamable HTTP answered HTTP {self.status}"


class ServerStream:
    """An httpx2 response hook telling when the server's own message stream has been answered.

    When a server gives a session id, the SDK opens a GET stream for the server's own messages
    (list changes, logs, answers resumed after a closed stream) in the background, after the
    ``initialized`` notification. Nothing orders that GET before the requests that follow, so
    on a busy machine it can arrive after a tool call's POST, and what the server sends before
    it is open (a ``list_changed`` sent at once, a reply it redirects to it) has nowhere to go.
    The hub waits for its answer (any status: a server without one says 405) before it calls
    the server ready. A server that gives no session id opens no such stream; nothing waits.
    """

    def __init__(self) -> None:
        self.expected = False
        self.answered = anyio.Event()
        self._hooks: list[Any] | None = None  # the client's response hooks, this one among them

    def attach(self, client: httpx2.AsyncClient) -> None:
        """Listen to ``client``'s answers until :meth:`settled` (then every answer is spared the hook)."""
        self._hooks = client.event_hooks["response"]
        self._hooks.append(self)

    async def __call__(self, response: httpx2.Response) -> None:
        """Note a session id on a POST's answer, and the GET's answer (the hook's signature)."""
        method = response.request.method
        if method == "GET":
            self.answered.set()
        elif method == "POST" and response.headers.get("mcp-session-id"):
            self.expected = True

    async def settled(self, timeout: float) -> bool:
        """Wait up to ``timeout`` s for the stream's answer when one is expected; False if none came.

        The hook leaves the client's hooks then: nothing later needs it."""
        try:
            if not self.expected or self.answered.is_set():
                return True
            with anyio.move_on_after(timeout):
                await self.answered.wait()
            return self.answered.is_set()
        finally:
            if self._hooks is not None and self in self._hooks:
                self._hooks.remove(self)


class DeliveryGuard(httpx2.AsyncBaseTransport):
    """The HTTP connection pool of a Streamable HTTP session, keeping one failed POST to itself.

    The SDK runs each request's POST in the transport's task group, so a connection reset on
    one POST would end the whole session and mark a healthy server unavailable. Here a POST
    whose connection could not be opened is sent once more (nothing was delivered, so it is
    safe); when that fails too the error goes up as before (the server is gone: the session
    ends and healing takes over). A POST whose exchange broke after it was sent (reset, protocol
    error, read timeout) is answered with a JSON-RPC error for that request id: the caller
    reads "may or may not have run", the session stays. A request that only reads
    (:data:`READ_ONLY_METHODS`) and broke without timing out is sent once more first, as
    HTTP clients resend idempotent requests.
    """

    def __init__(self, inner: httpx2.AsyncBaseTransport) -> None:
        self._inner = inner

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        """Send ``request``; for a POST, the retry and the error answer described above."""
        if request.method != "POST":
            return await self._inner.handle_async_request(request)
        try:
            return await self._inner.handle_async_request(request)
        except AnswerRefused as exc:
            return _error_answer(request, f"the server's answer was refused unread: {exc.reason}")
        except httpx2.ConnectError:
            logger.debug("POST to %s: could not connect; trying once more", request.url.host)
        except httpx2.TimeoutException as exc:
            return _broken_exchange(request, exc)
        except httpx2.TransportError as exc:
            if _method(request) not in READ_ONLY_METHODS:
                return _broken_exchange(request, exc)
            logger.debug("POST to %s broke (%s): sending it again", request.url.host, type(exc).__name__)
        try:
            return await self._inner.handle_async_request(request)
        except AnswerRefused as exc:
            return _error_answer(request, f"the server's answer was refused unread: {exc.reason}")
        except httpx2.ConnectError:
            raise
        except httpx2.TransportError as exc:
            return _broken_exchange(request, exc)

    async def aclose(self) -> None:
        """Close the connection pool."""
        await self._inner.aclose()


def _method(request: httpx2.Request) -> str | None:
    message = posted(request)
    return message.get("method") if message is not None and "id" in message else None


def _broken_exchange(request: httpx2.Request, exc: httpx2.TransportError) -> httpx2.Response:
    """The answer to a POST whose exchange broke after it was sent (see :class:`DeliveryGuard`)."""
    kind = type(exc).__name__
    logger.info(
        "POST to %s broke after it was sent (%s): answering the request with an error", request.url.host, kind
    )
    return _error_answer(
        request, f"the HTTP exchange with the server broke ({kind}); the request may or may not have run"
    )


def _error_answer(request: httpx2.Request, text: str) -> httpx2.Response:
    """A 502 answer carrying a JSON-RPC error for the request's id (no body for a notification)."""
    message = posted(request)
    if message is None or "id" not in message:
        return httpx2.Response(502, request=request)
    error = {"code": HTTP_EXCHANGE_FAILED, "message": text}
    return httpx2.Response(502, json={"jsonrpc": "2.0", "id": message["id"], "error": error}, request=request)


def http_client(
    headers: dict[str, str] | None, auth: httpx2.Auth | None, declared: Collection[Endpoint] = ()
) -> httpx2.AsyncClient:
    """An httpx2 client like the SDK's (its timeouts, redirects off) over a :class:`DeliveryGuard`,
    connecting where the egress policy allows (``declared``: the server's own endpoints)."""
    return httpx2.AsyncClient(
        headers=headers,
        auth=auth,
        timeout=httpx2.Timeout(MCP_DEFAULT_TIMEOUT, read=MCP_DEFAULT_SSE_READ_TIMEOUT),
        transport=DeliveryGuard(BoundedBodies(EgressTransport(declared=declared, limits=KEEPALIVE))),
    )


class EndWatcher:
    """The transport's receive stream, handed to the session as is, reporting when it ends.

    The session reads it directly (no extra task or hop per message); when the stream ends
    or breaks (child exited, connection lost) ``on_end`` runs at once, so the server is marked
    unavailable without waiting for the next call.
    """

    def __init__(self, inner: Any, on_end: Callable[[], None]) -> None:
        self._inner = inner
        self._on_end = on_end

    async def receive(self) -> Any:
        """The next message; the end of the stream is reported, then re-raised."""
        try:
            return await self._inner.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
            self._on_end()
            raise

    def __aiter__(self) -> EndWatcher:
        return self

    async def __anext__(self) -> Any:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def aclose(self) -> None:
        """Close the underlying stream."""
        await self._inner.aclose()

    def close(self) -> None:
        """Close the underlying stream without waiting."""
        self._inner.close()

    async def __aenter__(self) -> EndWatcher:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    def __getattr__(self, name: str) -> Any:
        # e.g. ``last_context``, read by the SDK's dispatcher when the transport provides it
        return getattr(self._inner, name)


def _declared(resolved: ResolvedServer) -> frozenset[Endpoint]:
    """The server's own host and port, reached as declared: an administrator's server's (mcp.json).
    A person's own server is only their word: its host is checked like any other."""
    return egress.declared(resolved.url) if resolved.config.owner_id is None else frozenset()


@contextlib.asynccontextmanager
async def open_streams(
    resolved: ResolvedServer,
    transport: str,
    *,
    name: str,
    timeout: float,
    init_timeout: float,
    auth: httpx2.Auth | None = None,
    answer: FirstAnswer | None = None,
    server_stream: ServerStream | None = None,
    on_stderr: Callable[[str], Any] = lambda line: None,
    on_exit: Callable[[int], Any] = lambda status: None,
) -> AsyncIterator[tuple[Any, Any]]:
    """The ``(read, write)`` streams of ``transport`` to the server ``resolved`` (see the module);
    a stdio server's stderr lines go to ``on_stderr``, its exit status to ``on_exit``."""
    if transport == STDIO:
        async with _stdio(resolved, name=name, on_stderr=on_stderr, on_exit=on_exit) as streams:
            yield streams
    elif transport == SSE:
        async with sse_client(
            resolved.url or "",
            headers=resolved.headers or None,
            timeout=init_timeout,
            sse_read_timeout=max(300.0, timeout),
            auth=auth,
            httpx_client_factory=functools.partial(bounded_client, declared=_declared(resolved)),
        ) as streams:
            yield streams
    else:
        # The server is reached as declared (its own host and port); any other host is checked.
        client = http_client(resolved.headers or None, auth, _declared(resolved))
        if answer is not None:
            client.event_hooks["response"].append(answer)
        if server_stream is not None:
            server_stream.attach(client)
        async with (
            client,
            streamable_http_client(
                resolved.url or "", http_client=client, max_sse_event_size=MAX_MESSAGE_BYTES
            ) as streams,
        ):
            yield streams


@contextlib.asynccontextmanager
async def _stdio(
    resolved: ResolvedServer, *, name: str, on_stderr: Callable[[str], Any], on_exit: Callable[[int], Any]
) -> AsyncIterator[tuple[Any, Any]]:
    read_fd, write_fd = os.pipe()
    errlog = os.fdopen(write_fd, "w")
    reader = asyncio.create_task(_read_stderr(read_fd, name, on_stderr), name=f"mcp-stderr:{name}")
    argv = [resolved.command or "", *resolved.args]
    if resolved.sandbox is not None:
        argv = bwrap_argv(resolved.sandbox, argv)
    statuses: list[int] = []
    try:
        async with stdio_streams(
            argv[0],
            argv[1:],
            env=dict(resolved.env),
            cwd=resolved.cwd,
            errlog=errlog,
            name=name,
            on_exit=statuses.append,
        ) as streams:
            errlog.close()  # the child holds its own copy; EOF comes when it exits
            yield streams
    finally:
        if not errlog.closed:
            errlog.close()
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(asyncio.shield(reader), 1.0)
        reader.cancel()
        if statuses:
            on_exit(statuses[0])  # its last stderr lines are in: what it left can be read together


async def _read_stderr(read_fd: int, name: str, on_stderr: Callable[[str], Any]) -> None:
    loop = asyncio.get_running_loop()
    stream = asyncio.StreamReader(limit=1 << 20)
    pipe = os.fdopen(read_fd, "rb", buffering=0)
    transport, _ = await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(stream), pipe)
    try:
        while True:
            try:
                line = await stream.readline()
            except ValueError:  # a line over the limit: keep reading
                continue
            if not line:
                return
            text = line.decode("utf-8", errors="replace").rstrip()
            on_stderr(text[:MAX_STDERR_LINE])
            logger.debug("[%s stderr] %s", name, text)
    finally:
        transport.close()

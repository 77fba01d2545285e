"""What a server sends, bounded before it is parsed: its size, its weight and whose request it is.

A message costs the event loop in proportion to what parsing builds: a 20 MB line, or 200,000
short strings in 2.6 MB, stall every session and turn of the process for a second or more (the
SDK's parser holds the GIL; no thread helps). So every message from a server is weighed first,
in C-speed passes over its bytes, and one over a limit is refused unread:

* :data:`MAX_MESSAGE_BYTES` (16 MiB): enough for the 5 MB a tool result may give the model,
  escaped, twice (servers send a text result both as content and as structured content), or a
  10 MB image in base64.
* :data:`MAX_MESSAGE_WEIGHT` (100,000) units of :func:`weight`: about one unit per string,
  separator or number, eight per object (the SDK validates a result three times over, and
  objects become models). A real ``tools/list`` page weighs about 130 units per tool; the
  limit keeps one message's parse and validation within tens of milliseconds.

A document the sign-in fetches on a server's word (OAuth metadata, a registration, a token) is
read whole within :data:`MAX_DOCUMENT_BYTES` (1 MiB) on a :func:`document_client`, which also
connects only where the egress policy allows (:mod:`mcpclient.engine.egress`).

A refused message is answered the way a reader needs: a response is replaced by a JSON-RPC error
for the request it answered (the caller reads at once why, instead of waiting out its time
limit); a request from the server is answered with an error for its id. Whose message it is
comes from its head or tail (:func:`envelope`): the SDKs write ``{"jsonrpc", "id", ...}``
(Python) or ``{..., "jsonrpc", "id"}`` (TypeScript). A message that says neither is dropped with
a warning. A message the SDK cannot parse (nested too deeply, a lone surrogate) is handled the
same way (:func:`parse`).
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import AsyncIterable, AsyncIterator, Collection
from dataclasses import dataclass
from typing import Any

import httpx2
import mcp_types as types
import pydantic
from mcp.shared._httpx_utils import MCP_DEFAULT_SSE_READ_TIMEOUT, MCP_DEFAULT_TIMEOUT
from mcp.shared.message import SessionMessage

from mcpclient.core.egress import Endpoint
from mcpclient.engine.egress import EgressTransport

logger = logging.getLogger("mcpclient.hub")

MAX_MESSAGE_BYTES = 16 * 1024 * 1024
# A document a server points BooCode at (OAuth metadata, a registration, a token) is far smaller.
MAX_DOCUMENT_BYTES = 1024 * 1024
DOCUMENT_TIMEOUT = httpx2.Timeout(30.0)
MAX_MESSAGE_WEIGHT = 100_000
# Below this size a message is parsed without weighing (the worst 64 KiB parses in a few ms).
WEIGH_FROM = 64 * 1024
# The JSON-RPC error code (implementation-defined server error range) of a message refused unread.
MESSAGE_REFUSED = -32098
# HTTP connections: the pool forgets an idle one after this many seconds, before the 5 s after
# which uvicorn and Node close theirs (httpx2's own default is those same 5 s): a request sent
# on a connection the server is closing at that moment breaks, and a tool call cannot be resent.
KEEPALIVE_SECONDS = 3.0
KEEPALIVE = httpx2.Limits(
    max_connections=100, max_keepalive_connections=20, keepalive_expiry=KEEPALIVE_SECONDS
)

_ID = rb'"id"\s*:\s*(-?\d{1,18}|"(?:[^"\\]|\\.){0,256}")'
_JSONRPC = rb'"jsonrpc"\s*:\s*"2\.0"\s*'
_HEAD = re.compile(rb"\s*\{\s*(?:" + _JSONRPC + rb",\s*)?(?:" + _ID + rb"\s*,\s*)?(\"method\")?")
_TAIL = re.compile(_ID + rb"\s*(?:,\s*" + _JSONRPC + rb")?\}\s*$")
_TAIL_BYTES = 512


@dataclass(frozen=True)
class Envelope:
    """Whose message a raw line is: its id (None when it cannot be told) and whether it is a request."""

    id: int | str | None
    request: bool


def weight(data: bytes) -> int:
    """About what parsing ``data`` costs, in small JSON values (see the module docstring).

    Escapes are dropped, the quotes counted (a string is two), and outside the strings each
    separator counts one and each object eight. Linear, in C: about 4 ms per MiB.
    """
    plain = data.replace(b"\\\\", b"").replace(b'\\"', b"")
    strings = plain.count(b'"') // 2
    if strings > MAX_MESSAGE_WEIGHT:
        return strings
    outside = b"".join(plain.split(b'"')[0::2])
    return strings + outside.count(b",") + 8 * outside.count(b"{")


def problem(data: bytes | bytearray, size: int | None = None) -> str | None:
    """Why the message ``data`` (of ``size`` bytes when only its start was kept) is refused, if it is."""
    size = len(data) if size is None else size
    if size > MAX_MESSAGE_BYTES:
        return f"a message of {_megabytes(size)}, over the {_megabytes(MAX_MESSAGE_BYTES)} limit"
    if size > WEIGH_FROM and (heavy := weight(bytes(data))) > MAX_MESSAGE_WEIGHT:
        return (
            f"a message of {_megabytes(size)} holding about {heavy:,} JSON values, "
            f"over the limit of {MAX_MESSAGE_WEIGHT:,}"
        )
    return None


def _megabytes(size: int) -> str:
    return f"{size / (1024 * 1024):.1f} MB"


def envelope(head: bytes, tail: bytes = b"") -> Envelope:
    """Whose message it is, from its first bytes (``head``) and its last (``tail``, if cut)."""
    tail = tail or head[-_TAIL_BYTES:]
    found = _HEAD.match(head)
    if found is not None and found.group(1) is not None:
        return Envelope(_id_value(found.group(1)), found.group(2) is not None)
    request = found is not None and found.group(2) is not None
    at_end = _TAIL.search(tail[-_TAIL_BYTES:])
    return Envelope(_id_value(at_end.group(1)) if at_end is not None else None, request)


def _id_value(raw: bytes) -> int | str | None:
    try:
        value = json.loads(raw)
    except ValueError:
        return None
    return value if isinstance(value, int | str) else None


def refusal(message_id: int | str, text: str, code: int = MESSAGE_REFUSED) -> SessionMessage:
    """A JSON-RPC error for ``message_id`` carrying ``text``."""
    error = types.ErrorData(code=code, message=text)
    return SessionMessage(types.JSONRPCError(jsonrpc="2.0", id=message_id, error=error))


@dataclass(frozen=True)
class Refused:
    """A message not handed to the session: what to answer, and to whom.

    ``to_session`` is the error that replaces a response (its caller reads it); ``to_server``
    answers a request of the server's. Both None: nobody can be told (the warning was logged).
    """

    reason: str
    to_session: SessionMessage | None = None
    to_server: SessionMessage | None = None


def refuse(server: str, reason: str, head: bytes, tail: bytes = b"") -> Refused:
    """What to do with a message refused for ``reason`` (see :class:`Refused`)."""
    whose = envelope(head, tail)
    if whose.id is None:
        logger.warning('MCP server "%s" sent %s that names no request; dropped', server, reason)
        return Refused(reason)
    logger.warning('MCP server "%s" sent %s; refused unread', server, reason)
    if whose.request:
        return Refused(reason, to_server=refusal(whose.id, f"refused by the client: {reason}"))
    return Refused(reason, to_session=refusal(whose.id, f"the server's answer was refused unread: {reason}"))


def parse(server: str, line: bytes) -> SessionMessage | Refused:
    """One whole message, weighed then parsed; a :class:`Refused` when it cannot be taken."""
    reason = problem(line)
    if reason is not None:
        return refuse(server, reason, line[:_TAIL_BYTES], line[-_TAIL_BYTES:])
    try:
        return SessionMessage(types.jsonrpc_message_adapter.validate_json(line, by_name=False))
    except pydantic.ValidationError as exc:
        detail = exc.errors()[0].get("msg", "invalid") if exc.errors() else "invalid"
        return refuse(
            server,
            f"a message that is not valid JSON-RPC ({detail[:200]})",
            line[:_TAIL_BYTES],
            line[-_TAIL_BYTES:],
        )


class LineReader:
    """Splits a byte stream into lines in linear time, keeping at most the message limit of one.

    :meth:`feed` returns the lines a chunk completes: whole lines as ``bytes``, and a line over
    :data:`MAX_MESSAGE_BYTES` as an :class:`Oversized` (its head, its tail, its size), its
    middle never kept.
    """

    def __init__(self, limit: int = MAX_MESSAGE_BYTES) -> None:
        self.limit = limit
        self._buffer = bytearray()
        self._over: Oversized | None = None

    def feed(self, chunk: bytes) -> list[bytes | Oversized]:
        """The lines ``chunk`` completes, in order."""
        lines: list[bytes | Oversized] = []
        start = 0
        while (end := chunk.find(b"\n", start)) >= 0:
            if not self._buffer and self._over is None and end - start <= self.limit:
                line = chunk[start:end]  # the usual case: a whole line inside one chunk
                lines.append(line[:-1] if line.endswith(b"\r") else line)
            else:
                self._take(chunk, start, end)
                lines.append(self._line())
            start = end + 1
        if start < len(chunk):
            self._take(chunk, start, len(chunk))
        return lines

    def _take(self, chunk: bytes, start: int, end: int) -> None:
        if self._over is not None:
            self._over.grow(chunk[start:end])
            return
        self._buffer += memoryview(chunk)[start:end]
        if len(self._buffer) > self.limit:
            self._over = Oversized(
                bytes(self._buffer[:_TAIL_BYTES]), bytes(self._buffer[-_TAIL_BYTES:]), len(self._buffer)
            )
            self._buffer = bytearray()

    def _line(self) -> bytes | Oversized:
        if self._over is not None:
            over, self._over = self._over, None
            return over
        line = bytes(self._buffer)
        self._buffer.clear()
        return line[:-1] if line.endswith(b"\r") else line


@dataclass
class Oversized:
    """A line over the limit: its first and last bytes and its size (the rest was not kept)."""

    head: bytes
    tail: bytes
    size: int

    def grow(self, more: bytes) -> None:
        self.size += len(more)
        if more:
            self.tail = (self.tail + more[-_TAIL_BYTES:])[-_TAIL_BYTES:]


# --- over HTTP -----------------------------------------------------------------------------------
class AnswerRefused(httpx2.RemoteProtocolError):
    """An HTTP answer refused before it was all read or parsed (its ``reason`` says why)."""

    def __init__(self, reason: str, request: httpx2.Request) -> None:
        super().__init__(f"the answer of {request.url.host} was refused unread: {reason}", request=request)
        self.reason = reason


class BoundedEvents(httpx2.SSEError):
    """An event of an event stream refused (over a limit): the stream ends with this error."""


class BoundedBodies(httpx2.AsyncBaseTransport):
    """Every answer read within the limits before anyone parses it.

    A body (decoded: a compressed one counts as it will be read) is read here in full, up to
    ``limit`` (:data:`MAX_MESSAGE_BYTES` unless told) and weighed (:func:`problem`); a larger or
    heavier one raises :class:`AnswerRefused` as soon as that is known. An event stream passes
    through event by event, each bounded the same way (:class:`_EventStream`), unless ``events``
    is false: a document (OAuth metadata, a token) is read whole whatever its type says.
    """

    def __init__(
        self, inner: httpx2.AsyncBaseTransport, *, limit: int = MAX_MESSAGE_BYTES, events: bool = True
    ) -> None:
        self._inner = inner
        self._limit = min(limit, MAX_MESSAGE_BYTES)
        self._events = events

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        """Send ``request``; its answer bounded (see the class docstring)."""
        response = await self._inner.handle_async_request(request)
        if self._events and response.headers.get("content-type", "").startswith("text/event-stream"):
            assert isinstance(response.stream, httpx2.AsyncByteStream)
            response.stream = _EventStream(response.stream, _request_id(request))
            return response
        declared = response.headers.get("content-length", "")
        encoded = "content-encoding" in response.headers
        try:
            if declared.isdigit() and int(declared) > self._limit:
                raise AnswerRefused(_over(self._limit, int(declared)), request)
            body = await (_read_bounded if encoded else _read_plain)(response, request, self._limit)
        finally:
            assert isinstance(response.stream, httpx2.AsyncByteStream)
            await response.stream.aclose()  # (the connection goes back to the pool)
        if not encoded:  # the usual answer: passed on as it came, its body read
            response.stream = httpx2.ByteStream(body)
            return response
        headers = [
            (key, value)
            for key, value in response.headers.multi_items()
            if key.lower() not in ("content-encoding", "content-length", "transfer-encoding")
        ]
        return httpx2.Response(
            response.status_code,
            headers=headers,
            content=body,
            request=request,
            extensions=response.extensions,
        )

    async def aclose(self) -> None:
        """Close the connection pool."""
        await self._inner.aclose()


def posted(request: httpx2.Request) -> dict[str, Any] | None:
    """The JSON-RPC message a POST carries (None for anything else)."""
    if request.method != "POST":
        return None
    try:
        message = json.loads(request.content)
    except (ValueError, httpx2.RequestNotRead):
        return None
    return message if isinstance(message, dict) else None


def _request_id(request: httpx2.Request) -> int | str | None:
    """The id of the JSON-RPC request a POST carries (None for a notification or anything else)."""
    message = posted(request)
    found = message.get("id") if message is not None and "method" in message else None
    return found if isinstance(found, int | str) else None


def _over(limit: int, size: int) -> str:
    """Why a body of ``size`` bytes is refused under ``limit``."""
    if limit == MAX_MESSAGE_BYTES:
        return problem(b"", size) or "too large"
    return f"a document of {_megabytes(size)}, over the {_megabytes(limit)} limit"


async def _read_bounded(response: httpx2.Response, request: httpx2.Request, limit: int) -> bytes:
    """The decoded body of ``response``, refused (:class:`AnswerRefused`) past the limits."""
    reading = httpx2.Response(
        response.status_code, headers=response.headers, stream=response.stream, request=request
    )
    return await _bounded(reading.aiter_bytes(), request, limit)


async def _read_plain(response: httpx2.Response, request: httpx2.Request, limit: int) -> bytes:
    """The body of ``response``, sent without a content encoding, bounded as :func:`_read_bounded`."""
    assert isinstance(response.stream, httpx2.AsyncByteStream)
    return await _bounded(response.stream, request, limit)


async def _bounded(chunks: AsyncIterable[bytes], request: httpx2.Request, limit: int) -> bytes:
    body = bytearray()
    async for chunk in chunks:
        body += chunk
        if len(body) > limit:
            what = "a message" if limit == MAX_MESSAGE_BYTES else "a document"
            raise AnswerRefused(f"{what} over the {_megabytes(limit)} limit", request)
    reason = problem(body)
    if reason is not None:
        raise AnswerRefused(reason, request)
    return bytes(body)


class _EventStream(httpx2.AsyncByteStream):
    """An event stream passed on whole event by whole event, each bounded (see :class:`BoundedBodies`).

    An event over the limits ends the stream: with an error event for ``request_id`` when the
    stream answers a request (its caller reads why, the session goes on), else with
    :class:`BoundedEvents`.
    """

    def __init__(self, inner: httpx2.AsyncByteStream, request_id: int | str | None) -> None:
        self._inner = inner
        self._request_id = request_id
        self._pending = bytearray()  # the event so far (since the last blank line)
        self._carry = b""  # a "\r" that may start a "\r\n" in the next chunk

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self._inner:
            data, self._carry = self._carry + chunk, b""
            if data.endswith(b"\r"):
                data, self._carry = data[:-1], b"\r"
            start = max(0, len(self._pending) - 1)  # a blank line may straddle two chunks
            self._pending += data.replace(b"\r\n", b"\n")
            end = self._pending.rfind(b"\n\n", start)
            if end >= 0:
                events = bytes(self._pending[: end + 2])
                del self._pending[: end + 2]
                for event in events.split(b"\n\n")[:-1]:
                    if (reason := problem(event)) is not None:
                        yield self._refused(reason)
                        return
                yield events
            if len(self._pending) > MAX_MESSAGE_BYTES:
                yield self._refused(f"an event over the {_megabytes(MAX_MESSAGE_BYTES)} limit")
                return
        if self._pending or self._carry:
            yield bytes(self._pending) + self._carry

    def _refused(self, reason: str) -> bytes:
        if self._request_id is None:
            raise BoundedEvents(reason)
        logger.warning("an event answering request %r was refused unread: %s", self._request_id, reason)
        error = {"code": MESSAGE_REFUSED, "message": f"the server's answer was refused unread: {reason}"}
        data = json.dumps({"jsonrpc": "2.0", "id": self._request_id, "error": error})
        return b"event: message\ndata: " + data.encode() + b"\n\n"

    async def aclose(self) -> None:
        await self._inner.aclose()


def bounded_client(
    headers: dict[str, str] | None = None,
    timeout: httpx2.Timeout | None = None,
    auth: httpx2.Auth | None = None,
    *,
    declared: Collection[Endpoint] = (),
) -> httpx2.AsyncClient:
    """An httpx2 client like the SDK's (its timeouts, redirects off) whose answers are bounded.

    It connects only where the egress policy allows (:mod:`mcpclient.engine.egress`), ``declared``
    (the server's own endpoints) as the administrator wrote them.
    """
    return httpx2.AsyncClient(
        headers=headers,
        auth=auth,
        timeout=timeout or httpx2.Timeout(MCP_DEFAULT_TIMEOUT, read=MCP_DEFAULT_SSE_READ_TIMEOUT),
        transport=BoundedBodies(EgressTransport(declared=declared, limits=KEEPALIVE)),
    )


def document_client(declared: Collection[Endpoint] = ()) -> httpx2.AsyncClient:
    """A client for one document a server points at (OAuth metadata, a token, a registration).

    Its answers are read whole within :data:`MAX_DOCUMENT_BYTES` (never passed on as a stream),
    within :data:`DOCUMENT_TIMEOUT`, redirects not followed, and only where the egress policy
    allows, ``declared`` as written.
    """
    return httpx2.AsyncClient(
        timeout=DOCUMENT_TIMEOUT,
        transport=BoundedBodies(
            EgressTransport(declared=declared, limits=KEEPALIVE), limit=MAX_DOCUMENT_BYTES, events=False
        ),
    )

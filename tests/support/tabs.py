"""One browser tab on a conversation's websocket: in the test process, or against a live Daphne.

Two transports, one tab:

- ``Tab(conversation, cookie)``: Channels' ``WebsocketCommunicator`` on the project's ASGI
  application, in the test's own event loop (``tab.ws`` is the communicator, for raw frames
  and close codes);
- ``Tab.live(port, account)``: a real websocket (aiohttp) to Daphne on 127.0.0.1:``port``,
  ``account`` as :func:`tests.support.live.create_accounts` returns it.

Lifecycle: ``await tab.open()`` connects and reads the greeting the server sends every new
socket, the ``history`` frame (returned, and kept as ``tab.history``) and then the first
``status`` frame; ``await tab.close()`` disconnects. ``async with tab:`` does both. A tab
opened with ``take_status=False`` leaves that first status unread, for a test that waits for
the status line to say something it may already say.

Reading: frames are read in the order the server sent them, and each is read once. ``next``
returns the first frame after the last one it returned that matches; the frames it passes
over are skipped for good. ``until_text`` reads ahead without taking anything. Every frame
read after the greeting is also appended to ``frames``, a log the test may inspect or clear.
A wait that runs out fails with the frames last seen.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections import deque
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
from channels.testing import WebsocketCommunicator

from boocode.asgi import application
from tests.support.accounts import conversation_of, login

IN_PROCESS_WAIT = 10.0  # seconds a frame may take in process
LIVE_WAIT = 30.0  # ... and from a live Daphne (another process, maybe a loaded machine)


class LiveSocket:
    """A websocket to a live server (aiohttp) with the methods of Channels' communicator a tab uses."""

    def __init__(self, url: str, headers: dict[str, str]) -> None:
        self.url, self.headers = url, headers
        self._session: aiohttp.ClientSession | None = None
        self._socket: aiohttp.ClientWebSocketResponse | None = None

    async def connect(self, timeout: float = LIVE_WAIT) -> tuple[bool, None]:
        """Open the socket (a refused handshake raises ``aiohttp.WSServerHandshakeError``)."""
        self._session = aiohttp.ClientSession()
        try:
            async with asyncio.timeout(timeout):
                self._socket = await self._session.ws_connect(self.url, headers=self.headers)
        except BaseException:
            await self._session.close()
            raise
        return True, None

    async def send_json_to(self, data: Any) -> None:
        assert self._socket is not None, "not connected"
        await self._socket.send_json(data)

    async def send_to(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        """Send a raw text or binary frame."""
        assert self._socket is not None, "not connected"
        if text_data is not None:
            await self._socket.send_str(text_data)
        if bytes_data is not None:
            await self._socket.send_bytes(bytes_data)

    async def receive_json_from(self, timeout: float = LIVE_WAIT) -> Any:
        """The next text frame, decoded; fails if the server closes the socket first."""
        assert self._socket is not None, "not connected"
        async with asyncio.timeout(timeout):
            message = await self._socket.receive()
        assert message.type == aiohttp.WSMsgType.TEXT, f"the socket ended: {message.type.name} {message.data}"
        return json.loads(message.data)

    async def disconnect(self, code: int = 1000, timeout: float = LIVE_WAIT) -> None:
        if self._socket is not None:
            # The server may be gone already (a test killed it): there is nothing left to close.
            with contextlib.suppress(aiohttp.ClientError, OSError, TimeoutError):
                async with asyncio.timeout(timeout):
                    await self._socket.close(code=code)
        if self._session is not None:
            await self._session.close()


class Tab:
    """One browser tab: a websocket to a conversation (see the module's docstring)."""

    def __init__(
        self,
        conversation_id: int,
        cookie: str | None,
        *,
        port: int | None = None,
        take_status: bool = True,
    ) -> None:
        """In process, or (``port``) to the live Daphne on 127.0.0.1:``port``."""
        path = f"/ws/conversations/{conversation_id}/"
        self.conversation_id, self.cookie = conversation_id, cookie
        self.ws: Any
        if port is None:
            headers = [(b"origin", b"http://127.0.0.1"), (b"host", b"127.0.0.1")]
            if cookie:
                headers.append((b"cookie", f"sessionid={cookie}".encode()))
            self.ws = WebsocketCommunicator(application, path, headers=headers)
            self.wait, self._connect_within = IN_PROCESS_WAIT, 5.0
        else:
            origin = f"http://127.0.0.1:{port}"
            live_headers = {"Origin": origin, **({"Cookie": f"sessionid={cookie}"} if cookie else {})}
            self.ws = LiveSocket(f"ws://127.0.0.1:{port}{path}", live_headers)
            self.wait, self._connect_within = LIVE_WAIT, LIVE_WAIT
        self.take_status = take_status
        self.history: dict[str, Any] = {}
        self.frames: list[dict[str, Any]] = []
        self._unread: deque[dict[str, Any]] = deque()  # read ahead (until_text), not yet passed by next

    @classmethod
    def live(cls, port: int, account: dict[str, Any], *, take_status: bool = True) -> Tab:
        """A tab on the live Daphne at ``port``, as ``account`` (``{"cookie", "conversation"}``)."""
        return cls(account["conversation"], account["cookie"], port=port, take_status=take_status)

    # --- lifecycle -------------------------------------------------------------------------
    async def open(self) -> dict[str, Any]:
        """Connect and read the greeting (``history``, then the first ``status``): the history."""
        connected, _ = await self.ws.connect(timeout=self._connect_within)
        assert connected
        self.history = await self.next("history")
        if self.take_status:
            await self.next("status")
        self.frames.clear()
        return self.history

    async def close(self) -> None:
        # Channels' default waits 1 s for the consumer to finish; a loaded machine needs longer.
        await self.ws.disconnect(timeout=30)

    async def __aenter__(self) -> Tab:
        await self.open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # --- frames ----------------------------------------------------------------------------
    async def send(self, frame: dict[str, Any]) -> None:
        await self.ws.send_json_to(frame)

    async def next(
        self,
        kind: str | tuple[str, ...] | None = None,
        within: float | None = None,
        *,
        timeout: float | None = None,
        **match: Any,
    ) -> dict[str, Any]:
        """The next frame of type ``kind`` (one of them, for a tuple) whose keys equal ``match``.

        ``kind=None``: the next frame of any type but ``status``. Frames before it are skipped.
        ``within`` (or ``timeout``, the same): seconds to wait, by default the transport's.
        """
        kinds = (kind,) if isinstance(kind, str) else kind
        seconds = within if within is not None else timeout if timeout is not None else self.wait
        try:
            async with asyncio.timeout(seconds):
                while True:
                    frame = self._unread.popleft() if self._unread else await self._read(seconds)
                    wanted = frame["type"] in kinds if kinds is not None else frame["type"] != "status"
                    if wanted and all(frame.get(key) == value for key, value in match.items()):
                        return frame
        except TimeoutError:
            raise AssertionError(
                f"no {kind or 'non-status'} frame {match or ''} within {seconds} s; last: {self._seen()}"
            ) from None

    async def next_of(self, kinds: tuple[str, ...], within: float | None = None) -> dict[str, Any]:
        """The next frame of any of ``kinds`` (``next`` with a tuple)."""
        return await self.next(kinds, within)

    async def until_turn_end(self) -> dict[str, Any]:
        """The next ``turn_end`` frame."""
        return await self.next("turn_end")

    async def turn(self, text: str, within: float | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
        """Send ``text``; the ``tool_result`` frame's call and the ``turn_end`` frame."""
        await self.send({"type": "user_message", "text": text})
        result = await self.next("tool_result", within)
        return result["call"], await self.next("turn_end", within)

    async def until_text(self, text: str, within: float | None = None) -> None:
        """Read on until the ``text_delta`` frames not yet passed by ``next`` add up to ``text``.

        Nothing is taken: ``next`` still returns the frames read here.
        """
        seconds = within if within is not None else self.wait
        try:
            async with asyncio.timeout(seconds):
                while "".join(f["text"] for f in self._unread if f["type"] == "text_delta") != text:
                    self._unread.append(await self._read(seconds))
        except TimeoutError:
            raise AssertionError(f"not {text!r} within {seconds} s; last: {self._seen()}") from None

    async def _read(self, seconds: float) -> dict[str, Any]:
        frame = await self.ws.receive_json_from(timeout=seconds)
        self.frames.append(frame)
        return frame

    def _seen(self) -> list[str]:
        return [json.dumps(frame)[:300] for frame in self.frames[-8:]]


async def finished(tab: Tab) -> dict[str, Any]:
    """Wait for the end of a complete turn and the ``conversation`` frame that follows it: its object."""
    end = await tab.until_turn_end()
    assert end["status"] == "complete", end
    return (await tab.next("conversation"))["conversation"]


async def logged_in_tab(username: str = "alice", conversation: int | None = None, **options: Any) -> Tab:
    """The preamble of a websocket test: ``username`` logged in (created if new), a tab on
    ``conversation`` (default: a new conversation of theirs), opened (its greeting read).

    ``tab.conversation_id`` and ``tab.cookie`` are the conversation and the session, for a
    second tab or a read of what was stored; ``options`` go to :class:`Tab` (``take_status``).
    """
    cookie = await login(username)
    if conversation is None:
        conversation = await conversation_of(username)
    tab = Tab(conversation, cookie, **options)
    await tab.open()
    return tab


@contextlib.asynccontextmanager
async def logged_in(
    username: str = "alice", conversation: int | None = None, **options: Any
) -> AsyncIterator[Tab]:
    """:func:`logged_in_tab` for an ``async with``: the tab is closed when the block ends."""
    tab = await logged_in_tab(username, conversation, **options)
    try:
        yield tab
    finally:
        await tab.close()

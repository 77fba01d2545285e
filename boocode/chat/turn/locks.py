"""One turn per conversation across web processes: a Redis lock that also says who runs the turn.

Used only with the Redis channel layer (BOOCODE_REDIS_URL, several Daphne processes); the
embedded default (in-memory layer, one process) keeps the in-process registry alone. Why Redis
and not a PostgreSQL advisory lock: docs/architecture.md ("One turn per conversation").

Keys (under the channel layer's prefix, so tests and deployments sharing a Redis stay apart):

- ``<prefix>:turn:<conversation>``: the lock, ``{"turn": id, "channel": owner}``, set with
  ``NX`` and a TTL of BOOCODE_TURN_LOCK_TTL seconds, renewed by the owner every third of it.
- ``<prefix>:turn-open:<conversation>``: the running turn's id, no TTL. A normal end deletes it
  with the lock (one script). Found without a lock, it means the owner died mid-turn: whoever
  sees it first (a new turn's start, a tab connecting, each process's periodic sweep) claims
  the lock, settles the conversation (:func:`boocode.chat.turn.conversations.close_interrupted`) and then
  deletes both.

Start: the first use in a process creates its control channel (a channel-layer channel of this
process) and a task reading it; the task hands each message to the handler the registry gave.
Locks held are renewed by one task, all in one script; a lock found lost (Redis restarted, the process stalled
past the TTL) is reported to the registry, which stops that turn rather than let two write.
Stop: the tasks are cancelled with the loop; nothing needs cleaning up, the TTL does that.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from channels.layers import get_channel_layer
from django.conf import settings

logger = logging.getLogger(__name__)

Handler = Callable[[dict[str, Any]], Awaitable[None]]

# KEYS: lock, open marker. ARGV: lock value, TTL in ms, turn id.
# Returns {1, previous open marker or ""} when taken, {0, current lock value} when held.
_ACQUIRE = """
local held = redis.call('get', KEYS[1])
if held then return {0, held} end
local previous = redis.call('get', KEYS[2]) or ''
redis.call('set', KEYS[1], ARGV[1], 'PX', ARGV[2])
redis.call('set', KEYS[2], ARGV[3])
return {1, previous}
"""
# KEYS: lock, open marker. ARGV: lock value, TTL in ms. Takes the lock only to settle a dead turn.
_CLAIM_INTERRUPTED = """
if redis.call('exists', KEYS[1]) == 1 then return '' end
local previous = redis.call('get', KEYS[2])
if not previous then return '' end
redis.call('set', KEYS[1], ARGV[1], 'PX', ARGV[2])
return previous
"""
# KEYS: lock, open marker. ARGV: lock value, turn id whose marker goes too.
_RELEASE = """
if redis.call('get', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('del', KEYS[1])
if redis.call('get', KEYS[2]) == ARGV[2] then redis.call('del', KEYS[2]) end
return 1
"""
# KEYS: every lock held. ARGV: TTL in ms, then each lock's value. One round trip for all of
# them (one at a time, a busy process fell behind its TTLs under load and lost locks it held).
_RENEW = """
local kept = {}
for i, key in ipairs(KEYS) do
  if redis.call('get', key) == ARGV[i + 1] then
    kept[i] = redis.call('pexpire', key, ARGV[1])
  else
    kept[i] = 0
  end
end
return kept
"""


def _reconnect_once() -> Any:
    """A connection of the pool found broken (Redis restarted since it was opened) is opened
    again and the command sent once more; a command never reached a broken connection's server.
    (redis is imported here, by a process that uses it: about 80 ms of start-up otherwise.)"""
    import redis.asyncio as redis
    from redis.asyncio.retry import Retry
    from redis.backoff import NoBackoff

    return Retry(NoBackoff(), 1, supported_errors=(redis.ConnectionError,))


@dataclass(frozen=True)
class Holder:
    """Who runs a conversation's turn: its id and the control channel of its process."""

    turn_id: str
    channel: str


@dataclass(frozen=True)
class Claim:
    """A lock taken: ``interrupted`` is the id of a turn whose process died holding it, if any."""

    value: str
    interrupted: str | None


class TurnLocked(Exception):
    """Another turn holds the conversation (``holder`` says which, when readable)."""

    def __init__(self, holder: Holder | None) -> None:
        super().__init__(holder.turn_id if holder else "")
        self.holder = holder


def _holder(raw: Any) -> Holder | None:
    try:
        data = json.loads(raw)
        return Holder(str(data["turn"]), str(data["channel"]))
    except (TypeError, ValueError, KeyError):
        return None


class SharedTurns:
    """The Redis side of the turn registry for one process (see the module docstring)."""

    def __init__(self, address: str, prefix: str, ttl: float, handler: Handler) -> None:
        import redis.asyncio as redis

        self._client = redis.Redis.from_url(address, retry=_reconnect_once())
        self._prefix = prefix
        self.ttl = ttl
        self._ttl_ms = max(1, int(ttl * 1000))
        self._handler = handler
        self._channel: str | None = None
        self._channel_ready: asyncio.Lock | None = None
        self._held: dict[int, tuple[str, str]] = {}  # conversation -> (lock value, turn id)
        self._on_lost: Callable[[int], object] | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._replies: dict[str, asyncio.Future[dict[str, Any]]] = {}  # request id -> its answer
        self._acquire = self._client.register_script(_ACQUIRE)
        self._claim = self._client.register_script(_CLAIM_INTERRUPTED)
        self._release = self._client.register_script(_RELEASE)
        self._renew = self._client.register_script(_RENEW)

    def _lock_key(self, conversation_id: int) -> str:
        return f"{self._prefix}:turn:{conversation_id}"

    def _open_key(self, conversation_id: int) -> str:
        return f"{self._prefix}:turn-open:{conversation_id}"

    def on_lost(self, callback: Callable[[int], object]) -> None:
        """Call ``callback(conversation_id)`` when a held lock turns out to be gone."""
        self._on_lost = callback

    async def channel(self) -> str:
        """This process's control channel (created, with its reader and the renewer, on first use)."""
        if self._channel is not None:
            return self._channel
        if self._channel_ready is None:
            self._channel_ready = asyncio.Lock()
        async with self._channel_ready:
            if self._channel is None:
                layer = get_channel_layer()
                # Subscribed here, before its name is published in any lock: over Redis pub/sub
                # a message sent to a channel nobody listens to yet is lost.
                name = await layer.new_channel()
                self._tasks = [
                    asyncio.create_task(self._read(name), name="turn-control"),
                    asyncio.create_task(self._keep(), name="turn-locks"),
                ]
                self._channel = name
        return self._channel

    async def acquire(self, conversation_id: int, turn_id: str) -> Claim:
        """Take the conversation's lock for ``turn_id``; raises :class:`TurnLocked` when held."""
        value = json.dumps({"turn": turn_id, "channel": await self.channel()})
        keys = [self._lock_key(conversation_id), self._open_key(conversation_id)]
        taken, detail = await self._acquire(keys=keys, args=[value, self._ttl_ms, turn_id])
        if not taken:
            raise TurnLocked(_holder(detail))
        self._held[conversation_id] = (value, turn_id)
        return Claim(value, detail.decode() if detail else None)

    async def release(self, conversation_id: int, claim: Claim, turn_id: str) -> None:
        """Give the lock back (and drop the open marker): another turn may start at once."""
        if self._held.get(conversation_id, (None,))[0] == claim.value:
            del self._held[conversation_id]
        keys = [self._lock_key(conversation_id), self._open_key(conversation_id)]
        await self._release(keys=keys, args=[claim.value, turn_id])

    async def holder(self, conversation_id: int) -> Holder | None:
        """Who runs the conversation's turn now, if anyone (settling a dead one counts too)."""
        return _holder(await self._client.get(self._lock_key(conversation_id)))

    async def claim_interrupted(self, conversation_id: int) -> tuple[Claim, str] | None:
        """Take the lock of a conversation whose turn's process died: ``(claim, dead turn id)``."""
        value = json.dumps({"turn": f"settling-{uuid.uuid4().hex}", "channel": await self.channel()})
        keys = [self._lock_key(conversation_id), self._open_key(conversation_id)]
        dead = await self._claim(keys=keys, args=[value, self._ttl_ms])
        if not dead:
            return None
        return Claim(value, None), dead.decode()

    async def interrupted(self) -> list[int]:
        """Conversations with an open marker and no lock: their turn's process died."""
        found: list[int] = []
        async for key in self._client.scan_iter(match=self._open_key(0)[:-1] + "*", count=500):
            with contextlib.suppress(ValueError):
                conversation_id = int(key.decode().rsplit(":", 1)[1])
                if not await self._client.exists(self._lock_key(conversation_id)):
                    found.append(conversation_id)
        return found

    async def send(self, channel: str, message: dict[str, Any]) -> None:
        """Send ``message`` to a channel (another process's control channel, a consumer's)."""
        await get_channel_layer().send(channel, message)

    async def request(self, channel: str, message: dict[str, Any], timeout: float) -> dict[str, Any] | None:
        """Send ``message`` and wait for the answer (None: none came).

        The answer comes to this process's control channel as a ``turn.reply`` with the
        request's id: no channel is opened per request (a pub/sub layer would keep each one).
        """
        request_id = uuid.uuid4().hex
        waiting: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._replies[request_id] = waiting
        try:
            reply = {"reply": await self.channel(), "request": request_id}
            await get_channel_layer().send(channel, {**message, **reply})
            async with asyncio.timeout(timeout):
                return await waiting
        except TimeoutError:
            return None
        finally:
            self._replies.pop(request_id, None)

    async def _read(self, name: str) -> None:
        layer = get_channel_layer()
        while True:
            message = await layer.receive(name)
            if message.get("type") == "turn.reply":
                waiting = self._replies.get(message.get("request", ""))
                if waiting is not None and not waiting.done():
                    waiting.set_result(message)
                continue
            try:
                await self._handler(message)
            except Exception:  # one bad message must not stop this process hearing the next
                logger.exception("could not handle the turn control message %s", message.get("type"))

    async def _keep(self) -> None:
        while True:
            await asyncio.sleep(self.ttl / 3)
            held = list(self._held.items())
            if not held:
                continue
            keys = [self._lock_key(conversation_id) for conversation_id, _ in held]
            try:
                kept = await self._renew(keys=keys, args=[self._ttl_ms, *(value for _, (value, _t) in held)])
            except Exception:  # Redis unreachable: try again next round, before the TTL ends
                logger.warning("could not renew the turn locks of %d conversation(s)", len(held))
                continue
            for (conversation_id, (value, _turn)), renewed in zip(held, kept, strict=True):
                if not renewed and self._held.get(conversation_id, (None,))[0] == value:
                    del self._held[conversation_id]
                    logger.error(
                        "conversation %s: the turn lock was lost; stopping its turn", conversation_id
                    )
                    if self._on_lost is not None:
                        self._on_lost(conversation_id)


_shared: dict[tuple[int, str, str], SharedTurns] = {}


def shared_turns(handler: Handler) -> SharedTurns | None:
    """This loop's :class:`SharedTurns` when the channel layer is Redis; None in the embedded mode."""
    layer = settings.CHANNEL_LAYERS.get("default", {})
    config = layer.get("CONFIG", {})
    if "hosts" not in config:  # (the Redis layers, signed or not, name their hosts)
        return None
    host = config.get("hosts", ["redis://127.0.0.1:6379"])[0]
    address = host["address"] if isinstance(host, dict) else host
    if not isinstance(address, str):
        return None
    prefix = config.get("prefix", "asgi")
    # A client per event loop: tests run one loop each, Daphne one for its life.
    key = (id(asyncio.get_running_loop()), address, prefix)
    shared = _shared.get(key)
    if shared is None:
        shared = _shared[key] = SharedTurns(address, prefix, settings.TURN_LOCK_TTL, handler)
    return shared

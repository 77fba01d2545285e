"""The Redis channel layer with every message signed: Redis is a trust boundary.

Whoever can publish to the Redis that carries the hub's messages could otherwise run a person's
"perUser" tools as that person, and the chat's, put frames on a person's page. Here every
message is sealed by its sender with an HMAC-SHA256 over what it says, whom it is for (the
channel or group), when it was sent and a random nonce, under a key every process of the
deployment shares (derived from ``SECRET_KEY``, see settings.py). A receiver opens it before
anything reads it and refuses, with a warning in the log, a message that is:

- not sealed, or sealed with another key, or altered;
- sealed for another channel or for a group the receiving channel is not in;
- older than :data:`MAX_AGE` seconds, or from further in the future than that (clocks differ);
- seen before on the same channel (``replay_window``; the hub's layer keeps the nonces it saw
  for :data:`MAX_AGE`).

A refused message is skipped: the receiver waits for the next one, so nothing an outsider
publishes can end a consumer (a websocket's, the worker's). Signing is not encryption: Redis
still sees the messages, so it must be private and authenticated (docs/deployment.md).
"""

from __future__ import annotations

import hashlib
import hmac
import itertools
import logging
import os
import time
from typing import Any

import msgpack
from channels_redis.pubsub import RedisPubSubChannelLayer

logger = logging.getLogger("mcpclient.worker")

MAX_AGE = 60.0  # seconds a sealed message stays good (the clocks of the processes may differ a little)
_SEALED = "__sealed"  # the envelope's key: the sealed body
_MAC = "__mac"


def layer_key(secret_key: str) -> bytes:
    """The channel layer's signing key, derived from Django's ``SECRET_KEY`` (shared by every process)."""
    return hmac.new(secret_key.encode(), b"boocode.channel-layer.v1", hashlib.sha256).digest()


class SignedRedisPubSubChannelLayer(RedisPubSubChannelLayer):
    """Channels' Redis pub/sub layer whose messages are sealed and opened (see the module's docstring).

    ``signing_key``: the key (bytes or text); ``replay_window``: refuse a nonce seen before on
    the same channel (the hub's traffic; the chat's high-volume frames only check age).
    """

    def __init__(
        self, *args: Any, signing_key: bytes | str, replay_window: bool = False, **kwargs: Any
    ) -> None:
        super().__init__(*args, **kwargs)
        if not signing_key:
            raise ValueError("the signed channel layer needs a signing_key")
        self._key = signing_key.encode() if isinstance(signing_key, str) else bytes(signing_key)
        self._replay_window = replay_window
        self._seen: dict[tuple[str, bytes], float] = {}  # (channel, nonce) -> when it stops mattering
        self._next_prune = 0.0
        # Nonces: this layer's random prefix and a count (unique without a system call each).
        self._prefix = os.urandom(12)
        self._count = itertools.count()

    # --- sending ------------------------------------------------------------------------------
    def seal(self, to: str, message: dict[str, Any]) -> dict[str, Any]:
        """The envelope that carries ``message`` to ``to`` (a channel, or a group's Redis channel)."""
        body = msgpack.packb([to, time.time(), self._nonce(), message], use_bin_type=True)
        return {"type": message.get("type"), _SEALED: body, _MAC: self._mac(body)}

    async def send(self, channel: str, message: dict[str, Any]) -> None:
        await self._get_layer().send(channel, self.seal(channel, message))

    async def group_send(self, group: str, message: dict[str, Any]) -> None:
        layer = self._get_layer()
        await layer.group_send(group, self.seal(layer._get_group_channel_name(group), message))

    async def group_listeners(self, group: str) -> int:
        """How many connections to Redis are subscribed to ``group`` now (``PUBSUB NUMSUB``).

        A process that dies loses its connection, and Redis its subscriptions, at once: a group
        only a dead process had joined counts 0 before any heartbeat is missed.
        """
        layer = self._get_layer()
        channel = layer._get_group_channel_name(group)
        shard = layer._get_shard(channel)
        async with shard._lock:  # the shard's connection, as its own publish uses it
            shard._ensure_redis()
            counts = await shard._redis.pubsub_numsub(channel)
        return int(counts[0][1]) if counts else 0

    # --- receiving ----------------------------------------------------------------------------
    def deserialize(self, message: bytes) -> Any:
        """Decode what Redis delivered; ``None`` (refused by :meth:`receive`) when it is not msgpack."""
        try:
            return super().deserialize(message)
        except Exception as exc:
            logger.warning("refused a channel layer message that could not be read: %s", type(exc).__name__)
            return None

    async def receive(self, channel: str) -> dict[str, Any]:
        """The next message for ``channel`` that opens; refused ones are logged and skipped."""
        layer = self._get_layer()
        while True:
            envelope = await layer.receive(channel)
            message, problem = self.open(channel, envelope, layer.groups)
            if message is not None:
                return message
            logger.warning("refused a channel layer message on %s: %s", channel, problem)

    def open(
        self, channel: str, envelope: Any, groups: dict[str, set[str]]
    ) -> tuple[dict[str, Any] | None, str]:
        """``(message, "")`` for a good envelope to ``channel``, else ``(None, why not)``."""
        if not isinstance(envelope, dict) or _SEALED not in envelope:
            return None, "not signed"
        body, mac = envelope.get(_SEALED), envelope.get(_MAC)
        if not isinstance(body, bytes) or not isinstance(mac, bytes):
            return None, "not signed"
        if not hmac.compare_digest(mac, self._mac(body)):
            return None, "bad signature"
        to, sent_at, nonce, message = msgpack.unpackb(body, raw=False)
        if to != channel and channel not in groups.get(to, ()):
            return None, f"sealed for {to!r}"
        now = time.time()
        if abs(now - sent_at) > MAX_AGE:
            return None, f"stale (sent {now - sent_at:.0f} s ago)"
        if self._replay_window:
            if (channel, nonce) in self._seen:
                return None, "replayed"
            self._remember(channel, nonce, now)
        if not isinstance(message, dict):
            return None, "not a message"
        return message, ""

    def _remember(self, channel: str, nonce: bytes, now: float) -> None:
        self._seen[(channel, nonce)] = now + 2 * MAX_AGE
        if now >= self._next_prune:  # at most once a second: forget nonces too old to matter
            self._next_prune = now + 1.0
            self._seen = {key: until for key, until in self._seen.items() if until > now}

    def _mac(self, body: bytes) -> bytes:
        return hmac.digest(self._key, body, "sha256")

    def _nonce(self) -> bytes:
        return self._prefix + next(self._count).to_bytes(8, "big")

"""How a server's session heals itself: pings, reconnects with backoff and jitter, a circuit.

Lifecycle
---------
The hub holds one :class:`Healer` (its :class:`HealPolicy` and a semaphore bounding how many
servers reconnect at the same time). Every owner task (:class:`mcpclient.engine.connection.ServerConnection`)
keeps a :class:`RetryState` of its own and, while its session is ready, a ping loop
(:func:`ping_loop`) in the session's task group: a ping that fails or gets no answer within
``ping_timeout`` marks the session dead, like a child that exited or a stream that ended.

When a session dies, or a connection attempt fails, the owner asks :meth:`RetryState.schedule`
for the delay before the next attempt: ``base * 2**(n-1)`` capped at ``cap`` for the n-th attempt
in a row, half of it fixed and half random ("equal jitter"), so servers that fail together do
not come back together. After ``attempts`` attempts in a row the circuit opens: the next
attempt waits ``circuit_seconds`` (one trial, then the circuit stays open if it fails). A
successful connection resets the count; the admin's Reconnect starts a fresh connection at once.
The owner waits for the retry time on its command queue, so stopping it is immediate, and it
takes a slot of the semaphore only for the connection attempt itself.

The clock and the random source are fields of the policy, so tests can make the schedule
deterministic.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import anyio
from mcp import MCPError
from mcp_types import METHOD_NOT_FOUND

from mcpclient.engine.protocol import is_modern

if TYPE_CHECKING:
    from mcp import Client


def _utcnow() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


@dataclass(frozen=True)
class HealPolicy:
    """The healing settings (``BOOCODE_MCP_PING_*``, ``BOOCODE_MCP_RECONNECT_*``, see the module).

    ``attempts = 0`` turns automatic reconnects off (the server stays down until Reconnect);
    ``ping_interval = 0`` turns pings off.
    """

    ping_interval: float = 0.0
    ping_timeout: float = 10.0
    base: float = 1.0
    cap: float = 60.0
    attempts: int = 0
    circuit_seconds: float = 300.0
    concurrency: int = 4
    random: Callable[[], float] = field(default=random.random, compare=False)
    now: Callable[[], dt.datetime] = field(default=_utcnow, compare=False)

    @classmethod
    def off(cls) -> HealPolicy:
        """No pings and no automatic reconnects (a bare :class:`~mcpclient.engine.hub.Hub`'s default)."""
        return cls()

    @property
    def reconnects(self) -> bool:
        """True when a dead or failed server is reconnected automatically."""
        return self.attempts > 0

    def backoff(self, attempt: int) -> float:
        """Seconds before the ``attempt``-th reconnect in a row (1-based): equal jitter, capped."""
        step = min(self.cap, self.base * 2 ** max(attempt - 1, 0))
        return step / 2 + self.random() * step / 2


@dataclass
class RetryState:
    """One server's reconnect attempts in a row, the next retry time and whether the circuit is open."""

    attempts: int = 0
    next_retry_at: dt.datetime | None = None
    circuit_open: bool = False

    def schedule(self, policy: HealPolicy) -> float:
        """After a failure: the seconds to wait before the next attempt (opens the circuit at the limit)."""
        if self.attempts >= policy.attempts:
            self.circuit_open = True
            delay = policy.circuit_seconds
        else:
            delay = policy.backoff(self.attempts + 1)
        self.next_retry_at = policy.now() + dt.timedelta(seconds=delay)
        return delay

    def begin_attempt(self) -> None:
        """The retry time has come: one more attempt in a row."""
        self.attempts += 1
        self.next_retry_at = None

    def reset(self) -> None:
        """The server is ready again."""
        self.attempts = 0
        self.next_retry_at = None
        self.circuit_open = False

    def describe(self, policy: HealPolicy) -> str:
        """The retry plan in a few words for people and the model ("" when none is scheduled)."""
        if self.next_retry_at is None:
            return ""
        seconds = max(0, round((self.next_retry_at - policy.now()).total_seconds()))
        if self.circuit_open:
            return f"{self.attempts} reconnect attempts failed; next try in {seconds} s"
        return f"reconnecting in {seconds} s"


class Healer:
    """A hub's healing policy and the bound on concurrent reconnect attempts."""

    def __init__(self, policy: HealPolicy) -> None:
        self.policy = policy
        self.slots = asyncio.Semaphore(max(1, policy.concurrency))


async def ping_loop(client: Client, policy: HealPolicy, on_dead: Callable[[str], None]) -> None:
    """Ping the session every ``ping_interval`` seconds; the first failed ping calls ``on_dead``.

    A 2025 session gets ``ping``; 2026-07-28 removed it, so a modern session gets the cheap,
    stateless ``server/discover`` at its own version instead. A server that answers with
    "method not found" answered: it is alive.
    """
    while True:
        await anyio.sleep(policy.ping_interval)
        try:
            with anyio.fail_after(policy.ping_timeout):
                if is_modern(client):
                    await client.session.send_discover(client.protocol_version)
                else:
                    await client.session.send_ping()
        except TimeoutError:
            on_dead(f"no answer to a ping within {policy.ping_timeout:g} s")
            return
        except MCPError as exc:
            if exc.error.code == METHOD_NOT_FOUND:
                continue
            on_dead(f"ping failed: {exc.error.message}")
            return
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError) as exc:
            on_dead(f"ping failed: {exc or type(exc).__name__}")
            return


def retry_fields(
    attempts: int, next_retry_at: dt.datetime | None, circuit_open: bool, *, now: dt.datetime | None = None
) -> dict[str, int | bool]:
    """The retry plan of a server for the status frame: ``retry_in`` (whole seconds), ``attempts``
    and ``circuit_open``; empty when no retry is scheduled (see docs/protocol.md)."""
    if next_retry_at is None:
        return {}
    seconds = (next_retry_at - (now or _utcnow())).total_seconds()
    return {"retry_in": max(0, int(seconds + 0.999)), "attempts": attempts, "circuit_open": circuit_open}

"""Prometheus metrics of the process that holds the MCP sessions, and the exposition of them all.

One registry per process (``prometheus_client``'s default, with its ``process_*`` and
``python_*`` figures): every Daphne process and the hub worker report their own figures, each
scraped on its own (docs/operations.md). The metrics here belong to whichever process holds the
hub (each web process with ``BOOCODE_HUB=inprocess``, the hub worker otherwise); the chat's
own metrics register in the same registry (``boocode.chat.ledger.metrics``).

Costs. A call adds one counter increment and at most one histogram observation (a lock and a
few additions); nothing is counted per streamed token. The servers' states are read from the
hub when the endpoint is scraped, on the loop the hub runs on (the endpoints are async).

The tool step (``boocode_tool_step_seconds``) runs from the model stream's last byte to the
moment the ``tools/call`` request is handed to the server's session: the chat starts it
(:func:`tool_step_began`) in the context of the call, and the session stops it
(:func:`tool_step_reached`) just before it sends. A call that waited for a person's approval
is not observed (:func:`tool_step_skipped`): the person's time is not BooCode's. Across the hub
worker the time spent so far travels with the call (:func:`tool_step_so_far`), so the worker
observes the whole step, less the message's time in Redis.
"""

from __future__ import annotations

import hmac
import time
from collections.abc import Callable, Iterable, Iterator
from contextvars import ContextVar

from prometheus_client import REGISTRY, Counter, Histogram, disable_created_metrics
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.exposition import choose_encoder
from prometheus_client.registry import Collector

from mcpclient.core.state import ServerSnapshot, Status

# No *_created series beside each counter and histogram: they double every series for nothing a
# dashboard here reads (a process's start is process_start_time_seconds).
disable_created_metrics()

# Outcomes of an MCP tool call as the session saw it (boocode_mcp_tool_calls_total{outcome}).
MCP_OUTCOMES = ("ok", "tool_error", "timeout", "unreachable", "failed", "cancelled")

MCP_TOOL_CALLS = Counter(
    "boocode_mcp_tool_calls",
    "MCP tools/call requests sent by this process, by server and outcome (ok, tool_error: the server's "
    "error result, timeout, unreachable, failed: a protocol or transport failure, cancelled)",
    ["server", "outcome"],
)
TOOL_STEP = Histogram(
    "boocode_tool_step_seconds",
    "From the model stream's last byte to the tools/call request handed to the MCP server's session "
    "(calls that waited for a person's approval are left out)",
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0),
)

_step_began: ContextVar[float | None] = ContextVar("boocode_tool_step_began", default=None)


def tool_step_began(at: float) -> None:
    """The call in this context was asked for by a model stream that ended at ``at`` (monotonic)."""
    _step_began.set(at)


def tool_step_skipped() -> None:
    """The call in this context waited for a person: its step is not observed."""
    _step_began.set(None)


def tool_step_so_far() -> float | None:
    """Seconds since the step of the call in this context began (None: no step runs)."""
    began = _step_began.get()
    return None if began is None else time.monotonic() - began


def tool_step_reached() -> None:
    """The request is being sent: observe the step (once; a retried request is not observed again)."""
    began = _step_began.get()
    if began is not None:
        _step_began.set(None)
        TOOL_STEP.observe(time.monotonic() - began)


class ServerStates(Collector):
    """Each MCP server's status, offered tools and reconnect attempts, read when scraped."""

    def __init__(self, snapshots: Callable[[], Iterable[ServerSnapshot]]) -> None:
        self.snapshots = snapshots

    def describe(self) -> Iterator[Metric]:
        yield from self._families()

    def collect(self) -> Iterator[Metric]:
        status, tools, attempts = self._families()
        for snapshot in self.snapshots():
            for each in Status:
                status.add_metric([snapshot.name, each.value], 1.0 if snapshot.status is each else 0.0)
            tools.add_metric([snapshot.name], float(sum(1 for tool in snapshot.tools if tool.offered)))
            attempts.add_metric([snapshot.name], float(snapshot.attempts))
        yield from (status, tools, attempts)

    @staticmethod
    def _families() -> tuple[GaugeMetricFamily, GaugeMetricFamily, GaugeMetricFamily]:
        return (
            GaugeMetricFamily(
                "boocode_mcp_server_status",
                "1 for the status each MCP server is in now (ready, connecting, unavailable, failed, "
                "auth_required, per_user, disabled), 0 for the others",
                labels=["server", "status"],
            ),
            GaugeMetricFamily(
                "boocode_mcp_server_tools", "Tools each MCP server offers now", labels=["server"]
            ),
            GaugeMetricFamily(
                "boocode_mcp_server_reconnect_attempts",
                "Reconnect attempts in a row of each MCP server (0 once it is ready)",
                labels=["server"],
            ),
        )


def watch_servers(snapshots: Callable[[], Iterable[ServerSnapshot]]) -> None:
    """Report the states ``snapshots()`` gives when scraped (the runtime calls this once)."""
    REGISTRY.register(ServerStates(snapshots))


def exposition(accept: str = "") -> tuple[bytes, str]:
    """Every metric of this process in the format ``accept`` asks for (Prometheus text by default)."""
    encoder, content_type = choose_encoder(accept)
    return encoder(REGISTRY), content_type


def bearer_allows(authorization: str | None, token: str) -> bool:
    """Whether an ``Authorization`` header carries ``Bearer <token>`` (compared in constant time)."""
    if not token or not authorization:
        return False
    scheme, _, presented = authorization.strip().partition(" ")
    if scheme.lower() != "bearer":
        return False
    return hmac.compare_digest(presented.strip().encode(), token.encode())

"""Latency of one trivial MCP tool call: the SDK's own session vs the hub vs a session per call.

Runs the project's toolbox test server over stdio and over Streamable HTTP (127.0.0.1) and
prints median and p95 per call of its ``echo`` tool for:

  (a) the SDK's ClientSession with the 2025-11-25 ``initialize`` handshake, held open,
  (e) the SDK's ``Client`` in ``"auto"`` mode, held open: what the hub is built on, speaking
      2026-07-28 to a server that offers it (the toolbox does) — the floor the hub must match,
  (b) ``Hub.call_tool`` (the hub's own cost),
  (d) the tool registry's ``execute_tool`` (what a chat turn pays: the model's JSON arguments
      parsed and validated against the tool's schema, the call bounded by the server's timeout),
  (c) a new transport + session per call (what some client libraries do),

the ratios b/e (target <= 1.10), b/a, d/e and c/b, and the throughput with 50 calls in flight
for (e) and (b) in ``--rate-rounds`` alternating rounds (target: the hub keeps >= 0.97 of the
SDK's; the median of the per-round ratios, with their range). Usage:

    .venv/bin/python bench/tool_calls.py [--calls 500] [--fresh-calls 20] [--rate-rounds 8]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from pathlib import Path

import django
from mcp import Client

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
# The registry reads Django settings: a throwaway data directory, no hub of its own.
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "boocode.settings")
os.environ.setdefault("BOOCODE_DATA_DIR", tempfile.mkdtemp(prefix="boocode-bench-"))
os.environ["BOOCODE_MCP_AUTOSTART"] = "0"
django.setup()

from mcp import ClientSession, StdioServerParameters, stdio_client  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402
from mcp.shared._httpx_utils import create_mcp_http_client  # noqa: E402

from boocode.tools.execution import execute_tool  # noqa: E402
from boocode.tools.registry import available_tools  # noqa: E402
from mcpclient import runtime  # noqa: E402
from mcpclient.config.entries import parse_server  # noqa: E402
from mcpclient.engine.hub import Hub  # noqa: E402
from tests.support.processes import PYTHON, TEST_COMMANDS, TOOLBOX, HttpServer, free_port  # noqa: E402

ARGS = {"text": "ping"}


async def measure(call: Callable[[], Awaitable[object]], count: int, warmup: int) -> list[float]:
    """Per-call latencies in milliseconds, after ``warmup`` untimed calls."""
    for _ in range(warmup):
        await call()
    samples = []
    for _ in range(count):
        start = time.perf_counter()
        await call()
        samples.append((time.perf_counter() - start) * 1000)
    return samples


def summary(samples: list[float]) -> tuple[float, float]:
    """(median, p95) in milliseconds."""
    ordered = sorted(samples)
    return statistics.median(ordered), ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))]


def open_transport(kind: str, url: str):
    """The SDK transport context for ``kind`` ("stdio" or "http")."""
    if kind == "stdio":
        return stdio_client(StdioServerParameters(command=PYTHON, args=[str(TOOLBOX)]))
    return streamable_http_client(url, http_client=create_mcp_http_client())


ARGS_JSON = json.dumps(ARGS)  # as the model sends them


async def persistent_pair(
    kind: str, url: str, calls: int, rounds: int = 10, in_flight: int = 50, rate_rounds: int = 8
) -> dict[str, list[float]]:
    """(a) a persistent ClientSession, (e) a persistent SDK Client, (b) the hub's call_tool and
    (d) the registry's execute_tool, measured in alternating rounds; then calls per second with
    ``in_flight`` concurrent callers for (e) and (b), also alternating.

    All are open at once and take turns in batches, so load from anything else on the
    machine falls on all alike.
    """
    entry = {"command": PYTHON, "args": [str(TOOLBOX)]} if kind == "stdio" else {"type": "http", "url": url}
    hub = Hub(base_dir=ROOT, allowed_commands=TEST_COMMANDS)
    await hub.start([parse_server("bench", entry)])
    runtime.set_hub(hub)
    tools = available_tools()  # a turn takes the agent's list once, at its start
    samples: dict[str, list[float]] = {key: [] for key in ("a", "e", "b", "d", "e_rate", "b_rate")}
    try:
        async with AsyncExitStack() as stack:
            read, write = await stack.enter_async_context(open_transport(kind, url))
            session = await stack.enter_async_context(ClientSession(read, write))
            await session.initialize()
            client = await stack.enter_async_context(Client(open_transport(kind, url), mode="auto"))
            batch = max(1, calls // rounds)
            for round_number in range(rounds):
                warmup = 50 if round_number == 0 else 5
                samples["a"] += await measure(lambda: session.call_tool("echo", ARGS), batch, warmup)
                samples["e"] += await measure(lambda: client.call_tool("echo", ARGS), batch, warmup)
                samples["b"] += await measure(lambda: hub.call_tool("bench_echo", ARGS), batch, warmup)
                samples["d"] += await measure(
                    lambda: execute_tool("bench_echo", ARGS_JSON, allowed=tools), batch, warmup
                )
            for _ in range(rate_rounds):
                sdk_rate = await rate(lambda: client.call_tool("echo", ARGS), calls, in_flight)
                hub_rate = await rate(lambda: hub.call_tool("bench_echo", ARGS), calls, in_flight)
                samples["e_rate"].append(sdk_rate)
                samples["b_rate"].append(hub_rate)
    finally:
        runtime.set_hub(None)
        await hub.stop()
    return samples


async def rate(call: Callable[[], Awaitable[object]], count: int, in_flight: int) -> float:
    """Calls per second for ``count`` calls made by ``in_flight`` concurrent callers."""
    per_caller = max(1, count // in_flight)

    async def caller() -> None:
        for _ in range(per_caller):
            await call()

    start = time.perf_counter()
    await asyncio.gather(*(caller() for _ in range(in_flight)))
    return per_caller * in_flight / (time.perf_counter() - start)


async def fresh_session(kind: str, url: str, calls: int) -> list[float]:
    """(c) connect, initialize, call and close for every call."""

    async def once() -> None:
        async with open_transport(kind, url) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            await session.call_tool("echo", ARGS)

    return await measure(once, calls, 2)


async def main() -> None:
    parser = argparse.ArgumentParser(description="MCP tool-call latency")
    parser.add_argument("--calls", type=int, default=500)
    parser.add_argument("--fresh-calls", type=int, default=20)
    parser.add_argument(
        "--rate-rounds", type=int, default=8, help="alternating rounds of the 50-in-flight throughput"
    )
    options = parser.parse_args()
    port = free_port()
    server = HttpServer([PYTHON, str(TOOLBOX), "--http", str(port)], port, "/mcp")
    try:
        print(f"echo tool, {options.calls} calls (fresh sessions: {options.fresh_calls}); milliseconds")
        print(f"{'transport':<10}{'variant':<28}{'median':>10}{'p95':>10}")
        for kind in ("stdio", "http"):
            samples = await persistent_pair(kind, server.url, options.calls, rate_rounds=options.rate_rounds)
            a, e, b, d = (summary(samples[key]) for key in ("a", "e", "b", "d"))
            c = summary(await fresh_session(kind, server.url, options.fresh_calls))
            for label, (median, p95) in (
                ("(a) SDK session, 2025 handshake", a),
                ("(e) SDK Client, auto", e),
                ("(b) hub.call_tool", b),
                ("(d) registry execute_tool", d),
                ("(c) new session per call", c),
            ):
                print(f"{kind:<10}{label:<28}{median:>10.3f}{p95:>10.3f}")
            print(f"{kind:<10}{'ratio b/e (median)':<28}{b[0] / e[0]:>10.3f}   (target <= 1.10)")
            print(f"{kind:<10}{'ratio b/a (median)':<28}{b[0] / a[0]:>10.3f}")
            print(f"{kind:<10}{'ratio d/e (median)':<28}{d[0] / e[0]:>10.3f}")
            e_rate, b_rate = statistics.median(samples["e_rate"]), statistics.median(samples["b_rate"])
            print(f"{kind:<10}{'(e) calls/s, 50 in flight':<28}{e_rate:>10.0f}")
            print(f"{kind:<10}{'(b) calls/s, 50 in flight':<28}{b_rate:>10.0f}")
            # Each round's pair ran back to back: the median of their ratios cancels the drift of
            # the machine between rounds, which the ratio of the two medians does not.
            ratios = sorted(b / e for b, e in zip(samples["b_rate"], samples["e_rate"], strict=True))
            print(f"{kind:<10}{'throughput b/e':<28}{statistics.median(ratios):>10.3f}   (target >= 0.97)")
            print(f"{kind:<10}{'  per round, min .. max':<28}{ratios[0]:>10.3f} .. {ratios[-1]:.3f}")
            print(f"{kind:<10}{'ratio c/b (median)':<28}{c[0] / b[0]:>10.1f}")
    finally:
        server.stop()


if __name__ == "__main__":
    asyncio.run(main())

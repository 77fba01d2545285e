"""How long a hostile MCP server's answers hold the event loop in one go.

The tests of ``tests/security/test_hostile_servers.py`` prove each hostile answer is refused with
its work bounded by counts (a message refused unread by its length, a parse stopped at a limit
of values, a question refused before it is built); how long the loop then works without a break
is a figure of the machine, measured here. One hub in this process, as a web process holds it,
runs the raw JSON-RPC servers of the tests (``tests/servers/hostile_stdio.py`` over stdio,
``hostile_http.py`` over Streamable HTTP); each case runs ``--runs`` times under the loop-lag
probe (:mod:`tests.support.loop_lag`: the loop thread's longest stretch of CPU time in one go)
and prints its worst and median stretch, with the machine's load average at the start and the end.

    .venv/bin/python bench/loop_lag.py [--runs 5]

Target: every case under 100 ms on a quiet machine (a busy one stretches CPU time too: quote
the load). This is a benchmark, not a test: it prints figures and asserts nothing about time.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "boocode.settings")
os.environ["BOOCODE_DATA_DIR"] = tempfile.mkdtemp(prefix="boocode-bench-lag-")
os.environ.setdefault("BOOCODE_LOG_LEVEL", "ERROR")

import django  # noqa: E402

django.setup()

from mcpclient.config.entries import parse_server  # noqa: E402
from mcpclient.engine.hub import Hub  # noqa: E402
from tests.support.loop_lag import LoopLag  # noqa: E402
from tests.support.processes import PYTHON, TEST_COMMANDS, HttpServer, free_port  # noqa: E402

HOSTILE = ROOT / "tests" / "servers" / "hostile_stdio.py"
HOSTILE_HTTP = ROOT / "tests" / "servers" / "hostile_http.py"


def stdio(*extra: str) -> object:
    return parse_server("bad", {"command": PYTHON, "args": [str(HOSTILE), *extra], "timeout": 60_000})


def call(hub: Hub, tool: str, arguments: dict[str, object]) -> Callable[[], Awaitable[object]]:
    async def run() -> object:
        return await hub.call_tool(tool, arguments)

    return run


async def measure(name: str, runs: int, case: Callable[[], Awaitable[object]]) -> None:
    worst: list[float] = []
    for _ in range(runs):
        async with LoopLag() as lag, asyncio.timeout(60):
            await case()
        worst.append(lag.worst)
    print(
        f"{name:<34} worst {max(worst) * 1000:7.1f} ms   median {statistics.median(worst) * 1000:7.1f} ms",
        flush=True,
    )


async def main(runs: int) -> None:
    print(f"load average at the start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    hub = Hub(base_dir=ROOT, allowed_commands=TEST_COMMANDS)
    http_port = free_port()
    web = HttpServer([PYTHON, str(HOSTILE_HTTP), str(http_port)], http_port, "/mcp")
    try:
        await hub.start([stdio(), parse_server("web", {"url": web.url, "timeout": 60_000})])
        cases: dict[str, Callable[[], Awaitable[object]]] = {
            "stdio: 20 MB answer, id first": call(hub, "bad_huge", {"megabytes": 20, "order": "id-first"}),
            "stdio: 20 MB answer, id last": call(hub, "bad_huge", {"megabytes": 20, "order": "id-last"}),
            "stdio: 300,000 values": call(hub, "bad_dense", {"values": 300_000}),
            "stdio: 200,000 options asked": call(hub, "bad_ask", {"options": 200_000}),
            "stdio: 40,000 options asked": call(hub, "bad_ask", {"options": 40_000}),
            "http: 20 MB answer": call(hub, "web_huge", {}),
            "http: endless answer": call(hub, "web_endless", {}),
            "http: compression bomb": call(hub, "web_bomb", {}),
            "http: 20 MB event": call(hub, "web_big_event", {}),
        }
        for name, case in cases.items():
            await measure(name, runs, case)

        async def ten_thousand_tools() -> None:
            other = Hub(base_dir=ROOT, allowed_commands=TEST_COMMANDS)
            try:
                await other.start([stdio("--tools", "10000")])
            finally:
                await other.stop()

        await measure("stdio: a page of 10,000 tools", runs, ten_thousand_tools)
    finally:
        await hub.stop()
        web.stop()
    print(f"load average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=5)
    asyncio.run(main(parser.parse_args().runs))

"""Another person's turns while a server floods its tool listing: their latency and the loop's stalls.

One process holds the hub, as a web process does with ``BOOCODE_HUB=inprocess`` (the default):
the toolbox MCP server, and the hostile server of the tests (``tests/servers/hostile_stdio.py
--wordy N --wordy-after-touch``: ``N`` tools of ``--description-kb`` KB descriptions, listed 100
a page, which appear once its ``touch`` tool is first called). The scripted model runs in a
process of its own; the database is a fresh SQLite file; the hub persists, broadcasts and indexes
for tool search as it does in a web process.

A person runs turns back to back, each on a conversation created for it (what ``POST /c/new/``
writes) and each a full tool round trip (the model calls ``toolbox_echo``, then answers). First
``--turns`` turns on a quiet hub; then as many while the hostile server says its tools changed
``--relists`` times (``touch``), waiting for each listing to end: the first brings the N tools,
the others list them again unchanged. Prints, for both phases: turns, p50, p95 and longest turn,
failed turns (e.g. ``database is locked``), the loop-lag probe (:mod:`tests.support.loop_lag`:
the loop thread's longest stretch of CPU time in one go) and the longest wall-clock gap between
its ticks, and the process's resident memory before and after (and its peak).

    .venv/bin/python bench/definition_flood.py [--wordy 990] [--description-kb 48] [--turns 40]
        [--relists 20]

Targets (issue "Safe by default"): the person's turns under 100 ms p95 and the loop lag under
100 ms while the server floods. This is a benchmark, not a test: it prints figures and asserts
nothing about time.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import statistics
import sys
import tempfile
import time
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

DATA = Path(tempfile.mkdtemp(prefix="boocode-bench-flood-"))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "boocode.settings")
os.environ["BOOCODE_DATA_DIR"] = str(DATA)
os.environ["BOOCODE_HUB"] = "inprocess"
os.environ.setdefault("BOOCODE_LOG_LEVEL", "ERROR")

from tests.support.llm import Call, Reply, ScriptedLLM, Text, ToolCalls  # noqa: E402
from tests.support.processes import PYTHON, toolbox_entry  # noqa: E402

HOSTILE = ROOT / "tests" / "servers" / "hostile_stdio.py"
MODEL = "bench-model"
AGENTS = "## Echo\n---\ntools: [toolbox_*]\ntoolSearch: never\n---\nCall the echo tool, then answer.\n"


def responder(body: dict[str, Any]) -> Reply:
    """A tool call first, the answer after its result."""
    last = body["messages"][-1]
    if last["role"] == "tool":
        return Text("The echo came back.")
    return ToolCalls([Call("toolbox_echo", {"text": f"ping {last['content']}"})])


def serve_model(conn: Connection) -> None:
    """The scripted model in its own process (the hub's work must not slow the model down)."""
    llm = ScriptedLLM(models=(MODEL,), responder=responder).start()
    conn.send(llm.base_url)
    conn.recv()
    llm.stop()


def options() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--wordy", type=int, default=990, help="tools with long descriptions")
    parser.add_argument("--description-kb", type=int, default=48)
    parser.add_argument(
        "--turns", type=int, default=40, help="turns of the quiet phase (at least as many after)"
    )
    parser.add_argument("--relists", type=int, default=20, help="listings the hostile server asks for")
    return parser.parse_args()


def memory() -> tuple[int, int]:
    """This process's resident memory and its peak, in MB."""
    found = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            found[key] = int(value.split()[0]) // 1024
    return found.get("VmRSS", 0), found.get("VmHWM", 0)


class Gaps:
    """The longest wall-clock gap between ticks of a task that wakes every 5 ms."""

    def __init__(self) -> None:
        self.worst = 0.0
        self.task: asyncio.Task[None] | None = None

    async def run(self) -> None:
        while True:
            before = time.perf_counter()
            await asyncio.sleep(0.005)
            self.worst = max(self.worst, time.perf_counter() - before - 0.005)


async def phase(name: str, turns: int, flood: Any, user_id: int) -> None:
    from channels.db import database_sync_to_async

    from boocode.chat.models import Conversation
    from boocode.chat.turn.loop import TurnRequest, run_turn
    from tests.support.loop_lag import LoopLag

    async def emit(event: dict[str, Any]) -> None:
        return None

    def new_conversation() -> int:
        return Conversation.objects.create(owner_id=user_id, agent_name="Echo").pk

    latencies: list[float] = []
    failures: list[str] = []
    gaps = Gaps()
    gaps.task = asyncio.create_task(gaps.run())
    async with LoopLag() as lag:
        flooding = asyncio.create_task(flood()) if flood is not None else None
        index = 0
        while index < turns or (flooding is not None and not flooding.done()):
            started = time.perf_counter()
            try:
                conversation = await database_sync_to_async(new_conversation)()
                status = await run_turn(TurnRequest(conversation, f"{name} {index}", user_id=user_id), emit)
                if status != "complete":
                    failures.append(status)
            except Exception as exc:  # a benchmark counts failures instead of stopping
                failures.append(f"{type(exc).__name__}: {exc}"[:200])
            latencies.append(time.perf_counter() - started)
            index += 1
        relists = await flooding if flooding is not None else 0
    gaps.task.cancel()
    latencies.sort()
    p95 = latencies[max(int(len(latencies) * 0.95) - 1, 0)]
    rss, peak = memory()
    print(
        f"{name:<6} turns {len(latencies):4d}  p50 {statistics.median(latencies) * 1000:7.1f} ms  "
        f"p95 {p95 * 1000:7.1f} ms  max {latencies[-1] * 1000:7.1f} ms  failed {len(failures)}  "
        f"loop lag (CPU) {lag.worst * 1000:6.1f} ms  longest gap (wall) {gaps.worst * 1000:7.1f} ms  "
        f"listings {relists}  RSS {rss} MB (peak {peak} MB)"
    )
    for failure in sorted(set(failures))[:5]:
        print(f"       failure: {failure}")


async def main(opts: argparse.Namespace) -> None:
    from channels.db import database_sync_to_async
    from django.contrib.auth import get_user_model
    from django.core.management import call_command

    from boocode.chat.llm import client as llm_client
    from mcpclient import runtime
    from mcpclient.engine.hub import Hub

    await database_sync_to_async(call_command)("migrate", verbosity=0)
    await database_sync_to_async(call_command)("mcp_sync", verbosity=0)
    user = await database_sync_to_async(get_user_model().objects.create)(username="bob")
    hub = await runtime.ensure_hub()
    assert isinstance(hub, Hub)  # (in this process: BOOCODE_HUB=inprocess)
    connection = hub.connection("bad")
    assert connection is not None, [s.last_error for s in hub.snapshots()]
    rss, _ = memory()
    print(f"hub ready: {len(hub.tools())} tools offered; RSS {rss} MB; load {os.getloadavg()[0]:.2f}")

    async def flood() -> int:
        for _ in range(opts.relists):
            listings = connection.tool_list.listings
            await hub.call_tool("bad_touch", {})
            async with asyncio.timeout(600):
                while connection.tool_list.listings == listings:
                    await connection.tool_list.updated.wait()
        await hub.drain_listeners()
        return opts.relists

    await phase("quiet", opts.turns, None, user.pk)
    await phase("flood", opts.turns, flood, user.pk)
    [snapshot] = [s for s in hub.snapshots() if s.name == "bad"]
    held = sum(tool.rejected for tool in snapshot.tools)
    load = os.getloadavg()[0]
    print(f"hostile server: {len(snapshot.tools)} tools listed, {held} not offered; load {load:.2f}")
    await hub.stop()
    await hub.drain_listeners()
    await llm_client.close_http_session()


if __name__ == "__main__":
    opts = options()
    model_conn, child_conn = multiprocessing.Pipe()
    model = multiprocessing.get_context("fork").Process(target=serve_model, args=(child_conn,), daemon=True)
    model.start()
    base_url = model_conn.recv()
    hostile = [str(HOSTILE), "--wordy", str(opts.wordy), "--description-kb", str(opts.description_kb)]
    servers = {
        "toolbox": toolbox_entry(),
        "bad": {
            "command": PYTHON,
            "args": [*hostile, "--page-size", "100", "--wordy-after-touch"],
            "timeout": 60_000,
        },
    }
    (DATA / "mcp.json").write_text(json.dumps({"mcpServers": servers}))
    (DATA / "AGENTS.md").write_text(AGENTS)
    os.environ.update(
        {
            "BOOCODE_MCP_CONFIG": str(DATA / "mcp.json"),
            "BOOCODE_AGENTS_FILE": str(DATA / "AGENTS.md"),
            "BOOCODE_LLM_BASE_URL": base_url,
            "BOOCODE_LLM_MODEL": MODEL,
            "BOOCODE_MCP_STDIO_COMMANDS": PYTHON,
        }
    )
    import django

    django.setup()
    try:
        asyncio.run(main(opts))
    finally:
        model_conn.send("stop")
        model.join(timeout=10)

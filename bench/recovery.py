"""Recovery: how long a server is gone after its stdio child crashes, and after a hang.

Runs the project's toolbox test server over stdio in a hub that heals (mcpclient/engine/healing.py),
kills the child (its ``crash`` tool exits the process) ``--rounds`` times and prints, as median
and p90 in milliseconds:

  detect  crash -> the server is ``unavailable`` (end of the stdio stream, no ping needed),
  ready   crash -> ``ready`` again with a fresh tool list and a first call that works
          (beside the first start of the same server: a recovery cannot beat it),

once with the default backoff (``BOOCODE_MCP_RECONNECT_BASE=1``: the first retry waits 0.5-1 s,
on purpose) and once with ``--base`` (0.05 s: what reconnecting itself costs). ``--hang`` adds
rounds where the server stops answering (``--feature hang``): the time until a ping with
``--ping-timeout`` declares it dead and the time until it is ready again.

    .venv/bin/python bench/recovery.py [--rounds 20] [--base 0.05] [--hang 5]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import django

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "boocode.settings")
os.environ.setdefault("BOOCODE_DATA_DIR", tempfile.mkdtemp(prefix="boocode-bench-"))
os.environ["BOOCODE_MCP_AUTOSTART"] = "0"
django.setup()

from mcpclient.config.entries import parse_server  # noqa: E402
from mcpclient.core.state import Status  # noqa: E402
from mcpclient.engine.healing import HealPolicy  # noqa: E402
from mcpclient.engine.hub import Hub  # noqa: E402
from mcpclient.runtime import heal_policy  # noqa: E402
from tests.support.processes import PYTHON, TEST_COMMANDS, TOOLBOX  # noqa: E402


def summary(values: list[float]) -> str:
    """Median and p90 in milliseconds."""
    ordered = sorted(values)
    p90 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.9))]
    return f"median {statistics.median(ordered) * 1000:7.1f} ms   p90 {p90 * 1000:7.1f} ms"


async def rounds(policy: HealPolicy, count: int, *, hang: bool) -> tuple[float, list[float], list[float]]:
    """Crash (or freeze) the server ``count`` times.

    Returns the seconds of the first start (child, handshake, listing: the floor of a
    recovery), and per round the seconds to ``unavailable`` and to ready + a working call.
    """
    hub = Hub(base_dir=ROOT, allowed_commands=TEST_COMMANDS, healing=policy)
    args = [str(TOOLBOX), *(["--feature", "hang"] if hang else [])]
    started = time.perf_counter()
    await hub.start([parse_server("box", {"command": PYTHON, "args": args})])
    cold = time.perf_counter() - started
    detect: list[float] = []
    ready: list[float] = []

    def state() -> Status:
        return hub.snapshots()[0].status

    try:
        for _ in range(count):
            assert state() is Status.READY
            started = time.perf_counter()
            if hang:
                frozen = asyncio.ensure_future(hub.call_tool("box_freeze", {"seconds": 600}))
            else:
                await hub.call_tool("box_crash", {})
            await hub.wait_until(lambda: state() is not Status.READY, 60)
            detect.append(time.perf_counter() - started)
            await hub.wait_until(lambda: state() is Status.READY, 120)
            result = await hub.call_tool("box_echo", {"text": "back"})
            assert result.output == "back", result.output
            ready.append(time.perf_counter() - started)
            if hang:
                await frozen
    finally:
        await hub.stop()
    return cold, detect, ready


async def main() -> None:
    raw = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=raw)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--base", type=float, default=0.05, help="the short backoff base (seconds)")
    parser.add_argument("--hang", type=int, default=5, help="rounds with a hung server (0: none)")
    parser.add_argument("--ping-interval", type=float, default=1.0)
    parser.add_argument("--ping-timeout", type=float, default=1.0)
    options = parser.parse_args()
    defaults = heal_policy()
    short = HealPolicy(
        ping_interval=options.ping_interval,
        ping_timeout=options.ping_timeout,
        base=options.base,
        cap=max(options.base, 1.0),
        attempts=defaults.attempts,
    )
    cases = [
        (f"crash, default backoff (base {defaults.base:g} s)", defaults, False, options.rounds),
        (f"crash, base {options.base:g} s", short, False, options.rounds),
    ]
    if options.hang:
        label = f"hang, ping every {options.ping_interval:g} s, timeout {options.ping_timeout:g} s"
        cases.append((label, short, True, options.hang))
    print(f"toolbox over stdio, {os.cpu_count()} CPUs")
    for label, policy, hang, count in cases:
        cold, detect, ready = await rounds(policy, count, hang=hang)
        print(f"{label} ({count} rounds; the first start took {cold * 1000:.0f} ms)")
        print(f"  detect  {summary(detect)}")
        print(f"  ready   {summary(ready)}")


if __name__ == "__main__":
    asyncio.run(main())

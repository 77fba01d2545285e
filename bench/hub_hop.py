"""What the hub worker's hop costs: one tool call through the worker vs the same call in-process.

Starts ``manage.py hub_worker`` (BOOCODE_HUB=worker, the Redis channel layer) with the toolbox
test server over stdio, and a hub in this process with its own toolbox over stdio. Then, in
alternating rounds (so a loaded machine's drift hits both alike), times ``echo`` calls:

  (i) ``Hub.call_tool`` in this process (what BOOCODE_HUB=inprocess pays),
  (w) ``RemoteHub.call_tool`` (what a web process pays with BOOCODE_HUB=worker: the request
      over Redis, the worker's call, the reply over Redis),
  (h) ``RemoteHub.call_tool`` of a tool no server offers: the worker answers at once, so this
      is the hop alone (both messages and the worker's dispatch, no MCP call).

Prints the median and p95 of each, the median added latency (w - i, target <= 1 ms on
127.0.0.1) and the ratio w/i. Then kills the worker (SIGKILL), starts a new one at once (a
process manager with no restart delay) and prints the time from the kill to the first call
that succeeds again (the new worker starts Django, connects the toolbox, answers). Usage:

    .venv/bin/python bench/hub_hop.py [--rounds 20] [--calls 50] [--redis redis://127.0.0.1:6379/13]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import selectors
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--calls", type=int, default=50, help="calls per round and side")
    parser.add_argument("--redis", default="redis://127.0.0.1:6379/13")
    options = parser.parse_args()

    data = Path(tempfile.mkdtemp(prefix="boocode-hop-"))
    python = sys.executable
    toolbox = ROOT / "tests" / "servers" / "toolbox.py"
    (data / "mcp.json").write_text(
        json.dumps({"mcpServers": {"toolbox": {"command": python, "args": [str(toolbox)]}}})
    )
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "boocode.settings",
        "BOOCODE_DATA_DIR": str(data),
        "BOOCODE_REDIS_URL": options.redis,
        "BOOCODE_HUB": "worker",
        "BOOCODE_HUB_CHANNEL": f"hop-{uuid.uuid4().hex[:10]}",
        "BOOCODE_MCP_STDIO_COMMANDS": python,
    }
    env.pop("BOOCODE_DATABASE_URL", None)
    subprocess.run([python, "manage.py", "migrate", "--noinput", "-v0"], cwd=ROOT, env=env, check=True)
    workers = [start_worker(python, env)]
    try:
        wait_listening(workers[0])
        os.environ.update(env)
        asyncio.run(run(options.rounds, options.calls, python, toolbox, workers, env))
    finally:
        for worker in workers:
            if worker.poll() is None:
                worker.terminate()
                worker.wait(20)


def start_worker(python: str, env: dict[str, str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [python, "manage.py", "hub_worker"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )


def wait_listening(worker: subprocess.Popen[bytes]) -> None:
    """Until the worker prints that it listens (its first line)."""
    assert worker.stdout is not None
    with selectors.DefaultSelector() as selector:
        selector.register(worker.stdout, selectors.EVENT_READ)
        if not selector.select(60):
            raise SystemExit("the hub worker did not start within 60 s")
    worker.stdout.readline()


async def timed(call, count: int, *, fails: bool = False) -> list[float]:  # type: ignore[no-untyped-def]
    samples = []
    for _ in range(count):
        start = time.perf_counter()
        result = await call()
        samples.append((time.perf_counter() - start) * 1000)
        assert result.is_error is fails, result.output
    return samples


async def run(
    rounds: int,
    calls: int,
    python: str,
    toolbox: Path,
    workers: list[subprocess.Popen[bytes]],
    env: dict[str, str],
) -> None:
    import django

    django.setup()
    from mcpclient import runtime
    from mcpclient.config.entries import parse_server
    from mcpclient.engine.hub import Hub

    local = Hub(allowed_commands=[python])
    await local.start([parse_server("toolbox", {"command": python, "args": [str(toolbox)]})])
    remote = await runtime.ensure_hub()
    await local.wait_until(lambda: bool(local.tools()), 30)
    # The worker answers once its hub has started: its state, tools included, came with the reply.
    assert remote.tools(), "the hub worker offers no tools"
    args = {"text": "ping"}
    inprocess, worker, bare = [], [], []
    await timed(lambda: local.call_tool("toolbox_echo", args), 20)  # warm-up, both sides
    await timed(lambda: remote.call_tool("toolbox_echo", args), 20)
    for _ in range(rounds):
        inprocess += await timed(lambda: local.call_tool("toolbox_echo", args), calls)
        worker += await timed(lambda: remote.call_tool("toolbox_echo", args), calls)
        # A tool no server offers: the worker answers at once, so this is the hop alone.
        bare += await timed(lambda: remote.call_tool("nobody_offers_this", {}), calls, fails=True)
    await local.stop()

    killed = time.perf_counter()
    workers[0].kill()
    workers[0].wait()
    workers.append(start_worker(python, env))
    attempts = 0
    # Until the new worker serves: a call may end "restarted during the call" or "not running"
    # (refused at once while the worker is silent): it is sent again 20 ms later.
    while True:
        attempts += 1
        if not (await remote.call_tool("toolbox_echo", args)).is_error:
            break
        await asyncio.sleep(0.02)
    recovered = time.perf_counter() - killed
    await remote.stop()

    def show(name: str, samples: list[float]) -> float:
        ordered = sorted(samples)
        median = statistics.median(ordered)
        p95 = ordered[int(len(ordered) * 0.95)]
        print(f"{name:<32} median {median:7.3f} ms   p95 {p95:7.3f} ms   ({len(samples)} calls)")
        return median

    i = show("(i) in-process Hub.call_tool", inprocess)
    w = show("(w) through the hub worker", worker)
    show("(h) the hop alone (no MCP call)", bare)
    print(f"added by the hop (median w - i): {w - i:.3f} ms (target <= 1 ms)   ratio w/i: {w / i:.2f}")
    print(f"hub worker killed -> first successful call: {recovered:.2f} s ({attempts} call(s) sent)")


if __name__ == "__main__":
    main()

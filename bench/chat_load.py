"""Chat load: N concurrent websocket sessions against a live Daphne, each with its own user.

Starts the scripted OpenAI-compatible server in a process of its own, a fresh data directory,
Daphne in a subprocess with the toolbox MCP server over stdio (started by Daphne's own hub), then
runs ``--turns`` turns in each of ``--sessions`` concurrent sessions. Every turn is a full
tool round trip: the model streams a short text and calls ``toolbox_echo``, the server runs
it, and the model answers. Prints turns/s, p50/p95 turn latency, the tool step (the model's
last byte to the MCP server receiving the call), the first-token delay and
what the server adds to the scripted model's own time (``--llm-delay`` after a request
arrives): from the user's frame to the model's request plus from the model's first bytes to
the ``text_delta`` at the client. Also prints errors, how the machine's CPUs were spent
(including the hypervisor's steal), and checks in the database that every message and tool
call of every turn was persisted, the Daphne processes' resident memory after the run, and how
long Daphne took from its launch to the first page (``GET /login/`` answering 200).

    .venv/bin/python bench/chat_load.py [--sessions 50] [--turns 5] [--llm-delay 0.05] [--think 0]
        [--answer plain|markdown] [--chunk-delay 0] [--web N] [--hub inprocess|worker]
        [--redis URL] [--database-url URL] [--against REF [--pairs 4]] [--json FILE]

The scripted model states a window of ``--window`` tokens (131072 by default) in ``/v1/models``
as vLLM does, so the toolbox's definitions fit and the tools are offered whole; ``--window 0``
states none, BooCode assumes its default window and, the definitions not fitting its share,
defers them behind tool search (which loads its embedding model in Daphne).

``--answer markdown`` makes the final answer 1.6 KB of Markdown (a heading, emphasis, a list, a
table and a highlighted fence) instead of three plain sentences, and ``--chunk-delay`` spaces
its 8-character chunks (seconds), so that it streams over many frames as a model's would: the
server renders it while it streams (``text_html``). The Daphne processes' own CPU time over
the measured sessions is printed per turn and per streamed KB (the text of both answers).

``--web N`` starts N Daphne processes (sessions spread over them round-robin; more than one
needs Redis); ``--hub worker`` adds the hub worker (``manage.py hub_worker``), which then holds
the toolbox for every web process. ``--database-url`` (e.g.
``postgres://postgres@127.0.0.1:5432/boocode_worker``, dropped and created afresh) replaces
the SQLite file; use PostgreSQL for more than one process. The single-process figures to set
beside them: the same command with ``--web 1 --hub inprocess``.

``--think 0`` sends each session's next message as soon as its turn ends: the server is
saturated and the figures show its capacity (latency is then mostly queueing). ``--think 3``
paces sessions like people reading and typing, and shows the latency they would see.

``--against REF`` (``94ebcaf``, ``main``, ``main~5``) measures this tree against another in one
command. REF is exported (``git archive``) into a temporary folder, removed afterwards, and given
this checkout's ``.venv``; its runs start Daphne (its ``scripts/serve``, or this tree's for a tree
that has none: the same Daphne options), ``manage.py migrate``, the users (its own models, so any
schema) and the hub worker from that folder. The rest is this tree's on both sides: the load's
clients, the scripted model and the toolbox MCP server, whose answers are part of the figures.
``--pairs N`` (default 4) runs N pairs, each side with a fresh data directory and fresh processes,
in ABBA order (this, that, that, this, ...) so that a drift of the machine falls on both sides;
each run prints its figures as above, then a table gives per pair and as their median the ratio
this ÷ that of turns/s, the added first-token delay p50 and its two parts, the tool step p50,
Daphne's CPU per turn, its RSS after the run and its start to the first page, the errors of each
side, and how many pairs favour each side. ``--json FILE`` writes every run's figures (and with
``--against`` the ratios) as JSON.

This is a benchmark, not a test: it prints figures and asserts nothing about time.
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import json
import multiprocessing
import os
import random
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

# Django is set up below on a throwaway data directory.
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "boocode.settings")
os.environ.setdefault("BOOCODE_DATA_DIR", tempfile.mkdtemp(prefix="boocode-bench-client-"))
os.environ.setdefault("BOOCODE_LOG_LEVEL", "ERROR")  # the clients' own closing-handshake warnings

import django  # noqa: E402

django.setup()

import txaio  # noqa: E402

# Daphne, an installed app, chose Twisted for txaio during django.setup(); this process is only
# the load's client, and its websockets (autobahn) run on asyncio.
txaio._explicit_framework = None
txaio.use_asyncio()

from autobahn.asyncio.websocket import WebSocketClientFactory, WebSocketClientProtocol  # noqa: E402
from prometheus_client.parser import text_string_to_metric_families  # noqa: E402

from bench.pairs import format_ratio_table, pair_order, ratio_table  # noqa: E402
from tests.support.live import create_accounts  # noqa: E402
from tests.support.llm import Call, Reply, ScriptedLLM, Text, ToolCalls  # noqa: E402
from tests.support.processes import PYTHON, TOOLBOX, free_port  # noqa: E402

FIRST_TEXT = "Let me check that."
FINAL_TEXT = "The echo came back, so the round trip works. " * 3
MARKDOWN_TEXT = (
    "## The round trip works\n\nThe echo came back **unchanged**, so the tool was called with the "
    "arguments the model sent and its result reached the model. What was checked:\n\n"
    "- the request to the model and its *streamed* answer;\n- the call of `toolbox_echo` over stdio;\n"
    "- the result, stored and sent back to the model.\n\n"
    "| step | where | result |\n|---|---|---|\n| model | scripted server | streamed |\n"
    "| tool | toolbox over stdio | done |\n| answer | this message | complete |\n\n"
    "To repeat it by hand:\n\n```python\nimport json\n\n\ndef ping(text: str) -> dict[str, str]:\n"
    '    """What the echo tool returns for ``text``."""\n    return {"text": f"ping {text}"}\n\n\n'
    'print(json.dumps(ping("turn 0"), indent=2))\n```\n\n'
    "> The figures above are from this run only; see the [benchmarks](https://example.com/bench) "
    "for others.\n\nThat is all: **nothing failed**, and every message was stored.\n"
) * 2
TURN_TIMEOUT = 120.0
METRICS_TOKEN = f"bench-{random.getrandbits(64):016x}"  # the Daphnes' /metrics, read after the run
REFUSED_ATTEMPTS = 3  # sends of one message refused with turn_in_progress before giving up


def responder(body: dict[str, Any], delay: float, final: str = FINAL_TEXT, chunk_delay: float = 0.0) -> Reply:
    """First call of a turn: text + a tool call; after the tool result: the final answer."""
    last = body["messages"][-1]
    if last["role"] == "tool":
        return Text(final, chunk_size=8, first_delay=delay, delay=chunk_delay)
    return ToolCalls(
        [Call("toolbox_echo", {"text": f"ping {last['content']}"})], text=FIRST_TEXT, first_delay=delay
    )


class Client(WebSocketClientProtocol):
    """Queues every JSON frame with the time it arrived; remembers the close code."""

    def __init__(self) -> None:
        super().__init__()
        self.frames: asyncio.Queue[tuple[float, dict[str, Any]]] = asyncio.Queue()
        self.closed: asyncio.Future[int | None] = asyncio.get_event_loop().create_future()
        self.received_at = 0.0  # when the frame last returned by next() arrived

    def onMessage(self, payload: bytes, isBinary: bool) -> None:
        # Stamped here, not when the session's task gets to it: with 50 sessions in one loop
        # that wait is the benchmark's own, not the server's.
        self.frames.put_nowait((time.perf_counter(), json.loads(payload)))

    def onClose(self, wasClean: bool, code: int | None, reason: str | None) -> None:
        if not self.closed.done():
            self.closed.set_result(code)

    async def next(self, kinds: set[str], within: float = TURN_TIMEOUT) -> dict[str, Any]:
        """The next frame whose type is in ``kinds`` (others are dropped)."""
        async with asyncio.timeout(within):
            while True:
                self.received_at, frame = await self.frames.get()
                if frame["type"] in kinds:
                    return frame

    def send_json(self, frame: dict[str, Any]) -> None:
        self.sendMessage(json.dumps(frame).encode())


async def open_socket(port: int, cookie: str, conversation: int) -> Client:
    url = f"ws://127.0.0.1:{port}/ws/conversations/{conversation}/"
    factory = WebSocketClientFactory(
        url, headers={"Cookie": f"sessionid={cookie}", "Origin": f"http://127.0.0.1:{port}"}
    )
    factory.protocol = Client
    _, protocol = await asyncio.get_running_loop().create_connection(factory, "127.0.0.1", port)
    await protocol.is_open
    await protocol.next({"history"}, within=30)
    return protocol


def serve_model(
    delay: float, conn: Connection, final: str = FINAL_TEXT, chunk_delay: float = 0.0, window: int = 0
) -> None:
    """The scripted model, in a process of its own so that the clients do not slow it down.

    Sends its base URL, serves until told to stop, then sends when each turn's first request
    arrived and when it sent that answer's first bytes (``time.perf_counter()``, the same clock
    in every process), by user text.
    """
    request_at: dict[str, float] = {}
    first_chunk_at: dict[str, float] = {}
    last_chunk_at: dict[str, float] = {}  # the end of the answer that asks for the tool call
    call_received_at: dict[str, float] = {}  # when the MCP server received that call (its echo says)

    def stamp(into: dict[str, float], body: dict[str, Any]) -> None:
        last = body["messages"][-1]
        if last["role"] == "user":
            into[last["content"]] = time.perf_counter()

    def on_request(body: dict[str, Any]) -> None:
        stamp(request_at, body)
        last = body["messages"][-1]
        if last["role"] == "tool":  # "ping <user text> @<when the server received the call>"
            echoed, _, received = str(last["content"]).rpartition(" @")
            if echoed.startswith("ping ") and received:
                call_received_at[echoed.removeprefix("ping ")] = float(received)

    llm = ScriptedLLM(
        models=("bench-model",),
        # As vLLM states it in /v1/models (0: says nothing, and BooCode assumes its default window).
        model_fields={"max_model_len": window} if window else None,
        responder=lambda body: responder(body, delay, final, chunk_delay),
        on_request=on_request,
        on_first_chunk=lambda body: stamp(first_chunk_at, body),
        on_last_chunk=lambda body: stamp(last_chunk_at, body),
    ).start()
    conn.send(llm.base_url)
    conn.recv()
    llm.stop()
    conn.send((request_at, first_chunk_at, last_chunk_at, call_received_at))


@dataclass
class Results:
    latencies: list[float] = field(default_factory=list)
    first_tokens: list[float] = field(default_factory=list)
    sent_at: dict[str, float] = field(default_factory=dict)  # by user text
    first_delta_at: dict[str, float] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    turns: int = 0
    refused: int = 0  # turn_in_progress answers to a message sent after turn_end, sent again
    refused_for_good: set[str] = field(default_factory=set)  # texts refused every time: never stored


async def run_session(
    port: int, account: dict[str, Any], turns: int, results: Results, think: float = 0.0
) -> None:
    try:
        client = await open_socket(port, account["cookie"], account["conversation"])
    except Exception as exc:  # a benchmark counts failures instead of stopping
        results.errors.append(f"connect: {exc!r}")
        return
    for index in range(turns):
        if think:  # a person reading the answer and typing the next message (spreads arrivals)
            await asyncio.sleep(think * random.uniform(0.5, 1.5))
        text = f"turn {index} of {account['conversation']}"
        started = results.sent_at[text] = time.perf_counter()
        client.send_json({"type": "user_message", "text": text})
        first: float | None = None
        attempts = 1
        try:
            while True:
                frame = await client.next({"text_delta", "turn_end", "error"})
                if frame["type"] == "text_delta" and first is None:
                    first = client.received_at - started
                    results.first_delta_at[text] = client.received_at
                elif frame["type"] == "error" and frame.get("code") == "turn_in_progress":
                    # Refused, not lost: nothing was stored, and the page would put the text
                    # back in the box. Sent again as a person would, and counted apart.
                    results.refused += 1
                    if attempts == REFUSED_ATTEMPTS:
                        results.refused_for_good.add(text)
                        results.errors.append(f"refused {attempts} times: {frame['message']}")
                        break
                    attempts += 1
                    await asyncio.sleep(0.05)
                    client.send_json({"type": "user_message", "text": text})
                elif frame["type"] == "error":
                    results.errors.append(f"error frame: {frame['message']}")
                    break
                elif frame["type"] == "turn_end":
                    if frame["status"] != "complete":
                        results.errors.append(f"turn {frame['status']}: {frame['error']}")
                    else:
                        results.latencies.append(client.received_at - started)
                        if first is not None:
                            results.first_tokens.append(first)
                        results.turns += 1
                    break
        except TimeoutError:
            results.errors.append("turn timed out")
            break
    client.sendClose()
    await asyncio.wait([client.closed], timeout=5)


async def wait_for_tools(port: int, account: dict[str, Any]) -> None:
    """Open one socket and wait until the status line reports the toolbox server ready."""
    client = await open_socket(port, account["cookie"], account["conversation"])
    async with asyncio.timeout(60):
        while True:
            frame = await client.next({"status"})
            if any(s["name"] == "toolbox" and s["status"] == "ready" for s in frame["servers"]):
                break
    client.sendClose()


async def load(
    ports: list[int],
    accounts: list[dict[str, Any]],
    turns: int,
    think: float,
    mark: Callable[[], None] = lambda: None,
) -> tuple[Results, float]:
    """Warm up, call ``mark`` (the measured part starts), run the sessions."""
    for port in ports:
        await wait_for_tools(port, accounts[0])
        warmup = Results()
        await run_session(port, accounts[0], 1, warmup)  # connections, caches, first-use imports
        if warmup.errors:
            raise SystemExit(f"warm-up turn failed: {warmup.errors}")
    results = Results()
    mark()
    started = time.perf_counter()
    await asyncio.gather(
        *(
            run_session(ports[index % len(ports)], account, turns, results, think)
            for index, account in enumerate(accounts[1:])
        )
    )
    return results, time.perf_counter() - started


def fresh_database(url: str) -> None:
    """Drop and create the PostgreSQL database of ``url`` (the bench's own, e.g. boocode_worker)."""
    import psycopg
    from psycopg import sql

    base, name = url.rsplit("/", 1)
    with psycopg.connect(f"{base}/postgres", autocommit=True) as connection:
        connection.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))
        connection.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))


def start_hub_worker(env: dict[str, str], root: Path = ROOT) -> subprocess.Popen[bytes]:
    """``manage.py hub_worker`` of the tree in ``root``; returns once it listens (its first line out)."""
    worker = subprocess.Popen(
        [PYTHON, "manage.py", "hub_worker"],
        cwd=root,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    assert worker.stdout is not None
    if b"listening" not in worker.stdout.readline():
        raise SystemExit("the hub worker did not start")
    return worker


def stop(process: subprocess.Popen[bytes]) -> None:
    """Terminate ``process`` (killed after 15 s)."""
    process.terminate()
    try:
        process.wait(timeout=15)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def check_persistence(
    database: Path,
    accounts: list[dict[str, Any]],
    turns: int,
    database_url: str = "",
    refused: Collection[str] = (),
    final_text: str = FINAL_TEXT,
) -> tuple[int, int]:
    """(turns expected, turns missing or wrong in the database) for the measured sessions.

    A turn whose message was ``refused`` every time was never stored, and is not expected.
    """
    if database_url:
        import psycopg

        connection: Any = psycopg.connect(database_url)
        mark = "%s"
    else:
        connection = sqlite3.connect(database)
        mark = "?"
    missing = expected_turns = 0
    for account in accounts:
        rows = connection.execute(
            f"SELECT id, role, status, content FROM chat_message WHERE conversation_id = {mark} ORDER BY id",
            (account["conversation"],),
        ).fetchall()
        calls = connection.execute(
            "SELECT m.id, c.status, c.output FROM chat_toolcall c JOIN chat_message m ON m.id = c.message_id "
            f"WHERE m.conversation_id = {mark}",
            (account["conversation"],),
        ).fetchall()
        call_of = {message_id: (status, output) for message_id, status, output in calls}
        for index in range(turns):
            text = f"turn {index} of {account['conversation']}"
            if text in refused:
                continue
            expected_turns += 1
            start = next((at for at, row in enumerate(rows) if row[1:] == ("user", "complete", text)), None)
            if start is None:
                missing += 1
                continue
            chunk = rows[start : start + 3]
            expected = [
                ("user", "complete", text),
                ("assistant", "complete", FIRST_TEXT),
                ("assistant", "complete", final_text),
            ]
            ok = [row[1:] for row in chunk] == expected
            status, output = call_of.get(chunk[1][0], ("", ""))
            ok = ok and status == "done" and output.rpartition(" @")[0] == f"ping {text}"
            missing += not ok
    connection.close()
    return expected_turns, missing


def process_cpu_seconds(pids: list[int]) -> float | None:
    """User and system CPU time these processes have used so far (Linux only)."""
    total = 0
    try:
        for pid in pids:
            with open(f"/proc/{pid}/stat") as stat:
                fields = stat.read().rpartition(")")[2].split()
            total += int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15)
    except (OSError, ValueError, IndexError):
        return None
    return total / os.sysconf("SC_CLK_TCK")


def cpu_times() -> list[int] | None:
    """The machine's CPU counters (user, nice, system, idle, iowait, irq, softirq, steal), Linux only."""
    try:
        with open("/proc/stat") as stat:
            return [int(value) for value in stat.readline().split()[1:9]]
    except (OSError, ValueError):
        return None


def cpu_share(before: list[int] | None, after: list[int] | None) -> str:
    """How the machine's CPUs spent the run; "steal" is time the hypervisor gave to other guests."""
    if before is None or after is None:
        return "not available"
    spent = [b - a for a, b in zip(before, after, strict=True)]
    total = sum(spent) or 1
    user, _, system, idle, _, _, _, steal = (100 * value / total for value in spent)
    return f"user {user:.0f}%, system {system:.0f}%, idle {idle:.0f}%, stolen by the hypervisor {steal:.1f}%"


def percentile(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(len(ordered) * fraction))] if ordered else float("nan")


def p50_p95(samples_ms: list[float]) -> str:
    if not samples_ms:
        return "no samples"
    return f"p50 {statistics.median(samples_ms):.1f} ms, p95 {percentile(samples_ms, 0.95):.1f} ms"


@dataclass(frozen=True)
class Tree:
    """The server side of a run: the folder Daphne, ``manage.py`` and the hub worker run from."""

    label: str  # "this tree", or the ref given to --against
    root: Path
    serve: Path  # its scripts/serve, or this tree's when it has none (the same Daphne options)


THIS_TREE = Tree("this tree", ROOT, ROOT / "scripts" / "serve")

# Run with the tree's folder first on sys.path (``-c`` puts the working folder there), so that it
# is that tree's own models and session store that write the rows: whatever its schema.
# argv: how many users. Prints [{"cookie": session key, "conversation": id}, ...].
_TREE_ACCOUNTS = """
import json, sys
import django
django.setup()
from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY, get_user_model
from django.contrib.sessions.backends.db import SessionStore
from boocode.chat.models import Conversation

out = []
for index in range(int(sys.argv[1])):
    user = get_user_model().objects.create_user(f"live{index}")
    session = SessionStore()
    session[SESSION_KEY] = str(user.pk)
    session[BACKEND_SESSION_KEY] = "django.contrib.auth.backends.ModelBackend"
    session[HASH_SESSION_KEY] = user.get_session_auth_hash()
    session.create()
    out.append({"cookie": session.session_key, "conversation": Conversation.objects.create(owner=user).pk})
print(json.dumps(out))
"""


def run_in_tree(tree: Tree, env: dict[str, str], argv: list[str]) -> str:
    """Run ``PYTHON argv`` in ``tree``'s folder; its stdout, or a clear stop naming the tree."""
    done = subprocess.run([PYTHON, *argv], cwd=tree.root, env=env, capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(
            f"{tree.label}: {' '.join(argv[:2])} failed ({done.returncode}):\n{done.stderr[-3000:]}"
        )
    return done.stdout


def tree_accounts(tree: Tree, env: dict[str, str], count: int) -> list[dict[str, Any]]:
    """``manage.py migrate`` and ``count`` logged-in users, each with a conversation, by ``tree``'s code."""
    run_in_tree(tree, env, ["manage.py", "migrate", "--noinput", "-v0"])
    return json.loads(run_in_tree(tree, env, ["-c", _TREE_ACCOUNTS, str(count)]))


def export_tree(ref: str, into: Path) -> Tree:
    """``ref`` of this repository exported into ``into`` (``git archive``), with this checkout's .venv."""
    commit = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}"],
        capture_output=True,
        text=True,
    ).stdout.strip()
    if not commit:
        raise SystemExit(f"--against {ref}: not a commit of {ROOT}")
    archive = subprocess.Popen(["git", "-C", str(ROOT), "archive", commit], stdout=subprocess.PIPE)
    assert archive.stdout is not None
    extracted = subprocess.run(["tar", "-x", "-C", str(into)], stdin=archive.stdout)
    archive.stdout.close()
    if archive.wait() or extracted.returncode:
        raise SystemExit(f"--against {ref}: git archive {commit} | tar -x -C {into} failed")
    # The same interpreter and packages on both sides: what differs is the tree's own code.
    (into / ".venv").symlink_to((ROOT / ".venv").resolve())
    serve = into / "scripts" / "serve"
    label = f"{ref} ({commit[:9]})" if not commit.startswith(ref) else commit[:9]
    return Tree(label, into, serve if serve.exists() else THIS_TREE.serve)


def wait_for_page(port: int, process: subprocess.Popen[bytes], timeout: float = 120.0) -> None:
    """Return once ``GET /login/`` on ``port`` answers 200 (a clear stop if Daphne dies or errs)."""
    deadline = time.monotonic() + timeout
    while True:
        if process.poll() is not None:
            raise SystemExit(f"Daphne on port {port} exited ({process.returncode}) before serving /login/")
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        try:
            connection.request("GET", "/login/")
            status = connection.getresponse().status
        except OSError:
            status = 0  # not listening yet
        finally:
            connection.close()
        if status == 200:
            return
        if status:
            raise SystemExit(f"Daphne on port {port}: GET /login/ answered {status}, not 200")
        if time.monotonic() > deadline:
            raise SystemExit(f"Daphne on port {port} served no page within {timeout:.0f} s")
        time.sleep(0.02)


def scrape_tool_step(ports: list[int], token: str) -> list[tuple[float, float]]:
    """The ``boocode_tool_step_seconds`` buckets (upper bound, count) summed over the Daphnes' ``/metrics``.

    That histogram is the server's own part of the tool step: from the turn reading the model
    stream's end to the call handed to the MCP session. An empty list when no Daphne has it (a tree
    from before the metric).
    """
    buckets: dict[float, float] = {}
    for port in ports:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        try:
            connection.request("GET", "/metrics", headers={"Authorization": f"Bearer {token}"})
            response = connection.getresponse()
            body = response.read().decode(errors="replace") if response.status == 200 else ""
        except OSError:
            body = ""
        finally:
            connection.close()
        for family in text_string_to_metric_families(body):
            for sample in family.samples:
                if sample.name == "boocode_tool_step_seconds_bucket":
                    bound = float(sample.labels["le"])
                    buckets[bound] = buckets.get(bound, 0.0) + sample.value
    return sorted(buckets.items())


def histogram_median_ms(buckets: list[tuple[float, float]]) -> float:
    """The median of a cumulative histogram, interpolated linearly inside its bucket (ms; NaN if empty)."""
    total = buckets[-1][1] if buckets else 0.0
    lower, below = 0.0, 0.0
    for bound, count in buckets:
        if total and count >= total / 2:
            if bound == float("inf"):
                return lower * 1000
            share = (total / 2 - below) / (count - below) if count > below else 0.0
            return (lower + (bound - lower) * share) * 1000
        lower, below = bound, count
    return float("nan")


def rss_mb(pids: list[int]) -> float | None:
    """The resident memory of these processes together, in MB (Linux only)."""
    total = 0
    try:
        for pid in pids:
            with open(f"/proc/{pid}/status") as status:
                line = next(line for line in status if line.startswith("VmRSS:"))
            total += int(line.split()[1])  # kB
    except (OSError, ValueError, StopIteration):
        return None
    return total / 1024


def median_or_nan(samples: list[float]) -> float:
    return statistics.median(samples) if samples else float("nan")


def steal_percent(before: list[int] | None, after: list[int] | None) -> float | None:
    if before is None or after is None:
        return None
    spent = [b - a for a, b in zip(before, after, strict=True)]
    return 100 * spent[7] / (sum(spent) or 1)


def run_once(options: argparse.Namespace, tree: Tree, *, tree_setup: bool) -> dict[str, Any]:
    """One measured run served from ``tree``: fresh data directory and processes. Prints its figures.

    ``tree_setup``: migrate and create the users with the tree's own code (what --against does on
    both sides); otherwise the tests' migrated template and accounts of this tree.
    Returns the run's figures (``FIGURES`` keys and more), NaN or None where nothing was measured.
    """
    scaled = options.web > 1 or options.hub == "worker"
    final_text = MARKDOWN_TEXT if options.answer == "markdown" else FINAL_TEXT

    data = Path(tempfile.mkdtemp(prefix="boocode-bench-"))
    (data / "mcp.json").write_text(
        # The echo says when the call arrived (BOOCODE_ECHO_STAMPS): the tool step below. This
        # tree's toolbox on both sides of --against: its answers are part of the figures.
        json.dumps(
            {
                "mcpServers": {
                    "toolbox": {
                        "command": PYTHON,
                        "args": [str(TOOLBOX)],
                        "env": {"BOOCODE_ECHO_STAMPS": "1"},
                    }
                }
            }
        )
    )
    # The model runs in its own process: in this one it would share the interpreter lock with
    # the clients, and the time it waited for it would count as delay added by the server.
    model_conn, child_conn = multiprocessing.Pipe()
    model = multiprocessing.get_context("fork").Process(
        target=serve_model,
        args=(options.llm_delay, child_conn, final_text, options.chunk_delay, options.window),
        daemon=True,
    )
    model.start()
    base_url = model_conn.recv()
    port = free_port()
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "boocode.settings",
        "BOOCODE_DATA_DIR": str(data),
        "BOOCODE_MCP_CONFIG": str(data / "mcp.json"),
        "BOOCODE_MCP_STDIO_COMMANDS": f"npx,uvx,node,{PYTHON}",
        "BOOCODE_MCP_AUTOSTART": "1",
        "BOOCODE_LLM_BASE_URL": base_url,
        "BOOCODE_LLM_MODEL": "bench-model",
        "BOOCODE_ALLOWED_HOSTS": "127.0.0.1",
        "BOOCODE_LOG_LEVEL": "WARNING",
        "BOOCODE_HUB": options.hub,
        "BOOCODE_HUB_CHANNEL": f"bench-hub-{os.getpid()}",
        "BOOCODE_METRICS_TOKEN": METRICS_TOKEN,
    }
    env.pop("BOOCODE_DATABASE_URL", None)
    env.pop("BOOCODE_REDIS_URL", None)
    if scaled:
        env["BOOCODE_REDIS_URL"] = options.redis
    if options.database_url:
        fresh_database(options.database_url)
        env["BOOCODE_DATABASE_URL"] = options.database_url
    if tree_setup:
        accounts = tree_accounts(tree, env, options.sessions + 1)
    else:
        accounts = create_accounts(env, options.sessions + 1)
    worker = start_hub_worker(env, tree.root) if options.hub == "worker" else None
    ports = [port] + [free_port() for _ in range(options.web - 1)]
    # Daphne's stderr goes to files: a pipe read only at the end would stop it at 64 KB of log.
    logs = [tempfile.TemporaryFile() for _ in ports]
    launched = time.perf_counter()
    webs = [
        subprocess.Popen(
            [str(tree.serve)],  # as deployments serve it
            cwd=tree.root,
            env={**env, "HOST": "127.0.0.1", "PORT": str(web_port), "PYTHON": PYTHON},
            stdout=subprocess.DEVNULL,
            stderr=log,
            start_new_session=True,
        )
        for web_port, log in zip(ports, logs, strict=True)
    ]
    stderr = b""
    try:
        for web_port, daphne in zip(ports, webs, strict=True):
            wait_for_page(web_port, daphne)
        first_page = time.perf_counter() - launched  # the slowest of them, with --web N
        cpu_before = cpu_times()
        server_cpu: list[float | None] = []  # the Daphnes' CPU time when the measured sessions start

        def mark() -> None:
            server_cpu.append(process_cpu_seconds([web.pid for web in webs]))

        results, elapsed = asyncio.run(load(ports, accounts, options.turns, options.think, mark))
        server_cpu.append(process_cpu_seconds([web.pid for web in webs]))
        rss = rss_mb([web.pid for web in webs])
        step_buckets = scrape_tool_step(ports, METRICS_TOKEN)
        cpu_after = cpu_times()
    finally:
        for daphne, log in zip(webs, logs, strict=True):
            stop(daphne)
            log.seek(0)
            stderr += log.read()
            log.close()
        if worker is not None:
            stop(worker)
        model_conn.send("stop")
        request_at, first_chunk_at, last_chunk_at, call_received_at = model_conn.recv()
        model.join(10)
    expected, missing = check_persistence(
        data / "boocode.sqlite3",
        accounts[1:],
        options.turns,
        options.database_url,
        results.refused_for_good,
        final_text,
    )
    shutil.rmtree(data, ignore_errors=True)

    latency_ms = [s * 1000 for s in results.latencies]
    first_ms = [s * 1000 for s in results.first_tokens]
    # What the server adds: from the user's frame to the model's request, plus from the model's
    # first bytes to the text_delta at the client. The model's own time in between (its
    # scripted delay and whatever its process took beyond that) is not the server's.
    before_ms, relay_ms, model_ms = [], [], []
    for text, at in results.first_delta_at.items():
        if text in request_at and text in first_chunk_at:
            before_ms.append((request_at[text] - results.sent_at[text]) * 1000)
            model_ms.append((first_chunk_at[text] - request_at[text]) * 1000)
            relay_ms.append((at - first_chunk_at[text]) * 1000)
    added_ms = [before + relay for before, relay in zip(before_ms, relay_ms, strict=True)]
    # The tool step: from the end of the model's answer that asks for the call to the MCP server
    # receiving it (the turn stores the answer and its call, then calls the server).
    tool_step_ms = [
        (received - last_chunk_at[text]) * 1000
        for text, received in call_received_at.items()
        if text in last_chunk_at
    ]
    nominal_ms = [value - options.llm_delay * 1000 for value in first_ms]
    pacing = f"{options.think:g} s mean think time" if options.think else "back to back"
    print(
        f"sessions: {options.sessions} concurrent, {options.turns} turns each, {pacing} "
        "(each turn: streamed text, one MCP tool call, streamed answer)"
    )
    print(
        f"shape: {options.web} web process(es), hub {options.hub}, "
        f"{'Redis' if scaled else 'in-memory layer'}, {'PostgreSQL' if options.database_url else 'SQLite'}"
    )
    print(f"turns completed: {results.turns} in {elapsed:.2f} s -> {results.turns / elapsed:.1f} turns/s")
    print(f"turn latency: {p50_p95(latency_ms)}")
    print(f"first token: {p50_p95(first_ms)} (the scripted model's own: {options.llm_delay * 1000:.0f} ms)")
    print(f"first token minus the model's nominal {options.llm_delay * 1000:.0f} ms: {p50_p95(nominal_ms)}")
    print(f"  the model's own, from its request to its first bytes: {p50_p95(model_ms)}")
    print(f"added first-token delay (the server's part): {p50_p95(added_ms)}")
    print(f"  from the user's frame to the model's request: {p50_p95(before_ms)}")
    print(f"  from the model's first bytes to the text_delta at the client: {p50_p95(relay_ms)}")
    print(f"tool step (the model's last byte to the MCP server receiving the call): {p50_p95(tool_step_ms)}")
    own_step_ms = histogram_median_ms(step_buckets)
    within = next((count for bound, count in step_buckets if bound == 0.025), float("nan"))
    calls = step_buckets[-1][1] if step_buckets else 0
    print(
        "  the server's own part (the stream's end read to the call handed to the MCP session, "
        + (
            f"boocode_tool_step_seconds): p50 ~{own_step_ms:.1f} ms, {within / calls:.0%} within 25 ms"
            if calls
            else "boocode_tool_step_seconds): n/a"
        )
    )
    print(f"machine CPU during the run: {cpu_share(cpu_before, cpu_after)}")
    started_cpu, ended_cpu = [*server_cpu, None, None][:2]
    per_turn = float("nan")
    if started_cpu is not None and ended_cpu is not None and results.turns:
        spent = ended_cpu - started_cpu
        per_turn = spent * 1000 / results.turns
        streamed_kb = results.turns * (len(FIRST_TEXT) + len(final_text)) / 1024
        print(
            f"server CPU (the Daphne processes): {spent:.1f} s, {per_turn:.1f} ms per turn, "
            f"{spent * 1000 / streamed_kb:.1f} ms per streamed KB ({options.answer} answer of "
            f"{len(final_text):,} characters, chunks {options.chunk_delay * 1000:g} ms apart)"
        )
    print(f"Daphne start to first page (launch to GET /login/ answering 200): {first_page:.2f} s")
    print("server RSS after the run (the Daphne processes): " + ("n/a" if rss is None else f"{rss:.0f} MB"))
    print(f"errors: {len(results.errors)}" + (f" (first: {results.errors[0]})" if results.errors else ""))
    print(
        f"refused (turn_in_progress, sent again): {results.refused}; "
        f"refused every time (never stored, not lost): {len(results.refused_for_good)}"
    )
    print(f"persisted: {expected - missing}/{expected} turns complete in the database; lost: {missing}")
    if stderr and b"Traceback" in stderr:
        print("daphne logged tracebacks:\n" + stderr.decode(errors="replace")[-3000:])
    return {
        "turns": results.turns,
        "elapsed_s": elapsed,
        "turns_per_s": results.turns / elapsed,
        "latency_p50_ms": median_or_nan(latency_ms),
        "latency_p95_ms": percentile(latency_ms, 0.95),
        "added_p50_ms": median_or_nan(added_ms),
        "added_p95_ms": percentile(added_ms, 0.95),
        "before_p50_ms": median_or_nan(before_ms),
        "relay_p50_ms": median_or_nan(relay_ms),
        "tool_step_p50_ms": median_or_nan(tool_step_ms),
        "own_tool_step_p50_ms": own_step_ms,
        "cpu_per_turn_ms": per_turn,
        "rss_mb": rss if rss is not None else float("nan"),
        "first_page_s": first_page,
        "errors": len(results.errors),
        "refused": results.refused,
        "expected_turns": expected,
        "lost_turns": missing,
        "steal_percent": steal_percent(cpu_before, cpu_after),
    }


def parse_options(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=50)
    parser.add_argument("--turns", type=int, default=5, help="turns per session")
    parser.add_argument(
        "--llm-delay", type=float, default=0.05, help="the scripted model's first-token delay (s)"
    )
    parser.add_argument(
        "--window",
        type=int,
        default=131072,
        help="the window the scripted model states in /v1/models, as vLLM does (0: none)",
    )
    parser.add_argument(
        "--think",
        type=float,
        default=0.0,
        help="mean pause before each turn (s); 0 = back to back (saturation)",
    )
    parser.add_argument(
        "--answer", choices=("plain", "markdown"), default="plain", help="the final answer's text"
    )
    parser.add_argument(
        "--chunk-delay", type=float, default=0.0, help="seconds between the final answer's chunks"
    )
    parser.add_argument("--web", type=int, default=1, help="Daphne web processes (more than 1 needs Redis)")
    parser.add_argument("--hub", choices=("inprocess", "worker"), default="inprocess")
    parser.add_argument("--redis", default="redis://127.0.0.1:6379/13", help="with --web > 1 or --hub worker")
    parser.add_argument("--database-url", default="", help="PostgreSQL (dropped and created afresh)")
    parser.add_argument(
        "--against",
        metavar="REF",
        default="",
        help="a git ref: alternate runs of this tree and that tree's server side, then print ratios",
    )
    parser.add_argument("--pairs", type=int, default=4, help="with --against: pairs of runs (ABBA order)")
    parser.add_argument("--json", metavar="FILE", default="", help="the figures (and ratios) as JSON")
    options = parser.parse_args(argv)
    if options.pairs < 1:
        parser.error("--pairs must be at least 1")
    return options


def compare(options: argparse.Namespace) -> dict[str, Any]:
    """--against: ``options.pairs`` pairs of runs, this tree and the exported one in ABBA order."""
    folder = Path(tempfile.mkdtemp(prefix="boocode-bench-against-"))
    try:
        that = export_tree(options.against, folder)
        sides = {"this": THIS_TREE, "that": that}
        print(f"this tree: {ROOT}; that tree: {that.label}, exported to {folder}")
        if that.serve == THIS_TREE.serve:
            print(f"  {that.label} has no scripts/serve: its Daphne runs with this tree's (same options)")
        runs: list[dict[str, Any]] = []
        order = pair_order(options.pairs)
        for index, (pair, side) in enumerate(order, 1):
            tree = sides[side]
            print(f"\n=== run {index} of {len(order)}: pair {pair + 1}, {tree.label} ===", flush=True)
            figures = run_once(options, tree, tree_setup=True)
            runs.append({"pair": pair, "side": side, "tree": tree.label, "figures": figures})
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    table = ratio_table(runs, options.pairs)
    print(f"\n=== this tree ÷ {that.label}, per pair (run order ABBA) ===")
    print(format_ratio_table(table, options.pairs))
    return {"this": str(ROOT), "that": that.label, "runs": runs, "ratios": table}


def json_safe(value: Any) -> Any:
    """``value`` with NaN as null (JSON has no NaN)."""
    if isinstance(value, float) and value != value:
        return None
    if isinstance(value, dict):
        return {key: json_safe(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(item) for item in value]
    return value


def main() -> None:
    options = parse_options()
    if options.against:
        report: dict[str, Any] = compare(options)
    else:
        figures = run_once(options, THIS_TREE, tree_setup=False)
        report = {"this": str(ROOT), "runs": [{"side": "this", "figures": figures}]}
    if options.json:
        report["options"] = vars(options)
        Path(options.json).write_text(json.dumps(json_safe(report), indent=2) + "\n")


if __name__ == "__main__":
    main()

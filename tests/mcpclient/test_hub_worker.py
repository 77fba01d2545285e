"""BOOCODE_HUB=worker with real processes: one hub worker, two Daphne web processes, Redis, PostgreSQL.

Everything is real: ``manage.py hub_worker`` holds the toolbox over stdio (with its resources,
prompts, questions and logs) and a "perUser" OAuth server over HTTP (tests/servers/oauth_server.py),
two Daphne processes serve the chat and the admin, the Redis channel layer (database 13, a
channel name of this module's own) carries the calls, all three processes share a PostgreSQL
database of this module's own, and the scripted model asks for the tools.
The tests run in file order on one deployment; the last two kill the worker with SIGKILL and
start it again.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import os
import re
import selectors
import signal
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from unittest import mock

import aiohttp
import psycopg
import pytest
import redis
from yarl import URL

from mcpclient.worker import wire as worker_wire
from mcpclient.worker.signing import SignedRedisPubSubChannelLayer, layer_key
from tests.support.live import create_accounts, fresh_database, live_daphne, with_default_sigint
from tests.support.llm import Call, ScriptedLLM, Text, ToolCalls
from tests.support.oauth import OAuthServer
from tests.support.otlp import OtlpReceiver, ancestry
from tests.support.processes import PYTHON, REAL_PYTHON, ROOT, TOOLBOX, HttpServer, free_port, redis_url
from tests.support.scrape import Figures
from tests.support.tabs import Tab

pytestmark = [pytest.mark.redis, pytest.mark.postgres_only, pytest.mark.processes]

MODEL = "test-model"
REDIS_URL = redis_url()  # a database of this worker's own
REDIS_PREFIX = f"boocode-db{REDIS_URL.rsplit('/', 1)[1]}"  # settings.py names the layer's channels so
# Of the toolbox; "writes" adds write_note, whose every call needs the person's approval.
# "meta": request_meta answers with its request's _meta (the trace context across the hop).
# "skills": skills served by the skills extension (listed, read and verified in the worker).
FEATURES = (
    "progress",
    "questions",
    "resources",
    "prompts",
    "logs",
    "writes",
    "meta",
    "apps",
    "skills",
    "undeclared",
)
TIMEOUT_S = 8  # the toolbox's "timeout" in mcp.json: a call never waits longer (plus the grace)
SECRET_KEY = f"hub-worker-test-{uuid.uuid4().hex}"  # shared by the deployment's processes
METRICS_TOKEN = f"metrics-{uuid.uuid4().hex}"  # every process's /metrics, the hub worker's included


def signed_layer(key: str = SECRET_KEY) -> SignedRedisPubSubChannelLayer:
    """The hub's channel layer as a process of the deployment (``key``: another one's) has it."""
    return SignedRedisPubSubChannelLayer(hosts=[REDIS_URL], prefix=REDIS_PREFIX, signing_key=layer_key(key))


def respond(body: dict[str, Any]) -> Any:
    """The model: ``tool NAME {json}`` calls that tool; after a tool result it says what came back."""
    last = body["messages"][-1]
    if last["role"] == "tool":
        return Text(f"got: {last['content'][:200]}")
    match = re.fullmatch(r"tool (\S+) (.*)", last["content"])
    if match is None:
        return Text("no tool asked for")
    return ToolCalls([Call(match[1], json.loads(match[2]))])


class Deployment:
    """The processes of one worker-mode deployment and how to reach them."""

    def __init__(
        self,
        env: dict[str, str],
        tag: str,
        accounts: list[dict[str, Any]],
        llm: ScriptedLLM,
        oauth: OAuthServer,
    ) -> None:
        self.env, self.tag, self.accounts, self.llm, self.oauth = env, tag, accounts, llm, oauth
        self.worker: subprocess.Popen[bytes] | None = None
        self.ports: list[int] = []
        self.traces: OtlpReceiver | None = None  # where every process of the deployment sends its spans

    @property
    def worker_metrics(self) -> str:
        """The hub worker's own /metrics (BOOCODE_HUB_WORKER_METRICS_PORT)."""
        return f"http://127.0.0.1:{self.env['BOOCODE_HUB_WORKER_METRICS_PORT']}/metrics"

    @property
    def worker_log(self) -> Path:
        """What every hub worker of this deployment wrote to stderr (its log)."""
        return Path(self.env["BOOCODE_DATA_DIR"]) / "worker.log"

    def start_worker(self) -> None:
        """Start ``manage.py hub_worker``; return once it listens (its first line on stdout)."""
        with self.worker_log.open("ab") as log:
            self.worker = subprocess.Popen(
                # The real interpreter: the tests check that the servers are this process's children.
                with_default_sigint([REAL_PYTHON, "manage.py", "hub_worker"]),
                cwd=ROOT,
                env=self.env,
                stdout=subprocess.PIPE,
                stderr=log,
            )
        assert self.worker.stdout is not None
        with selectors.DefaultSelector() as selector:
            selector.register(self.worker.stdout, selectors.EVENT_READ)
            # A deadline, not a wait (as for a live Daphne): a start on a loaded machine is slow.
            assert selector.select(120), "the hub worker did not start within 120 s"
        assert b"listening" in self.worker.stdout.readline()

    def children(self) -> list[tuple[int, int]]:
        """``(pid, parent pid)`` of every live toolbox process of this deployment."""
        found = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                argv = (entry / "cmdline").read_bytes().split(b"\0")
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            state = stat.rsplit(")", 1)[1].split()
            if str(TOOLBOX).encode() in argv and self.tag.encode() in argv and state[0] != "Z":
                found.append((int(entry.name), int(state[1])))
        return found


def wait_for(predicate: Any, timeout: float, what: str) -> None:
    """Block until ``predicate()`` holds (checked every 50 ms: other processes give no event)."""
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"{what}: not within {timeout} s"
        time.sleep(0.05)


@pytest.fixture(scope="module")
def deployment(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    data = tmp_path_factory.mktemp("hubworker")
    tag = f"hubworker-{uuid.uuid4().hex[:8]}"
    entry = {
        "command": PYTHON,
        "args": [str(TOOLBOX), "--tag", tag]
        + [arg for feature in FEATURES for arg in ("--feature", feature)],
        "timeout": TIMEOUT_S * 1000,
        "writeTools": "approve",
    }
    port_b = free_port()
    oauth = OAuthServer.start()
    secure = {"type": "http", "url": oauth.url, "oauth": {"mode": "perUser"}}
    # For the group "eng" only (tests/chat/test_groups.py); its tag keeps it out of children().
    team = {"command": PYTHON, "args": [str(TOOLBOX), "--tag", f"{tag}-team"], "groups": ["eng"]}
    servers = {"toolbox": entry, "secure": secure, "team": team}
    (data / "mcp.json").write_text(json.dumps({"mcpServers": servers}))
    with (
        contextlib.ExitStack() as stack,
        ScriptedLLM(models=(MODEL,), responder=respond) as llm,
        OtlpReceiver() as traces,
    ):
        stack.callback(oauth.stop)
        env = {
            **os.environ,
            "BOOCODE_DATA_DIR": str(data),
            "BOOCODE_LLM_BASE_URL": llm.base_url,
            "BOOCODE_LLM_MODEL": MODEL,
            "BOOCODE_ALLOWED_HOSTS": "127.0.0.1",
            "BOOCODE_REDIS_URL": REDIS_URL,
            "BOOCODE_HUB": "worker",
            "BOOCODE_HUB_CHANNEL": f"hubtest-{uuid.uuid4().hex[:12]}",
            "BOOCODE_MCP_STDIO_COMMANDS": PYTHON,
            "BOOCODE_MCP_AUTOSTART": "1",
            # Every tool in every model request (these tests look at them), unless AGENTS.md says
            # otherwise (the tool search test does).
            "BOOCODE_TOOL_SEARCH_TOOLS": "10000",
            "BOOCODE_TOOL_SEARCH_TOKENS": "10000000",
            # A window that holds every definition (past half the window tools are deferred).
            "BOOCODE_LLM_CONTEXT_TOKENS": "1000000",
            "BOOCODE_PUBLIC_URL": f"http://127.0.0.1:{port_b}",  # sign-ins come back to B
            "BOOCODE_SECRET_KEY": SECRET_KEY,  # the hub's messages are signed with a key from it
            # Traces and metrics (docs/operations.md): every process exports its spans to the
            # receiver, in batches 0.1 s apart; the worker serves its own /metrics.
            "OTEL_EXPORTER_OTLP_ENDPOINT": traces.url,
            "OTEL_BSP_SCHEDULE_DELAY": "100",
            "BOOCODE_METRICS_TOKEN": METRICS_TOKEN,
            "BOOCODE_HUB_WORKER_METRICS_PORT": str(free_port()),
            # People's own servers are checked like any address: the tests' run on 127.0.0.1.
            "BOOCODE_EGRESS_ALLOW": "127.0.0.1",
        }
        env.pop("BOOCODE_TEST_DB_NAME", None)
        env["BOOCODE_DATABASE_URL"] = stack.enter_context(fresh_database("boocode_hubworker"))
        accounts = create_accounts(env, 3, staff=True)  # administrators: the admin tests need them
        deployment = Deployment(env, tag, accounts, llm, oauth)
        deployment.traces = traces
        deployment.start_worker()
        try:
            with live_daphne(env) as (_, port_a), live_daphne(env, port_b):
                deployment.ports = [port_a, port_b]
                yield deployment
        finally:
            if deployment.worker is not None and deployment.worker.poll() is None:
                deployment.worker.send_signal(signal.SIGTERM)
                deployment.worker.wait(20)


async def _start_turn(tab: Tab, text: str | dict[str, Any], started: str = "tool_call") -> None:
    """Send ``text`` (or a frame) until its turn starts (a ``started`` frame), within 10 s.

    The conversation's turn lock may be released a moment after the last turn_end (the server
    says turn_in_progress then): the message is sent again.
    """
    deadline = time.monotonic() + 10
    frame = {"type": "user_message", "text": text} if isinstance(text, str) else text
    while True:
        await tab.send(frame)
        got = await tab.next_of((started, "error"))
        if got["type"] == started:
            return
        assert got["code"] == "turn_in_progress" and time.monotonic() < deadline, got
        await asyncio.sleep(0.1)


def server_status(frame: dict[str, Any]) -> str:
    return next((s["status"] for s in frame["servers"] if s["name"] == "toolbox"), "absent")


async def _ready_status(tab: Tab) -> None:
    """Wait until the page's status line says the toolbox is ready (the worker connected it)."""
    frame = await tab.next("status")
    while server_status(frame) != "ready":
        frame = await tab.next("status")


def test_a_call_from_each_web_process_reaches_the_one_child(deployment: Deployment) -> None:
    async def run() -> list[str]:
        outputs = []
        for port, account in zip(deployment.ports, deployment.accounts, strict=False):
            async with Tab.live(port, account, take_status=False) as tab:
                await _ready_status(tab)
                call, end = await tab.turn(f'tool toolbox_echo {{"text": "from {port}"}}')
                assert end["status"] == "complete"
                outputs.append(call["output"])
        return outputs

    assert asyncio.run(run()) == [f"from {port}" for port in deployment.ports]
    assert deployment.worker is not None
    # One stdio child for one stdio server, whatever the number of web processes: the worker's.
    assert [parent for _, parent in deployment.children()] == [deployment.worker.pid]
    # Each call left its audit row, written by the web process that ran the turn, in the one
    # database every process shares; the definition's digest is the one the worker reviewed.
    expected = [
        (f"live{index}", "model", "toolbox", "echo", "ok", json.dumps({"text": f"from {port}"}))
        for index, port in enumerate(deployment.ports)
    ]
    deadline = time.monotonic() + 10
    while (rows := _audit_rows(deployment)) != expected and time.monotonic() < deadline:
        time.sleep(0.1)
    assert rows == expected
    digests = _query(
        deployment,
        "SELECT a.digest, p.digest FROM chat_toolcallaudit a JOIN mcpclient_toolpin p "
        "ON p.server = a.server AND p.tool = a.tool",
    )
    assert digests and all(len(audited) == 64 and audited == pinned for audited, pinned in digests)


def _query(deployment: Deployment, sql: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(deployment.env["BOOCODE_DATABASE_URL"]) as connection:
        return connection.execute(sql).fetchall()


def _audit_rows(deployment: Deployment) -> list[tuple[Any, ...]]:
    return _query(
        deployment,
        "SELECT username, origin, server, tool, outcome, arguments FROM chat_toolcallaudit "
        "WHERE name = 'toolbox_echo' ORDER BY created_at, id",
    )


def test_a_call_through_the_worker_is_one_trace_down_to_the_request_the_server_received(
    deployment: Deployment,
) -> None:
    async def run() -> dict[str, Any]:
        async with Tab.live(deployment.ports[0], deployment.accounts[0], take_status=False) as tab:
            await _ready_status(tab)
            call, end = await tab.turn("tool toolbox_request_meta {}")
            assert end["status"] == "complete"
            return json.loads(call["output"])

    received = asyncio.run(run())
    _, trace_id, parent_id, _ = received["traceparent"].split("-")
    assert deployment.traces is not None
    spans = deployment.traces.wait_for(
        lambda spans: {"turn", "tools/call request_meta"} <= {s.name for s in spans if s.trace_id == trace_id}
    )
    trace = [span for span in spans if span.trace_id == trace_id]
    [request] = [span for span in trace if span.span_id == parent_id]  # the span the server was told of
    assert ancestry(request, trace) == [
        "tools/call request_meta",
        "hub.call toolbox_request_meta",
        "execute_tool toolbox_request_meta",
        "turn",
    ]
    # The MCP request is the hub worker's span, its parent the web process's: the hop carried it.
    assert request.resource["boocode.process"] == "hub_worker"
    parent = next(span for span in trace if span.span_id == request.parent_id)
    assert parent.resource["boocode.process"] == "web" and parent.kind == "client"


def test_each_web_process_and_the_worker_report_their_own_figures(deployment: Deployment) -> None:
    port_a, port_b = deployment.ports
    bearer = {"Authorization": f"Bearer {METRICS_TOKEN}"}

    async def scrape(url: str) -> Figures:
        async with aiohttp.ClientSession() as session, session.get(url, headers=bearer) as response:
            assert response.status == 200, await response.text()
            return Figures.parse(await response.text())

    async def run() -> None:
        async with aiohttp.ClientSession() as session:  # the worker's endpoint refuses the rest
            async with session.get(deployment.worker_metrics) as response:
                assert response.status == 404
            wrong = {"Authorization": "Bearer not-the-token"}
            async with session.get(deployment.worker_metrics, headers=wrong) as response:
                assert response.status == 403
        before = [await scrape(f"http://127.0.0.1:{port}/metrics") for port in (port_a, port_b)]
        worker_before = await scrape(deployment.worker_metrics)
        async with Tab.live(port_b, deployment.accounts[1], take_status=False) as tab:
            await _ready_status(tab)
            call, end = await tab.turn('tool toolbox_echo {"text": "counted"}')
            assert (call["output"], end["status"]) == ("counted", "complete")
        # A turn is counted as its task ends, just after turn_end reached the tab: B is read again
        # (every 50 ms, for 10 s at most: another process gives no event) until it has been. The
        # other figures were counted before the tool's result went out.
        deadline = time.monotonic() + 10
        complete = {"status": "complete"}
        after_b = await scrape(f"http://127.0.0.1:{port_b}/metrics")
        while not after_b.delta(before[1], "boocode_turns_total", **complete) and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
            after_b = await scrape(f"http://127.0.0.1:{port_b}/metrics")
        after_a = await scrape(f"http://127.0.0.1:{port_a}/metrics")
        worker = await scrape(deployment.worker_metrics)
        # The turn is B's; the MCP request, its tool step and the servers' states are the worker's.
        ok = {"server": "toolbox", "outcome": "ok"}
        assert after_b.delta(before[1], "boocode_turns_total", **complete) == 1
        assert after_a.delta(before[0], "boocode_turns_total", **complete) == 0
        assert after_b.delta(before[1], "boocode_tool_calls_total", **ok) == 1
        assert worker.delta(worker_before, "boocode_mcp_tool_calls_total", **ok) == 1
        assert worker.delta(worker_before, "boocode_tool_step_seconds_count") == 1
        assert worker.value("boocode_mcp_server_status", server="toolbox", status="ready") == 1
        assert not after_b.has("boocode_mcp_server_status", server="toolbox", status="ready")
        assert after_b.delta(before[1], "boocode_mcp_tool_calls_total", **ok) == 0

    asyncio.run(run())


def test_the_worker_weighs_the_agents_windows_once_its_servers_have_started(deployment: Deployment) -> None:
    # The web processes hold no hub: the worker, whose servers' tools are known, weighs them
    # (tests/chat/test_window_startup.py has the warnings themselves, from a real Daphne).
    def weighed() -> re.Match[str] | None:
        log = deployment.worker_log.read_text()
        return re.search(r"context windows weighed for (\d+) agents?: (\d+) too small", log)

    wait_for(weighed, 60, "the hub worker did not weigh the agents' context windows")
    found = weighed()
    assert found is not None and int(found.group(1)) >= 1 and found.group(2) == "0"  # a window of 1,000,000


def test_a_message_the_worker_cannot_handle_is_logged_and_calls_go_on(deployment: Deployment) -> None:
    from redis.asyncio import Redis

    bad = [
        {"type": "hub.nonsense"},  # no handler
        {"type": "dispatch", "id": "x"},  # not a hub message: never one of the consumer's methods
        {"type": "hub.call", "id": "x"},  # a call without its reply channel, name or arguments
    ]

    async def run() -> dict[str, Any]:
        group = deployment.env["BOOCODE_HUB_CHANNEL"]
        layer = signed_layer()  # as a buggy process of the deployment would send them
        try:
            for message in [{"id": "x"}, *bad]:  # the first has no type: Channels' listener stops on it
                await layer.group_send(group, message)
            # Not msgpack at all (0xc1 is never used by the format), on the group's Redis channel.
            redis = Redis.from_url(REDIS_URL)
            await redis.publish(f"{REDIS_PREFIX}__group__{group}", b"\xc1 not a message")
            await redis.aclose()
        finally:
            await layer.flush()
        async with Tab.live(deployment.ports[0], deployment.accounts[0], take_status=False) as tab:
            await _ready_status(tab)
            call, end = await tab.turn('tool toolbox_echo {"text": "still here"}')
            assert end["status"] == "complete"
            return call

    assert asyncio.run(run())["output"] == "still here"
    assert deployment.worker is not None and deployment.worker.poll() is None  # the same worker
    log = deployment.worker_log.read_text()
    assert "dropped a message without a type" in log
    assert "refused a channel layer message that could not be read" in log  # the bytes that are no msgpack
    assert "could not handle a 'hub.nonsense' message" in log
    assert "not a hub message: 'dispatch'" in log
    assert "could not handle a 'hub.call' message" in log and "KeyError: 'reply'" in log


def test_progress_and_a_form_reach_the_tab_that_made_the_call(deployment: Deployment, tmp_path: Path) -> None:
    gate = tmp_path

    async def run() -> None:
        port_a, port_b = deployment.ports
        async with (
            Tab.live(port_a, deployment.accounts[0], take_status=False) as a,
            Tab.live(port_b, deployment.accounts[1], take_status=False) as b,
        ):
            await _ready_status(a)
            await _ready_status(b)
            arguments = json.dumps({"steps": 3, "gate": str(gate)})
            await a.send({"type": "user_message", "text": f"tool toolbox_count_steps {arguments}"})
            call = (await a.next("tool_call"))["call"]
            for step in (1, 2):  # the server reports step N once the test lets it (no timing)
                (gate / f"go-{step}").touch()
                update = await a.next("tool_progress", call_id=call["id"], progress=step)
                assert (update["total"], update["message"]) == (3, f"step {step} of 3")
            # The last step comes with the result: the page's throttle may fold it into the result.
            (gate / "go-3").touch()
            assert (await a.next("tool_result"))["call"]["output"] == "counted 3 steps"
            await a.next("turn_end")

            await b.send({"type": "user_message", "text": "tool toolbox_ask_form {}"})
            form = (await b.next("elicitation"))["elicitation"]
            await b.send({"type": "elicitation_answer", "id": form["id"], "action": "decline"})
            assert (await b.next("tool_result"))["call"]["output"] == "decline"
            await b.next("turn_end")
            # Neither the other process's tab saw a thing of it.
            assert not [f for f in a.frames if f["type"] == "elicitation"]
            assert not [f for f in b.frames if f["type"] == "tool_progress"]

    asyncio.run(run())


def test_a_views_calls_go_through_the_worker_behind_the_same_approval(deployment: Deployment) -> None:
    """MCP Apps: the view of a call asks the web process, which calls through the worker."""

    async def run() -> None:
        async with Tab.live(deployment.ports[1], deployment.accounts[2], take_status=False) as tab:
            await _ready_status(tab)
            call, end = await tab.turn('tool toolbox_show_clock {"city": "Rome"}')
            assert end["status"] == "complete" and call["view"] == "ui://toolbox/clock.html"
            ask = {"type": "view_request", "call": call["id"], "method": "tools/call"}
            await tab.send({**ask, "id": 1, "params": {"name": "tick"}})  # for views only
            assert (await tab.next("view_reply"))["result"]["content"][0]["text"] == "tick"
            await tab.send({**ask, "id": 2, "params": {"name": "set_alarm", "arguments": {"at": "9:00"}}})
            approval = (await tab.next("approval"))["approval"]
            assert approval["from_view"] and approval["name"] == "toolbox_set_alarm"
            await tab.send({"type": "approval_answer", "id": approval["id"], "decision": "approve"})
            reply = await tab.next("view_reply")  # the worker checked the approval it was given
            assert reply["id"] == 2 and reply["result"]["content"][0]["text"] == "alarm set for 9:00"
            await tab.send({**ask, "id": 3, "params": {"name": "model_only"}})
            assert "for the model only" in (await tab.next("view_reply"))["error"]

    asyncio.run(run())


def test_tool_search_ranks_the_tools_the_worker_holds(deployment: Deployment) -> None:
    """An agent with toolSearch: always gets the search tool, which ranks the worker's tools."""
    agents = Path(deployment.env["BOOCODE_DATA_DIR"]) / "AGENTS.md"

    async def run() -> None:
        async with Tab.live(deployment.ports[0], deployment.accounts[2], take_status=False) as tab:
            await _ready_status(tab)
            since = len(deployment.llm.requests)
            call, end = await tab.turn('tool tool_search {"query": "count the steps and report progress"}')
            assert end["status"] == "complete"
            offered = [tool["function"]["name"] for tool in deployment.llm.requests[since].get("tools", [])]
            assert "tool_search" in offered and len(offered) < 10
            found = [tool["name"] for tool in json.loads(call["output"])["tools"]]
            assert found[0] == "toolbox_count_steps", found

    agents.write_text("## Searcher\n---\ntoolSearch: always\n---\nFind your tools.\n")
    try:
        asyncio.run(run())
    finally:
        agents.unlink()


@contextlib.asynccontextmanager
async def signed_in(account: dict[str, Any]) -> Any:
    """An HTTP client with ``account``'s session (cookies of 127.0.0.1 go to both web processes)."""
    # unsafe: keep the cookies of an IP address (127.0.0.1), as a browser does.
    jar = aiohttp.CookieJar(unsafe=True)
    async with aiohttp.ClientSession(cookies={"sessionid": account["cookie"]}, cookie_jar=jar) as session:
        yield session


async def _json(session: aiohttp.ClientSession, url: str, status: int = 200) -> Any:
    async with session.get(url) as response:
        body = await response.json()
        assert response.status == status, body
        return body


def test_resources_completions_and_prompts_are_served_by_the_worker(deployment: Deployment) -> None:
    port_a, port_b = deployment.ports

    async def run() -> None:
        async with signed_in(deployment.accounts[0]) as session:
            base = f"http://127.0.0.1:{port_b}/api"
            listed = await _json(session, f"{base}/resources/?q=read")
            assert [(r["server"], r["uri"]) for r in listed["resources"]] == [
                ("toolbox", "toolbox://notes/readme.txt")
            ]
            assert [s["name"] for s in listed["servers"]] == ["toolbox"]
            read = await _json(
                session, f"{base}/resources/read/?server=toolbox&uri=toolbox://notes/readme.txt"
            )
            assert read["contents"][0]["text"] == "The toolbox reads you this note."
            dot = await _json(session, f"{base}/resources/read/?server=toolbox&uri=toolbox://images/dot.png")
            assert dot["contents"][0]["size"] == 70  # bytes over the hop, as bytes
            # Capped in the worker: 6 MB of text never crosses whole.
            large = await _json(
                session, f"{base}/resources/read/?server=toolbox&uri=toolbox://data/large.txt"
            )
            assert large["contents"][0]["text"].endswith(
                "[output truncated: 1048576 of 6291456 bytes cut; the limit is 5242880 bytes]"
            )
            missing = await _json(session, f"{base}/resources/read/?server=toolbox&uri=toolbox://nope", 404)
            assert missing["error"].startswith('MCP server "toolbox" has no resource toolbox://nope')
            city = "toolbox://cities/{city}"
            found = await _json(
                session, f"{base}/complete/?server=toolbox&ref=resource&name={city}&argument=city&value=Be"
            )
            assert found["values"] == ["Berlin", "Bern"]
            menu = await _json(session, f"{base}/prompts/")
            assert {"greeting", "code_review", "briefing"} <= {p["name"] for p in menu["prompts"]}

        async with Tab.live(port_a, deployment.accounts[0], take_status=False) as a:
            await _ready_status(a)
            arguments = {"language": "python", "code": "print(1)"}
            await _start_turn(
                a,
                {"type": "prompt", "server": "toolbox", "name": "code_review", "arguments": arguments},
                "message",
            )
            end = await a.next("turn_end")
            assert end["status"] == "complete"
            inserted = [f["message"]["content"] for f in a.frames if f["type"] == "message"]
            assert "Please review this python code:\nprint(1)" in inserted
            since = len(deployment.llm.requests)
            attached = [{"server": "toolbox", "uri": "toolbox://notes/readme.txt"}]
            asked = {"type": "user_message", "text": "What does it say?", "attachments": attached}
            await _start_turn(a, asked, "message")
            assert (await a.next("turn_end"))["status"] == "complete"
            sent = deployment.llm.requests[since]["messages"][-1]["content"]
            assert "The toolbox reads you this note." in sent and 'server="toolbox"' in sent

    asyncio.run(run())


def test_skills_are_listed_read_and_verified_in_the_worker(deployment: Deployment) -> None:
    port_a, port_b = deployment.ports

    async def run() -> None:
        async with signed_in(deployment.accounts[0]) as session:
            base = f"http://127.0.0.1:{port_b}/api"
            listed = await _json(session, f"{base}/skills/")
            assert [(s["server"], s["label"]) for s in listed["skills"]] == [
                ("toolbox", "pdf-forms"),
                ("toolbox", "git-workflow"),
                ("toolbox", "release-notes"),
                ("toolbox", "daily-report"),
            ]
            read = await _json(session, f"{base}/skills/read/?server=toolbox&skill=pdf-forms")
            assert read["contents"][0]["text"].startswith("name: pdf-forms")  # its frontmatter, then
            refused = await _json(session, f"{base}/skills/read/?server=toolbox&skill=daily-report", 409)
            assert 'the skill "daily-report" cannot be loaded' in refused["error"]  # a refusal, not a failure

        async with Tab.live(port_a, deployment.accounts[0], take_status=False) as a:
            await _ready_status(a)
            for file, said in [
                ("references/FORMS.md", "the bank account, checked before sending"),
                ("examples/changelog.md", "file examples/changelog.md: its SHA-256 digest is sha256:"),
            ]:
                since = len(deployment.llm.requests)
                skill = "pdf-forms" if file.startswith("references") else "release-notes"
                asked = {"server": "toolbox", "skill": skill, "file": file}
                await _start_turn(a, f"tool load_skill {json.dumps(asked)}")
                assert (await a.next("turn_end"))["status"] == "complete"
                assert said in deployment.llm.requests[since + 1]["messages"][-1]["content"]

    asyncio.run(run())


def test_a_link_reaches_the_tab_and_ends_as_the_server_or_the_person_says(deployment: Deployment) -> None:
    async def run() -> None:
        async with (
            Tab.live(deployment.ports[1], deployment.accounts[1], take_status=False) as b,
            aiohttp.ClientSession() as browser,
        ):
            await _ready_status(b)
            # The server completes it: the person opened the page and submitted it.
            await _start_turn(b, "tool toolbox_ask_link {}")
            link = (await b.next("elicitation"))["elicitation"]
            assert link["mode"] == "url" and link["message"] == "Connect your Example account"
            await b.send({"type": "elicitation_answer", "id": link["id"], "action": "accept"})
            await b.next("elicitation_waiting", id=link["id"])
            async with browser.post(link["url"], data={"value": "v1"}) as page:
                assert page.status == 200
            assert (await b.next("elicitation_end", id=link["id"]))["outcome"] == "completed"
            assert (await b.next("tool_result"))["call"]["output"] == "connected: v1"
            await b.next("turn_end")

            # The person says they are done (the server never reported): the worker hears of it.
            await _start_turn(b, "tool toolbox_ask_link {}")
            link = (await b.next("elicitation"))["elicitation"]
            await b.send({"type": "elicitation_answer", "id": link["id"], "action": "accept"})
            await b.next("elicitation_waiting", id=link["id"])
            await b.send({"type": "elicitation_answer", "id": link["id"], "action": "done"})
            assert (await b.next("elicitation_end", id=link["id"]))["outcome"] == "done"
            # Back on the clock: the call ends by its time limit, not by the page's (minutes).
            result = (await b.next("tool_result", timeout=TIMEOUT_S + 10))["call"]
            assert result["status"] == "error" and "timed out" in result["output"], result
            await b.next("turn_end")

    asyncio.run(run())


def test_a_person_signs_in_through_one_web_process_and_back_through_the_other(
    deployment: Deployment,
) -> None:
    port_a, port_b = deployment.ports

    async def run() -> None:
        async with signed_in(deployment.accounts[0]) as session:
            async with session.get(f"http://127.0.0.1:{port_a}/") as page:
                assert page.status == 200
            token = session.cookie_jar.filter_cookies(URL(f"http://127.0.0.1:{port_a}/"))["csrftoken"].value
            async with session.post(
                f"http://127.0.0.1:{port_a}/oauth/connect/secure/",
                data={"csrfmiddlewaretoken": token, "next": "/"},
                headers={"Referer": f"http://127.0.0.1:{port_a}/"},
                allow_redirects=False,
            ) as started:
                html = await started.text()
                assert started.status == 200, started.cookies.get("messages")  # the outcome, if any
            found = re.search(r'id="oauth-continue" class="button" href="([^"]+)"', html)
            assert found is not None, html[:2000]
            provider = found[1].replace("&amp;", "&")
            async with session.get(provider, allow_redirects=False) as consent:
                callback = consent.headers["Location"]  # the provider consents at once
            assert callback.startswith(f"http://127.0.0.1:{port_b}/oauth/callback/?")
            async with session.get(callback, allow_redirects=False) as back:
                assert back.status == 302, await back.text()

        async with Tab.live(port_a, deployment.accounts[0], take_status=False) as a:
            call, _ = await a.turn("tool secure_whoami {}")
            assert call["status"] == "done" and "alice" in call["output"], call
        async with Tab.live(port_b, deployment.accounts[1], take_status=False) as other:  # not their account
            call, _ = await other.turn("tool secure_whoami {}")
            assert 'Unknown tool "secure_whoami"' in call["output"]

    asyncio.run(run())
    whoami = [r for r in deployment.oauth.state()["mcp_requests"] if r.get("tool") == "whoami"]
    assert len(whoami) == 1  # the other person's call never reached the server


async def _admin(
    port: int, account: dict[str, Any], action: str = "", data: dict[str, str] | None = None
) -> str:
    """The toolbox's admin page on one web process, or (``action``) a POST to one of its buttons.

    Returns the page, or the message the admin shows after the POST's redirect.
    """
    cookies = {"sessionid": account["cookie"]}
    # unsafe: keep the cookies of an IP address (127.0.0.1), as a browser does.
    jar = aiohttp.CookieJar(unsafe=True)
    async with aiohttp.ClientSession(cookies=cookies, cookie_jar=jar) as session:
        base = f"http://127.0.0.1:{port}/admin/mcpclient/mcpserver/"
        async with session.get(base) as page:
            html = await page.text()
            assert page.status == 200, html[:500]
        pk = re.search(r"/admin/mcpclient/mcpserver/(\d+)/toggle/", html)
        assert pk is not None, html[:2000]
        if not action:
            async with session.get(f"{base}{pk[1]}/change/") as page:
                assert page.status == 200
                return await page.text()
        token = session.cookie_jar.filter_cookies(URL(base))["csrftoken"].value
        async with session.post(
            f"{base}{pk[1]}/{action}/",
            data={**(data or {}), "csrfmiddlewaretoken": token},
            headers={"Referer": base},
        ) as response:
            assert response.status == 200 and len(response.history) == 1, await response.text()
            messages = re.findall(r'<li class="(?:success|warning|error)">(.*?)</li>', await response.text())
            assert messages, "no admin message after the POST"
            return messages[-1]


def _admin_toggle(port: int, account: dict[str, Any], enabled: bool) -> None:
    """POST the admin list's enable/disable button of the toolbox on one web process."""
    asyncio.run(_admin(port, account, "toggle", {"enabled": "1" if enabled else "0"}))


def _turn_offering(
    deployment: Deployment, port: int, account: dict[str, Any], text: str
) -> tuple[dict[str, Any], set[str]]:
    """One turn of ``account`` on the web process at ``port``: its tool call, and the tools offered."""

    async def run() -> tuple[dict[str, Any], set[str]]:
        async with Tab.live(port, account, take_status=False) as tab:
            await _ready_status(tab)
            since = len(deployment.llm.requests)
            call, end = await tab.turn(text)
            assert end["status"] == "complete"
            return call, _offered(deployment, since)

    return asyncio.run(run())


def _offered(deployment: Deployment, since: int) -> set[str]:
    """The tool names the model was offered in the requests after the first ``since``."""
    names: set[str] = set()
    for body in deployment.llm.requests[since:]:
        names.update(tool["function"]["name"] for tool in body.get("tools") or [])
    return names


def test_an_admin_toggle_on_one_web_process_changes_the_tools_of_the_other(deployment: Deployment) -> None:
    port_a, port_b = deployment.ports
    account = deployment.accounts[2]

    async def watch(until: str) -> None:
        async with Tab.live(port_b, account, take_status=False) as b:
            frame = await b.next("status")
            while server_status(frame) != until:
                frame = await b.next("status")
            since = len(deployment.llm.requests)
            await b.send({"type": "user_message", "text": "hello"})
            await b.next("turn_end")
            offered = _offered(deployment, since)
            assert ("toolbox_echo" in offered) is (until == "ready"), offered

    _admin_toggle(port_a, account, enabled=False)
    asyncio.run(watch("disabled"))
    wait_for(lambda: not deployment.children(), 20, "the disabled server's child to end")
    _admin_toggle(port_a, account, enabled=True)
    asyncio.run(watch("ready"))
    assert len(deployment.children()) == 1


def test_a_servers_groups_decide_in_each_web_process_and_again_in_the_worker(deployment: Deployment) -> None:
    port_a, port_b = deployment.ports
    outside, inside = deployment.accounts[0], deployment.accounts[1]
    owner = "SELECT owner_id FROM chat_conversation WHERE id = {}"
    outside_id, inside_id = (
        _query(deployment, owner.format(int(a["conversation"])))[0][0] for a in (outside, inside)
    )
    with psycopg.connect(deployment.env["BOOCODE_DATABASE_URL"]) as connection:  # (as an admin would)
        group = connection.execute("INSERT INTO auth_group (name) VALUES ('eng') RETURNING id").fetchone()
        assert group is not None
        joined = (inside_id, group[0])
        connection.execute("INSERT INTO auth_user_groups (user_id, group_id) VALUES (%s, %s)", joined)
    time.sleep(2.5)  # what a process read of the person is used up to mcpclient.runtime.people.MAX_AGE
    group_channel = deployment.env["BOOCODE_HUB_CHANNEL"]

    def turn(port: int, account: dict[str, Any]) -> tuple[dict[str, Any], set[str]]:
        return _turn_offering(deployment, port, account, 'tool team_echo {"text": "for eng"}')

    async def straight_to_the_worker(user_id: int) -> str:
        layer = signed_layer()
        reply = await layer.new_channel()
        try:  # a web process that would not check: the worker decides on its own read
            call = _call(reply, "team_echo", {"text": "x"}, user_id=user_id)
            return await _reply_to(layer, reply, group_channel, call)
        finally:
            await layer.flush()

    call, offered = turn(port_b, inside)
    assert call["output"] == "for eng" and "team_echo" in offered
    call, offered = turn(port_a, outside)
    assert call["is_error"] and "for eng" not in call["output"]
    assert "toolbox_echo" in offered and "team_echo" not in offered
    assert asyncio.run(straight_to_the_worker(outside_id)).startswith('Unknown tool "team_echo"')
    assert asyncio.run(straight_to_the_worker(inside_id)) == "x"

    # Taken out of the group in the database: every process reads it again within seconds.
    with psycopg.connect(deployment.env["BOOCODE_DATABASE_URL"]) as connection:
        connection.execute("DELETE FROM auth_user_groups WHERE user_id = %s", (inside_id,))
    time.sleep(2.5)  # mcpclient.runtime.people.MAX_AGE
    call, offered = turn(port_a, inside)
    assert call["is_error"] and "team_echo" not in offered
    assert asyncio.run(straight_to_the_worker(inside_id)).startswith('Unknown tool "team_echo"')


async def _add_own_server(port: int, account: dict[str, Any], name: str, url: str, key: str) -> None:
    """``account`` adds a server of their own on the web process at ``port`` (signed in with ``key``)."""
    async with signed_in(account) as session:
        base = f"http://127.0.0.1:{port}"
        async with session.get(f"{base}/") as page:
            assert page.status == 200
        token = session.cookie_jar.filter_cookies(URL(f"{base}/"))["csrftoken"].value
        fields = {
            "name": name,
            "url": url,
            "transport": "http",
            "sign_in": "header",
            "header_name": "X-Api-Key",
            "header_value": key,
            "next": "/",
        }
        async with session.post(
            f"{base}/servers/add/",
            data={**fields, "csrfmiddlewaretoken": token},
            headers={"Referer": f"{base}/"},
            allow_redirects=False,
        ) as added:
            assert added.status == 302, await added.text()


def test_a_persons_own_server_is_added_on_one_web_process_and_used_through_the_worker_from_the_other(
    deployment: Deployment,
) -> None:
    port_a, port_b = deployment.ports
    port = free_port()
    server = HttpServer([PYTHON, str(TOOLBOX), "--http", str(port), "--feature", "meta"], port, "/mcp")
    owner, other = deployment.accounts[2], deployment.accounts[0]

    def turn(port: int, account: dict[str, Any]) -> tuple[dict[str, Any], set[str]]:
        return _turn_offering(deployment, port, account, 'tool own_request_header {"name": "X-Api-Key"}')

    try:
        asyncio.run(_add_own_server(port_a, owner, "own", server.url, "key-of-live2"))
        call, offered = turn(port_b, owner)
        assert call["output"] == "key-of-live2" and "own_request_header" in offered
        call, offered = turn(port_a, other)
        assert call["is_error"] and not any(name.startswith("own_") for name in offered)

        # Under the name of "team", a shared server hidden from its person (it is for eng): the name
        # is theirs, and the worker serves them their own server under it, never the hidden one.
        asyncio.run(_add_own_server(port_a, owner, "team", server.url, "key-of-their-team"))
        asked = 'tool team_request_header {"name": "X-Api-Key"}'
        # (on the process it was added on: B reads the person's servers again within 2 s of its last read)
        call, _ = _turn_offering(deployment, port_a, owner, asked)
        assert call["output"] == "key-of-their-team", call
        call, _ = _turn_offering(deployment, port_a, other, asked)
        assert call["is_error"] and "key-of-their-team" not in call["output"]
    finally:
        server.stop()


def test_what_became_of_a_log_level_is_shown_by_every_web_process_admin(deployment: Deployment) -> None:
    port_a, port_b = deployment.ports
    account = deployment.accounts[2]
    what = "protocol 2026-07-28: each tool call asks for messages at warning and above"

    async def ready() -> None:
        async with Tab.live(port_a, account, take_status=False) as tab:
            await _ready_status(tab)

    asyncio.run(ready())
    said = asyncio.run(_admin(port_a, account, "log-level", {"mcp_log_level": "warning"}))
    assert said == f"Log level of toolbox: warning. {what[0].upper()}{what[1:]}."

    def shows_note(port: int) -> bool:
        return f"Now: {what}." in asyncio.run(_admin(port, account))

    for port in (port_a, port_b):  # B heard the worker's state broadcast
        wait_for(functools.partial(shows_note, port), 10, f"the note on {port}")


async def _reply(layer: SignedRedisPubSubChannelLayer, reply: str, within: float) -> dict[str, Any] | None:
    """The worker's ``hub.reply`` on ``reply`` within ``within`` seconds, or None."""
    try:
        async with asyncio.timeout(within):
            while (message := await layer.receive(reply))["type"] != "hub.reply":
                pass
            return message
    except TimeoutError:
        return None


def _call(reply: str, name: str, arguments: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {
        "type": "hub.call",
        "id": uuid.uuid4().hex,
        "reply": reply,
        "name": name,
        "arguments": arguments,
        "user_id": None,
        "ask": False,
        **extra,
    }


def test_hub_messages_unsigned_forged_misaddressed_stale_or_replayed_are_refused(
    deployment: Deployment,
) -> None:
    from channels_redis.pubsub import RedisPubSubChannelLayer
    from redis.asyncio import Redis

    group = deployment.env["BOOCODE_HUB_CHANNEL"]
    log_before = deployment.worker_log.read_text()

    async def run() -> dict[str, Any]:
        layer = signed_layer()
        reply = await layer.new_channel()
        outcomes: dict[str, Any] = {}
        try:
            # A good call from a process of the deployment: answered.
            good = await _reply_to(layer, reply, group, _call(reply, "toolbox_echo", {"text": "signed"}))
            outcomes["signed"] = good
            # Unsigned (anyone who can publish to Redis), and signed with another key.
            plain = RedisPubSubChannelLayer(hosts=[REDIS_URL], prefix=REDIS_PREFIX)
            await plain.group_send(group, _call(reply, "toolbox_echo", {"text": "unsigned"}))
            await plain.flush()
            other = signed_layer("another deployment's key")
            await other.group_send(group, _call(reply, "toolbox_echo", {"text": "forged"}))
            await other.flush()
            # Sealed by the deployment's key for another channel (a reply channel), sent to the hub.
            group_channel = layer._get_layer()._get_group_channel_name(group)
            redis = Redis.from_url(REDIS_URL)
            try:
                sealed = layer.seal(reply, _call(reply, "toolbox_echo", {"text": "misaddressed"}))
                await redis.publish(group_channel, layer.serialize(sealed))
                # Sealed two minutes ago (copied off the wire then).
                with mock.patch("time.time", return_value=time.time() - 120):
                    stale = layer.seal(group_channel, _call(reply, "toolbox_echo", {"text": "stale"}))
                await redis.publish(group_channel, layer.serialize(stale))
                # A good message sent twice (a replay of what went over the wire): answered once.
                once = layer.seal(group_channel, _call(reply, "toolbox_echo", {"text": "once"}))
                await redis.publish(group_channel, layer.serialize(once))
                await redis.publish(group_channel, layer.serialize(once))
            finally:
                await redis.aclose()
            answers = []
            while (answer := await _reply(layer, reply, within=5)) is not None:
                answers.append(worker_wire.result_in(answer["result"]).output)
            outcomes["answers"] = answers
        finally:
            await layer.flush()
        return outcomes

    outcomes = asyncio.run(run())
    assert outcomes["signed"] == "signed"
    assert outcomes["answers"] == ["once"]  # nothing else ran; the replay did not run twice
    log = deployment.worker_log.read_text()[len(log_before) :]
    for why in ("not signed", "bad signature", "sealed for", "stale (sent 120 s ago)", "replayed"):
        assert re.search(rf"refused a channel layer message on \S+: {re.escape(why)}", log), why


async def _reply_to(
    layer: SignedRedisPubSubChannelLayer, reply: str, group: str, call: dict[str, Any]
) -> str:
    await layer.group_send(group, call)
    answer = await _reply(layer, reply, within=30)
    assert answer is not None, "the worker did not answer a signed call"
    return worker_wire.result_in(answer["result"]).output


def test_a_tool_that_needs_approval_runs_in_the_worker_only_with_the_approval_it_names(
    deployment: Deployment,
) -> None:
    group = deployment.env["BOOCODE_HUB_CHANNEL"]
    account = deployment.accounts[2]
    user_id = int(_owner_of(deployment, account["conversation"]))

    async def run() -> dict[str, Any]:
        seen: dict[str, Any] = {}
        # The person approves through the page: the web process names the approval, the worker
        # checks it and runs the call.
        async with Tab.live(deployment.ports[0], account, take_status=False) as tab:
            write = 'tool toolbox_write_note {"key": "k", "text": "approved"}'
            await _start_turn(tab, write, started="approval")
            approval = next(f for f in tab.frames if f["type"] == "approval")["approval"]
            await tab.send({"type": "approval_answer", "id": approval["id"], "decision": "approve"})
            seen["approved"] = (await tab.next("tool_result"))["call"]["output"]
            approved_arguments = approval["arguments"]
            await tab.next("turn_end")
        # A key-holder's call without an approval, with one that does not exist, and with the
        # real one for other arguments: refused where the call runs.
        layer = signed_layer()
        reply = await layer.new_channel()
        try:
            sneaky = {"key": "k", "text": "sneaky"}
            for case, extra, arguments in (
                ("none", {}, sneaky),
                ("missing", {"approval": 999_999}, sneaky),
                ("other arguments", {"approval": approval["id"]}, sneaky),
                ("same", {"approval": approval["id"]}, approved_arguments),
            ):
                call = _call(reply, "toolbox_write_note", arguments, **extra)
                call["user_id"] = user_id
                seen[case] = await _reply_to(layer, reply, group, call)
            # A tool that declares nothing may write: the worker asks for an approval too.
            call = _call(reply, "toolbox_create_issue", {"title": "sneaky"})
            call["user_id"] = user_id
            seen["undeclared"] = await _reply_to(layer, reply, group, call)
        finally:
            await layer.flush()
        return seen

    seen = asyncio.run(run())
    assert seen["approved"] == "stored note 'k'"
    assert "need a person's approval" in seen["none"] and "none came with the call" in seen["none"]
    assert "there is no approval 999999" in seen["missing"]
    assert "was given for other arguments" in seen["other arguments"]
    assert seen["same"] == "stored note 'k'"  # the approval holds for the very call it was given for
    assert seen["undeclared"].startswith('Not run: calls of "toolbox_create_issue" need a person\'s approval')
    assert 'does not declare "readOnlyHint": true' in seen["undeclared"]
    assert "none came with the call" in seen["undeclared"]


def _owner_of(deployment: Deployment, conversation: int) -> str:
    done = subprocess.run(
        [
            PYTHON,
            "-c",
            "import django; django.setup()\nfrom boocode.chat.models import Conversation\n"
            f"print(Conversation.objects.get(pk={conversation}).owner_id)",
        ],
        cwd=ROOT,
        env=deployment.env,
        check=True,
        capture_output=True,
        text=True,
    )
    return done.stdout.strip()


def test_a_stopped_turn_ends_at_once_and_the_next_call_works(deployment: Deployment) -> None:
    async def run() -> None:
        async with Tab.live(deployment.ports[1], deployment.accounts[1], take_status=False) as b:
            await _ready_status(b)
            await b.send({"type": "user_message", "text": 'tool toolbox_slow {"seconds": 60}'})
            await b.next("tool_call")
            await b.send({"type": "cancel"})
            assert (await b.next("turn_end", timeout=TIMEOUT_S))["status"] == "stopped"
            await _start_turn(b, 'tool toolbox_echo {"text": "next"}')
            call = (await b.next("tool_result"))["call"]
            assert (call["output"], (await b.next("turn_end"))["status"]) == ("next", "complete")

    asyncio.run(run())


def listening_on_the_hub_channel(deployment: Deployment) -> int:
    """How many Redis connections are subscribed to the hub channel's group (the worker's)."""
    group_channel = f"{REDIS_PREFIX}__group__{deployment.env['BOOCODE_HUB_CHANNEL']}"
    with redis.Redis.from_url(REDIS_URL) as client:
        return int(client.pubsub_numsub(group_channel)[0][1])


def test_the_first_call_after_the_worker_died_is_refused_at_once(deployment: Deployment) -> None:
    # Killed while nothing runs: no call in flight, no heartbeat missed yet. Each later answer
    # says the worker is not running because nothing listens on its channel: not after a request's
    # time limit ("did not answer within"), nor after the heartbeats' silence ("nothing heard").
    assert deployment.worker is not None
    port_a, _ = deployment.ports

    async def run() -> None:
        async with Tab.live(port_a, deployment.accounts[0], take_status=False) as a:
            await _ready_status(a)
            assert deployment.worker is not None
            deployment.worker.send_signal(signal.SIGKILL)
            deployment.worker.wait(10)
            wait_for(lambda: listening_on_the_hub_channel(deployment) == 0, 10, "Redis to drop the worker")

            # The model's call: the turn goes on without the worker's skills, the call says why.
            call, end = await a.turn('tool toolbox_echo {"text": "nobody there"}', within=20)
            assert (call["status"], end["status"]) == ("error", "complete"), (call, end)
            assert 'the MCP hub worker is not running (nothing listens on its channel "' in call["output"], (
                call["output"]
            )

            # The tool console's /call reads the servers' state first: the turn fails, saying why.
            await a.send({"type": "user_message", "text": '/call toolbox_echo {"text": "console"}'})
            end = await a.next("turn_end", within=20)
            assert end["status"] == "failed", end
            assert "the MCP hub worker is not running (nothing listens on its channel" in end["error"], end

            wait_for(lambda: not deployment.children(), 20, "the killed worker's child to end")
            deployment.start_worker()
            await _ready_status(a)

    asyncio.run(run())


def test_a_killed_worker_fails_the_call_readably_and_the_restarted_one_serves(deployment: Deployment) -> None:
    assert deployment.worker is not None
    port_a, _ = deployment.ports

    async def run() -> None:
        async with Tab.live(port_a, deployment.accounts[0], take_status=False) as a:
            await _ready_status(a)
            await a.send({"type": "user_message", "text": 'tool toolbox_slow {"seconds": 60}'})
            await a.next("tool_call")
            started = time.monotonic()
            assert deployment.worker is not None
            deployment.worker.send_signal(signal.SIGKILL)
            deployment.worker.wait(10)
            # The worker's silence is noticed well before the call's own time limit.
            result = (await a.next("tool_result", timeout=TIMEOUT_S + 10))["call"]
            assert time.monotonic() - started < worker_wire.SILENT_AFTER + worker_wire.HEARTBEAT + 1.5
            assert result["status"] == "error"
            assert "the MCP hub worker stopped answering during the call" in result["output"]
            assert (await a.next("turn_end"))["status"] == "complete"

            # While no worker runs, a call is refused at once, saying why.
            await _start_turn(a, 'tool toolbox_echo {"text": "nobody there"}')
            started = time.monotonic()
            call = (await a.next("tool_result"))["call"]
            assert time.monotonic() - started < 5
            assert (call["status"], (await a.next("turn_end"))["status"]) == ("error", "complete")
            assert "the MCP hub worker is not running (" in call["output"]

            # The process manager's part: start it again. Its child reconnects; the next call works.
            wait_for(lambda: not deployment.children(), 20, "the killed worker's child to end")
            deployment.start_worker()
            await _ready_status(a)
            call, end = await a.turn('tool toolbox_echo {"text": "after the restart"}')
            assert (call["output"], end["status"]) == ("after the restart", "complete")

    asyncio.run(run())
    assert deployment.worker is not None
    assert [parent for _, parent in deployment.children()] == [deployment.worker.pid]

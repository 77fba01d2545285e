"""Servers heal themselves: pings, reconnects with backoff and jitter, the circuit, transient failures.

Real servers (the toolbox over stdio and Streamable HTTP, a real TCP proxy in front of one) and
tiny healing settings, so that every test finishes in seconds; the schedule itself is checked
with an injected random source and clock.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import itertools
import json
import socket
import struct
from collections.abc import AsyncIterator, Callable

import anyio
import pytest

from mcpclient.core.state import ServerSnapshot, Status
from mcpclient.engine.healing import HealPolicy, RetryState, retry_fields
from mcpclient.engine.hub import Hub
from tests.support.hubs import make_config, stop_process_hub
from tests.support.processes import PYTHON, TEST_COMMANDS, TOOLBOX, HttpServer, free_port, toolbox_entry

pytestmark = pytest.mark.processes

HANDSHAKE_TOOLBOX = TOOLBOX.parent / "handshake_toolbox.py"
FAST = HealPolicy(ping_interval=0.2, ping_timeout=1.0, base=0.05, cap=0.2, attempts=20, circuit_seconds=60)


def status_of(hub: Hub, name: str) -> ServerSnapshot:
    return next(s for s in hub.snapshots() if s.name == name)


def record(hub: Hub) -> list[ServerSnapshot]:
    """Every snapshot the hub publishes from now on (what the admin and the status line hear)."""
    seen: list[ServerSnapshot] = []
    hub.add_listener(seen.append)
    return seen


def toolbox_http(port: int, *extra: str) -> HttpServer:
    return HttpServer([PYTHON, str(TOOLBOX), "--http", str(port), *extra], port, "/mcp")


# -- the schedule (deterministic) ------------------------------------------------------------
def test_backoff_doubles_up_to_the_cap_with_half_of_it_random() -> None:
    low = HealPolicy(base=1, cap=8, attempts=9, random=lambda: 0.0)
    high = HealPolicy(base=1, cap=8, attempts=9, random=lambda: 1.0)
    assert [low.backoff(n) for n in range(1, 7)] == [0.5, 1, 2, 4, 4, 4]
    assert [high.backoff(n) for n in range(1, 7)] == [1, 2, 4, 8, 8, 8]


def test_the_circuit_opens_after_the_limit_and_closes_on_success() -> None:
    now = dt.datetime(2026, 11, 24, 3, 0, tzinfo=dt.UTC)
    policy = HealPolicy(base=2, cap=60, attempts=3, circuit_seconds=300, random=lambda: 0.5, now=lambda: now)
    state = RetryState()
    delays = []
    for _ in range(4):
        delays.append(state.schedule(policy))
        assert state.next_retry_at == now + dt.timedelta(seconds=delays[-1])
        state.begin_attempt()
    assert delays == [1.5, 3.0, 6.0, 300]
    assert state.circuit_open and state.attempts == 4
    assert state.schedule(policy) == 300  # one trial per circuit period while it keeps failing
    assert state.describe(policy) == "4 reconnect attempts failed; next try in 300 s"
    assert retry_fields(state.attempts, state.next_retry_at, state.circuit_open, now=now) == {
        "retry_in": 300,
        "attempts": 4,
        "circuit_open": True,
    }
    state.reset()
    assert (state.attempts, state.next_retry_at, state.circuit_open) == (0, None, False)
    assert retry_fields(0, None, False) == {}


def test_no_reconnects_without_attempts() -> None:
    assert not HealPolicy.off().reconnects and HealPolicy.off().ping_interval == 0


# -- real servers ----------------------------------------------------------------------------
@pytest.mark.parametrize("script", [TOOLBOX, HANDSHAKE_TOOLBOX], ids=["2026-07-28", "2025-11-25"])
async def test_ping_detects_a_hung_server_and_it_comes_back(hub: Hub, script) -> None:
    hub.healing = FAST
    seen = record(hub)
    await hub.start([make_config("frozen", {"command": PYTHON, "args": [str(script), "--feature", "hang"]})])
    modern = status_of(hub, "frozen").protocol_version == "2026-07-28"
    assert modern == (script is TOOLBOX)  # ping on 2025, server/discover on 2026-07-28
    in_flight = asyncio.ensure_future(hub.call_tool("frozen_freeze", {"seconds": 120}))
    await hub.wait_until(lambda: status_of(hub, "frozen").status is not Status.READY, 15)
    with anyio.fail_after(5):
        frozen = await in_flight
    assert frozen.is_error and frozen.output.startswith('MCP server "frozen" unreachable: ')
    assert any("ping" in s.last_error for s in seen if s.status is Status.UNAVAILABLE)
    await hub.wait_until(lambda: status_of(hub, "frozen").status is Status.READY, 30)
    assert (await hub.call_tool("frozen_echo", {"text": "awake"})).output == "awake"


async def test_a_crashed_stdio_child_comes_back_by_itself(hub: Hub) -> None:
    hub.healing = FAST
    seen = record(hub)
    await hub.start([make_config("doomed", toolbox_entry()), make_config("fine", toolbox_entry())])
    in_flight = asyncio.ensure_future(hub.call_tool("doomed_slow", {"seconds": 30}))
    await hub.wait_until(lambda: True, 0.1)  # hand the call to the session
    crashed = await hub.call_tool("doomed_crash", {})
    assert crashed.is_error and crashed.output.startswith('MCP server "doomed" unreachable: ')
    with anyio.fail_after(5):
        slow = await in_flight
    assert slow.is_error and slow.output.startswith('MCP server "doomed" unreachable: ')
    await hub.wait_until(lambda: status_of(hub, "doomed").status is Status.READY, 30)
    assert (await hub.call_tool("doomed_echo", {"text": "back"})).output == "back"
    assert "doomed_echo" in {tool.prefixed_name for tool in hub.tools()}
    states = [s.status for s in seen if s.name == "doomed"]
    # ready, unavailable (with a retry time), connecting again, ready: each change was published.
    assert states[-3:] == [Status.UNAVAILABLE, Status.CONNECTING, Status.READY]
    scheduled = [s for s in seen if s.name == "doomed" and s.next_retry_at is not None]
    assert scheduled and scheduled[0].attempts == 0 and not scheduled[0].circuit_open
    assert status_of(hub, "fine").status is Status.READY


async def test_the_circuit_opens_and_reconnect_closes_it(hub: Hub) -> None:
    port = free_port()
    hub.healing = HealPolicy(base=0.01, cap=0.02, attempts=2, circuit_seconds=3600)
    await hub.start([make_config("remote", {"url": f"http://127.0.0.1:{port}/mcp"})])
    await hub.wait_until(lambda: status_of(hub, "remote").circuit_open, 15)
    snapshot = status_of(hub, "remote")
    assert snapshot.status is Status.FAILED and snapshot.attempts == 2
    assert "connection" in snapshot.last_error.lower()
    assert snapshot.next_retry_at is not None
    assert snapshot.next_retry_at > dt.datetime.now(dt.UTC) + dt.timedelta(seconds=3000)
    refused = await hub.call_tool("remote_echo", {"text": "hi"})
    assert refused.is_error
    server = toolbox_http(port)
    try:
        await hub.reconnect("remote")  # the admin's action does not wait for the circuit
        snapshot = status_of(hub, "remote")
        assert snapshot.status is Status.READY
        assert (snapshot.attempts, snapshot.next_retry_at, snapshot.circuit_open) == (0, None, False)
        assert (await hub.call_tool("remote_echo", {"text": "hi"})).output == "hi"
    finally:
        server.stop()


async def test_a_package_the_registry_does_not_have_is_not_tried_again(hub: Hub, tmp_path) -> None:
    launcher = TOOLBOX.parent / "launcher_failure.py"
    starts = {name: tmp_path / name for name in ("typo", "offline")}

    def entry(name: str, kind: str) -> dict[str, object]:
        return {"command": PYTHON, "args": [str(launcher), kind, "--count", str(starts[name])]}

    hub.healing = HealPolicy(base=0.01, cap=0.02, attempts=3, circuit_seconds=3600)
    await hub.start(
        [
            make_config("typo", entry("typo", "npm-missing")),
            make_config("offline", entry("offline", "npm-offline")),
        ]
    )
    # A registry that did not answer may answer later: tried again until the circuit opens. By
    # then the missing package would have been tried as often, were it tried again.
    await hub.wait_until(lambda: status_of(hub, "offline").circuit_open, 15)
    assert starts["offline"].read_text().count("started") == 4
    typo = status_of(hub, "typo")
    assert typo.status is Status.FAILED and starts["typo"].read_text().count("started") == 1
    assert (typo.attempts, typo.next_retry_at, typo.circuit_open) == (0, None, False)
    assert typo.last_error.startswith(
        "its package was not found in the registry, so it is not retried until its entry in mcp.json "
        "changes or an administrator reconnects it (stderr: npm error 404  The requested resource "
        "'@boocode-test/no-such-server@*' could not be found"
    )
    await hub.reconnect("typo")  # the admin's Reconnect tries once more
    assert starts["typo"].read_text().count("started") == 2
    assert status_of(hub, "typo").status is Status.FAILED


async def test_a_flapping_http_server_is_healed(hub: Hub) -> None:
    port = free_port()
    server = toolbox_http(port)
    try:
        hub.healing = FAST
        await hub.start([make_config("remote", {"url": f"http://127.0.0.1:{port}/mcp"})])
        assert (await hub.call_tool("remote_echo", {"text": "one"})).output == "one"
        server.stop()  # gone, no call in flight: only the pings can tell
        await hub.wait_until(lambda: status_of(hub, "remote").status is not Status.READY, 15)
        down = await hub.call_tool("remote_echo", {"text": "two"})
        assert down.is_error and down.output.startswith('MCP server "remote" unreachable: ')
        server = toolbox_http(port)  # back on the same port
        await hub.wait_until(lambda: status_of(hub, "remote").status is Status.READY, 30)
        assert (await hub.call_tool("remote_echo", {"text": "three"})).output == "three"
    finally:
        server.stop()


BAD_GATEWAY = b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"


class FlakyProxy:
    """A TCP proxy that breaks the one exchange whose bytes contain a marker.

    ``drop-this-call``: the connection is reset without forwarding anything (the request never
    reached the server); ``drop-once``: the same, the first time only (a server closing an idle
    connection as the request arrives). ``bad-gateway-please``: the proxy answers HTTP 502 itself.
    """

    def __init__(self, upstream: int) -> None:
        self.upstream = upstream
        self.port = 0
        self.broken = 0
        self._server: asyncio.Server | None = None

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._relay, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()

    async def _relay(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.upstream)

        async def pump(src: asyncio.StreamReader, dst: asyncio.StreamWriter, inspect: bool) -> None:
            try:
                while data := await src.read(65536):
                    dropped_once = inspect and b"drop-once" in data and not self.broken
                    if dropped_once or (inspect and b"drop-this-call" in data):
                        self.broken += 1
                        sock = writer.get_extra_info("socket")
                        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                        writer.transport.abort()
                        up_writer.transport.abort()
                        return
                    if inspect and b"bad-gateway-please" in data:
                        self.broken += 1
                        writer.write(BAD_GATEWAY)
                        await writer.drain()
                        writer.close()
                        up_writer.transport.abort()
                        return
                    dst.write(data)
                    await dst.drain()
            except (ConnectionError, OSError):
                pass
            finally:
                dst.close()

        await asyncio.gather(pump(reader, up_writer, True), pump(up_reader, writer, False))


@pytest.fixture
async def flaky_proxy() -> AsyncIterator[Callable[[int], FlakyProxy]]:
    proxies: list[FlakyProxy] = []

    def make(upstream: int) -> FlakyProxy:
        proxy = FlakyProxy(upstream)
        proxies.append(proxy)
        return proxy

    yield make
    for proxy in proxies:
        await proxy.stop()


async def test_one_failed_http_exchange_leaves_the_server_ready(hub: Hub, flaky_proxy) -> None:
    port = free_port()
    server = toolbox_http(port)
    proxy = flaky_proxy(port)
    await proxy.start()
    try:
        hub.healing = FAST
        await hub.start([make_config("remote", {"url": f"http://127.0.0.1:{proxy.port}/mcp"})])
        seen = record(hub)
        dropped = await hub.call_tool("remote_echo", {"text": "drop-this-call"})
        assert dropped.is_error and "may or may not have run" in dropped.output, dropped.output
        refused = await hub.call_tool("remote_echo", {"text": "bad-gateway-please"})
        assert refused.is_error and refused.output.startswith('MCP server "remote": tool "echo" failed')
        assert proxy.broken == 2
        assert status_of(hub, "remote").status is Status.READY
        assert (await hub.call_tool("remote_echo", {"text": "fine"})).output == "fine"
        assert all(s.status is Status.READY for s in seen)
    finally:
        server.stop()


async def test_a_read_whose_exchange_broke_is_sent_once_more(hub: Hub, flaky_proxy) -> None:
    port = free_port()
    server = toolbox_http(port, "--feature", "resources")
    proxy = flaky_proxy(port)
    await proxy.start()
    try:
        await hub.start([make_config("remote", {"url": f"http://127.0.0.1:{proxy.port}/mcp"})])
        read = await hub.read_resource("remote", "toolbox://cities/drop-once", None)
        assert read.model_text() == "drop-once is a city in Europe."
        assert proxy.broken == 1
        assert status_of(hub, "remote").status is Status.READY
    finally:
        server.stop()


async def test_many_servers_failing_together_come_back_spread_out(hub: Hub) -> None:
    spread = itertools.cycle([0.0, 0.3, 0.6, 0.9])
    hub.healing = HealPolicy(base=0.4, cap=0.8, attempts=5, concurrency=1, random=lambda: next(spread))
    names = [f"box{i}" for i in range(4)]
    await hub.start([make_config(name, toolbox_entry()) for name in names])
    most_at_once = 0

    def count(_: ServerSnapshot) -> None:
        nonlocal most_at_once
        live = [hub.connection(name) for name in names]
        most_at_once = max(most_at_once, sum(conn is not None and conn.reconnecting for conn in live))

    hub.add_listener(count)
    seen = record(hub)
    await asyncio.gather(*(hub.call_tool(f"{name}_crash", {}) for name in names))
    # A deadline, not a wait: four servers started one after the other take long on a loaded machine.
    await hub.wait_until(lambda: all(status_of(hub, n).status is Status.READY for n in names), 120)
    retry_times = {s.name: s.next_retry_at for s in seen if s.next_retry_at is not None}
    assert len(set(retry_times.values())) == len(names)  # jitter: four different retry times
    assert most_at_once == 1  # the bound on concurrent reconnects held
    for name in names:
        assert (await hub.call_tool(f"{name}_echo", {"text": name})).output == name


# -- what the admin and the status line see ---------------------------------------------------
@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
async def test_the_retry_plan_is_persisted_and_in_the_status_frame(tmp_path, settings) -> None:
    from channels.db import database_sync_to_async

    from mcpclient import runtime
    from mcpclient.models import McpServer
    from mcpclient.runtime.sync import sync_servers

    settings.MCP_CONFIG = tmp_path / "mcp.json"
    settings.MCP_STDIO_COMMANDS = TEST_COMMANDS
    settings.MCP_AUTOSTART = True
    # A long first wait, so the plan is still pending when it is read (no waiting on retries here).
    settings.MCP_RECONNECT_BASE, settings.MCP_RECONNECT_CAP = 60.0, 120.0
    settings.MCP_CONFIG.write_text(json.dumps({"mcpServers": {"tb": toolbox_entry()}}))
    await database_sync_to_async(sync_servers)()
    try:
        hub = await runtime.ensure_hub()
        assert hub.healing.reconnects and hub.healing.base == 60.0
        await runtime.hub_call("tb_crash", {})
        await hub.wait_until(lambda: status_of(hub, "tb").next_retry_at is not None, 10)
        await hub.drain_listeners()
        row = await McpServer.objects.aget(name="tb")
        assert row.status == "unavailable" and row.next_retry_at is not None
        assert (row.reconnect_attempts, row.circuit_open) == (0, False)
        assert row.next_retry_at >= dt.datetime.now(dt.UTC) + dt.timedelta(seconds=25)
        (status,) = runtime.hub_statuses()
        assert status["status"] == "unavailable" and 25 <= status["retry_in"] <= 60
        assert (status["attempts"], status["circuit_open"]) == (0, False)
        later = await runtime.hub_call("tb_echo", {"text": "hi"})
        assert later.is_error and "(reconnecting in " in later.output
        await hub.reconnect("tb")  # the admin's action: at once
        await hub.drain_listeners()
        row = await McpServer.objects.aget(name="tb")
        assert row.status == "ready" and row.next_retry_at is None
        ready = {"name": "tb", "status": "ready", "tool_count": 12, "held_count": 0}
        assert runtime.hub_statuses() == [ready]
    finally:
        await stop_process_hub()


@pytest.mark.django_db
def test_the_admin_shows_the_retry_time_and_the_open_circuit(admin_client) -> None:
    from django.urls import reverse

    from mcpclient.models import McpServer

    at = dt.datetime(2026, 11, 24, 3, 14, 5, tzinfo=dt.UTC)
    McpServer.objects.create(name="flaky", status="unavailable", next_retry_at=at, reconnect_attempts=2)
    McpServer.objects.create(
        name="gone", status="failed", next_retry_at=at, reconnect_attempts=8, circuit_open=True
    )
    body = admin_client.get(reverse("admin:mcpclient_mcpserver_changelist")).content.decode()
    assert '<small class="mcp-retry">reconnecting at 03:14:05 UTC (attempt 3)</small>' in body
    assert "circuit open after 8 failed attempts: next try at 03:14:05 UTC" in body

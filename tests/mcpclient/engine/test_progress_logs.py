"""Progress and server logs at the hub: real toolbox servers on 2026-07-28 and 2025-11-25.

Progress: every tool call carries a token and the server's notifications reach the reporter of
the caller's context, over stdio and Streamable HTTP, for both revisions. Logs: kept per server
(bounded, capped, redacted), the level reaching the server (``logging/setLevel`` on 2025, the
request's ``_meta`` on 2026-07-28) and filtering what it sends.
"""

from __future__ import annotations

import asyncio
import json

import anyio
import pytest

from mcpclient.core.progress import Progress
from mcpclient.core.state import Status
from mcpclient.engine import progress, server_logs
from mcpclient.engine.hub import Hub
from tests.support.hubs import make_config
from tests.support.processes import NODE_DIR, PYTHON, ROOT, HttpServer, free_port, toolbox_entry

pytestmark = pytest.mark.processes

HANDSHAKE_TOOLBOX = ROOT / "tests" / "servers" / "handshake_toolbox.py"
FEATURES = ("--feature", "progress", "--feature", "logs")


@pytest.fixture(params=["stdio-2026", "http-2026", "stdio-2025", "http-2025"])
def features_config(request, http_toolbox):
    """The toolbox with the progress and logs groups, per transport and protocol revision."""
    transport, revision = request.param.split("-")
    started: list[HttpServer] = []

    def factory(name: str = "tb"):
        if transport == "stdio" and revision == "2026":
            return make_config(name, toolbox_entry(*FEATURES))
        if transport == "stdio":
            return make_config(name, {"command": PYTHON, "args": [str(HANDSHAKE_TOOLBOX), *FEATURES]})
        if revision == "2026":
            return make_config(name, {"type": "http", "url": http_toolbox(*FEATURES).url})
        port = free_port()
        server = HttpServer([PYTHON, str(HANDSHAKE_TOOLBOX), "--http", str(port), *FEATURES], port, "/mcp")
        started.append(server)
        return make_config(name, {"type": "http", "url": server.url})

    factory.revision = "2025-11-25" if revision == "2025" else "2026-07-28"
    yield factory
    for server in started:
        server.stop()


async def _call_reporting(hub: Hub, name: str, arguments: dict) -> tuple[object, list[Progress]]:
    seen: list[Progress] = []
    with progress.reporting(seen.append):
        result = await hub.call_tool(name, arguments)
    return result, seen


async def test_progress_reaches_the_caller(hub: Hub, features_config):
    await hub.start([features_config()])
    snapshot = hub.snapshots()[0]
    assert snapshot.status is Status.READY, snapshot.last_error
    assert snapshot.protocol_version == features_config.revision

    result, seen = await _call_reporting(hub, "tb_count_steps", {"steps": 3})
    assert result.output == "counted 3 steps"
    assert [(p.progress, p.total, p.message) for p in seen] == [
        (1.0, 3.0, "step 1 of 3"),
        (2.0, 3.0, "step 2 of 3"),
        (3.0, 3.0, "step 3 of 3"),
    ]
    assert {p.tool for p in seen} == {"count_steps"}

    # Without a total and without a message.
    _, seen = await _call_reporting(hub, "tb_count_steps", {"steps": 2, "with_total": False, "message": ""})
    assert [(p.progress, p.total, p.message) for p in seen] == [(1.0, None, ""), (2.0, None, "")]


async def test_concurrent_calls_report_to_their_own_callers(hub: Hub, toolbox_config):
    await hub.start([toolbox_config("tb", *FEATURES)])
    first, second = [], []

    async def run(target: list, steps: int) -> None:
        with progress.reporting(target.append):
            await hub.call_tool("tb_count_steps", {"steps": steps})

    async with anyio.create_task_group() as group:
        group.start_soon(run, first, 2)
        group.start_soon(run, second, 4)
    assert [p.total for p in first] == [2.0, 2.0]
    assert [p.total for p in second] == [4.0] * 4
    # No reporter: the call works, the updates go nowhere.
    assert (await hub.call_tool("tb_count_steps", {"steps": 2})).output == "counted 2 steps"


async def test_nothing_is_reported_after_the_call_returned(hub: Hub, toolbox_config):
    await hub.start([toolbox_config("tb", *FEATURES)])
    seen: list[Progress] = []
    with progress.reporting(seen.append):
        result = await hub.call_tool("tb_chatty", {"count": 300})
        count_at_result = len(seen)
    assert result.output == "sent 300 progress notifications"
    # Another request's round trip: notifications still queued in the SDK's tasks have arrived
    # by its end, and they must have been dropped.
    with progress.reporting(seen.append):
        await hub.call_tool("tb_echo", {"text": "later"})
    assert len(seen) == count_at_result
    values = [p.progress for p in seen]
    assert values == sorted(values) and values, "updates arrive in order"


def test_progress_values_are_checked():
    assert progress.checked("t", float("nan"), None, None) is None
    update = progress.checked("t", 2, -1, "m" * 900)
    assert update is not None and update.total is None and len(update.message) == progress.MAX_MESSAGE
    assert progress.checked("t", 1, float("inf"), 5).total is None  # type: ignore[arg-type]


# --- server logs ----------------------------------------------------------------------------------


async def test_logs_are_kept_with_level_and_filtered_by_the_chosen_level(hub: Hub, features_config):
    hub.log_levels["tb"] = "warning"
    await hub.start([features_config()])
    connection = hub.connection("tb")
    assert connection is not None and connection.status is Status.READY, connection.last_error
    if features_config.revision == "2025-11-25":
        # Applied at connect with logging/setLevel: the server knows the level.
        assert (await hub.call_tool("tb_log_level_set", {})).output == "warning"
        assert "logging/setLevel warning" in connection.logs.note
    else:
        assert "each tool call asks for messages at warning" in connection.logs.note

    await hub.call_tool("tb_log_levels", {"text": "first", "logger": "worker"})
    await _wait_for_entries(connection, 5)
    entries = list(connection.logs.entries)
    assert [e["level"] for e in entries] == ["warning", "error", "critical", "alert", "emergency"]
    assert entries[0]["data"] == "warning: first" and entries[0]["logger"] == "worker" and entries[0]["time"]

    # Changed at once on the live session (no reconnect).
    note = await hub.set_log_level("tb", "debug")
    assert note == connection.logs.note
    connection.logs.entries.clear()
    await hub.call_tool("tb_log_levels", {"text": "second"})
    await _wait_for_entries(connection, 8)
    assert [e["level"] for e in connection.logs.entries] == list(server_logs.LEVELS)


async def test_modern_session_without_a_level_gets_no_log_messages(hub: Hub, toolbox_config):
    await hub.start([toolbox_config("tb", *FEATURES)])
    connection = hub.connection("tb")
    assert connection.protocol_version == "2026-07-28"
    assert "no level chosen" in connection.logs.note
    await hub.call_tool("tb_log_levels", {})
    await hub.call_tool("tb_count_steps", {"steps": 1})  # a later request: anything sent is in by now
    assert list(connection.logs.entries) == []


async def test_log_ring_is_bounded_capped_and_redacted(hub: Hub, toolbox_config):
    hub.log_levels["tb"] = "debug"
    await hub.start([toolbox_config("tb", *FEATURES)])
    connection = hub.connection("tb")
    heard: list[int] = []
    hub.add_log_listener(lambda name, entries: heard.append(len(entries)))

    await hub.call_tool("tb_log_levels", {"rounds": 30})  # 240 messages
    await _wait_for_entries(connection, server_logs.MAX_ENTRIES)
    entries = list(connection.logs.entries)
    assert len(entries) == server_logs.MAX_ENTRIES
    assert entries[-1]["data"] == "emergency: hello"
    assert heard and max(heard) == server_logs.MAX_ENTRIES

    secret = "https://user:hunter2@example.com/hook?token=abc123 Bearer sk-verysecretvalue"
    await hub.call_tool("tb_log_data", {"text": secret, "size": 5000})
    await _wait_for(connection, lambda: '"text"' in connection.logs.entries[-1]["data"])
    data = connection.logs.entries[-1]["data"]
    assert "hunter2" not in data and "abc123" not in data and "sk-verysecretvalue" not in data
    assert len(data) < server_logs.MAX_DATA + 100 and "characters cut" in data
    assert json.loads(data[: data.index("xxx")] + '"}')["text"].startswith("https://")


async def test_server_without_logging_capability_is_said_so(hub: Hub, toolbox_config):
    hub.log_levels["tb"] = "info"
    await hub.start([toolbox_config("tb")])  # no "logs" feature: no logging capability
    note = await hub.set_log_level("tb", "error")
    assert "does not declare the logging capability" in note
    assert hub.connection("tb").logs.call_meta() is None


async def test_level_for_a_server_that_is_not_connected(hub: Hub):
    assert "applied when the server next connects" in await hub.set_log_level("nothing", "info")
    assert hub.log_levels["nothing"] == "info"


async def _wait_for_entries(connection, count: int) -> None:
    await _wait_for(connection, lambda: len(connection.logs.entries) >= count)


async def _wait_for(connection, predicate) -> None:
    # Log notifications ride the call's stream before its result, but the SDK hands them to
    # the message handler from tasks of its own: wait (bounded) until a kept entry satisfies it.
    changed = asyncio.Event()
    listener, connection.logs.listener = connection.logs.listener, None

    def heard(name: str, entries: tuple) -> None:
        changed.set()
        if listener is not None:
            listener(name, entries)

    connection.logs.listener = heard
    try:
        with anyio.fail_after(10):
            while not predicate():
                changed.clear()
                await changed.wait()
    finally:
        connection.logs.listener = listener


# --- a third-party server: @modelcontextprotocol/server-everything (2025-11-25) -------------------


@pytest.mark.npx
async def test_server_everything_progress_and_logs(hub: Hub) -> None:
    config = make_config(
        "every",
        {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-everything"], "cwd": str(NODE_DIR)},
    )
    hub.log_levels["every"] = "debug"
    with anyio.fail_after(60):
        await hub.start([config])
    connection = hub.connection("every")
    assert connection is not None and connection.status is Status.READY, connection.last_error
    assert connection.protocol_version == "2025-11-25"
    assert connection.logs.note == "sent logging/setLevel debug to the live session"

    # Progress: the long-running operation reports each step with its total.
    result, seen = await _call_reporting(
        hub, "every_trigger-long-running-operation", {"duration": 0.3, "steps": 3}
    )
    assert not result.is_error and "Steps: 3" in result.output
    assert [(p.progress, p.total) for p in seen] == [(1.0, 3.0), (2.0, 3.0), (3.0, 3.0)]

    # Logs: simulated logging sends one message at once (a random level; debug lets all through).
    # The toggle is a write tool (readOnlyHint false): called on the session, not offered to models.
    toggled = await connection.call_tool("toggle-simulated-logging", {})
    assert "Started simulated" in toggled.output
    try:
        await _wait_for_entries(connection, 1)
        entry = connection.logs.entries[0]
        assert entry["level"] in server_logs.LEVELS and "message" in entry["data"]
    finally:
        await connection.call_tool("toggle-simulated-logging", {})  # stop it

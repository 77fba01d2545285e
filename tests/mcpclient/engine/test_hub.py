"""The hub against real MCP servers: the project's toolbox over stdio, Streamable HTTP and SSE."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
import signal
import time
import uuid
from pathlib import Path

import anyio
import pytest

from mcpclient.core.results import MAX_OUTPUT_BYTES
from mcpclient.core.state import Status
from mcpclient.engine.hub import Hub
from mcpclient.engine.server_stderr import missing_package, telling_stderr
from tests.support.hubs import make_config
from tests.support.processes import (
    PYTHON,
    ROOT,
    TEST_COMMANDS,
    TOOLBOX,
    HttpServer,
    free_port,
    pids_with,
    toolbox_entry,
)

pytestmark = pytest.mark.processes


def _group_members(pgid: int) -> list[int]:
    """PIDs of live processes in the process group ``pgid``."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            # The fields after the command name (which may hold spaces): state, ppid, pgrp, ...
            state, _, group = (entry / "stat").read_text().rpartition(")")[2].split()[:3]
        except (OSError, ValueError):
            continue
        if int(group) == pgid and state != "Z":
            pids.append(int(entry.name))
    return pids


def _stop_process_group(server) -> None:
    """Stop a server started in its own session, and everything it started.

    ``npx`` exits on SIGTERM but leaves the node process it spawned running, so the whole
    group gets the signal; fails if anything is still alive after 10 s (then it is killed).
    """
    pgid = server.process.pid  # start_new_session: the leader's pid names the group
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGTERM)
    server.stop()
    deadline = time.monotonic() + 10
    while left := _group_members(pgid):  # polled like wait_for_port: no event says "exited"
        if time.monotonic() > deadline:
            for pid in left:
                os.kill(pid, signal.SIGKILL)
            raise AssertionError(f"processes {left} outlived the server they belong to")
        time.sleep(0.05)


@pytest.fixture(params=["stdio", "http"])
def transport_config(request, http_toolbox, shared_http_toolbox):
    """Factory giving a toolbox config over stdio or over Streamable HTTP.

    Over HTTP the session's server answers (the tests only read from it); ``own_server=True``
    starts one for the test alone, for a test that changes the server's tools.
    """

    def factory(name: str = "tb", *extra: str, own_server: bool = False, **keys):
        if request.param == "stdio":
            return make_config(name, toolbox_entry(*extra, **keys))
        server = (http_toolbox if own_server else shared_http_toolbox)(*extra)
        return make_config(name, {"type": "http", "url": server.url, **keys})

    factory.transport = request.param
    return factory


async def test_discovery_names_and_read_only_guard(hub: Hub, transport_config):
    await hub.start([transport_config("tb")])
    snapshot = hub.snapshots()[0]
    assert snapshot.status is Status.READY
    assert snapshot.protocol_version
    assert snapshot.server_info["name"] == "toolbox"
    names = {tool.prefixed_name for tool in hub.tools()}
    assert {"tb_echo", "tb_add", "tb_media", "tb_slow"} <= names
    # readOnlyHint false: kept as rejected with a reason, never offered.
    assert "tb_delete_everything" not in names
    rejected = {tool.name: tool for tool in snapshot.tools if tool.rejected}
    assert list(rejected) == ["delete_everything"]
    assert "readOnlyHint is false" in rejected["delete_everything"].reject_reason
    # Declared read-only: offered, and called without asking.
    add = next(tool for tool in hub.tools() if tool.name == "add")
    assert add.annotations == {"readOnlyHint": True} and add.read_only and not add.approval_reason
    assert add.input_schema["properties"]["a"]["type"] == "integer"
    assert [tool.prefixed_name for tool in hub.tools()] == sorted(names)


async def test_calls_strip_the_prefix_and_run_concurrently(hub: Hub, transport_config):
    await hub.start([transport_config("tb")])
    result = await hub.call_tool("tb_add", {"a": 2, "b": 40})
    assert (result.output, result.is_error) == ("42", False)
    with anyio.fail_after(4):  # five 1-second calls in parallel, not in sequence
        results = await asyncio.gather(*(hub.call_tool("tb_slow", {"seconds": 1}) for _ in range(5)))
    assert [r.output for r in results] == ["slept 1.0"] * 5


async def test_result_extraction(hub: Hub, transport_config):
    await hub.start([transport_config("tb")])
    media = await hub.call_tool("tb_media", {})
    lines = media.output.split("\n")
    assert lines[0] == "here is a picture"
    assert lines[1].startswith("[image: image/png, ") and "bytes" in lines[1]
    assert json.loads(lines[2]) == {
        "resource": {"uri": "file:///notes.txt", "mimeType": "text/plain", "text": "notes"}
    }
    blob = json.loads(lines[3])["resource"]
    assert blob["blob"] == "[binary data: 10 bytes, application/octet-stream]"
    assert lines[4] == "[resource: file:///linked.txt]"
    assert media.parts[0]["type"] == "image" and media.parts[0]["mime_type"] == "image/png"
    assert base64.b64decode(media.parts[0]["data"]).startswith(b"\x89PNG")

    structured = await hub.call_tool("tb_structured", {})
    assert json.loads(structured.output) == {"temperature": 21.5, "unit": "C"}
    assert (await hub.call_tool("tb_empty", {})).output == "(no output)"
    failed = await hub.call_tool("tb_fail", {"message": "disk on fire"})
    assert failed.is_error and failed.output == "disk on fire"


async def test_output_is_capped_at_5_mb(hub: Hub, transport_config):
    await hub.start([transport_config("tb")])
    result = await hub.call_tool("tb_big", {"megabytes": 6})
    head, marker = result.output.rsplit("\n", 1)
    assert len(head.encode()) == MAX_OUTPUT_BYTES
    cut = 6 * 1024 * 1024 - MAX_OUTPUT_BYTES
    assert (
        marker
        == f"[output truncated: {cut} of {6 * 1024 * 1024} bytes cut; the limit is {MAX_OUTPUT_BYTES} bytes]"
    )


async def test_timeout_is_an_error_result(hub: Hub, transport_config):
    await hub.start([transport_config("tb", timeout=500)])
    result = await hub.call_tool("tb_slow", {"seconds": 5})
    assert result.is_error
    assert (
        result.output
        == 'MCP server "tb": tool "slow" timed out after 0.5 s (the server\'s "timeout" in mcp.json)'
    )
    # The session survives a timed-out call.
    assert (await hub.call_tool("tb_echo", {"text": "still here"})).output == "still here"


async def test_list_changed_relists_tools(hub: Hub, transport_config):
    await hub.start([transport_config("tb", own_server=True)])
    generation = hub.generation
    assert (await hub.call_tool("tb_add_tool", {"name": "fresh"})).output == "added fresh"
    await hub.wait_until(lambda: "tb_fresh" in {tool.prefixed_name for tool in hub.tools()}, 5)
    assert hub.generation > generation
    assert (await hub.call_tool("tb_fresh", {})).output == "I am fresh"
    await hub.call_tool("tb_remove_tool", {"name": "fresh"})
    await hub.wait_until(lambda: "tb_fresh" not in {tool.prefixed_name for tool in hub.tools()}, 5)


async def test_every_page_of_tools_is_listed(hub: Hub, transport_config):
    await hub.start([transport_config("tb", "--extra-tools", "120", "--page-size", "25")])
    names = {tool.prefixed_name for tool in hub.tools()}
    assert {f"tb_item_{index:03d}" for index in range(120)} <= names
    assert "tb_echo" in names


async def test_sse_transport(hub: Hub, shared_http_toolbox):
    server = shared_http_toolbox(sse=True)
    await hub.start([make_config("legacy", {"type": "sse", "url": server.url})])
    assert hub.snapshots()[0].status is Status.READY
    assert (await hub.call_tool("legacy_echo", {"text": "over sse"})).output == "over sse"


async def test_crash_mid_session_costs_only_that_server(hub: Hub):
    await hub.start([make_config("doomed", toolbox_entry()), make_config("fine", toolbox_entry())])
    in_flight = asyncio.ensure_future(hub.call_tool("doomed_slow", {"seconds": 30}))
    await asyncio.sleep(0.2)  # let the slow call reach the server before it dies
    crashed = await hub.call_tool("doomed_crash", {})
    assert crashed.is_error and crashed.output.startswith('MCP server "doomed" unreachable: ')
    with anyio.fail_after(5):
        slow = await in_flight
    assert slow.is_error and slow.output.startswith('MCP server "doomed" unreachable: ')
    later = await hub.call_tool("doomed_echo", {"text": "anyone?"})
    assert later.is_error and later.output.startswith('MCP server "doomed" unreachable: ')
    states = {s.name: s for s in hub.snapshots()}
    assert states["doomed"].status is Status.UNAVAILABLE
    assert "crashing on request" in "\n".join(states["doomed"].stderr_tail)
    assert not any(tool.server == "doomed" for tool in hub.tools())
    assert (await hub.call_tool("fine_echo", {"text": "ok"})).output == "ok"
    # Reconnect brings it back.
    await hub.reconnect("doomed")
    assert (await hub.call_tool("doomed_echo", {"text": "back"})).output == "back"


async def test_http_server_going_away_marks_it_unavailable(hub: Hub, http_toolbox):
    server = http_toolbox()
    await hub.start([make_config("remote", {"url": server.url})])
    assert (await hub.call_tool("remote_echo", {"text": "hi"})).output == "hi"
    server.stop()
    result = await hub.call_tool("remote_echo", {"text": "hi"})
    assert result.is_error and result.output.startswith('MCP server "remote" unreachable: ')
    assert hub.snapshots()[0].status is Status.UNAVAILABLE


async def test_start_failures_cost_only_their_own_server(hub: Hub, monkeypatch):
    monkeypatch.delenv("BOOCODE_TEST_UNSET", raising=False)
    hub.allowed_commands = [*TEST_COMMANDS, "boocode-no-such-command"]
    configs = [
        make_config("ok", toolbox_entry()),
        make_config("enoent", {"command": "boocode-no-such-command"}),
        make_config("refused", {"url": f"http://127.0.0.1:{free_port()}/mcp", "initTimeout": 5000}),
        make_config(
            "silent", {"command": PYTHON, "args": ["-c", "import time; time.sleep(60)"], "initTimeout": 800}
        ),
        make_config("badenv", toolbox_entry(env={"TOKEN": "${BOOCODE_TEST_UNSET}"})),
        make_config("refusedcmd", {"command": "bash", "args": ["-c", "true"]}),
        make_config(
            "exits", {"command": PYTHON, "args": ["-c", "import sys; sys.stderr.write('boom: no config\\n')"]}
        ),
        # Crashes whose reason stands above a stack and a banner ("Node.js v20…" is the last line).
        make_config("nodecrash", {"command": "node", "args": ["/nonexistent/boocode-missing.js"]}),
        make_config("pycrash", {"command": PYTHON, "args": ["-c", "import boocode_no_such_module"]}),
    ]
    with anyio.fail_after(20):
        await hub.start(configs)
    states = {s.name: s for s in hub.snapshots()}
    assert states["ok"].status is Status.READY
    for name in ("enoent", "refused", "silent", "badenv", "refusedcmd", "exits", "nodecrash", "pycrash"):
        assert states[name].status is Status.FAILED, name
        assert states[name].tools == ()
    assert "command not found" in states["enoent"].last_error
    assert "connection" in states["refused"].last_error.lower()
    assert states["silent"].last_error.startswith('no answer within 0.8 s (the server\'s "initTimeout")')
    assert (
        '"BOOCODE_TEST_UNSET"' in states["badenv"].last_error
        and 'server "badenv"' in states["badenv"].last_error
    )
    assert "BOOCODE_MCP_STDIO_COMMANDS" in states["refusedcmd"].last_error
    assert "boom: no config" in states["exits"].last_error
    assert (
        "(stderr: Error: Cannot find module '/nonexistent/boocode-missing.js')"
        in states["nodecrash"].last_error
    )
    assert states["pycrash"].last_error.endswith(
        "(stderr: ModuleNotFoundError: No module named 'boocode_no_such_module')"
    )
    assert {tool.server for tool in hub.tools()} == {"ok"}
    failed = await hub.call_tool("enoent_anything", {})
    assert failed.is_error


async def test_stop_while_a_server_is_still_connecting_is_prompt(hub: Hub):
    silent = make_config("silent", {"command": PYTHON, "args": ["-c", "import time; time.sleep(60)"]})
    starting = asyncio.ensure_future(hub.start([silent]))
    await hub.wait_until(lambda: any(s.status is Status.CONNECTING for s in hub.snapshots()), 5)
    with anyio.fail_after(10):  # not the 30 s initTimeout
        await hub.stop()
        await starting
    assert hub.tools() == []


async def test_envfile_and_placeholders_reach_the_child(hub: Hub, tmp_path, monkeypatch):
    (tmp_path / "server.env").write_text("GREETING=from-envfile\n")
    monkeypatch.setenv("BOOCODE_TEST_MARK", "marked")
    entry = {
        "command": PYTHON,
        "args": [
            "-c",
            "import os,runpy,sys; sys.argv=[sys.argv[1]]; print(os.environ['GREETING'], os.environ['MARK'], "
            "file=sys.stderr); runpy.run_path(sys.argv[0], run_name='__main__')",
            str(TOOLBOX),
        ],
        "envFile": "server.env",
        "env": {"MARK": "${env:BOOCODE_TEST_MARK}"},
    }
    hub.base_dir = tmp_path
    await hub.start([make_config("envy", entry)])
    snapshot = hub.snapshots()[0]
    assert snapshot.status is Status.READY, snapshot.last_error
    assert "from-envfile marked" in snapshot.stderr_tail


async def test_stop_terminates_stdio_children(hub: Hub):
    tag = uuid.uuid4().hex
    await hub.start([make_config("tb", toolbox_entry("--tag", tag))])
    assert len(pids_with(tag)) == 1
    await hub.stop()
    assert pids_with(tag) == []
    assert hub.tools() == []


async def test_apply_disables_and_enables(hub: Hub, toolbox_config):
    config = toolbox_config("tb")
    await hub.start([config])
    assert hub.tools()
    disabled = make_config("tb", toolbox_entry(enabled=False))
    await hub.apply([disabled])
    assert hub.tools() == [] and hub.snapshots()[0].status is Status.DISABLED
    result = await hub.call_tool("tb_echo", {"text": "x"})
    assert result.is_error
    await hub.apply([config])
    assert (await hub.call_tool("tb_echo", {"text": "x"})).output == "x"


async def test_name_collisions_are_disambiguated(hub: Hub):
    # "a" + "b_echo" and "a_b" + "echo" both sanitise to "a_b_echo".
    await hub.start([make_config("a", toolbox_entry()), make_config("a_b", toolbox_entry())])
    await hub.call_tool("a_add_tool", {"name": "b_echo"})
    await hub.wait_until(lambda: any(tool.name == "b_echo" for tool in hub.tools()), 5)
    by_origin = {(tool.server, tool.name): tool for tool in hub.tools()}
    first, second = by_origin[("a", "b_echo")], by_origin[("a_b", "echo")]
    assert first.prefixed_name == "a_b_echo"
    assert second.prefixed_name != "a_b_echo" and second.prefixed_name.startswith("a_b_echo_")
    assert "a_b_echo" in second.warning
    assert (await hub.call_tool(second.prefixed_name, {"text": "two"})).output == "two"
    assert (await hub.call_tool("a_b_echo", {})).output == "I am b_echo"


@pytest.mark.npx
@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_server_everything(hub: Hub, transport: str, http_toolbox):
    node_dir = ROOT / "tests" / "node"
    if transport == "stdio":
        config = make_config(
            "every",
            {
                "command": "npx",
                "args": ["-y", "@modelcontextprotocol/server-everything"],
                "cwd": str(node_dir),
            },
        )
    else:
        port = free_port()
        server = HttpServer(
            ["npx", "@modelcontextprotocol/server-everything", "streamableHttp"],
            port,
            "/mcp",
            env={"PORT": str(port)},
            cwd=node_dir,
        )
        try:
            config = make_config("every", {"url": server.url})
            await _check_everything(hub, config)
        finally:
            await hub.stop()
            _stop_process_group(server)
        return
    await _check_everything(hub, config)


async def _check_everything(hub: Hub, config) -> None:
    with anyio.fail_after(60):
        await hub.start([config])
    snapshot = hub.snapshots()[0]
    assert snapshot.status is Status.READY, snapshot.last_error
    offered = {tool.name for tool in hub.tools()}
    rejected = {tool.name for tool in snapshot.tools if tool.rejected}
    assert "echo" in offered
    assert rejected, "server-everything annotates some tools readOnlyHint=false"
    assert not offered & rejected
    for tool in snapshot.tools:
        if tool.annotations and tool.annotations.get("readOnlyHint") is False:
            assert tool.rejected
    result = await hub.call_tool("every_echo", {"message": "hello"})
    assert not result.is_error and "hello" in result.output


async def test_no_shell_for_stdio_commands(hub: Hub, tmp_path):
    marker = tmp_path / "pwned"
    tag = f"$(touch {marker}); touch {marker}"
    await hub.start([make_config("literal", toolbox_entry("--tag", tag))])
    assert hub.snapshots()[0].status is Status.READY
    assert len(pids_with(tag)) == 1  # the argument reached the child verbatim
    assert not marker.exists()


def test_the_stderr_line_that_says_what_went_wrong_is_the_one_shown():
    uvx = ["error: Failed to spawn: `mcp-server-nope`", "  Caused by: No such file or directory (os error 2)"]
    assert (
        telling_stderr(uvx)
        == "error: Failed to spawn: `mcp-server-nope` | Caused by: No such file or directory (os error 2)"
    )
    npm = [
        "npm error code E404",
        "npm error 404 Not Found - GET /@scope%2fnope - Not found",
        "npm error 404  '@scope/nope@*' is not in this registry.",
        "npm error A complete log of this run can be found in: /root/.npm/_logs/debug-0.log",
    ]
    assert telling_stderr(npm) == (
        "npm error 404 Not Found - GET /@scope%2fnope - Not found"
        " | npm error 404  '@scope/nope@*' is not in this registry."
    )
    # npm 10 says it between lines that are its prefix alone, and ends with advice: not shown.
    npm10 = [
        "npm error code E404",
        "npm error 404 Not Found - GET /@scope%2fnope",
        "npm error 404",
        "npm error 404  The requested resource '@scope/nope@*' could not be found or you do not have "
        "permission to access it.",
        "npm error 404",
        "npm error 404 Note that you can also install from a",
        "npm error 404 tarball, folder, http url, or git url.",
        "npm error A complete log of this run can be found in: /root/.npm/_logs/debug-0.log",
    ]
    assert telling_stderr(npm10) == (
        "npm error 404  The requested resource '@scope/nope@*' could not be found or you do not have "
        "permission to access it."
    )
    assert missing_package(npm) and missing_package(npm10)
    offline = ["npm error code EAI_AGAIN", "npm error errno EAI_AGAIN", "npm error request to /x failed"]
    assert telling_stderr([*offline, "npm error Note that"]) == (
        "npm error errno EAI_AGAIN | npm error request to /x failed"
    )
    assert not missing_package(offline)  # the registry did not answer: trying again may help
    uv = [
        "error: No solution found when resolving tool dependencies",
        "  cause: Because nope was not found in the package registry and you require nope, we can "
        "conclude that your requirements are unsatisfiable.",
    ]
    assert telling_stderr(uv) == " | ".join(line.strip() for line in uv) and missing_package(uv)
    assert not missing_package(uvx)
    # A launcher's warning is not what failed: the server's own last words are.
    first_start = ["npm warn exec The following package was not found and will be installed: x@1.0.0", "bye"]
    assert telling_stderr(first_start) == " | ".join(first_start)
    assert (
        telling_stderr(["starting", "", "listening on stdio", "bye"]) == "starting | listening on stdio | bye"
    )
    assert (
        telling_stderr(["ValueError: bad port", "retrying in 1 s"])
        == "ValueError: bad port | retrying in 1 s"
    )
    assert telling_stderr([]) == ""

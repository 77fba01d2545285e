"""Hardening case 1, "no user can stall the server": tools are bounded in time and off the loop.

The probe that found it: grep's ``(a+)+$`` against lines of ``a``s ending in ``b`` froze every
user's requests (Python's ``re`` backtracks exponentially while holding the GIL) and Daphne
ignored SIGTERM. These tests drive the real thing: grep in a child process, a live Daphne with
the scripted model server, a real stdio MCP server stopped with SIGSTOP.

Long-running tools are made from a large log file: catastrophic lines first, then a long tail
(a sparse file, so the test writes kilobytes for a file of a terabyte) that takes grep far
longer than any limit to read.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from boocode.tools.arguments import validate_arguments
from boocode.tools.execution import execute_tool
from boocode.tools.native import NATIVE_TOOLS
from boocode.tools.tool import Tool
from mcpclient.core.results import ToolResult
from tests.support.hubs import make_config
from tests.support.live import create_accounts, live_daphne, server_log
from tests.support.llm import Call, ScriptedLLM, Text, ToolCalls
from tests.support.processes import PYTHON, REAL_PYTHON, ROOT, toolbox_entry

pytestmark = pytest.mark.processes

MODEL = "test-model"
CATASTROPHIC = "(a+)+$"
# How long a child process may take before the test fails: the old code never answered, and a
# start-up (Python, Django) on 2 busy cores can take tens of seconds; the tool itself is timed
# inside the child (`seconds`).
CHILD_TIMEOUT = 120.0


def catastrophic_lines(count: int) -> str:
    """``count`` lines of 40 to 70 ``a``s ending in ``b``: exponential for a backtracking engine."""
    return "".join("a" * (40 + index % 31) + "b\n" for index in range(count))


def write_huge_log(path: Path) -> None:
    """Catastrophic lines, then a terabyte-long tail (sparse: nothing is written for it)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as handle:
        handle.write(catastrophic_lines(500).encode())
        handle.truncate(1 << 40)


def child_env(data_dir: Path, **extra: str) -> dict[str, str]:
    """The environment of a child process (or Daphne) using ``data_dir`` and its workspace."""
    env = {
        **os.environ,
        "BOOCODE_DATA_DIR": str(data_dir),
        "BOOCODE_ALLOWED_HOSTS": "127.0.0.1",
        "DJANGO_SETTINGS_MODULE": "tests.settings",
        **extra,
    }
    env.pop("BOOCODE_DATABASE_URL", None)
    env.pop("BOOCODE_WORKSPACE", None)
    return env


_RUN_TOOLS = """
import asyncio, json, sys, time
import django
django.setup()
from boocode.tools.execution import execute_tool
for name, arguments in json.loads(sys.argv[1]):
    started = time.monotonic()
    result = asyncio.run(execute_tool(name, arguments))
    print(json.dumps({"seconds": time.monotonic() - started, **result.to_dict()}), flush=True)
"""


def run_tools_in_child(env: dict[str, str], *calls: tuple[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """Each ``execute_tool(name, arguments)`` in one fresh process: the results, each with its duration.

    A child process, because a tool that holds the GIL or a thread the interpreter waits for
    at exit would freeze the test run itself; here it only fails the test after
    :data:`CHILD_TIMEOUT`.
    """
    try:
        done = subprocess.run(
            [PYTHON, "-c", _RUN_TOOLS, json.dumps(calls)],
            cwd=ROOT,
            env=env,
            capture_output=True,
            timeout=CHILD_TIMEOUT,
            check=True,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"no answer from {[name for name, _ in calls]} within {CHILD_TIMEOUT:g} s")
    return [json.loads(line) for line in done.stdout.splitlines()]


# --- (a) a catastrophic pattern answers at once -------------------------------------------


def test_catastrophic_pattern_answers_quickly(tmp_path: Path) -> None:
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    (workspace / "input.txt").write_text(catastrophic_lines(2000) + "aaaa\n")
    [result] = run_tools_in_child(child_env(tmp_path), ("grep", {"pattern": CATASTROPHIC}))
    assert not result["is_error"], result["output"]
    assert result["output"] == "input.txt:2001: aaaa"  # the one line that does match
    assert result["seconds"] < 2.0, result


# --- (b) and (c): a live Daphne while a grep runs ----------------------------------------


def grep_then_answer(body: dict[str, Any]) -> ToolCalls | Text:
    """The scripted model: grep with the catastrophic pattern, then answer once it has the result."""
    if body["messages"][-1]["role"] == "tool":
        return Text("done")
    return ToolCalls([Call("grep", {"pattern": CATASTROPHIC, "path": "big.log"})])


@asynccontextmanager
async def chat_socket(port: int, account: dict[str, Any]) -> AsyncIterator[aiohttp.ClientWebSocketResponse]:
    """The conversation's websocket, opened as the page opens it."""
    url = f"ws://127.0.0.1:{port}/ws/conversations/{account['conversation']}/"
    headers = {"Cookie": f"sessionid={account['cookie']}", "Origin": f"http://127.0.0.1:{port}"}
    async with aiohttp.ClientSession() as session, session.ws_connect(url, headers=headers) as socket:
        yield socket


async def frame_of_type(socket: aiohttp.ClientWebSocketResponse, kind: str) -> dict[str, Any]:
    """The next frame of type ``kind`` (earlier frames are skipped)."""
    while (frame := await socket.receive_json())["type"] != kind:
        pass
    return frame


async def start_grep_turn(socket: aiohttp.ClientWebSocketResponse) -> dict[str, Any]:
    """Send a message; return the ``tool_call`` frame once grep is running."""
    await socket.send_json({"type": "user_message", "text": "search the log"})
    async with asyncio.timeout(15):
        call = (await frame_of_type(socket, "tool_call"))["call"]
    assert call["name"] == "grep" and call["status"] == "running", call
    return call


def daphne_env(tmp_path: Path, llm: ScriptedLLM, **extra: str) -> dict[str, str]:
    (tmp_path / "mcp.json").write_text(json.dumps({"mcpServers": {}}))
    write_huge_log(tmp_path / "workspace" / "big.log")
    return child_env(tmp_path, BOOCODE_LLM_BASE_URL=llm.base_url, BOOCODE_LLM_MODEL=MODEL, **extra)


def test_other_users_are_answered_while_a_grep_runs(tmp_path: Path) -> None:
    with ScriptedLLM(models=(MODEL,), responder=grep_then_answer) as llm:
        env = daphne_env(tmp_path, llm, BOOCODE_TOOL_TIMEOUT="3")
        grepping, other = create_accounts(env, 2)
        with live_daphne(env) as (_daphne, port):

            async def scenario() -> tuple[float, float, dict[str, Any]]:
                async with chat_socket(port, grepping) as socket:
                    await start_grep_turn(socket)
                    started = time.monotonic()
                    page = f"http://127.0.0.1:{port}/c/{other['conversation']}/"
                    cookies = {"sessionid": other["cookie"]}
                    timeout = aiohttp.ClientTimeout(total=10)
                    async with (
                        aiohttp.ClientSession(cookies=cookies, timeout=timeout) as http,
                        http.get(page) as response,
                    ):
                        assert response.status == 200
                        await response.read()
                    waited = time.monotonic() - started
                    async with asyncio.timeout(15):
                        result = (await frame_of_type(socket, "tool_result"))["call"]
                    return waited, time.monotonic() - started, result

            waited, ended, result = asyncio.run(scenario())
    # The other user's page came back while grep went on until its 3 s limit: before the grep's
    # result (an order of events, not a speed).
    assert waited < ended, f"the page took {waited:.2f} s; the grep ended after {ended:.2f} s"
    assert result["status"] == "error", result
    assert "time limit of 3 s" in result["output"] and "BOOCODE_TOOL_TIMEOUT" in result["output"]


def test_sigterm_during_a_running_tool_stops_daphne(tmp_path: Path) -> None:
    with ScriptedLLM(models=(MODEL,), responder=grep_then_answer) as llm:
        env = daphne_env(tmp_path, llm)  # the default limit: grep would run for 30 s
        [account] = create_accounts(env, 1)
        with live_daphne(env) as (daphne, port):

            async def grep_running() -> None:
                async with chat_socket(port, account) as socket:
                    await start_grep_turn(socket)
                    daphne.send_signal(signal.SIGTERM)
                    # A deadline before grep's own 30 s limit: Daphne stopped, not the grep.
                    try:
                        await asyncio.to_thread(daphne.wait, 25)
                    except subprocess.TimeoutExpired:
                        pytest.fail("Daphne was still running 25 s after SIGTERM")

            asyncio.run(grep_running())
            log = server_log(daphne)
    assert "Traceback" not in log, log


# --- (d) the wall-clock limit -------------------------------------------------------------


async def test_a_slow_native_call_stops_at_the_limit(settings, tmp_path: Path) -> None:
    settings.WORKSPACE = workspace = tmp_path / "workspace"
    for index in range(5):
        directory = workspace / f"pkg{index:02}"
        directory.mkdir(parents=True)
        for number in range(10):
            (directory / f"module{number:03}.py").write_text(f"def function_{number}():\n    pass\n")
    # grep walks the folders in name order: the modules first, then a terabyte without a newline
    # (sparse), so the limit always falls inside it, however fast or busy the machine, after the
    # modules' matches (a limit of a few milliseconds could pass before the first file on 2 busy
    # cores; 0.5 s once passed after 3 of the 50 modules, with two test runs and Chromium beside).
    (workspace / "zz").mkdir()
    with (workspace / "zz" / "huge.log").open("wb") as handle:
        handle.write(b"x" * 10_000)
        handle.truncate(1 << 40)
    settings.TOOL_TIMEOUT = 3.0
    result = await execute_tool("grep", {"pattern": r"def function_\d+", "max_results": 1000})
    assert result.is_error, result.output[:200]
    assert result.output.startswith(
        "grep: stopped at the time limit of 3 s per tool call (BOOCODE_TOOL_TIMEOUT)"
    )
    assert "narrow the path, glob or pattern" in result.output
    # What grep found before the limit comes along, so the model can narrow the search.
    assert "Found before the limit:\npkg00/module000.py:1: def function_0():" in result.output
    assert "pkg04/module009.py:1: def function_9():" in result.output
    # (The limit, not the end of the terabyte, ended it: the message says so; reading it would take minutes.)
    settings.TOOL_TIMEOUT = 30.0
    assert not (await execute_tool("grep", {"pattern": r"def function_\d+", "glob": "*.py"})).is_error


def test_the_limit_holds_inside_one_huge_line(tmp_path: Path) -> None:
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    with (workspace / "one-line.log").open("wb") as handle:
        handle.write(b"x" * 10_000)
        handle.truncate(1 << 40)  # a terabyte without a newline (sparse)
    results = run_tools_in_child(
        child_env(tmp_path, BOOCODE_TOOL_TIMEOUT="1"),
        ("view_file", {"path": "one-line.log", "start_line": 2}),
        ("grep", {"pattern": "needle", "path": "one-line.log"}),
    )
    for result in results:
        # (Reading on to the line's end would take minutes: the child's deadline would end the test.)
        assert result["is_error"] and "time limit of 1 s" in result["output"], result


async def test_an_mcp_server_that_stops_reading_cannot_hold_a_call(hub, tmp_path: Path) -> None:
    # The server's "timeout" only starts once a request is written. A server that stops reading
    # its stdin (here: stopped with SIGSTOP) leaves a large request stuck in the pipe; the hub's
    # timeout answers that call, but every later call waits to be written, for ever.
    from mcpclient.runtime import set_hub

    tag = f"stopped-{os.getpid()}-{time.monotonic_ns()}"
    # The real interpreter: the server's own process is stopped (a launcher would not pass SIGSTOP on).
    await hub.start([make_config("tb", toolbox_entry("--tag", tag, timeout=500, command=REAL_PYTHON))])
    set_hub(hub)
    [pid] = pids_with(tag)
    os.kill(pid, signal.SIGSTOP)
    # The signal is only queued by kill(): on a loaded machine the server may read on until the
    # kernel next schedules it. The calls start once it is stopped.
    await wait_for_condition(lambda: process_state(pid) == "T", timeout=10)
    abandoned = (
        'MCP server "tb": tool "echo" gave no result within 0.5 s (the server\'s "timeout" in mcp.json); '
        "the call was abandoned"
    )
    results = []
    try:
        for arguments in ({"text": "x" * 1_000_000}, {"text": "hello"}):
            # The limit is 0.5 s plus MCP_GRACE (2 s); the deadline is a guard against waiting for ever.
            result = await asyncio.wait_for(execute_tool("tb_echo", arguments), 10)
            results.append(result.output)
            assert result.is_error and "0.5 s" in result.output, result
        assert result.output == abandoned, (results, process_state(pid))
    finally:
        os.kill(pid, signal.SIGCONT)
        set_hub(None)


def process_state(pid: int) -> str:
    """The state letter of ``pid`` in /proc (``T``: stopped), or "" once it is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except OSError:
        return ""


async def wait_for_condition(condition: Callable[[], bool], *, timeout: float) -> None:
    """Poll ``condition`` every 10 ms until it holds; TimeoutError after ``timeout`` seconds."""
    async with asyncio.timeout(timeout):
        while not condition():  # noqa: ASYNC110 (nothing signals another process's state: /proc is read)
            await asyncio.sleep(0.01)


def pids_with(marker: str) -> list[int]:
    """Processes whose command line contains ``marker``."""
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if marker.encode() in (entry / "cmdline").read_bytes():
                    pids.append(int(entry.name))
            except OSError:
                continue
    return pids


# --- (e) RE2 syntax -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("pattern", "feature"),
    [
        (r"(\w+) \1", r"backreferences (\1)"),
        ("def (?=main)", "lookahead (?=...)"),
        ("(?<!_)main", "negative lookbehind (?<!...)"),
        ("a++", "possessive quantifiers"),
    ],
)
async def test_unsupported_re2_syntax_is_a_clear_error(
    settings, tmp_path: Path, pattern: str, feature: str
) -> None:
    settings.WORKSPACE = workspace = tmp_path / "workspace"
    workspace.mkdir()
    (workspace / "app.py").write_text("def main():\n    main main\n")
    result = await execute_tool("grep", {"pattern": pattern})
    assert result.is_error
    assert result.output.startswith(
        f"grep: invalid regular expression {pattern!r}: unsupported feature: {feature}"
    )
    assert "grep uses RE2 syntax, which has no backreferences, lookahead or lookbehind" in result.output


def test_grep_describes_its_syntax_as_re2() -> None:
    [grep] = [tool for tool in NATIVE_TOOLS if tool.name == "grep"]
    assert "RE2 syntax" in grep.description
    assert "RE2 syntax" in grep.parameters["properties"]["pattern"]["description"]


# --- argument validation never runs a schema's regular expression -------------------------


def test_a_schema_pattern_cannot_stall_argument_validation(tmp_path: Path) -> None:
    # jsonschema would run the pattern with Python's re on the event loop; in a child process
    # so that the old behaviour fails the test instead of freezing it.
    code = """
import django
django.setup()
from boocode.tools.arguments import validate_arguments
from boocode.tools.tool import Tool
schema = {"type": "object", "properties": {"q": {"type": "string", "pattern": "^(a+)+$"},
          "n": {"type": "integer"}}, "patternProperties": {"^(x+)+$": {"type": "string"}},
          "additionalProperties": False}
tool = Tool("remote", "", schema, True, "x", None)
print(validate_arguments(tool, {"q": "a" * 40 + "b", "n": "one", "x" * 40 + "y": 1}))
"""
    try:
        done = subprocess.run(
            [PYTHON, "-c", code],
            cwd=ROOT,
            env=child_env(tmp_path),
            capture_output=True,
            timeout=CHILD_TIMEOUT,
            check=True,
            text=True,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"validation did not finish within {CHILD_TIMEOUT:g} s")
    # It finished (running the patterns on 40 characters would take longer than the universe
    # has: the child's deadline ends that). The other keywords are still checked locally; the
    # patterns are left to the server.
    [message] = done.stdout.splitlines()
    assert message == "Invalid arguments for remote: at 'n': 'one' is not of type 'integer'"


def test_pattern_named_properties_are_still_validated() -> None:
    async def run(arguments: dict[str, Any]) -> ToolResult:
        return ToolResult(output="ran")

    # "pattern" as a property name (grep's own schema) is not the keyword.
    schema = {
        "type": "object",
        "properties": {"pattern": {"type": "string", "minLength": 1}},
        "required": ["pattern"],
        "additionalProperties": False,
    }
    tool = Tool("finder", "", schema, True, "x", run)
    assert validate_arguments(tool, {"pattern": ""}) == (
        "Invalid arguments for finder: at 'pattern': '' should be non-empty"
    )
    assert "'other' was unexpected" in (validate_arguments(tool, {"pattern": "a", "other": 1}) or "")

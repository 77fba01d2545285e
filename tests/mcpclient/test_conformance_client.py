"""``manage.py mcp_conformance_client URL``, run the way the MCP conformance suite runs it.

The suite itself (``make conformance``) is not run here: it needs Node 22 and fails today
(docs/conformance.md). These tests run the command in its own process against the real
toolbox server over Streamable HTTP (the session's: they only call read-only tools), with the
environment the suite sets, and check what the suite sees: the exit status, the lines on stdout
and the one error line on stderr.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from mcpclient.core.state import DiscoveredTool
from mcpclient.runtime.conformance import PLANS, planner_for
from tests.support.processes import PYTHON, ROOT, free_port

pytestmark = pytest.mark.processes


def conformance_client(
    data_dir: Path, url: str, scenario: str, context: dict[str, Any] | None = None
) -> subprocess.CompletedProcess[str]:
    """The command as the suite starts it: URL last, the scenario (and context) in the environment."""
    env = {
        **os.environ,
        "BOOCODE_DATA_DIR": str(data_dir),
        "BOOCODE_LOG_LEVEL": "CRITICAL",
        "MCP_CONFORMANCE_SCENARIO": scenario,
    }
    env.pop("MCP_CONFORMANCE_CONTEXT", None)
    if context is not None:
        env["MCP_CONFORMANCE_CONTEXT"] = json.dumps({"name": scenario, **context})
    return subprocess.run(
        [PYTHON, "manage.py", "mcp_conformance_client", url],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,  # a deadline (loaded: slow)
    )


def command_error(done: subprocess.CompletedProcess[str]) -> str:
    """The one ``CommandError:`` line the failing command printed last, without the prefix."""
    assert "Traceback" not in done.stderr, done.stderr
    lines = done.stderr.strip().splitlines()
    assert lines and lines[-1].startswith("CommandError: "), done.stderr
    return lines[-1].removeprefix("CommandError: ")


def test_the_initialize_scenario_connects_on_a_fresh_data_folder(
    shared_http_toolbox: Any, tmp_path: Path
) -> None:
    server = shared_http_toolbox()

    done = conformance_client(tmp_path, server.url, "initialize")

    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        'MCP server "conformance" ready over streamableHttp, protocol 2026-07-28, 12 of 13 tools offered'
    ]
    # A data folder that was never set up gets a database: sign-ins go to the secret store.
    assert (tmp_path / "boocode.sqlite3").is_file()


def test_calls_named_by_the_context_go_through_the_hub(shared_http_toolbox: Any, tmp_path: Path) -> None:
    server = shared_http_toolbox()
    calls = [{"name": "add", "arguments": {"a": 2, "b": 3}}, {"name": "echo", "arguments": {"text": "héllo"}}]

    done = conformance_client(tmp_path, server.url, "http-custom-headers", {"toolCalls": calls})

    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[1:] == ["add: 5", "echo: héllo"]


def test_a_tool_the_hub_does_not_offer_and_an_error_result_fail_the_run(
    shared_http_toolbox: Any, tmp_path: Path
) -> None:
    server = shared_http_toolbox()
    calls = [
        {"name": "delete_everything", "arguments": {"path": "/"}},  # readOnlyHint false: rejected
        {"name": "fail", "arguments": {"message": "boom"}},
    ]

    done = conformance_client(tmp_path, server.url, "some-scenario", {"toolCalls": calls})

    assert done.returncode == 1
    assert command_error(done) == (
        "delete_everything: not called: the hub does not offer it (readOnlyHint is false: only "
        "read-only tools are offered to the model); fail: error result: boom"
    )


def test_an_unreachable_server_fails_with_the_hubs_reason(tmp_path: Path) -> None:
    done = conformance_client(tmp_path, f"http://127.0.0.1:{free_port()}/mcp", "tools_call")

    assert done.returncode == 1
    assert command_error(done).startswith(
        'MCP server "conformance" failed: connection refused or unreachable'
    )


def test_a_context_that_is_not_json_is_refused(tmp_path: Path) -> None:
    env = {**os.environ, "BOOCODE_DATA_DIR": str(tmp_path), "MCP_CONFORMANCE_CONTEXT": "{oops"}
    done = subprocess.run(
        [PYTHON, "manage.py", "mcp_conformance_client", "http://127.0.0.1:9/mcp"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,  # a deadline (loaded: slow)
    )

    assert done.returncode == 1
    assert command_error(done).startswith("MCP_CONFORMANCE_CONTEXT is not valid JSON:")


def test_invalid_tool_headers_calls_only_the_tools_the_hub_offers() -> None:
    tools = [
        DiscoveredTool("valid_tool", "", {"type": "object"}, None),
        DiscoveredTool("invalid_empty_header", "", {}, None, rejected=True, reject_reason="bad header"),
    ]

    planned = PLANS["http-invalid-tool-headers"](tools)

    assert [(call.tool, call.arguments) for call in planned] == [("valid_tool", {"region": "us-west1"})]
    assert [call.tool for call in planner_for("auth/metadata-default", {})([])] == ["test-tool"]
    assert planner_for("a-scenario-added-later", {}) is None

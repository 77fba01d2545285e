"""A tool whose structured content breaks its own outputSchema: a readable tool error, no crash."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import anyio
import pytest

from mcpclient.config.entries import parse_server
from mcpclient.core.state import Status
from mcpclient.engine.hub import Hub
from tests.support.live import seed_migrated
from tests.support.processes import PYTHON, ROOT, TEST_COMMANDS

pytestmark = pytest.mark.processes

LIAR = ROOT / "tests" / "servers" / "schema_liar.py"


async def test_structured_content_against_the_schema_is_a_tool_error(hub: Hub) -> None:
    with anyio.fail_after(20):
        await hub.start([parse_server("liar", {"command": PYTHON, "args": [str(LIAR)]})])
    assert hub.snapshots()[0].status is Status.READY
    result = await hub.call_tool("liar_weather", {})
    assert result.is_error
    assert result.output == (
        'MCP server "liar": tool "weather" returned a result that does not match its output schema: '
        "Invalid structured content returned by tool weather: 'hot' is not of type 'number'"
    )
    assert hub.snapshots()[0].status is Status.READY  # the server is fine; only that result was not


def test_mcp_call_exits_1_with_one_line_instead_of_a_traceback(tmp_path: Path) -> None:
    (tmp_path / "mcp.json").write_text(
        json.dumps({"mcpServers": {"liar": {"command": PYTHON, "args": [str(LIAR)]}}})
    )
    env = {
        **os.environ,
        "BOOCODE_DATA_DIR": str(tmp_path),
        "BOOCODE_MCP_STDIO_COMMANDS": ",".join(TEST_COMMANDS),
    }
    env.pop("BOOCODE_DATABASE_URL", None)
    run = {"cwd": ROOT, "env": env, "capture_output": True, "text": True, "timeout": 120}
    seed_migrated(tmp_path, env)
    subprocess.run([PYTHON, "manage.py", "migrate", "-v0"], check=True, **run)
    done = subprocess.run([PYTHON, "manage.py", "mcp_call", "liar_weather", "{}"], **run)
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    assert "does not match its output schema" in done.stdout + done.stderr

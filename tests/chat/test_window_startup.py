"""At start, a real Daphne names each agent whose model's window cannot hold its system prompt
and its tools (the MCP servers' included), with the figures and what to change."""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

from tests.support.live import live_daphne, seed_migrated, server_log
from tests.support.llm import MODEL, ScriptedLLM
from tests.support.processes import PYTHON, ROOT, toolbox_entry

pytestmark = pytest.mark.processes

AGENTS = """# Agents

## Cramped
---
tools: [tb_*]
toolSearch: never
---
Read.

## Configured
---
model: unlisted-model
context: 1024
tools: [tb_*]
toolSearch: never
---
Read.

## Roomy
---
model: unlisted-model
context: 131072
tools: [tb_*]
toolSearch: never
---
Read.
"""


def _warnings(log: str) -> dict[str, str]:
    """The start-up window warnings in ``log``, by agent."""
    found = {}
    for line in log.splitlines():
        if " WARNING boocode.chat.turn.window_check: " in line:
            agent = re.search(r'cannot hold agent "([^"]+)"', line)
            assert agent is not None, line
            found[agent.group(1)] = line
    return found


def test_an_agent_whose_window_cannot_hold_its_tools_is_named_at_start(tmp_path: Path) -> None:
    (tmp_path / "mcp.json").write_text(json.dumps({"mcpServers": {"tb": toolbox_entry()}}))
    (tmp_path / "AGENTS.md").write_text(AGENTS)
    # The model server says the default model's window (vLLM's max_model_len); not the other's.
    with ScriptedLLM(models=(MODEL,), model_fields={"max_model_len": 1024}) as llm:
        env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "tests.settings",
            "BOOCODE_DATA_DIR": str(tmp_path),
            "BOOCODE_MCP_AUTOSTART": "1",
            "BOOCODE_MCP_STDIO_COMMANDS": PYTHON,
            "BOOCODE_AGENTS_FILE": str(tmp_path / "AGENTS.md"),
            "BOOCODE_LLM_BASE_URL": llm.base_url,
            "BOOCODE_LLM_MODEL": MODEL,
        }
        env.pop("BOOCODE_DATABASE_URL", None)
        seed_migrated(tmp_path, env)
        for command in (["migrate", "-v0"], ["mcp_sync"]):
            manage = [PYTHON, "manage.py", *command]
            subprocess.run(manage, cwd=ROOT, env=env, check=True, capture_output=True)
        with live_daphne(env, graceful=True) as (daphne, port):
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/login/") as response:
                assert response.status == 200  # Daphne starts its hub on the first request
            deadline = time.monotonic() + 60
            while "context windows weighed for 3 agents" not in server_log(daphne):
                assert daphne.poll() is None, server_log(daphne)
                assert time.monotonic() < deadline, server_log(daphne)
                time.sleep(0.1)
            log = server_log(daphne)

    warned = _warnings(log)
    assert sorted(warned) == ["Configured", "Cramped"], log  # Roomy's window holds them: no line
    assert "context windows weighed for 3 agents: 2 too small" in log
    cramped, configured = warned["Cramped"], warned["Configured"]
    assert f'Model "{MODEL}" has a context window of 1,024 tokens (server)' in cramped
    assert 'Model "unlisted-model" has a context window of 1,024 tokens (agent context:)' in configured
    for line in (cramped, configured):
        tools = re.search(r"tool definitions \(about ([\d,]+) tokens\)", line)
        assert tools is not None and int(tools.group(1).replace(",", "")) > 300, line  # the server's 14 tools
        assert "with the 256 tokens kept for the answer and 512 for the conversation" in line
        assert "tools: in AGENTS.md" in line and "toolSearch: always" in line
        assert "context: key or BOOCODE_LLM_CONTEXT_TOKENS" in line
    assert "Traceback" not in log

"""A real Daphne: the hub starts on the first request and Ctrl-C leaves no orphan children."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import urllib.request
import uuid
from pathlib import Path

import pytest

from tests.support.live import live_daphne, seed_migrated, server_log
from tests.support.processes import PYTHON, REAL_PYTHON, ROOT, pids_with, toolbox_entry

pytestmark = pytest.mark.processes


def _wait_for(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(what)
        time.sleep(0.05)


def test_ctrl_c_stops_stdio_children(tmp_path: Path):
    tag = uuid.uuid4().hex
    # The real interpreter: the server's own process must end with Daphne (no launcher between).
    entry = toolbox_entry("--tag", tag, command=REAL_PYTHON)
    (tmp_path / "mcp.json").write_text(json.dumps({"mcpServers": {"tb": entry}}))
    env = {
        **os.environ,
        "BOOCODE_DATA_DIR": str(tmp_path),
        "BOOCODE_MCP_AUTOSTART": "1",
        "BOOCODE_MCP_STDIO_COMMANDS": REAL_PYTHON,
    }
    env.pop("BOOCODE_DATABASE_URL", None)
    seed_migrated(tmp_path, env)
    for command in (["migrate", "-v0"], ["mcp_sync"]):
        subprocess.run([PYTHON, "manage.py", *command], cwd=ROOT, env=env, check=True, capture_output=True)
    with live_daphne(env) as (daphne, port):
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/login/") as response:
                assert response.status == 200
            _wait_for(lambda: len(pids_with(tag)) == 1, 20, "the hub did not start the stdio server")
            daphne.send_signal(signal.SIGINT)
            daphne.wait(20)
            _wait_for(lambda: not pids_with(tag), 10, "the stdio server outlived Daphne")
        finally:
            for pid in pids_with(tag):
                os.kill(pid, signal.SIGKILL)
    log = server_log(daphne)
    assert "stopping MCP servers" in log
    assert "Traceback" not in log

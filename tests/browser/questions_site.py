"""A live Daphne for the question (elicitation) browser tests, with the toolbox's "questions" group.

The browser conftest's session-wide site runs other servers and the default elicitation time
limit; these tests need the questions server at both revisions ("q26": 2026-07-28, "q25":
2025-11-25) and, for the timed-out form, a short ``BOOCODE_ELICITATION_TIMEOUT``. A test module
overrides the ``site`` fixture with :func:`running_site`; ``open_page`` and the rest of the
conftest's fixtures then use it.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

from tests.browser.conftest import _SETUP, PASSWORD, Site
from tests.chat.test_browser import CHROMIUM
from tests.conftest import PYTHON, ROOT, TOOLBOX, free_port, wait_for_port
from tests.llm_server import ScriptedLLM, Text

HANDSHAKE_TOOLBOX = ROOT / "tests" / "servers" / "handshake_toolbox.py"


def running_site(data: Path, *, elicitation_timeout: float) -> Iterator[Site]:
    """Daphne on a free port with the questions servers; stopped when the generator closes."""
    import pytest

    if not Path(CHROMIUM).exists():
        pytest.skip("Chromium is not installed (make test-deps)")
    servers = {
        "q26": {"command": PYTHON, "args": [str(TOOLBOX), "--feature", "questions"]},
        "q25": {"command": PYTHON, "args": [str(HANDSHAKE_TOOLBOX), "--feature", "questions"]},
    }
    (data / "mcp.json").write_text(json.dumps({"mcpServers": servers}))
    (data / "AGENTS.md").write_text(
        "## Assistant\n---\ndescription: Uses every tool\n---\nYou are a test assistant.\n"
    )
    llm = ScriptedLLM(models=("test-model",), responder=lambda body: Text("(unscripted)")).start()
    env = {
        **os.environ,
        "BOOCODE_DATA_DIR": str(data),
        "BOOCODE_MCP_CONFIG": str(data / "mcp.json"),
        "BOOCODE_AGENTS_FILE": str(data / "AGENTS.md"),
        "BOOCODE_MCP_STDIO_COMMANDS": f"npx,uvx,node,{PYTHON}",
        "BOOCODE_MCP_AUTOSTART": "1",
        "BOOCODE_LLM_BASE_URL": llm.base_url,
        "BOOCODE_LLM_MODEL": "test-model",
        "BOOCODE_LLM_TIMEOUT": "30",
        "BOOCODE_ADMIN_PASSWORD": PASSWORD,
        "BOOCODE_ALLOWED_HOSTS": "127.0.0.1",
        "BOOCODE_ELICITATION_TIMEOUT": f"{elicitation_timeout:g}",
    }
    subprocess.run(
        [PYTHON, "-c", _SETUP % PASSWORD],
        cwd=ROOT,
        env={**env, "DJANGO_SETTINGS_MODULE": "boocode.settings"},
        check=True,
        capture_output=True,
    )
    port = free_port()
    log = (data / "daphne.log").open("wb")
    process = subprocess.Popen(
        [PYTHON, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port), "boocode.asgi:application"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=log,
        start_new_session=True,
    )
    site = Site(f"http://127.0.0.1:{port}", port, llm, env, data, process)
    try:
        wait_for_port(port, process)
        yield site
    finally:
        llm.release()
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()
        llm.stop()

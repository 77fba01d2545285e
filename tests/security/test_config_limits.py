"""Hostile configuration: deep or huge files, invalid entries, leftovers and disguised commands.

The commands run as real processes (``manage.py`` in a subprocess) so their exit status and
what they print are what an operator sees; the running app is a real hub with the toolbox
server over stdio.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.test import Client
from django.urls import reverse

from mcpclient import runtime
from mcpclient.config.entries import parse_server
from mcpclient.config.model import ConfigError
from mcpclient.config.resolve import resolve_server
from mcpclient.models import McpServer
from tests.support.hubs import stop_process_hub
from tests.support.live import seed_migrated
from tests.support.processes import PYTHON, ROOT, TEST_COMMANDS, toolbox_entry

pytestmark = pytest.mark.processes

DEEP_JSON = '{"mcpServers": {}, "x": ' + "[" * 5000 + "]" * 5000 + "}"
HUGE_JSON = json.dumps({"mcpServers": {}, "pad": "x" * (2 * 1024 * 1024)})
DEEP_YAML_AGENTS = "## A\n---\ntools: " + "[" * 300 + "]" * 300 + "\n---\nHi.\n"
HUGE_AGENTS = "## A\n---\ndescription: ok\n---\n" + "words " * 400_000


def manage(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``manage.py`` in its own process, on a database and data folder of its own."""
    env = {
        **os.environ,
        "BOOCODE_DATA_DIR": str(tmp_path),
        "BOOCODE_MCP_STDIO_COMMANDS": ",".join(TEST_COMMANDS),
    }
    env.pop("BOOCODE_DATABASE_URL", None)
    return subprocess.run(
        [PYTHON, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    seed_migrated(tmp_path, {})
    assert manage(tmp_path, "migrate", "-v0").returncode == 0
    return tmp_path


@pytest.mark.parametrize(("text", "says"), [(DEEP_JSON, "nested 5001 levels"), (HUGE_JSON, "bytes")])
def test_mcp_sync_refuses_hostile_mcp_json_with_a_clear_error(data_dir: Path, text: str, says: str) -> None:
    (data_dir / "mcp.json").write_text(text)
    done = manage(data_dir, "mcp_sync")
    assert done.returncode != 0
    assert "mcp.json" in done.stderr and says in done.stderr and "limit" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize(("text", "says"), [(DEEP_YAML_AGENTS, "nested deeper than"), (HUGE_AGENTS, "bytes")])
def test_agents_sync_refuses_hostile_agents_md_with_a_clear_error(
    data_dir: Path, text: str, says: str
) -> None:
    (data_dir / "AGENTS.md").write_text(text)
    done = manage(data_dir, "agents_sync")
    assert done.returncode != 0
    assert "AGENTS.md" in done.stderr and says in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.django_db(transaction=True)
async def test_the_running_app_keeps_the_last_good_servers(tmp_path: Path, settings: Any) -> None:
    settings.MCP_CONFIG = tmp_path / "mcp.json"
    settings.MCP_STDIO_COMMANDS = TEST_COMMANDS
    settings.MCP_AUTOSTART = True
    settings.MCP_CONFIG.write_text(json.dumps({"mcpServers": {"tb": toolbox_entry()}}))
    try:
        await runtime.ensure_hub()
        assert "tb_echo" in {tool.prefixed_name for tool in runtime.hub_tools()}
        settings.MCP_CONFIG.write_text(DEEP_JSON)
        os.utime(settings.MCP_CONFIG, ns=(1, 1))  # a new mtime, whatever the clock's resolution
        await runtime.ensure_hub()  # before: RecursionError out of every turn
        assert "tb_echo" in {tool.prefixed_name for tool in runtime.hub_tools()}
        result = await runtime.hub_call("tb_echo", {"text": "still here"})
        assert not result.is_error and result.output == "still here"
    finally:
        await stop_process_hub()


@pytest.mark.django_db
def test_the_admin_list_renders_while_mcp_json_is_hostile(tmp_path: Path, settings: Any) -> None:
    settings.MCP_CONFIG = tmp_path / "mcp.json"
    settings.MCP_CONFIG.write_text(json.dumps({"mcpServers": {"tb": toolbox_entry()}}))
    call_command("mcp_sync", stdout=StringIO())
    settings.MCP_CONFIG.write_text(DEEP_JSON)
    client = Client()
    client.force_login(User.objects.create_superuser("root", password="x"))
    response = client.get(reverse("admin:mcpclient_mcpserver_changelist"))
    assert response.status_code == 200 and b"tb" in response.content
    change = client.get(reverse("admin:mcpclient_mcpserver_change", args=[McpServer.objects.get().pk]))
    assert change.status_code == 200


DUPLICATE_KEYS = """{"mcpServers": {"tb": {
  "command": "%s",
  "args": ["--no-such-flag"],
  "args": ["%s"]
}}}"""


@pytest.mark.django_db(transaction=True)
async def test_an_entry_with_a_duplicate_key_never_runs(tmp_path: Path, settings: Any) -> None:
    # The last "args" would have worked; the stored JSON no longer shows the duplicate.
    settings.MCP_CONFIG = tmp_path / "mcp.json"
    settings.MCP_STDIO_COMMANDS = TEST_COMMANDS
    settings.MCP_AUTOSTART = True
    settings.MCP_CONFIG.write_text(DUPLICATE_KEYS % (PYTHON, ROOT / "tests" / "servers" / "toolbox.py"))
    try:
        await runtime.ensure_hub()
        assert runtime.hub_tools() == []
        row = await McpServer.objects.aget(name="tb")
        assert row.status == "failed" and 'duplicate key "args"' in row.last_error
    finally:
        await stop_process_hub()


@pytest.mark.django_db
def test_the_admin_shows_why_an_entry_does_not_run(tmp_path: Path, settings: Any) -> None:
    settings.MCP_CONFIG = tmp_path / "mcp.json"
    settings.MCP_CONFIG.write_text(DUPLICATE_KEYS % (PYTHON, "x.py"))
    call_command("mcp_sync", stdout=StringIO())
    client = Client()
    client.force_login(User.objects.create_superuser("root", password="x"))
    page = client.get(reverse("admin:mcpclient_mcpserver_changelist")).content.decode()
    assert "duplicate key &quot;args&quot;" in page or 'duplicate key "args"' in page


def test_an_interrupted_write_leaves_no_temporary_file_after_the_next_start(data_dir: Path) -> None:
    (data_dir / "mcp.json").write_text('{"mcpServers": {}}')
    leftover = data_dir / ".mcp.json.k3x9q1.tmp"  # what a write-back killed mid-write leaves
    leftover.write_text('{"mcpServers": {"x": {"command": "npx", "env": {"TOKEN": "sk-left-behind"}}}}')
    unrelated = data_dir / "notes.tmp"
    unrelated.write_text("mine")
    done = manage(data_dir, "mcp_sync")
    assert done.returncode == 0, done.stderr
    assert not leftover.exists() and unrelated.exists()


def _fake_program(folder: Path, name: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    program = folder / name
    program.write_text("#!/bin/sh\necho owned\n")
    program.chmod(0o755)
    return program


def test_the_stdio_allowlist_compares_resolved_commands(tmp_path: Path) -> None:
    npx = shutil.which("npx")
    assert npx is not None
    impostor = _fake_program(tmp_path / "any" / "dir", "npx")

    def resolve(entry: dict[str, Any]) -> Any:
        return resolve_server(
            parse_server("srv", entry), base_dir=tmp_path, environ=dict(os.environ), allowed_commands=["npx"]
        )

    with pytest.raises(ConfigError, match="is not allowed"):
        resolve({"command": str(impostor)})  # before: allowed, its name is "npx"
    with pytest.raises(ConfigError, match=r"is not allowed|command not found"):
        resolve({"command": "../../bin/sh"})
    # A PATH given to the child cannot swap the program: it runs as the file "npx" is here.
    resolved = resolve({"command": "npx", "env": {"PATH": str(impostor.parent)}})
    assert resolved.command == npx
    assert resolve({"command": npx}).command == npx  # the very file a listed name resolves to

"""The database mirror of mcp.json, the hub's persisted state, and the mcp_* commands."""

from __future__ import annotations

import json
import os
import time
from io import StringIO
from pathlib import Path

import pytest
from channels.db import database_sync_to_async
from django.core.management import CommandError, call_command

from mcpclient import runtime
from mcpclient.models import McpServer, McpState, McpTool
from mcpclient.runtime.sync import sync_servers
from tests.support.hubs import stop_process_hub
from tests.support.processes import PYTHON, toolbox_entry

pytestmark = [pytest.mark.postgres, pytest.mark.processes]


def write_config(path: Path, servers: dict) -> Path:
    path.write_text(json.dumps({"mcpServers": servers}, indent=2))
    return path


@pytest.mark.django_db
def test_sync_creates_updates_and_deletes(mcp_file):
    write_config(
        mcp_file,
        {
            "github": {
                "url": "https://example.invalid/mcp",
                "headers": {"Authorization": "Bearer ${GITHUB_TOKEN}"},
                "x-note": "kept",
            },
            "local": {"command": "npx", "args": ["-y", "some-server"], "enabled": False},
            "broken": {"type": "stdio"},
        },
    )
    report = sync_servers()
    assert sorted(report.created) == ["broken", "github", "local"]
    github = McpServer.objects.get(name="github")
    # Raw values: the placeholder is stored as written, unknown keys kept.
    assert github.config["headers"] == {"Authorization": "Bearer ${GITHUB_TOKEN}"}
    assert github.config["x-note"] == "kept"
    assert (github.transport, github.enabled, github.status) == ("streamableHttp", True, "connecting")
    local = McpServer.objects.get(name="local")
    assert (local.transport, local.enabled, local.status) == ("stdio", False, "disabled")
    broken = McpServer.objects.get(name="broken")
    assert broken.status == "failed"
    assert broken.config_error == 'mcp.json: server "broken": "command" is required for stdio'
    assert [s.name for s in McpServer.objects.all()] == ["github", "local", "broken"]
    version = McpState.objects.get().version

    # A second sync of the same file changes nothing.
    again = sync_servers()
    assert not again.changed and sorted(again.unchanged) == ["broken", "github", "local"]
    assert McpState.objects.get().version == version

    write_config(mcp_file, {"local": {"command": "npx", "args": ["-y", "some-server"]}})
    report = sync_servers()
    assert report.updated == ["local"] and sorted(report.deleted) == ["broken", "github"]
    assert McpServer.objects.get().enabled is True
    assert McpState.objects.get().version > version


@pytest.mark.django_db
def test_sync_refuses_a_broken_file_without_touching_rows(mcp_file):
    write_config(mcp_file, {"a": {"command": "npx"}})
    sync_servers()
    mcp_file.write_text('{"mcpServers": {"a": {"command": "npx" "args": []}}}')  # a comma missing
    with pytest.raises(Exception, match=r"mcp\.json: invalid JSON at line 1, column"):
        sync_servers()
    assert McpServer.objects.get().name == "a"


@pytest.mark.django_db
def test_a_file_written_while_it_is_synced_is_synced_again(mcp_file, monkeypatch):
    """mcp.json edited between the sync's read and its bookkeeping: the next check sees the edit."""
    from mcpclient.config import loading
    from mcpclient.runtime.sync import config_mtime_ns, current_state

    write_config(mcp_file, {"first": {"url": "https://example.invalid/a"}})
    read = loading.load_config

    def read_then_edit(path):
        loaded = read(path)
        write_config(path, {"second": {"url": "https://example.invalid/b"}})
        os.utime(path, ns=(time.time_ns() + 10**9,) * 2)  # a later tick, whatever the clock's grain
        return loaded

    monkeypatch.setattr("mcpclient.runtime.sync.load_config", read_then_edit)
    assert sync_servers().created == ["first"]
    monkeypatch.undo()
    assert config_mtime_ns() != current_state().config_mtime_ns  # the edit is still to be applied
    report = sync_servers()
    assert (report.created, report.deleted) == (["second"], ["first"])
    assert config_mtime_ns() == current_state().config_mtime_ns


@pytest.mark.django_db
def test_missing_file_means_no_servers(mcp_file):
    report = sync_servers()
    assert not report.exists and McpServer.objects.count() == 0


@pytest.mark.django_db(transaction=True)
async def test_running_hub_persists_state_and_follows_file_edits(mcp_file, settings):
    settings.MCP_AUTOSTART = True
    # The crashed server's state is read below; the hub's own reconnect (test_healing.py) waits
    # long enough not to move it on first, however slow the machine.
    settings.MCP_RECONNECT_BASE, settings.MCP_RECONNECT_CAP = 60.0, 120.0
    write_config(mcp_file, {"tb": toolbox_entry()})
    await _sync()
    try:
        hub = await runtime.ensure_hub()
        assert {t.prefixed_name for t in runtime.hub_tools()} >= {"tb_echo", "tb_add"}
        await hub.drain_listeners()
        row = await McpServer.objects.aget(name="tb")
        assert row.status == "ready" and row.connected_at is not None and row.protocol_version
        assert row.tool_count == 12 and row.rejected_count == 1
        rejected = await McpTool.objects.aget(server=row, rejected=True)
        assert rejected.prefixed_name == "tb_delete_everything" and "readOnlyHint" in rejected.reject_reason
        assert runtime.hub_statuses() == [
            {"name": "tb", "status": "ready", "tool_count": 12, "held_count": 0}
        ]
        assert runtime.hub_statuses(staff=True) == [
            {"name": "tb", "status": "ready", "tool_count": 12, "held_count": 0, "last_error": ""}
        ]

        # The file is edited by hand: the next ensure_hub (before a turn) applies it.
        write_config(mcp_file, {"tb": toolbox_entry(enabled=False), "tb2": toolbox_entry()})
        hub2 = await runtime.ensure_hub()
        assert hub2 is hub
        names = {t.prefixed_name for t in runtime.hub_tools()}
        assert "tb2_echo" in names and "tb_echo" not in names
        await hub.drain_listeners()
        assert (await McpServer.objects.aget(name="tb")).status == "disabled"
        assert await McpTool.objects.filter(server__name="tb").acount() == 0

        result = await runtime.hub_call("tb2_crash", {})
        assert result.is_error
        await hub.drain_listeners()
        row = await McpServer.objects.aget(name="tb2")
        assert row.status == "unavailable" and "connection closed" in row.last_error
        assert "crashing on request" in row.stderr_tail
    finally:
        await stop_process_hub()


async def _sync():
    return await database_sync_to_async(sync_servers)()


@pytest.mark.django_db
def test_mcp_discover_command(mcp_file):
    write_config(
        mcp_file,
        {
            "tb": toolbox_entry(),
            "off": toolbox_entry(enabled=False),
            "dead": {"command": PYTHON, "args": ["-c", "pass"]},
        },
    )
    out = StringIO()
    # Every enabled server counts: "dead" failing makes the run fail (exit status 1).
    with pytest.raises(CommandError, match="failed: dead"):
        call_command("mcp_discover", stdout=out, stderr=StringIO())
    lines = out.getvalue().splitlines()
    assert lines[:2] == ["mcp.json shape: mcpServers", "tb: ready, 12 tools, 1 rejected"]
    assert lines[2].startswith("dead: failed, 0 tools, 0 rejected (")
    assert McpTool.objects.filter(server__name="tb", rejected=False).count() == 12

    out = StringIO()
    call_command("mcp_discover", "tb", "--json", stdout=out)
    data = json.loads(out.getvalue())
    tools = {t["prefixed_name"]: t for t in data["servers"][0]["tools"]}
    assert tools["tb_echo"]["name"] == "echo" and not tools["tb_echo"]["rejected"]
    assert (
        tools["tb_delete_everything"]["rejected"]
        and "readOnlyHint" in tools["tb_delete_everything"]["reason"]
    )

    with pytest.raises(CommandError, match="failed: dead"):
        call_command("mcp_discover", "dead", stdout=StringIO(), stderr=StringIO())
    for name, says in (("off", '"off" is disabled'), ("nope", 'no MCP server named "nope"')):
        err = StringIO()
        with pytest.raises(CommandError, match=f"failed: {name}"):
            call_command("mcp_discover", name, stdout=StringIO(), stderr=err)
        assert says in err.getvalue()


@pytest.mark.django_db
def test_mcp_call_command(mcp_file):
    write_config(mcp_file, {"tb": toolbox_entry()})
    out = StringIO()
    call_command("mcp_call", "tb_add", '{"a": 1, "b": 2}', stdout=out)
    assert out.getvalue() == "3\n"
    out = StringIO()
    call_command("mcp_call", "tb_media", "{}", "--json", stdout=out)
    data = json.loads(out.getvalue())
    assert data["is_error"] is False and data["parts"][0]["type"] == "image"
    with pytest.raises(CommandError, match="not valid JSON"):
        call_command("mcp_call", "tb_add", "{nope", stdout=StringIO())
    out = StringIO()
    with pytest.raises(CommandError, match="returned an error"):
        call_command("mcp_call", "tb_fail", '{"message": "bad"}', stdout=out)
    assert out.getvalue() == "bad\n"

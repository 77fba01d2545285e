"""Per-server ``includeTools`` / ``excludeTools``: applied at discovery against the real toolbox.

A filtered tool is kept (shown as "filtered" with the reason) but never offered to the model,
never counted in ``tool_count``, and marked ``"filtered": true`` in ``mcp_discover --json``.
"""

from __future__ import annotations

import json
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from channels.db import database_sync_to_async
from django.core.management import call_command
from django.test import Client
from django.urls import reverse

from mcpclient.core.state import Status, filter_reason
from mcpclient.engine.hub import Hub
from mcpclient.models import McpServer, McpTool
from mcpclient.runtime.sync import persist_snapshot, sync_servers
from tests.support.admin import write_config
from tests.support.hubs import make_config
from tests.support.processes import TEST_COMMANDS, toolbox_entry

pytestmark = pytest.mark.processes


def test_filter_semantics_are_gemini_clis_with_agent_globs() -> None:
    assert filter_reason("echo", None, ()) == ""
    assert filter_reason("echo", ["echo", "a*"], ()) == ""
    assert filter_reason("add_tool", ["echo", "a*"], ()) == ""
    assert filter_reason("slow", ["echo", "a*"], ()) == (
        'left out by "includeTools": it matches none of ["echo", "a*"]'
    )
    # Exclude wins over include.
    assert filter_reason("add_tool", ["a*"], ["*_tool", "x"]) == 'left out by "excludeTools": ["*_tool"]'
    # "*" is the only wildcard; "?" and "." are literal; matching is anchored.
    assert filter_reason("echo", ["ech?"], ()) != ""
    assert filter_reason("echo", ["ech"], ()) != ""
    assert filter_reason("echo", [], ()) != ""  # an empty include list offers nothing


async def test_filtered_tools_are_never_offered(hub: Hub) -> None:
    config = make_config("tb", toolbox_entry(includeTools=["echo", "add*", "delete_*"], excludeTools=["add"]))
    assert config.include_tools == ("echo", "add*", "delete_*") and config.exclude_tools == ("add",)
    await hub.start([config])
    snapshot = hub.snapshots()[0]
    assert snapshot.status is Status.READY

    assert sorted(tool.prefixed_name for tool in hub.tools()) == ["tb_add_tool", "tb_echo"]
    tools = {tool.name: tool for tool in snapshot.tools}
    assert tools["add"].filtered and not tools["add"].rejected
    assert tools["add"].reject_reason == 'left out by "excludeTools": ["add"]'
    assert tools["slow"].filtered and "includeTools" in tools["slow"].reject_reason
    # Included but not read-only: the read-only guard still rejects it.
    assert tools["delete_everything"].rejected and not tools["delete_everything"].filtered
    # Kept under a prefixed name, so the admin can show it, but unknown to calls.
    assert snapshot.prefixed_names["slow"] == "tb_slow"
    result = await hub.call_tool("tb_slow", {"seconds": 0})
    assert result.is_error and "Unknown tool" in result.output

    # A tool the server adds later goes through the same filter.
    assert not (await hub.call_tool("tb_add_tool", {"name": "fresh"})).is_error
    await hub.rediscover("tb")
    fresh = {tool.name: tool for tool in hub.snapshots()[0].tools}["fresh"]
    assert fresh.filtered and "tb_fresh" not in {tool.prefixed_name for tool in hub.tools()}


@pytest.fixture
def mcp_file(tmp_path: Path, settings: Any) -> Path:
    settings.MCP_CONFIG = tmp_path / "mcp.json"
    settings.MCP_STDIO_COMMANDS = TEST_COMMANDS
    return settings.MCP_CONFIG


@pytest.mark.django_db
def test_filtered_tools_are_stored_shown_and_listed_as_filtered(admin_client: Client, mcp_file: Path) -> None:
    write_config(mcp_file, {"tb": toolbox_entry(excludeTools=["slow", "crash", "big"])})
    out = StringIO()
    call_command("mcp_discover", "tb", "--json", stdout=out)
    tools = {tool["name"]: tool for tool in json.loads(out.getvalue())["servers"][0]["tools"]}
    assert tools["slow"]["filtered"] is True and tools["slow"]["rejected"] is False
    assert tools["slow"]["reason"] == 'left out by "excludeTools": ["slow"]'
    assert tools["echo"]["filtered"] is False
    assert tools["delete_everything"]["filtered"] is False and tools["delete_everything"]["rejected"]
    server = json.loads(out.getvalue())["servers"][0]
    assert server["tool_count"] == 9  # 13 listed: 3 filtered, 1 rejected

    row = McpServer.objects.get(name="tb")
    assert (row.tool_count, row.rejected_count, row.filtered_count) == (9, 1, 3)
    assert set(McpTool.objects.filter(server=row, filtered=True).values_list("name", flat=True)) == {
        "slow",
        "crash",
        "big",
    }

    html = admin_client.get(reverse("admin:mcpclient_mcpserver_change", args=[row.pk])).content.decode()
    assert '<span class="mcp-tool-filtered">filtered</span>' in html
    assert '<span class="mcp-tool-rejected">rejected</span>' in html
    assert "left out by &quot;excludeTools&quot;: [&quot;slow&quot;]" in html
    listing = admin_client.get(reverse("admin:mcpclient_mcpserver_changelist")).content.decode()
    left_out = '<small class="mcp-left-out">1 rejected, 3 filtered</small>'
    assert f'<td class="field-tools_summary">9<br>{left_out}</td>' in listing


@pytest.mark.django_db(transaction=True)  # the hub's thread writes through its own connection
async def test_a_filter_change_is_persisted_on_the_next_snapshot(hub: Hub, mcp_file: Path) -> None:
    write_config(mcp_file, {"tb": toolbox_entry()})
    await database_sync_to_async(sync_servers)()
    await hub.start([make_config("tb", toolbox_entry(includeTools=["echo"]))])
    await database_sync_to_async(persist_snapshot)(hub.snapshots()[0])
    row = await McpServer.objects.aget(name="tb")
    assert (row.tool_count, row.filtered_count) == (1, 12)

    await hub.apply([make_config("tb", toolbox_entry())])  # the filter removed: reconnected
    await database_sync_to_async(persist_snapshot)(hub.snapshots()[0])
    row = await McpServer.objects.aget(name="tb")
    assert (row.tool_count, row.rejected_count, row.filtered_count) == (12, 1, 0)
    assert not await McpTool.objects.filter(server=row, filtered=True).aexists()

"""``writeTools`` and ``trusted``: validated, written back as written, applied at discovery.

The hub tests run the real toolbox with its write group (``--feature writes``): with the default
``writeTools: "reject"`` its write tools are rejected as before; with ``"approve"`` they are
offered and marked as needing approval; with ``trusted: false`` every tool is.
"""

from __future__ import annotations

import json
import os
import subprocess
from io import StringIO
from pathlib import Path
from typing import Any

import mcp.types as types
import pytest
from django.core.management import call_command
from django.test import Client
from django.urls import reverse

from boocode.tools.execution import execute_tool
from boocode.tools.registry import available_tools
from mcpclient.admin.importing import import_servers
from mcpclient.config.entries import parse_server
from mcpclient.config.model import ConfigError
from mcpclient.config.shapes import SHAPES, entry_for
from mcpclient.core.approval import UNTRUSTED_REASON, WRITE_REASON, declared_hints, stored_approval_reason
from mcpclient.core.state import Status, discover_tool
from mcpclient.engine.hub import Hub
from mcpclient.models import McpServer, McpTool
from mcpclient.runtime import set_hub
from tests.support.admin import write_config
from tests.support.hubs import make_config
from tests.support.processes import PYTHON, ROOT, TOOLBOX, HttpServer, free_port, toolbox_entry

pytestmark = pytest.mark.processes


def writes_entry(**keys: Any) -> dict[str, Any]:
    return toolbox_entry("--feature", "writes", **keys)


# --- configuration --------------------------------------------------------------------------------
def test_defaults_keep_the_read_only_guard_and_trust() -> None:
    config = parse_server("tb", toolbox_entry())
    assert (config.write_tools, config.trusted) == ("reject", True)
    config = parse_server("tb", toolbox_entry(writeTools="approve", trusted=False))
    assert (config.write_tools, config.trusted) == ("approve", False)


@pytest.mark.parametrize(
    ("keys", "message"),
    [
        ({"writeTools": "allow"}, 'server "tb": "writeTools" must be "reject" or "approve", got "allow"'),
        ({"writeTools": True}, '"writeTools" must be "reject" or "approve", got true'),
        ({"writeTools": ["approve"]}, '"writeTools" must be "reject" or "approve", got ["approve"]'),
        ({"trusted": "no"}, 'server "tb": "trusted" must be true or false, got "no"'),
        ({"trusted": 0}, '"trusted" must be true or false, got 0'),
    ],
)
def test_bad_values_are_refused_naming_the_key_and_the_value(keys: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_server("tb", toolbox_entry(**keys), source="mcp.json")
    assert message in str(caught.value) and str(caught.value).startswith("mcp.json: ")


@pytest.mark.parametrize("shape", SHAPES, ids=lambda shape: shape.label)
def test_write_back_keeps_both_keys_in_every_shape(shape: Any) -> None:
    config = parse_server("tb", toolbox_entry(writeTools="approve", trusted=False))
    entry = entry_for(shape, config)
    assert (entry["writeTools"], entry["trusted"]) == ("approve", False)
    again = parse_server("tb", entry)
    assert (again.write_tools, again.trusted) == ("approve", False)
    # The defaults are left out, like default time limits.
    plain = entry_for(shape, parse_server("tb", toolbox_entry(writeTools="reject", trusted=True)))
    assert "writeTools" not in plain and "trusted" not in plain


@pytest.mark.django_db
def test_mcp_import_carries_both_keys(tmp_path: Path, settings: Any) -> None:
    settings.MCP_CONFIG = tmp_path / "mcp.json"
    source = tmp_path / "claude_desktop_config.json"
    source.write_text(
        json.dumps({"mcpServers": {"notes": {"command": "npx", "writeTools": "approve", "trusted": False}}})
    )
    import_servers(source)
    entry = json.loads(settings.MCP_CONFIG.read_text())["mcpServers"]["notes"]
    assert (entry["writeTools"], entry["trusted"]) == ("approve", False)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("soon", "BOOCODE_APPROVAL_TIMEOUT='soon': expected a number"),
        ("0.5", "BOOCODE_APPROVAL_TIMEOUT=0.5: must be at least 1.0"),
    ],
)
def test_a_bad_approval_timeout_stops_the_process(tmp_path: Path, value: str, message: str) -> None:
    env = {**os.environ, "BOOCODE_DATA_DIR": str(tmp_path), "BOOCODE_APPROVAL_TIMEOUT": value}
    result = subprocess.run([PYTHON, "manage.py", "check"], cwd=ROOT, env=env, capture_output=True, text=True)
    assert result.returncode != 0 and message in result.stderr


# --- discovery ------------------------------------------------------------------------------------
def listed(**annotations: Any) -> types.Tool:
    return types.Tool(
        name="t", input_schema={"type": "object"}, annotations=types.ToolAnnotations(**annotations)
    )


def test_discovery_per_setting() -> None:
    write, read = listed(readOnlyHint=False), listed(readOnlyHint=True)
    rejected = discover_tool(write)
    assert rejected.rejected and not rejected.offered and not rejected.needs_approval
    offered = discover_tool(write, write_tools="approve")
    assert offered.offered and offered.needs_approval and offered.approval_reason == WRITE_REASON
    assert not discover_tool(read, write_tools="approve").needs_approval
    # Untrusted: read-only tools too; a write tool is still rejected unless writes are approved.
    assert discover_tool(read, trusted=False).approval_reason == UNTRUSTED_REASON
    assert discover_tool(types.Tool(name="t", input_schema={}), trusted=False).needs_approval
    assert discover_tool(write, trusted=False).rejected
    both = discover_tool(write, write_tools="approve", trusted=False).approval_reason
    assert WRITE_REASON in both and UNTRUSTED_REASON in both
    # The entry's filters still come first: a filtered tool needs nothing, it is not offered.
    filtered = discover_tool(write, exclude=["t"], write_tools="approve")
    assert filtered.filtered and not filtered.needs_approval


def test_hints_are_shown_as_the_server_declared_them() -> None:
    assert declared_hints({"readOnlyHint": False, "destructiveHint": True, "title": "x"}) == {
        "readOnly": False,
        "destructive": True,
        "idempotent": None,
        "openWorld": None,
    }
    unsaid = {"readOnly": None, "destructive": None, "idempotent": None, "openWorld": None}
    assert declared_hints(None) == unsaid


async def test_the_hub_rejects_write_tools_by_default(hub: Hub) -> None:
    await hub.start([make_config("tb", writes_entry())])
    assert hub.snapshots()[0].status is Status.READY
    tools = {tool.name: tool for tool in hub.snapshots()[0].tools}
    assert tools["write_note"].rejected and tools["delete_notes"].rejected
    names = {tool.prefixed_name for tool in hub.tools()}
    assert "tb_write_note" not in names and "tb_read_notes" in names
    assert all(not tool.approval_reason for tool in hub.tools())


async def test_approve_offers_write_tools_marked_for_approval(hub: Hub) -> None:
    await hub.start([make_config("tb", writes_entry(writeTools="approve"))])
    offered = {tool.prefixed_name: tool for tool in hub.tools()}
    assert offered["tb_write_note"].approval_reason == WRITE_REASON
    assert offered["tb_delete_notes"].approval_reason == WRITE_REASON
    assert offered["tb_delete_everything"].approval_reason == WRITE_REASON  # the toolbox's own
    assert offered["tb_read_notes"].approval_reason == ""
    assert offered["tb_echo"].approval_reason == ""
    set_hub(hub)
    try:
        registry = {tool.name: tool for tool in available_tools()}
        assert registry["tb_write_note"].approval_reason == WRITE_REASON
        assert registry["tb_write_note"].annotations["destructiveHint"] is False
        # Nobody to ask (no gate): refused, and the server never saw the call.
        result = await execute_tool("tb_write_note", {"key": "k", "text": "v"})
        assert result.is_error and "need a person's approval" in result.output
        assert (await execute_tool("tb_read_notes", {})).output == "{}"
    finally:
        set_hub(None)


async def test_untrusted_server_needs_approval_for_every_tool(hub: Hub) -> None:
    await hub.start([make_config("tb", writes_entry(trusted=False))])
    offered = {tool.prefixed_name: tool for tool in hub.tools()}
    assert "tb_write_note" not in offered  # writes still rejected: trusted=false widens nothing
    assert offered["tb_read_notes"].approval_reason == UNTRUSTED_REASON
    assert all(tool.approval_reason == UNTRUSTED_REASON for tool in offered.values())


# --- the admin's tool pages ---------------------------------------------------------------------------
@pytest.mark.django_db
def test_the_admin_shows_which_tools_need_approval_and_why(admin_client: Client, mcp_file: Path) -> None:
    write_config(mcp_file, {"tb": writes_entry(writeTools="approve")})
    out = StringIO()
    call_command("mcp_discover", "tb", "--json", stdout=out)
    listed_tools = {tool["name"]: tool for tool in json.loads(out.getvalue())["servers"][0]["tools"]}
    assert listed_tools["write_note"]["approval"] == WRITE_REASON
    assert listed_tools["write_note"]["rejected"] is False and listed_tools["echo"]["approval"] == ""
    row = McpServer.objects.get(name="tb")
    write = McpTool.objects.get(server=row, name="write_note")
    assert not write.rejected
    assert stored_approval_reason(row.config, write.name, write.annotations) == WRITE_REASON

    page = admin_client.get(reverse("admin:mcpclient_mcptool_change", args=[write.pk])).content.decode()
    assert "Needs approval:" in page and "each call needs the person&#x27;s approval" in page
    reader = McpTool.objects.get(server=row, name="read_notes")
    page = admin_client.get(reverse("admin:mcpclient_mcptool_change", args=[reader.pk])).content.decode()
    assert "each call needs the person" not in page
    server_url = reverse("admin:mcpclient_mcpserver_change", args=[row.pk])
    server_page = admin_client.get(server_url).content.decode()
    # Three write tools, and the count of the tools that ask ('... ("writeTools": "approve")').
    assert server_page.count("(&quot;writeTools&quot;: &quot;approve&quot;)") == 4
    assert "3 of 16 tools ask before each call" in server_page


async def test_a_per_user_servers_write_tools_need_approval_in_the_persons_own_view(hub: Hub) -> None:
    # The toolbox asks for no sign-in, so a person's session opens without one.
    port = free_port()
    server = HttpServer([PYTHON, str(TOOLBOX), "--http", str(port), "--feature", "writes"], port, "/mcp")
    try:
        entry = {"type": "http", "url": server.url, "oauth": {"mode": "perUser"}, "writeTools": "approve"}
        await hub.start([make_config("mine", entry)])
        await hub.open_user_sessions(1, ["mine"])
        assert hub.user_connection("mine", 1).status is Status.READY
        own = {tool.prefixed_name: tool for tool in hub.tools(1)}
        assert own["mine_write_note"].approval_reason == WRITE_REASON
        assert own["mine_read_notes"].approval_reason == ""
        assert "mine_write_note" not in {tool.prefixed_name for tool in hub.tools(2)}
        set_hub(hub)
        try:
            registry = {tool.name: tool for tool in available_tools(1)}
            assert registry["mine_write_note"].approval_reason == WRITE_REASON
        finally:
            set_hub(None)
    finally:
        await hub.stop()
        server.stop()

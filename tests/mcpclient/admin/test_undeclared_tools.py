"""Approval follows the MCP schema's defaults: a tool that does not declare ``readOnlyHint: true``
may change things, so each call waits for the person unless the server's entry vouches for it.

Real servers: the toolbox with its ``undeclared`` group over stdio, and the published GitLab server
as ``npx -y`` installs it (tests/node/gitlab/), whose tools declare no annotations at all (listing
them needs no GitLab).
"""

from __future__ import annotations

import asyncio
import json
import logging
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
from mcpclient.admin import changes
from mcpclient.config.entries import parse_server
from mcpclient.config.model import ConfigError
from mcpclient.config.shapes import SHAPES, entry_for
from mcpclient.core.approval import (
    CAUSES,
    UNDECLARED_OWN_REASON,
    UNDECLARED_REASON,
    UNTRUSTED_REASON,
    WRITE_REASON,
    approval_reason,
    stored_approval_reason,
)
from mcpclient.core.state import Status, discover_tool
from mcpclient.engine.hub import Hub
from mcpclient.models import McpServer, McpTool
from mcpclient.runtime import set_hub
from tests.support.admin import form_fields, write_config
from tests.support.hubs import make_config
from tests.support.processes import ROOT, toolbox_entry

pytestmark = pytest.mark.processes

GITLAB_DIR = ROOT / "tests" / "node" / "gitlab"
GITLAB_WRITES = ("push_files", "create_repository", "create_issue")


def gitlab_entry(**keys: Any) -> dict[str, Any]:
    return {
        "command": "npx",
        "args": ["-y", "@modelcontextprotocol/server-gitlab"],
        "cwd": str(GITLAB_DIR),
        "env": {"GITLAB_PERSONAL_ACCESS_TOKEN": "not-a-token"},  # listing tools never uses it
        **keys,
    }


def undeclared_entry(**keys: Any) -> dict[str, Any]:
    return toolbox_entry("--feature", "undeclared", **keys)


# --- configuration --------------------------------------------------------------------------------
def test_read_only_is_a_list_of_globs_carried_through_every_shape() -> None:
    assert parse_server("tb", toolbox_entry()).read_only == ()
    config = parse_server("tb", toolbox_entry(readOnly=["get_*", "list_issues"]))
    assert config.read_only == ("get_*", "list_issues")
    for shape in SHAPES:
        assert entry_for(shape, config)["readOnly"] == ["get_*", "list_issues"], shape.key
    assert "readOnly" not in entry_for(SHAPES[0], parse_server("tb", toolbox_entry()))


@pytest.mark.parametrize(
    ("keys", "message"),
    [
        ({"readOnly": "get_*"}, '"readOnly" must be an array of strings, got string'),
        ({"readOnly": ["get_*", 3]}, '"readOnly[1]" must be a string, got number'),
        ({"readOnly": ["get_*", " "]}, '"readOnly[1]" must not be empty'),
        ({"readOnly": ["*"], "trusted": False}, 'conflicting "readOnly" and "trusted": false'),
        ({"readOnly": [], "trusted": False}, 'conflicting "readOnly" and "trusted": false'),
    ],
)
def test_bad_read_only_values_are_refused_naming_the_key(keys: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_server("tb", toolbox_entry(**keys))
    assert str(caught.value).startswith('mcp.json: server "tb": ') and message in str(caught.value)


def test_the_admin_form_writes_read_only_back_and_clears_it() -> None:
    original = toolbox_entry(trusted=True)
    assert changes.entry_values(original)["read_only"] == []
    written = changes.build_entry(original, {"read_only": ["get_*"]})
    assert written["readOnly"] == ["get_*"] and changes.entry_values(written)["read_only"] == ["get_*"]
    assert "readOnly" not in changes.build_entry(written, {"read_only": []})


# --- discovery ------------------------------------------------------------------------------------
def listed(name: str = "t", **annotations: Any) -> types.Tool:
    declared = types.ToolAnnotations(**annotations) if annotations else None
    return types.Tool(name=name, input_schema={"type": "object"}, annotations=declared)


def test_a_tool_that_does_not_declare_read_only_asks_unless_vouched_for() -> None:
    for tool in (listed(), listed(destructiveHint=False), listed(title="Quiet")):
        discovered = discover_tool(tool)
        assert discovered.offered and discovered.approval_reason == UNDECLARED_REASON
        assert not discover_tool(tool, read_only=["t"]).needs_approval
        assert not discover_tool(tool, read_only=["*"]).needs_approval
        assert discover_tool(tool, read_only=["t?", "other_*"]).needs_approval  # * is the only wildcard
    assert not discover_tool(listed(readOnlyHint=True)).needs_approval
    # A tool that declares it writes stays the writeTools' business: "readOnly" never frees it.
    assert discover_tool(listed(readOnlyHint=False), read_only=["*"]).rejected
    approved = discover_tool(listed(readOnlyHint=False), read_only=["*"], write_tools="approve")
    assert approved.approval_reason == WRITE_REASON
    # Untrusted: the annotations are not believed, readOnlyHint true included.
    assert discover_tool(listed(readOnlyHint=True), trusted=False).approval_reason == UNTRUSTED_REASON
    assert discover_tool(listed(), trusted=False).approval_reason == UNTRUSTED_REASON


def test_the_reason_says_why_in_words_and_how_to_vouch() -> None:
    reason = approval_reason(None, write_tools="reject", trusted=True)
    assert reason == (
        'it does not declare "readOnlyHint": true, so it may change things '
        '("readOnly": [...] in its server\'s entry vouches for it)'
    )
    entry = {"command": "x", "readOnly": ["get_*"]}
    assert stored_approval_reason(entry, "create_issue", None) == UNDECLARED_REASON
    assert stored_approval_reason(entry, "get_issue", None) == ""
    assert stored_approval_reason({"readOnly": "get_*"}, "get_issue", None) == UNDECLARED_REASON  # unreadable
    # A person's own server has no entry to vouch in: its reason does not send them to one.
    assert discover_tool(listed(), own=True).approval_reason == UNDECLARED_OWN_REASON
    assert "entry" not in UNDECLARED_OWN_REASON and UNDECLARED_OWN_REASON in UNDECLARED_REASON


# --- the published GitLab server --------------------------------------------------------------------
async def test_gitlab_write_tools_ask_and_only_what_the_entry_vouches_for_runs_free(hub: Hub) -> None:
    async with asyncio.timeout(120):
        await hub.start([make_config("gitlab", gitlab_entry())])
    [snapshot] = hub.snapshots()
    assert snapshot.status is Status.READY, snapshot.last_error
    tools = {tool.name: tool for tool in snapshot.tools}
    assert all(tool.annotations is None for tool in tools.values())  # GitLab declares nothing
    for name in GITLAB_WRITES:
        assert tools[name].offered and tools[name].approval_reason == UNDECLARED_REASON, name
    assert all(tool.needs_approval for tool in tools.values())
    offered = {tool.prefixed_name: tool for tool in hub.tools()}
    assert offered["gitlab_push_files"].approval_reason == UNDECLARED_REASON
    set_hub(hub)
    try:
        # Nobody to ask (no gate): refused before GitLab is reached.
        result = await execute_tool("gitlab_create_issue", {"project_id": "1", "title": "t"})
        assert result.is_error and "need a person's approval" in result.output
        assert 'does not declare "readOnlyHint": true' in result.output
    finally:
        set_hub(None)

    async with asyncio.timeout(120):  # (a changed entry: a new session lists the tools again)
        await hub.apply([make_config("gitlab", gitlab_entry(readOnly=["get_*"]))])
    assert hub.snapshots()[0].status is Status.READY, hub.snapshots()[0].last_error
    tools = {tool.name: tool for tool in hub.snapshots()[0].tools}
    vouched = sorted(name for name in tools if name.startswith("get_"))
    assert vouched == ["get_file_contents"]
    assert not tools["get_file_contents"].needs_approval
    for name in GITLAB_WRITES:
        assert tools[name].approval_reason == UNDECLARED_REASON, name
    assert sum(tool.needs_approval for tool in tools.values()) == len(tools) - 1


@pytest.mark.django_db
def test_mcp_discover_and_the_admin_count_the_gitlab_tools_that_ask(
    admin_client: Client, mcp_file: Path, caplog: pytest.LogCaptureFixture
) -> None:
    write_config(mcp_file, {"gitlab": gitlab_entry()})
    out = StringIO()
    with caplog.at_level(logging.WARNING, logger="mcpclient.hub"):
        call_command("mcp_discover", "gitlab", stdout=out)
    line = out.getvalue().splitlines()[-1]
    assert line == (
        "gitlab: ready, 9 tools, 0 rejected; 9 of 9 tools ask before each call: 9 not declaring "
        '"readOnlyHint": true (vouch for them with "readOnly": [...] in the server\'s entry)'
    )
    told = [r.getMessage() for r in caplog.records if r.getMessage().startswith('MCP server "gitlab": 9 of')]
    assert len(told) == 1 and "Tools that declare nothing now ask" in told[0]

    write_config(mcp_file, {"gitlab": gitlab_entry(readOnly=["get_*", "search_*", "list_*"])})
    out = StringIO()
    call_command("mcp_discover", "gitlab", "--json", stdout=out)
    [server] = json.loads(out.getvalue())["servers"]
    causes = {CAUSES[UNDECLARED_REASON]: 7}
    assert (server["tool_count"], server["approval_count"], server["approval_causes"]) == (9, 7, causes)
    tools = {tool["name"]: tool for tool in server["tools"]}
    assert tools["search_repositories"]["approval"] == "" and tools["get_file_contents"]["approval"] == ""
    assert tools["push_files"]["approval"] == UNDECLARED_REASON

    row = McpServer.objects.get(name="gitlab")
    listing = admin_client.get(reverse("admin:mcpclient_mcpserver_changelist")).content.decode()
    assert "7 ask before each call" in listing
    page = admin_client.get(reverse("admin:mcpclient_mcpserver_change", args=[row.pk])).content.decode()
    assert "7 of 9 tools ask before each call" in page
    push = McpTool.objects.get(server=row, name="push_files")
    tool_page = admin_client.get(reverse("admin:mcpclient_mcptool_change", args=[push.pk])).content.decode()
    assert "so it may change things" in tool_page and "not declared (may change things)" in tool_page


# --- the toolbox: the registry and the model's view --------------------------------------------------
async def test_an_undeclared_tool_is_refused_without_someone_to_ask_and_a_vouched_one_runs(hub: Hub) -> None:
    await hub.start(
        [make_config("iss", undeclared_entry()), make_config("ok", undeclared_entry(readOnly=["*"]))]
    )
    assert [s.status for s in hub.snapshots()] == [Status.READY, Status.READY]
    set_hub(hub)
    try:
        registry = {tool.name: tool for tool in available_tools()}
        assert registry["iss_create_issue"].approval_reason == UNDECLARED_REASON
        # Annotations without readOnlyHint say nothing about reading either.
        assert registry["iss_issue_count"].approval_reason == UNDECLARED_REASON
        assert registry["iss_list_issues"].approval_reason == ""
        refused = await execute_tool("iss_create_issue", {"title": "t"})
        assert refused.is_error and "nobody can be asked here" in refused.output
        assert (await execute_tool("iss_list_issues", {})).output == "[]"  # it never ran
        # Vouched for by its entry: runs without asking.
        assert registry["ok_create_issue"].approval_reason == ""
        assert (await execute_tool("ok_create_issue", {"title": "t"})).output == "created issue #1: t"
        assert (await execute_tool("ok_list_issues", {})).output == '["t"]'
    finally:
        set_hub(None)


@pytest.mark.django_db
def test_the_admin_server_form_edits_read_only_and_refuses_it_with_trusted_unticked(
    admin_client: Client, mcp_file: Path
) -> None:
    write_config(mcp_file, {"tb": undeclared_entry()})
    admin_client.get(reverse("admin:mcpclient_mcpserver_add"))  # any admin GET mirrors the file
    url = reverse("admin:mcpclient_mcpserver_change", args=[McpServer.objects.get(name="tb").pk])
    data = form_fields(admin_client.get(url).content.decode())
    assert data["read_only"] == ""
    response = admin_client.post(url, {**data, "read_only": "create_*\n list_issues \n", "_save": "Save"})
    assert response.status_code == 302
    written = json.loads(mcp_file.read_text())["mcpServers"]["tb"]
    assert written == {**undeclared_entry(), "readOnly": ["create_*", "list_issues"]}

    data = form_fields(admin_client.get(url).content.decode())
    assert data["read_only"] == "create_*\nlist_issues" and "readOnly" not in data["extra"]
    data.pop("trusted")  # untick
    response = admin_client.post(url, {**data, "_save": "Save"})
    errors = response.context["adminform"].form.errors
    assert list(errors) == ["read_only"]
    assert 'conflicting "readOnly" and "trusted": false' in errors["read_only"][0]
    assert json.loads(mcp_file.read_text())["mcpServers"]["tb"] == written  # nothing written

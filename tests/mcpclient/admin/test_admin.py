"""The MCP server admin: pages, permissions, write-through to mcp.json and live toggles.

Pages are driven with Django's test clients, forms are submitted the way a browser would (the
fields are read from the page, so masked secrets go back exactly as shown), and the live
tests run a real hub with real stdio/HTTP toolbox servers.
"""

from __future__ import annotations

import asyncio
import json
import os
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from django.contrib.auth.models import Group, Permission, User
from django.core.management import call_command
from django.test import AsyncClient, Client
from django.urls import reverse

from mcpclient import runtime
from mcpclient.admin.changes import MASK
from mcpclient.config.entries import parse_server
from mcpclient.engine.hub import Hub
from mcpclient.models import McpServer, McpState, McpTool
from tests.support.admin import AsgiAdmin, form_fields, write_config
from tests.support.hubs import stop_process_hub
from tests.support.processes import ROOT, TEST_COMMANDS, toolbox_entry

pytestmark = [pytest.mark.postgres, pytest.mark.processes]

CHANGELIST = "admin:mcpclient_mcpserver_changelist"


# --- helpers -------------------------------------------------------------------------------


def expected_text(servers: dict[str, Any], **top: Any) -> str:
    return json.dumps({**top, "mcpServers": servers}, indent=2, ensure_ascii=False) + "\n"


def read_entries(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text())["mcpServers"]


def change_url(name: str) -> str:
    return reverse("admin:mcpclient_mcpserver_change", args=[McpServer.objects.get(name=name).pk])


def assert_sync_is_a_no_op() -> None:
    version = McpState.objects.get().version
    out = StringIO()
    call_command("mcp_sync", stdout=out)
    assert "0 created, 0 updated, 0 deleted" in out.getvalue()
    assert McpState.objects.get().version == version


def messages_of(response: Any) -> list[str]:
    return [str(message) for message in response.context["messages"]] if response.context else []


SECRET = "s3cret-token-value"
HEADER_SECRET = "hunter2-api-key"


@pytest.fixture
def servers() -> dict[str, Any]:
    """Three entries: one with secrets, placeholders and unknown keys; an http one; an invalid one."""
    return {
        "tb": {
            **toolbox_entry(),
            "env": {"API_TOKEN": SECRET, "GITHUB": "${GITHUB_TOKEN}"},
            "x-note": {"kept": ["as", "written"], "n": 1.5},
        },
        "docs": {
            "type": "http",
            "url": "https://docs.example.invalid/mcp",
            "headers": {"Authorization": "Bearer ${DOCS_TOKEN}", "X-Api-Key": HEADER_SECRET},
            "timeout": 120000,
        },
        "broken": {"type": "stdio"},
    }


@pytest.fixture
def synced(mcp_file: Path, servers: dict[str, Any]) -> Path:
    write_config(mcp_file, servers, **{"$schema": "https://example.invalid/schema.json"})
    call_command("mcp_sync", stdout=StringIO())
    return mcp_file


@pytest.fixture
def viewer(db: Any) -> Client:
    """A staff user who may view servers but not change, add or delete them."""
    user = User.objects.create_user("viewer", password="x", is_staff=True)
    user.user_permissions.add(Permission.objects.get(codename="view_mcpserver"))
    client = Client()
    client.force_login(user)
    return client


# --- access --------------------------------------------------------------------------------


@pytest.mark.django_db
def test_non_staff_users_are_sent_to_the_login_page(client: Client, synced: Path) -> None:
    User.objects.create_user("alice", password="x")
    client.login(username="alice", password="x")
    for url in (reverse(CHANGELIST), change_url("tb"), reverse("admin:mcpclient_mcpserver_add")):
        response = client.get(url)
        assert response.status_code == 302 and response["Location"].startswith("/admin/login/")
    response = client.post(reverse("admin:mcpclient_mcpserver_toggle", args=[1]), {"enabled": "0"})
    assert response.status_code == 302 and response["Location"].startswith("/admin/login/")


@pytest.mark.django_db
def test_staff_without_change_permission_can_look_but_not_change(viewer: Client, synced: Path) -> None:
    before = synced.read_bytes()
    tb = McpServer.objects.get(name="tb")
    body = viewer.get(reverse(CHANGELIST)).content.decode()
    assert "tb" in body and "mcp-toggle" not in body and '<option value="disable">' not in body
    page = viewer.get(change_url("tb"))
    assert page.status_code == 200
    html = page.content.decode()
    assert SECRET not in html and "${GITHUB_TOKEN}" in html and 'name="_save"' not in html

    assert viewer.post(change_url("tb"), {"name": "tb", "transport": "stdio"}).status_code == 403
    toggle = reverse("admin:mcpclient_mcpserver_toggle", args=[tb.pk])
    assert viewer.post(toggle, {"enabled": "0"}).status_code == 403
    for action in ("disable", "enable", "reconnect", "rediscover", "delete_selected"):
        response = viewer.post(reverse(CHANGELIST), {"action": action, "_selected_action": [tb.pk]})
        assert response.status_code == 403, action
    response = viewer.post(change_url("tb"), {"CHANGE_FORM-action": "disable", "_selected_action": tb.pk})
    assert response.status_code == 403
    assert viewer.get(reverse("admin:mcpclient_mcpserver_add")).status_code == 403
    delete = reverse("admin:mcpclient_mcpserver_delete", args=[tb.pk])
    assert viewer.post(delete, {"post": "yes"}).status_code == 403
    assert synced.read_bytes() == before
    assert McpServer.objects.get(name="tb").enabled is True


# --- list and detail -----------------------------------------------------------------------


@pytest.mark.django_db
def test_list_shows_state_with_colours_toggles_and_filters(admin_client: Client, synced: Path) -> None:
    McpServer.objects.filter(name="tb").update(status="ready", tool_count=12, rejected_count=1)
    long_error = "connection refused or unreachable " + "x" * 200
    McpServer.objects.filter(name="docs").update(status="unavailable", last_error=long_error)
    body = admin_client.get(reverse(CHANGELIST)).content.decode()
    # Colours from static/boocode/admin.css (CSP: no inline styles; tests/browser/test_admin_styles.py)
    assert '<span class="mcp-status mcp-status-ready">● ready</span>' in body
    assert 'class="mcp-status mcp-status-failed"' in body  # the invalid entry
    assert "/static/boocode/admin.css" in body and 'style="' not in body
    assert 'class="mcp-status mcp-status-unavailable"' in body
    assert "connection refused or unreachable xxx" in body and "x" * 100 not in body.replace(long_error, "")
    assert '<td class="field-tools_summary">12<br><small class="mcp-left-out">1 rejected</small></td>' in body
    tb = McpServer.objects.get(name="tb")
    toggle = reverse("admin:mcpclient_mcpserver_toggle", args=[tb.pk])
    assert f'formaction="{toggle}" name="enabled" value="0"' in body
    assert "?status__exact=failed" in body and "?transport__exact=sse" in body

    failed = admin_client.get(reverse(CHANGELIST), {"status__exact": "failed"}).content.decode()
    assert ">broken<" in failed and ">tb<" not in failed
    http = admin_client.get(reverse(CHANGELIST), {"transport__exact": "streamableHttp"}).content.decode()
    assert ">docs<" in http and ">tb<" not in http


@pytest.mark.django_db
def test_detail_shows_entry_tools_stderr_and_never_a_secret(
    admin_client: Client, synced: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GITHUB_TOKEN", "expanded-github-token")
    # Real discovery against the stdio toolbox fills tools, protocol version and server info.
    call_command("mcp_discover", "tb", stdout=StringIO())
    McpServer.objects.filter(name="tb").update(stderr_tail="toolbox: line one\ntoolbox: <b>line two</b>")
    tb = McpServer.objects.get(name="tb")
    assert tb.tool_count == 12 and tb.protocol_version
    html = admin_client.get(change_url("tb")).content.decode()

    assert SECRET not in html and "expanded-github-token" not in html
    assert f"API_TOKEN={MASK}" in html and "GITHUB=${GITHUB_TOKEN}" in html
    assert "&quot;x-note&quot;" in html  # unknown keys in the "other keys" field
    assert "tb_echo" in html and "tb_delete_everything" in html
    assert "readOnlyHint is false" in html  # the rejected tool's reason
    assert tb.protocol_version in html and "toolbox 1.0.0" in html
    assert "toolbox: &lt;b&gt;line two&lt;/b&gt;" in html
    assert "mcp-status-ready" in html

    docs = admin_client.get(change_url("docs")).content.decode()
    assert HEADER_SECRET not in docs
    assert "Authorization=Bearer ${DOCS_TOKEN}" in docs and f"X-Api-Key={MASK}" in docs
    assert 'value="120000"' in docs


# --- write-through -------------------------------------------------------------------------


@pytest.mark.django_db
def test_editing_one_field_rewrites_only_that_key(
    admin_client: Client, synced: Path, servers: dict[str, Any]
) -> None:
    url = change_url("tb")
    data = form_fields(admin_client.get(url).content.decode())
    data["args"] += "\n--extra-tools\n2"
    data["_save"] = "Save"
    response = admin_client.post(url, data)
    assert response.status_code == 302, response.content.decode()[:3000]

    servers["tb"]["args"] += ["--extra-tools", "2"]
    # Secret kept (not the mask), placeholders, unknown keys, other entries, key order and
    # the other top-level key: byte for byte.
    assert synced.read_text() == expected_text(servers, **{"$schema": "https://example.invalid/schema.json"})
    row = McpServer.objects.get(name="tb")
    assert row.config == servers["tb"] and row.status == "connecting"
    assert_sync_is_a_no_op()

    # Editing a secret for real replaces it; an unchanged masked header keeps its value.
    url = change_url("docs")
    data = form_fields(admin_client.get(url).content.decode())
    assert data["headers"] == f"Authorization=Bearer ${{DOCS_TOKEN}}\nX-Api-Key={MASK}"
    data["headers"] += "\nX-Trace=on"
    data["_save"] = "Save"
    assert admin_client.post(url, data).status_code == 302
    headers = json.loads(synced.read_text())["mcpServers"]["docs"]["headers"]
    assert headers == {"Authorization": "Bearer ${DOCS_TOKEN}", "X-Api-Key": HEADER_SECRET, "X-Trace": "on"}
    assert json.loads(synced.read_text())["mcpServers"]["docs"]["type"] == "http"  # alias kept
    assert_sync_is_a_no_op()


@pytest.mark.django_db
def test_entries_in_other_dialects_keep_untouched_keys(admin_client: Client, mcp_file: Path) -> None:
    entry = {
        "type": "local",
        "command": ["npx", "-y", "some-server"],
        "environment": {"KEY": "value"},
        "timeout": 5000.0,
    }
    write_config(mcp_file, {"oc": entry})
    url = reverse("admin:mcpclient_mcpserver_add")  # any admin GET mirrors the file
    admin_client.get(url)
    data = form_fields(admin_client.get(change_url("oc")).content.decode())
    assert (data["command"], data["args"]) == ("npx", "-y\nsome-server")
    data.pop("enabled")  # untick
    data["_save"] = "Save"
    assert admin_client.post(change_url("oc"), data).status_code == 302
    assert json.loads(mcp_file.read_text())["mcpServers"]["oc"] == {**entry, "enabled": False}


@pytest.mark.django_db
def test_the_safety_keys_have_fields_of_their_own(
    admin_client: Client, synced: Path, servers: dict[str, Any]
) -> None:
    url = change_url("tb")
    page = admin_client.get(url).content.decode()
    data = form_fields(page)
    assert data["write_tools"] == "reject" and data["trusted"] == "on"  # the defaults, nothing written
    assert data["pin_tools"] == "block" and "accept_new_tools" not in data
    assert data["include_tools"] == data["exclude_tools"] == ""
    assert "Safety" in page and "waits for the person" in page
    assert "Keys BooCode does not use" not in page

    data |= {
        "write_tools": "approve",
        "include_tools": "echo\n add_* \n",
        "exclude_tools": "add_secret",
        "pin_tools": "warn",
        "accept_new_tools": "on",
    }
    data.pop("trusted")  # untick
    assert admin_client.post(url, {**data, "_save": "Save"}).status_code == 302
    entry = json.loads(synced.read_text())["mcpServers"]["tb"]
    assert entry == {
        **servers["tb"],
        "writeTools": "approve",
        "trusted": False,
        "includeTools": ["echo", "add_*"],
        "excludeTools": ["add_secret"],
        "pinTools": "warn",
        "acceptNewTools": True,
    }
    row = McpServer.objects.get(name="tb")
    assert (
        row.config == entry
        and "writeTools" not in form_fields(admin_client.get(url).content.decode())["extra"]
    )

    # Back to the defaults: the keys go, as "enabled" does.
    data = form_fields(admin_client.get(url).content.decode())
    assert (data["write_tools"], "trusted" in data, data["include_tools"]) == (
        "approve",
        False,
        "echo\nadd_*",
    )
    data |= {
        "write_tools": "reject",
        "trusted": "on",
        "include_tools": "",
        "exclude_tools": "",
        "pin_tools": "block",
        "_save": "Save",
    }
    data.pop("accept_new_tools")  # untick
    assert admin_client.post(url, data).status_code == 302
    assert json.loads(synced.read_text())["mcpServers"]["tb"] == servers["tb"]

    data = form_fields(admin_client.get(url).content.decode())
    response = admin_client.post(url, {**data, "extra": '{"writeTools": "approve"}', "_save": "Save"})
    assert response.context["adminform"].form.errors == {"extra": ['"writeTools" has its own field above']}


@pytest.mark.django_db
def test_invalid_input_is_reported_on_the_field_and_nothing_is_written(
    admin_client: Client, synced: Path
) -> None:
    before = synced.read_bytes()
    url = change_url("tb")
    start = form_fields(admin_client.get(url).content.decode())

    def submit(**changes: str) -> dict[str, list[str]]:
        data = {**start, **changes, "_save": "Save"}
        response = admin_client.post(url, data)
        assert response.status_code == 200, changes
        errors = response.context["adminform"].form.errors
        return {field: list(messages) for field, messages in errors.items()}

    prefix = 'mcp.json: server "tb": '
    assert submit(command="") == {
        "command": [prefix + '"command" (for stdio) or "url" (for streamableHttp/sse) is required']
    }
    assert submit(url="https://example.invalid/mcp") == {
        "command": [prefix + 'conflicting "command" and "url": set "type" or keep only one of them']
    }
    assert submit(transport="sse") == {"url": ['mcp.json: server "tb": "url" is required for sse']}
    assert submit(command="bash")["command"][0].endswith(
        'command "bash" is not allowed; add its name to BOOCODE_MCP_STDIO_COMMANDS to allow it'
    )
    # A program that is not there is said to be missing: allowing it would not make it run.
    assert submit(command="mcp-server-nope-typo") == {
        "command": [
            prefix
            + "command not found: mcp-server-nope-typo (looked up on BooCode's PATH and its virtualenv)"
        ]
    }
    assert submit(env="NOT A PAIR") == {"env": ["line 1: expected KEY=VALUE"]}
    assert "env" in submit(env="BAD NAME=1")
    masked_new = submit(env=f"OTHER={MASK}")
    assert "OTHER: enter a value" in masked_new["env"][0]
    assert submit(extra='{"command": "x"}') == {"extra": ['"command" has its own field above']}
    assert "not valid JSON" in submit(extra="{nope")["extra"][0]
    assert "name" in submit(name="bad name")
    assert "name" in submit(name="docs")  # taken
    assert synced.read_bytes() == before


@pytest.mark.django_db
def test_add_rename_and_delete_write_through(
    admin_client: Client, synced: Path, servers: dict[str, Any]
) -> None:
    add = reverse("admin:mcpclient_mcpserver_add")
    data = form_fields(admin_client.get(add).content.decode())
    data.update(name="time", command="uvx", args="mcp-server-time", env="TZ=${TZ}", _save="Save")
    response = admin_client.post(add, data)
    assert response.status_code == 302, response.content.decode()[:3000]
    servers["time"] = {"command": "uvx", "args": ["mcp-server-time"], "env": {"TZ": "${TZ}"}}
    top = {"$schema": "https://example.invalid/schema.json"}
    assert synced.read_text() == expected_text(servers, **top)
    assert McpServer.objects.get(name="time").position == 3
    assert_sync_is_a_no_op()

    data = form_fields(admin_client.get(add).content.decode())
    data.update(name="events", transport="sse", url="https://events.example.invalid/sse", _save="Save")
    assert admin_client.post(add, data).status_code == 302
    assert json.loads(synced.read_text())["mcpServers"]["events"] == {
        "type": "sse",
        "url": "https://events.example.invalid/sse",
    }

    url = change_url("docs")
    data = form_fields(admin_client.get(url).content.decode())
    data.update(name="manuals", _save="Save")
    assert admin_client.post(url, data).status_code == 302
    assert list(json.loads(synced.read_text())["mcpServers"]) == ["tb", "manuals", "broken", "time", "events"]
    assert json.loads(synced.read_text())["mcpServers"]["manuals"] == servers["docs"]

    time = McpServer.objects.get(name="time")
    response = admin_client.post(reverse("admin:mcpclient_mcpserver_delete", args=[time.pk]), {"post": "yes"})
    assert response.status_code == 302
    assert list(json.loads(synced.read_text())["mcpServers"]) == ["tb", "manuals", "broken", "events"]
    assert not McpServer.objects.filter(name="time").exists()

    events = McpServer.objects.get(name="events")
    response = admin_client.post(
        reverse(CHANGELIST), {"action": "delete_selected", "_selected_action": [events.pk], "post": "yes"}
    )
    assert response.status_code == 302
    assert list(json.loads(synced.read_text())["mcpServers"]) == ["tb", "manuals", "broken"]
    assert_sync_is_a_no_op()


@pytest.mark.django_db
def test_toggle_writes_only_the_enabled_key(
    admin_client: Client, synced: Path, servers: dict[str, Any]
) -> None:
    tb = McpServer.objects.get(name="tb")
    McpTool.objects.create(server=tb, name="echo", prefixed_name="tb_echo")
    toggle = reverse("admin:mcpclient_mcpserver_toggle", args=[tb.pk])
    assert admin_client.get(toggle).status_code == 405
    response = admin_client.post(toggle, {"enabled": "0"}, HTTP_REFERER="http://testserver/admin/x/?q=1")
    assert response.status_code == 302 and response["Location"] == "http://testserver/admin/x/?q=1"
    top = {"$schema": "https://example.invalid/schema.json"}
    servers["tb"]["enabled"] = False
    assert synced.read_text() == expected_text(servers, **top)
    tb.refresh_from_db()
    assert (tb.enabled, tb.status, tb.tool_count, tb.tools.count()) == (False, "disabled", 0, 0)
    assert_sync_is_a_no_op()

    response = admin_client.post(reverse(CHANGELIST), {"action": "enable", "_selected_action": [tb.pk]})
    assert response.status_code == 302
    del servers["tb"]["enabled"]  # enabled again: the entry reads as it did, no "enabled": true
    assert synced.read_text() == expected_text(servers, **top)
    assert McpServer.objects.get(name="tb").status == "connecting"
    assert_sync_is_a_no_op()


@pytest.mark.django_db
def test_a_failed_write_leaves_the_file_and_the_database_as_they_were(
    admin_client: Client, synced: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = synced.read_bytes()
    version = McpState.objects.get().version
    real_replace = os.replace

    def full_disk(src: Any, dst: Any) -> None:
        if Path(dst).name == "mcp.json":
            raise OSError(28, "No space left on device")
        real_replace(src, dst)

    url = change_url("tb")
    data = form_fields(admin_client.get(url).content.decode())
    data.update(args="changed", _save="Save")
    monkeypatch.setattr(os, "replace", full_disk)

    response = admin_client.post(url, data)
    assert response.status_code == 200
    html = response.content.decode()
    assert "No space left on device; the file is unchanged" in html
    assert SECRET not in html
    assert response.context["adminform"].form["args"].value() == "changed"  # the input is kept

    tb = McpServer.objects.get(name="tb")
    response = admin_client.post(reverse("admin:mcpclient_mcpserver_toggle", args=[tb.pk]), {"enabled": "0"})
    assert response.status_code == 302
    response = admin_client.post(reverse(CHANGELIST), {"action": "disable", "_selected_action": [tb.pk]})
    assert any("No space left on device" in m for m in messages_of(admin_client.get(reverse(CHANGELIST))))
    delete = reverse("admin:mcpclient_mcpserver_delete", args=[tb.pk])
    assert admin_client.post(delete, {"post": "yes"}).status_code == 302

    assert synced.read_bytes() == before
    assert [p.name for p in synced.parent.iterdir() if p.name.endswith(".tmp")] == []
    tb.refresh_from_db()
    assert tb.enabled is True and tb.config["args"] == toolbox_entry()["args"]
    assert McpState.objects.get().version == version
    monkeypatch.undo()
    assert_sync_is_a_no_op()


@pytest.mark.django_db
def test_hand_edits_are_picked_up_and_never_overwritten(admin_client: Client, synced: Path) -> None:
    url = change_url("tb")
    data = form_fields(admin_client.get(url).content.decode())
    document = json.loads(synced.read_text())
    document["mcpServers"]["tb"]["args"].append("--tag")
    document["mcpServers"]["tb"]["args"].append("by-hand")
    synced.write_text(json.dumps(document, indent=2))
    os.utime(synced, ns=(1, 1))  # a different mtime even on a coarse clock

    data.update(cwd="/tmp", _save="Save")
    response = admin_client.post(url, data)
    assert response.status_code == 200
    assert "was changed in the file since this page was loaded" in response.content.decode()
    assert json.loads(synced.read_text())["mcpServers"]["tb"]["args"][-1] == "by-hand"

    admin_client.get(reverse(CHANGELIST))  # the admin mirrors the file again
    assert McpServer.objects.get(name="tb").config["args"][-1] == "by-hand"


# --- live hub ------------------------------------------------------------------------------


def _process_with_tag(tag: str) -> bool:
    """True if a live process has ``tag`` in its command line."""
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if tag.encode() in (entry / "cmdline").read_bytes():
                    return True
            except OSError:
                continue
    return False


async def _admin(username: str = "root") -> AsgiAdmin:
    user = await database_sync_to_async(User.objects.create_superuser)(username, password="x")
    client = AsyncClient()
    await client.aforce_login(user)
    return AsgiAdmin(client)


async def _row(name: str) -> McpServer:
    return await McpServer.objects.aget(name=name)


async def _stop_hub() -> None:
    await stop_process_hub()


@pytest.mark.django_db(transaction=True)
async def test_toggling_a_server_of_the_live_hub_removes_and_restores_its_tools(
    mcp_file: Path, settings: Any
) -> None:
    settings.MCP_AUTOSTART = True
    tag = f"admin-live-{os.getpid()}"
    # acceptNewTools: the edit below adds tools to a known server (held for review otherwise).
    write_config(mcp_file, {"tb": toolbox_entry("--tag", tag, acceptNewTools=True), "other": toolbox_entry()})
    await database_sync_to_async(call_command)("mcp_sync", stdout=StringIO())
    layer = get_channel_layer()
    channel = await layer.new_channel()
    await layer.group_add(runtime.STATUS_GROUP, channel)
    try:
        async with asyncio.timeout(60):
            await runtime.ensure_hub()
            names = {tool.prefixed_name for tool in runtime.hub_tools()}
            assert {"tb_echo", "other_echo"} <= names
            assert _process_with_tag(tag)
            client = await _admin()
            tb = await _row("tb")

            # Disable from the list: when the response arrives the session is closed, the
            # child stopped, the tools gone, the row and the status line updated.
            toggle = reverse("admin:mcpclient_mcpserver_toggle", args=[tb.pk])
            response = await client.post(toggle, {"enabled": "0"})
            assert response.status_code == 302
            names = {tool.prefixed_name for tool in runtime.hub_tools()}
            assert "tb_echo" not in names and "other_echo" in names
            assert not _process_with_tag(tag)
            row = await _row("tb")
            assert (row.enabled, row.status, row.tool_count) == (False, "disabled", 0)
            assert read_entries(mcp_file)["tb"]["enabled"] is False
            while True:
                await layer.receive(channel)  # a signal: the page then reads the statuses
                statuses = {server["name"]: server["status"] for server in runtime.hub_statuses()}
                if statuses.get("tb") == "disabled":
                    break

            # Enable with the list action: connected again, tools back.
            enable = {"action": "enable", "_selected_action": [tb.pk]}
            response = await client.post(reverse(CHANGELIST), enable)
            assert response.status_code == 302
            assert "tb_echo" in {tool.prefixed_name for tool in runtime.hub_tools()}
            assert _process_with_tag(tag)
            row = await _row("tb")
            assert (row.enabled, row.status, row.tool_count) == (True, "ready", 12)
            first_connected = row.connected_at

            # Edit: the server is reconnected with the new arguments.
            url = reverse("admin:mcpclient_mcpserver_change", args=[tb.pk])
            data = form_fields((await client.get(url)).content.decode())
            data.update(args=data["args"] + "\n--extra-tools\n2", _save="Save")
            response = await client.post(url, data)
            assert response.status_code == 302
            assert "tb_item_001" in {tool.prefixed_name for tool in runtime.hub_tools()}
            assert (await _row("tb")).tool_count == 14

            # Reconnect from the change page's action.
            response = await client.post(url, {"CHANGE_FORM-action": "reconnect", "_selected_action": tb.pk})
            assert response.status_code == 302
            row = await _row("tb")
            assert row.status == "ready" and row.connected_at > first_connected
            assert "tb_item_001" in {tool.prefixed_name for tool in runtime.hub_tools()}
    finally:
        await layer.group_discard(runtime.STATUS_GROUP, channel)
        await _stop_hub()


@pytest.mark.django_db(transaction=True)
async def test_rediscover_action_lists_tools_the_hub_was_not_told_about(
    mcp_file: Path, settings: Any, http_toolbox: Any
) -> None:
    settings.MCP_AUTOSTART = True
    server = http_toolbox()
    # acceptNewTools: the new tool of a known server would wait for review
    # (tests/mcpclient/runtime/test_pins.py).
    write_config(mcp_file, {"web": {"url": server.url, "acceptNewTools": True}})
    await database_sync_to_async(call_command)("mcp_sync", stdout=StringIO())
    other = Hub(base_dir=ROOT, allowed_commands=TEST_COMMANDS)
    try:
        async with asyncio.timeout(60):
            await runtime.ensure_hub()
            assert "web_fresh" not in {tool.prefixed_name for tool in runtime.hub_tools()}
            # The server gains a tool without telling anyone (a 2026-07-28 notice would reach
            # every subscriber): only rediscovery can find it.
            await other.start([parse_server("web", {"url": server.url})])
            added = await other.call_tool("web_add_tool", {"name": "fresh", "notify": False})
            assert not added.is_error
            await runtime.ensure_hub()
            assert "web_fresh" not in {tool.prefixed_name for tool in runtime.hub_tools()}

            client = await _admin()
            web = await _row("web")
            rediscover = {"action": "rediscover", "_selected_action": [web.pk]}
            response = await client.post(reverse(CHANGELIST), rediscover)
            assert response.status_code == 302
            assert "web_fresh" in {tool.prefixed_name for tool in runtime.hub_tools()}
            assert await McpTool.objects.filter(server__name="web", prefixed_name="web_fresh").aexists()
    finally:
        await other.stop()
        await _stop_hub()


@pytest.mark.django_db(transaction=True)  # actions run after the commit, as in production
def test_rediscover_without_a_hub_in_this_process_runs_a_discovery(
    admin_client: Client, mcp_file: Path
) -> None:
    write_config(mcp_file, {"tb": toolbox_entry(), "off": toolbox_entry(enabled=False)})
    admin_client.get(reverse(CHANGELIST))  # mirrors the file
    tb, off = McpServer.objects.get(name="tb"), McpServer.objects.get(name="off")
    version = McpState.objects.get().version
    response = admin_client.post(
        reverse(CHANGELIST), {"action": "rediscover", "_selected_action": [tb.pk, off.pk]}, follow=True
    )
    shown = messages_of(response)
    assert "Not rediscovered (disabled or invalid): off." in shown
    assert "Tools listed again: tb: ready, 12 tools." in shown
    assert McpTool.objects.filter(server=tb, rejected=False).count() == 12
    assert McpState.objects.get().version > version  # a hub in another process will follow

    response = admin_client.post(
        reverse(CHANGELIST), {"action": "reconnect", "_selected_action": [tb.pk]}, follow=True
    )
    assert "The MCP hub does not run in this process: nothing to reconnect." in messages_of(response)


@pytest.mark.django_db
def test_a_file_name_in_a_message_is_written_as_it_is(synced: Path, admin_client: Client) -> None:
    # Django's admin capitalised every message: "Mcp.json cannot be used".
    synced.write_text('{"mcpServers": ')  # not JSON
    body = admin_client.get(reverse(CHANGELIST)).content.decode()
    assert "mcp.json cannot be used" in body
    assert "Mcp.json" not in body


@pytest.mark.django_db
def test_the_form_says_a_stdio_server_is_shared_by_every_user(synced: Path, admin_client: Client) -> None:
    body = admin_client.get(reverse("admin:mcpclient_mcpserver_add")).content.decode()
    assert "One process serves every user: its environment, credentials and files are shared by all." in body


@pytest.mark.django_db
def test_a_server_added_as_streamable_http_says_so(admin_client: Client, synced: Path) -> None:
    # A url without "type" is Streamable HTTP that may fall back to SSE: not what was chosen.
    add = reverse("admin:mcpclient_mcpserver_add")
    data = form_fields(admin_client.get(add).content.decode())
    data.update(name="stream", transport="streamableHttp", url="https://stream.example.invalid/mcp")
    assert admin_client.post(add, {**data, "_save": "Save"}).status_code == 302
    entry = json.loads(synced.read_text())["mcpServers"]["stream"]
    assert entry == {"type": "http", "url": "https://stream.example.invalid/mcp"}


@pytest.mark.django_db
def test_who_may_use_a_server_is_edited_and_shown_with_the_groups_people(
    admin_client: Client, synced: Path, servers: dict[str, Any]
) -> None:
    engineers = Group.objects.create(name="eng")
    for name in ("ada", "grace"):
        User.objects.create_user(name).groups.add(engineers)
    url = change_url("tb")
    data = form_fields(admin_client.get(url).content.decode())
    assert data["groups"] == ""
    assert "Everybody who can sign in (no groups)." in admin_client.get(url).content.decode()
    assert admin_client.post(url, {**data, "groups": "eng\n ops \n", "_save": "Save"}).status_code == 302
    assert json.loads(synced.read_text())["mcpServers"]["tb"] == {**servers["tb"], "groups": ["eng", "ops"]}
    page = admin_client.get(url).content.decode()
    assert "<strong>eng</strong>: 2 people (ada, grace)" in page
    assert "<strong>ops</strong>: no such group yet, so nobody" in page
    group_page = admin_client.get(reverse("admin:auth_group_change", args=[engineers.pk])).content.decode()
    assert "MCP servers for this group: tb" in group_page

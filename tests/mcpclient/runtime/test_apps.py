"""MCP Apps discovery: the extension advertised, each tool's view and visibility read and kept.

Real servers: the toolbox with its apps group (``--feature apps``: a tool with a view, one only
its view may call, one nobody may call, declarations the host must ignore) over stdio, and
``tests/servers/modern.py`` on both revisions and both transports for what the client declares.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from mcpclient.config.entries import parse_server
from mcpclient.config.model import ConfigError
from mcpclient.config.shapes import SHAPES, entry_for
from mcpclient.core import mcp_apps
from mcpclient.core.state import Status
from mcpclient.engine.hub import Hub
from mcpclient.engine.protocol import SKILLS_EXTENSION
from mcpclient.models import McpServer, McpTool
from mcpclient.runtime.sync import persist_snapshot, sync_servers
from mcpclient.worker.wire import discovered_in
from tests.support.admin import form_fields
from tests.support.hubs import make_config
from tests.support.processes import ROOT, TEST_COMMANDS, toolbox_entry
from tests.support.wires import WIRES, modern_wires

CLOCK = "ui://toolbox/clock.html"


# --- what a tool declares ------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("meta", "uri", "visibility", "note"),
    [
        (None, "", ("model", "app"), ""),
        ({"ui": {"resourceUri": CLOCK}}, CLOCK, ("model", "app"), ""),
        ({"ui": {"resourceUri": CLOCK, "visibility": ["app"]}}, CLOCK, ("app",), ""),
        ({"ui": {"visibility": ["app", "model", "app"]}}, "", ("model", "app"), ""),
        ({"ui": {"visibility": []}}, "", (), ""),
        ({"ui/resourceUri": CLOCK}, CLOCK, ("model", "app"), ""),
        ({"ui": {"resourceUri": CLOCK}, "ui/resourceUri": "ui://other"}, CLOCK, ("model", "app"), ""),
        (
            {"ui": {"resourceUri": "https://x.invalid/v", "visibility": "app"}},
            "",
            ("model", "app"),
            '_meta.ui.resourceUri ignored: it does not start with "ui://"; '
            "_meta.ui.visibility ignored: it is not a list but str",
        ),
        (
            {"ui": {"resourceUri": 7}},
            "",
            ("model", "app"),
            "_meta.ui.resourceUri ignored: it is not a string but int",
        ),
        (
            {"ui": {"resourceUri": "ui://a b"}},
            "",
            ("model", "app"),
            "_meta.ui.resourceUri ignored: it holds spaces or control characters",
        ),
        (
            {"ui": {"resourceUri": "ui://" + "x" * mcp_apps.MAX_URI_CHARS}},
            "",
            ("model", "app"),
            f"_meta.ui.resourceUri ignored: it is longer than {mcp_apps.MAX_URI_CHARS} characters",
        ),
        ({"ui": {"visibility": ["app", "pip"]}}, "", ("app",), "_meta.ui.visibility: unknown 'pip' left out"),
        ({"ui": ["resourceUri"]}, "", ("model", "app"), "_meta.ui ignored: it is not an object but list"),
    ],
)
def test_a_tools_view_and_visibility_are_checked(
    meta: dict[str, Any] | None, uri: str, visibility: tuple[str, ...], note: str
) -> None:
    assert mcp_apps.tool_ui(meta) == mcp_apps.ToolUi(resource_uri=uri, visibility=visibility, note=note)


def test_a_views_declarations_open_only_origins_and_only_their_directives() -> None:
    declared = {
        "csp": {
            "connectDomains": [
                "https://api.example.com",
                "wss://live.example.com:8443",
                "*",
                "'unsafe-eval'",
            ],
            "resourceDomains": ["https://*.cdn.example/", "data:", "https://cdn.example/lib.js", 7],
            "frameDomains": "https://player.example",
        },
        "permissions": {"camera": {}, "microphone": {}, "usb": {}},
        "prefersBorder": False,
    }
    policy = mcp_apps.view_policy({"ui": declared})
    assert policy.domains == {
        "connectDomains": ("https://api.example.com", "wss://live.example.com:8443"),
        "resourceDomains": ("https://*.cdn.example",),
    }
    assert (policy.permissions, policy.allow_attribute(), policy.prefers_border) == (
        ("camera", "microphone"),
        "camera; microphone",
        False,
    )
    assert policy.note == (
        "_meta.ui.csp.connectDomains: 2 left out (not an origin, or past 32); "
        "_meta.ui.csp.resourceDomains: 3 left out (not an origin, or past 32); "
        "_meta.ui.csp.frameDomains ignored: it is not a list"
    )
    header = dict(part.split(" ", 1) for part in policy.content_security_policy().split("; "))
    assert header["connect-src"] == "https://api.example.com wss://live.example.com:8443"
    assert header["script-src"] == "'unsafe-inline' https://*.cdn.example"
    assert header["frame-src"] == header["base-uri"] == header["object-src"] == "'none'"
    assert "unsafe-eval" not in policy.content_security_policy()
    assert (header["worker-src"], header["webrtc"]) == ("'none'", "'block'")
    many = mcp_apps.view_policy(
        {"ui": {"csp": {"connectDomains": [f"https://h{n}.example" for n in range(40)]}}}
    )
    assert len(many.domains["connectDomains"]) == mcp_apps.MAX_DOMAINS
    default = mcp_apps.ViewPolicy().content_security_policy()
    for nothing in (None, {}, {"ui": "x"}, {"ui": {"csp": []}}):
        assert mcp_apps.view_policy(nothing).content_security_policy() == default


def test_a_reads_view_declarations_cross_the_hub_workers_wire() -> None:
    import mcp.types as types

    from mcpclient.core.resources import ReadResult
    from mcpclient.engine.resources import shape_contents
    from mcpclient.worker.wire import read_in, read_out

    item = types.TextResourceContents(
        uri=CLOCK,
        mime_type=mcp_apps.MIME_TYPE,
        text="<p>hi",
        _meta={"ui": {"prefersBorder": True}, "other": 1},
    )
    [content] = shape_contents([item])
    assert (content.meta, content.cut) == ({"ui": {"prefersBorder": True}}, False)
    result = ReadResult(server="tb", uri=CLOCK, contents=(content,))
    assert read_in(read_out(result)) == result
    [cut] = shape_contents([item.model_copy(update={"text": "x" * 100})], limit=10)
    assert cut.cut


# --- the "apps" key ------------------------------------------------------------------------------
def test_the_apps_key_is_checked_and_kept_in_every_shape() -> None:
    assert parse_server("tb", toolbox_entry()).apps is True
    with pytest.raises(ConfigError, match='"apps" must be true or false, got "no"'):
        parse_server("tb", toolbox_entry(apps="no"))
    for shape in SHAPES:
        entry = entry_for(shape, parse_server("tb", toolbox_entry(apps=False)))
        assert entry["apps"] is False, shape.label
        assert parse_server("tb", entry).apps is False, shape.label
        assert "apps" not in entry_for(shape, parse_server("tb", toolbox_entry(apps=True))), shape.label


@pytest.mark.django_db
def test_the_admin_has_a_field_for_it(admin_client: Client, tmp_path: Path, settings: Any) -> None:
    settings.MCP_CONFIG = tmp_path / "mcp.json"
    settings.MCP_STDIO_COMMANDS = TEST_COMMANDS
    settings.MCP_CONFIG.write_text(json.dumps({"mcpServers": {"tb": toolbox_entry()}}))
    sync_servers()
    url = reverse("admin:mcpclient_mcpserver_change", args=[McpServer.objects.get(name="tb").pk])
    page = admin_client.get(url)
    assert "views (MCP Apps)" in page.content.decode()
    data = form_fields(page.content.decode())
    assert data["apps"] == "on"  # the default, nothing written
    data.pop("apps")  # untick
    assert admin_client.post(url, {**data, "_save": "Save"}).status_code == 302
    written = json.loads(settings.MCP_CONFIG.read_text())["mcpServers"]["tb"]
    assert written == {**toolbox_entry(), "apps": False}
    data = form_fields(admin_client.get(url).content.decode())
    assert "apps" not in data
    response = admin_client.post(url, {**data, "extra": '{"apps": true}', "_save": "Save"})
    assert response.context["adminform"].form.errors == {"extra": ['"apps" has its own field above']}


# --- the hub -------------------------------------------------------------------------------------
@pytest.mark.processes
async def test_views_and_visibilities_are_read_and_the_model_sees_only_its_tools(hub: Hub) -> None:
    await hub.start([make_config("tb", toolbox_entry("--feature", "apps"))])
    (snapshot,) = hub.snapshots()
    assert snapshot.status is Status.READY, snapshot.last_error
    listed = {tool.name: tool for tool in snapshot.tools}
    expected = {  # name: (view, offered to the model, callable from a view)
        "show_clock": (CLOCK, True, True),
        "tick": (CLOCK, False, True),
        "sealed": ("", False, False),
        "odd_view": ("", True, True),
        "legacy_view": (CLOCK, True, True),
        "echo": ("", True, True),
        "set_alarm": (CLOCK, False, False),  # a write tool: the read-only guard rejects it here
        "model_only": ("", True, False),
    }
    for name, (view, offered, app_callable) in expected.items():
        tool = listed[name]
        assert (tool.ui_resource_uri, tool.offered, tool.app_callable) == (view, offered, app_callable), name
    assert "resourceUri ignored" in listed["odd_view"].ui_note and not listed["show_clock"].ui_note

    offered = {tool.prefixed_name: tool for tool in hub.tools()}
    assert "tb_show_clock" in offered and offered["tb_show_clock"].ui_resource_uri == CLOCK
    assert "tb_tick" not in offered and "tb_sealed" not in offered
    refused = await hub.call_tool("tb_tick", {})
    assert refused.is_error and 'Unknown tool "tb_tick"' in refused.output
    assert (await hub.call_tool("tb_apps_supported", {})).output == "yes"
    # The views' own list: what a view may call, by the same prefixed names.
    for_views = {tool.prefixed_name: tool for tool in hub.tools(views=True)}
    assert {"tb_tick", "tb_show_clock", "tb_echo"} <= set(for_views)
    assert "tb_model_only" not in for_views and "tb_sealed" not in for_views
    assert (for_views["tb_tick"].model, for_views["tb_tick"].app) == (False, True)
    assert (await hub.call_tool("tb_tick", {}, views=True)).output == "tick"
    refused = await hub.call_tool("tb_model_only", {}, views=True)
    assert refused.is_error and 'Unknown tool "tb_model_only"' in refused.output
    # Through the hub worker's wire the same tool comes back.
    assert discovered_in(dataclasses.asdict(listed["tick"])) == listed["tick"]


@pytest.mark.processes
@pytest.mark.django_db(transaction=True)
async def test_the_admin_keeps_each_tools_view_and_says_why_the_model_is_not_offered_it(
    hub: Hub, tmp_path: Path, settings: Any, admin_client: Client
) -> None:
    from asgiref.sync import sync_to_async

    settings.MCP_CONFIG = tmp_path / "mcp.json"
    settings.MCP_CONFIG.write_text(json.dumps({"mcpServers": {"tb": toolbox_entry("--feature", "apps")}}))
    await sync_to_async(sync_servers)()
    await hub.start([make_config("tb", toolbox_entry("--feature", "apps"))])
    (snapshot,) = hub.snapshots()
    await sync_to_async(persist_snapshot)(snapshot)

    def rows() -> dict[str, McpTool]:
        return {tool.name: tool for tool in McpTool.objects.filter(server__name="tb")}

    stored = await sync_to_async(rows)()
    clock = stored["show_clock"]
    assert (clock.ui_resource_uri, clock.visibility) == (CLOCK, ["model", "app"])
    assert (stored["tick"].visibility, stored["tick"].reject_reason) == (
        ["app"],
        '_meta.ui.visibility is ["app"]: only its server\'s views call it',
    )
    assert "neither the model nor a view" in stored["sealed"].reject_reason
    assert 'resourceUri ignored: it does not start with "ui://"' in stored["odd_view"].warning
    server = await McpServer.objects.aget(name="tb")
    model = [name for name, tool in stored.items() if not tool.rejected and "model" in tool.visibility]
    assert "tick" not in model and "sealed" not in model and server.tool_count == len(model)

    page = await sync_to_async(admin_client.get)(
        reverse("admin:mcpclient_mcptool_change", args=[stored["tick"].pk])
    )
    text = page.content.decode()
    assert '<span class="mcp-tool-hidden">views only</span>' in text and CLOCK in text


# --- what the client declares ------------------------------------------------------------------------
@pytest.fixture(scope="module")
def modern_servers() -> Iterator[Callable[..., dict[str, Any]]]:
    """Factory: the mcp.json entry of modern.py (with its ``capabilities`` tool) on one wire."""
    with modern_wires("--elicit-tools") as entry:
        yield entry


async def declared(hub: Hub, name: str) -> dict[str, Any]:
    return json.loads((await hub.call_tool(f"{name}_capabilities", {})).output)


@pytest.mark.processes
@pytest.mark.django_db  # the hub looks up stored sign-ins of HTTP servers
async def test_the_extension_is_advertised_on_every_wire_unless_turned_off(
    hub: Hub, modern_servers: Callable[[str], dict[str, Any]]
) -> None:
    off = {**modern_servers("stdio2026"), "apps": False}
    await hub.start([*(make_config(wire, modern_servers(wire)) for wire in WIRES), make_config("off", off)])
    versions = {snapshot.name: snapshot.protocol_version for snapshot in hub.snapshots()}
    for snapshot in hub.snapshots():
        assert snapshot.status is Status.READY, snapshot.last_error
    for wire, (_, version) in WIRES.items():
        assert versions[wire] == version
        extensions = (await declared(hub, wire)).get("extensions")
        # (The skills extension is advertised always: mcpclient.engine.skills.)
        assert extensions == {
            mcp_apps.EXTENSION: {"mimeTypes": [mcp_apps.MIME_TYPE]},
            SKILLS_EXTENSION: {},
        }, wire
    assert (await declared(hub, "off"))["extensions"] == {SKILLS_EXTENSION: {}}  # the server's "apps": false

    whole = Hub(base_dir=ROOT, allowed_commands=TEST_COMMANDS, apps=False)  # BOOCODE_APPS off
    try:
        await whole.start([make_config("stdio2026", modern_servers("stdio2026"))])
        assert (await declared(whole, "stdio2026"))["extensions"] == {SKILLS_EXTENSION: {}}
    finally:
        await whole.stop()

"""A tool's ``title``, ``icons`` and ``outputSchema``: kept by the hub, stored, shown, offered.

The toolbox's ``--titled-tools`` adds ``forecast`` (a ``title`` and an ``annotations.title``,
four icons of which the ``javascript:`` one and an oversized ``data:`` one must be dropped, an
``outputSchema``) and ``almanac`` (only an ``annotations.title``). Icons are untrusted: the
admin shows their addresses as text, never as an image or a link.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from html import unescape
from html.parser import HTMLParser
from io import StringIO
from pathlib import Path
from typing import Any

import anyio
import mcp.types as types
import pytest
from django.contrib.auth.models import Permission, User
from django.core.management import call_command
from django.test import Client
from django.urls import reverse

from boocode.tools.registry import available_tools
from mcpclient import runtime
from mcpclient.config.model import ServerConfig
from mcpclient.core.state import Status, discover_tool
from mcpclient.core.tool_metadata import MAX_ICON_SRC_BYTES, MAX_ICONS
from mcpclient.engine.hub import Hub
from mcpclient.models import McpServer, McpTool
from tests.support.hubs import make_config
from tests.support.processes import TEST_COMMANDS, HttpServer, toolbox_entry

pytestmark = pytest.mark.processes

HTTPS_ICON = "https://icons.example.invalid/forecast.png"
SMALL_DATA_ICON = (
    "data:image/png;base64,"
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
)
FORECAST_SCHEMA = {
    "type": "object",
    "title": "Forecast",
    "description": "Tomorrow's weather.",
    "properties": {
        "temperature": {"title": "Temperature", "type": "number"},
        "unit": {"title": "Unit", "type": "string"},
    },
    "required": ["temperature", "unit"],
}
FORECAST_ICONS = [
    {"src": HTTPS_ICON, "mimeType": "image/png", "sizes": ["48x48"]},
    {"src": SMALL_DATA_ICON, "theme": "dark"},
]


def listed(**fields: Any) -> types.Tool:
    """A tool as a server lists it (the SDK's own type, validated like a tools/list result)."""
    return types.Tool.model_validate({"name": "t", "inputSchema": {"type": "object"}, **fields})


# --- what the hub keeps of a listed tool --------------------------------------------------


@pytest.mark.parametrize(
    ("fields", "title"),
    [
        ({"title": "Weather forecast", "annotations": {"title": "Annotated"}}, "Weather forecast"),
        ({"annotations": {"title": "Annotated"}}, "Annotated"),
        ({"title": "  ", "annotations": {"title": "Annotated"}}, "Annotated"),  # blank: not a title
        ({"title": "Two\nlines  here"}, "Two lines here"),
        ({}, ""),
    ],
)
def test_title_is_title_then_the_annotation_title(fields: dict[str, Any], title: str) -> None:
    assert discover_tool(listed(**fields)).title == title


def test_a_long_title_fits_its_column() -> None:
    assert discover_tool(listed(title="x" * 1000)).title == "x" * 255


@pytest.mark.parametrize(
    ("src", "kept"),
    [
        (HTTPS_ICON, True),
        ("HTTPS://icons.example.invalid/a.svg", True),
        (SMALL_DATA_ICON, True),
        ("data:image/svg+xml;utf8,<svg xmlns='http://www.w3.org/2000/svg'/>", True),
        ("http://icons.example.invalid/a.png", False),
        ("javascript:alert(1)", False),
        ("JaVaScRiPt:alert(1)", False),
        ("data:text/html;base64,PHNjcmlwdD4=", False),
        ("file:///etc/passwd", False),
        ("//icons.example.invalid/a.png", False),
        ("https:///no-host.png", False),
        (" https://icons.example.invalid/a.png", False),
        ("https://icons.example.invalid/a\n.png", False),
        ("icon.png", False),
    ],
)
def test_icons_keep_only_https_and_data_image_sources(src: str, kept: bool) -> None:
    icons = discover_tool(listed(icons=[{"src": src}])).icons
    assert icons == (({"src": src},) if kept else ())


def test_icons_are_capped_in_number_and_size() -> None:
    prefix = "data:image/png;base64,"
    fits = prefix + "A" * (MAX_ICON_SRC_BYTES - len(prefix))
    too_big = fits + "A"
    many = [{"src": f"https://icons.example.invalid/{n}.png"} for n in range(MAX_ICONS + 3)]
    icons = discover_tool(listed(icons=[{"src": too_big}, {"src": fits}, *many])).icons
    assert [icon["src"] for icon in icons] == [fits] + [icon["src"] for icon in many[: MAX_ICONS - 1]]


def test_output_schema_is_kept_as_listed() -> None:
    assert discover_tool(listed(outputSchema=FORECAST_SCHEMA)).output_schema == FORECAST_SCHEMA
    assert discover_tool(listed()).output_schema is None


# --- a real server, over stdio and Streamable HTTP ------------------------------------------


@pytest.fixture(params=["stdio", "http"])
def titled_toolbox(request: pytest.FixtureRequest, http_toolbox: Callable[..., HttpServer]) -> ServerConfig:
    """The toolbox with ``--titled-tools``, over the transport of the parameter."""
    if request.param == "stdio":
        return make_config("tb", toolbox_entry("--titled-tools"))
    return make_config("tb", {"type": "http", "url": http_toolbox("--titled-tools").url})


async def test_hub_keeps_title_icons_and_output_schema(hub: Hub, titled_toolbox: ServerConfig) -> None:
    with anyio.fail_after(30):
        await hub.start([titled_toolbox])
    [snapshot] = hub.snapshots()
    assert snapshot.status is Status.READY
    discovered = {tool.name: tool for tool in snapshot.tools}
    assert discovered["forecast"].title == "Weather forecast"
    assert list(discovered["forecast"].icons) == FORECAST_ICONS  # javascript: and > 8 KB dropped
    assert discovered["forecast"].output_schema == FORECAST_SCHEMA

    tools = {tool.prefixed_name: tool for tool in hub.tools()}
    forecast, almanac, echo = tools["tb_forecast"], tools["tb_almanac"], tools["tb_echo"]
    assert (forecast.title, list(forecast.icons)) == ("Weather forecast", FORECAST_ICONS)
    assert forecast.output_schema == FORECAST_SCHEMA
    assert (almanac.title, almanac.icons) == ("Almanac of the year", ())
    assert (echo.title, echo.icons) == ("", ())
    assert echo.output_schema is not None  # the SDK's server publishes one for "-> str"
    result = await hub.call_tool("tb_forecast", {"city": "Oslo"})
    assert not result.is_error and json.loads(result.output) == {"temperature": 21.5, "unit": "C"}


async def test_registry_offers_title_and_output_schema_to_pages_not_to_the_model(hub: Hub) -> None:
    with anyio.fail_after(30):
        await hub.start([make_config("tb", toolbox_entry("--titled-tools"))])
    runtime.set_hub(hub)
    try:
        tools = {tool.name: tool for tool in available_tools()}
    finally:
        runtime.set_hub(None)
    forecast, almanac, native = tools["tb_forecast"], tools["tb_almanac"], tools["view_file"]
    assert (forecast.title, forecast.output_schema) == ("Weather forecast", FORECAST_SCHEMA)
    assert almanac.title == "Almanac of the year"
    assert (native.title, native.output_schema) == ("", None)
    # The model's view is unchanged: name, description and the input schema only.
    assert forecast.openai() == {
        "type": "function",
        "function": {
            "name": "tb_forecast",
            "description": "Tomorrow's temperature in a city.",
            "parameters": forecast.parameters,
        },
    }


# --- stored, listed by the command, shown in the admin -------------------------------------


@pytest.fixture
def discovered(tmp_path: Path, settings: Any) -> Iterator[McpServer]:
    """mcp.json with the titled toolbox as "tb", discovered by ``mcp_discover`` into the database."""
    settings.MCP_CONFIG = tmp_path / "mcp.json"
    settings.MCP_STDIO_COMMANDS = TEST_COMMANDS
    settings.MCP_CONFIG.write_text(json.dumps({"mcpServers": {"tb": toolbox_entry("--titled-tools")}}))
    call_command("mcp_discover", "tb", stdout=StringIO())
    yield McpServer.objects.get(name="tb")


@pytest.mark.postgres
@pytest.mark.django_db
def test_the_stored_tool_rows_have_title_icons_and_output_schema(discovered: McpServer) -> None:
    forecast = McpTool.objects.get(server=discovered, name="forecast")
    assert (forecast.title, forecast.icons) == ("Weather forecast", FORECAST_ICONS)
    assert forecast.output_schema == FORECAST_SCHEMA
    almanac = McpTool.objects.get(server=discovered, name="almanac")
    assert (almanac.title, almanac.icons) == ("Almanac of the year", [])
    assert McpTool.objects.get(server=discovered, name="empty").output_schema is None


@pytest.mark.postgres
@pytest.mark.django_db
def test_mcp_discover_shows_titles_and_prints_them_with_the_output_schema_in_json(
    discovered: McpServer,
) -> None:
    out = StringIO()
    call_command("mcp_discover", "tb", verbosity=2, stdout=out)
    lines = out.getvalue().splitlines()
    assert '  tb_forecast "Weather forecast"' in lines
    assert '  tb_almanac "Almanac of the year"' in lines
    assert "  tb_echo" in lines  # no title: the name alone
    [rejected] = [line for line in lines if line.startswith("  tb_delete_everything")]
    assert "(rejected: readOnlyHint is false" in rejected

    out = StringIO()
    call_command("mcp_discover", "tb", "--json", stdout=out)
    tools = {tool["name"]: tool for tool in json.loads(out.getvalue())["servers"][0]["tools"]}
    assert tools["forecast"]["title"] == "Weather forecast"
    assert tools["forecast"]["output_schema"] == FORECAST_SCHEMA
    assert (tools["empty"]["title"], tools["empty"]["output_schema"]) == ("", None)


class _Links(HTMLParser):
    """Every address an ``<img>``, ``<a>``, ``<link>`` or ``<source>`` of a page would load or open."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.addresses: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for name, value in attrs:
            if name in ("src", "href", "srcset") and value:
                self.addresses.append(value)


def loaded_addresses(html: str) -> list[str]:
    reader = _Links()
    reader.feed(html)
    return reader.addresses


@pytest.mark.postgres
@pytest.mark.django_db
def test_admin_tool_page_shows_title_output_schema_and_icon_addresses_as_text(
    admin_client: Client, discovered: McpServer
) -> None:
    forecast = McpTool.objects.get(server=discovered, name="forecast")
    url = reverse("admin:mcpclient_mcptool_change", args=[forecast.pk])

    server_page = admin_client.get(reverse("admin:mcpclient_mcpserver_change", args=[discovered.pk]))
    html = server_page.content.decode()
    assert re.search(r'<td class="field-title">\s*<p>Weather forecast</p>', html)
    assert re.search(r'<td class="field-title">\s*<p>Almanac of the year</p>', html)
    assert f'<a href="{url}" class="inlineviewlink">' in html  # each tool links to its own page

    tool_list = admin_client.get(reverse("admin:mcpclient_mcptool_changelist")).content.decode()
    assert '<td class="field-title">Weather forecast</td>' in tool_list

    page = admin_client.get(url)
    assert page.status_code == 200
    html = page.content.decode()
    assert "Weather forecast" in html
    [schema] = re.findall(r'<pre class="mcp-output-schema">(.*?)</pre>', html, re.DOTALL)
    assert json.loads(unescape(schema)) == FORECAST_SCHEMA and "\n  &quot;properties&quot;: {\n" in schema
    # Icons are their addresses as text; a data: URI is cut short; dropped ones are nowhere.
    assert f'<code class="mcp-icon-src">{HTTPS_ICON}</code> (image/png, 48x48)' in html
    assert f'<code class="mcp-icon-src">{SMALL_DATA_ICON[:48]}… (' in html and SMALL_DATA_ICON not in html
    assert "javascript:" not in html.lower() and "A" * 100 not in html
    for address in loaded_addresses(html):
        assert "icons.example.invalid" not in address and not address.startswith("data:"), address
    assert 'name="_save"' not in html  # read-only: the server is the source


@pytest.mark.postgres
@pytest.mark.django_db
def test_staff_who_may_view_servers_see_tool_pages_but_cannot_change_them(discovered: McpServer) -> None:
    user = User.objects.create_user("viewer", password="x", is_staff=True)
    user.user_permissions.add(Permission.objects.get(codename="view_mcpserver"))
    client = Client()
    client.force_login(user)
    forecast = McpTool.objects.get(server=discovered, name="forecast")
    url = reverse("admin:mcpclient_mcptool_change", args=[forecast.pk])
    assert client.get(url).status_code == 200
    assert client.post(url, {"title": "changed"}).status_code == 403
    assert client.get(reverse("admin:mcpclient_mcptool_add")).status_code == 403
    delete = reverse("admin:mcpclient_mcptool_delete", args=[forecast.pk])
    assert client.post(delete, {"post": "yes"}).status_code == 403
    assert McpTool.objects.get(pk=forecast.pk).title == "Weather forecast"

    stranger = User.objects.create_user("stranger", password="x", is_staff=True)
    client.force_login(stranger)
    assert client.get(url).status_code == 403

"""MCP Apps on the page: published App servers' views rendered in the conversation, sandboxed.

The site's mcp.json gets ``@modelcontextprotocol/server-basic-vanillajs`` and
``@modelcontextprotocol/server-system-monitor`` (pinned in tests/node/package.json, run with node
over stdio) for the test. The scripted model calls a tool; the view, in its frame below the card,
receives the call's result from the page through the official bridge, shows it, calls its own
server's tools through the page (the basic view's "Get Server Time", the monitor's polling of its
views-only ``poll-system-stats``), proposes a message the person sends with a click, and the
frame takes the height the view asks for. A reloaded page shows the view again from the stored
result, without calling the tool again.

Our own views (the toolbox's apps group) play the hostile part: what a view must not reach, what
it must not call, approving its own write call, a flood of messages, a 50 MB resource.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.browser import (
    AXE,
    NODE_MODULES,
    WIDTHS,
    Site,
    landing,
    overflowing,
    screenshot,
    send,
    serious_violations,
    start_conversation,
)
from tests.support.llm import Call, Text, ToolCalls
from tests.support.processes import PYTHON, TOOLBOX

pytestmark = pytest.mark.browser

BASIC = NODE_MODULES / "@modelcontextprotocol" / "server-basic-vanillajs" / "dist" / "index.js"
MONITOR = NODE_MODULES / "@modelcontextprotocol" / "server-system-monitor" / "dist" / "index.js"
ISO_TIME = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}")


@pytest.fixture
def basic_server(site: Site) -> Iterator[None]:
    """The site with the published basic App server (``basic``) for this test only; its tools
    declare no annotations, and the entry vouches for the one that reads the time."""
    entry = {"command": "node", "args": [str(BASIC), "--stdio"], "readOnly": ["get-time"]}
    with site.with_servers({"basic": entry}):
        yield


@pytest.mark.parametrize("width", WIDTHS)
def test_a_published_apps_view_shows_the_calls_result_in_a_sandboxed_frame(
    open_page: Any, site: Site, width: int, basic_server: None
) -> None:
    from playwright.sync_api import expect

    page = open_page(width)
    landing(page, site)
    site.llm.script(ToolCalls([Call("basic_get-time", {})]), Text("That is the time."))
    start_conversation(page, "What time is it there?")
    expect(page.locator(".message.role-assistant").last).to_contain_text("That is the time.")

    frame = page.locator(".app-view-frame")
    expect(frame).to_have_count(1)
    assert frame.get_attribute("sandbox") == "allow-scripts"  # an opaque origin: never BooCode's
    view = page.frame_locator(".app-view-frame")
    shown = view.locator("#server-time")
    expect(shown).to_have_text(ISO_TIME)  # the result's structuredContent, delivered by the page
    time_shown = shown.inner_text()
    card = page.locator(".tool-card", has=page.locator(".tool-server", has_text="basic"))
    expect(card.locator(".tool-result")).to_contain_text(time_shown)  # the same call's result

    # The frame takes the height the view asked for (its content), within the page's bounds.
    expect(frame).not_to_have_css("height", "120px")
    height = frame.bounding_box()["height"]
    assert 60 <= height <= 800, height
    assert overflowing(page) == []
    if AXE.exists():  # the page around the frame (the frame is titled; its inside is the server's)
        assert serious_violations(page) == []
    screenshot(page, "app-view")

    # The view calls its server's tool through the page: a new time, the card's stays.
    view.locator("#get-time-btn").click()
    expect(shown).not_to_have_text(time_shown)
    expect(shown).to_have_text(ISO_TIME)
    expect(card.locator(".tool-result")).to_contain_text(time_shown)

    # A message the view proposes is shown, and sent only when the person clicks Send.
    view.locator("#message-text").fill("Hello from the view")
    view.locator("#send-message-btn").click()
    offer = page.locator(".app-view-offer")
    expect(offer).to_contain_text("The view asks to send this message:")
    expect(offer.locator(".app-view-quote")).to_have_text("Hello from the view")
    expect(page.locator(".message.role-user")).to_have_count(1)  # nothing sent yet
    assert overflowing(page) == []
    if AXE.exists():
        assert serious_violations(page) == []
    screenshot(page, "app-view-message")
    site.llm.script(Text("Hello, view."))
    offer.get_by_role("button", name="Send").click()
    expect(offer).to_have_count(0)
    expect(page.locator(".message.role-user").last).to_contain_text("Hello from the view")
    expect(page.locator(".message.role-assistant").last).to_contain_text("Hello, view.")

    # Reloaded: the view again, from the stored result (a new call would give another time).
    page.reload()
    expect(page.frame_locator(".app-view-frame").locator("#server-time")).to_have_text(time_shown)


@pytest.fixture
def monitor_server(site: Site) -> Iterator[None]:
    """The site with the published system monitor App server (``monitor``) for this test only; its
    tools declare no annotations, and the entry vouches for the two that read the machine's state."""
    entry = {
        "command": "node",
        "args": [str(MONITOR), "--stdio"],
        "readOnly": ["get-system-info", "poll-system-stats"],
    }
    with site.with_servers({"monitor": entry}):
        yield


@pytest.mark.parametrize("width", WIDTHS)
def test_a_published_view_polls_its_servers_views_only_tool_through_the_page(
    open_page: Any, site: Site, width: int, monitor_server: None
) -> None:
    from playwright.sync_api import expect

    page = open_page(width)
    landing(page, site)
    site.llm.script(ToolCalls([Call("monitor_get-system-info", {})]), Text("Here is the machine."))
    start_conversation(page, "How is the machine doing?")
    expect(page.locator(".message.role-assistant").last).to_contain_text("Here is the machine.")
    view = page.frame_locator(".app-view-frame")
    expect(view.locator("#info-hostname")).not_to_be_empty()  # the result, from the page
    # poll-system-stats is for views only ("visibility": ["app"]): the model was never offered it,
    # and the view's polls reach it through the page's socket.
    offered = [tool["function"]["name"] for tool in site.llm.requests[-1].get("tools", [])]
    assert "monitor_get-system-info" in offered and "monitor_poll-system-stats" not in offered
    expect(view.locator("#memory-percent")).to_contain_text("%", timeout=15_000)
    expect(view.locator("#status-text")).to_have_text(re.compile(r"^\d{2}:\d{2}:\d{2}$"))
    height = page.locator(".app-view-frame").bounding_box()["height"]
    assert 60 <= height <= 800, height
    assert overflowing(page) == []
    screenshot(page, "app-view-monitor")

    # From the tool console too: the call's card shows its own view.
    send(page, "/call monitor_get-system-info")
    expect(page.locator(".app-view-frame")).to_have_count(2)
    expect(page.frame_locator(".app-view-frame >> nth=1").locator("#info-hostname")).not_to_be_empty()


@pytest.fixture
def apps_toolbox(site: Site) -> Iterator[None]:
    """The site with the toolbox's apps group (``boxapps``: views of our own, hostile ones among
    them; its write tool behind approval)."""
    entry = {"command": PYTHON, "args": [str(TOOLBOX), "--feature", "apps"], "writeTools": "approve"}
    with site.with_servers({"boxapps": entry}):
        yield


def test_a_hostile_view_reaches_nothing_outside_its_frame(
    open_page: Any, site: Site, apps_toolbox: None
) -> None:
    """Cookies, storage, the page, top navigation, pop-ups, undeclared origins: each refused."""
    from playwright.sync_api import expect

    page = open_page(1280)
    landing(page, site)
    page.evaluate("localStorage.setItem('anything', 'secret')")
    site.llm.script(ToolCalls([Call("boxapps_hostile_view", {})]), Text("Shown."))
    start_conversation(page, "Show the hostile view")
    here = page.url
    view = page.frame_locator(".app-view-frame")
    for name in ("cookie", "storage", "page", "navigate", "popup", "fetch"):
        expect(view.locator(f"#{name}")).to_contain_text(f"{name}: refused")
    expect(page.locator(".message.role-assistant").last).to_contain_text("Shown.")
    assert page.url == here and len(page.context.pages) == 1  # not navigated, no window opened


def test_a_view_calls_only_what_views_may_and_cannot_approve_its_own_write(
    open_page: Any, site: Site, apps_toolbox: None
) -> None:
    """Its server's views-only tool, not a model-only one, not another server's; a 50 MB resource
    refused; a write waits for the person, whatever the view posts to the page."""
    from playwright.sync_api import expect

    page = open_page(1280)
    landing(page, site)
    site.llm.script(ToolCalls([Call("boxapps_caller_view", {})]), Text("Shown."))
    start_conversation(page, "Show the caller view")
    view = page.frame_locator(".app-view-frame")
    expect(view.locator("#tick")).to_contain_text('tick: ok {"content":[{"type":"text","text":"tick"}]')
    expect(view.locator("#model_only")).to_contain_text("model_only: refused")
    expect(view.locator("#model_only")).to_contain_text("is for the model only, not for views")
    expect(view.locator("#other_server")).to_contain_text('has no tool "toolbox_echo" that a view may call')
    expect(view.locator("#huge")).to_contain_text("over the 16.0 MB limit")
    expect(view.locator("#socket")).to_contain_text("socket: refused")

    # The host context: the theme and every style variable of the spec, from the page's colours.
    expect(view.locator("#theme")).to_have_text("theme: light 76 #ffffff")  # (the spec names 76)

    # Fullscreen when asked, told to the view, with a way back.
    expect(view.locator("#fullscreen")).to_contain_text('fullscreen: ok {"mode":"fullscreen"}')
    expect(view.locator("#context")).to_have_text('context: "fullscreen"')
    box = page.locator(".app-view-fullscreen").bounding_box()
    assert (box["width"], box["height"]) == (1280, page.viewport_size["height"])
    page.get_by_role("button", name="Exit full screen").click()
    expect(page.locator(".app-view-fullscreen")).to_have_count(0)
    page.locator("#theme-switch input[value=dark]").click()  # the page's theme reaches the view
    expect(view.locator("#theme-dark")).to_have_text("theme-dark: #16171b")

    card = page.locator(".approval")
    expect(card).to_contain_text("The view asks to run this tool. Approve?")
    expect(card).to_contain_text("set_alarm")
    page.wait_for_timeout(500)  # the forged answers had their time: the call still waits
    expect(view.locator("#set_alarm")).to_have_count(0)
    expect(card).to_have_count(1)
    screenshot(page, "app-view-approval")
    card.get_by_role("button", name="Deny").click()
    expect(view.locator("#set_alarm")).to_contain_text("set_alarm: error")
    expect(view.locator("#set_alarm")).to_contain_text("the person denied this call")


def test_a_view_that_floods_the_page_is_stopped_and_the_page_stays_responsive(
    open_page: Any, site: Site, apps_toolbox: None
) -> None:
    from playwright.sync_api import expect

    page = open_page(1280)
    landing(page, site)
    site.llm.script(ToolCalls([Call("boxapps_flood_view", {})]), Text("Flooded."))
    start_conversation(page, "Show the flood view")
    expect(page.locator(".app-view .note")).to_have_text("The view sent too many messages and was stopped.")
    expect(page.locator(".app-view-frame")).to_have_count(0)
    # The page answers at once and takes typing as ever.
    started = page.evaluate("performance.now()")
    page.locator("#message-input").fill("still here")
    assert page.evaluate("performance.now()") - started < 1000
    expect(page.locator("#message-input")).to_have_value("still here")

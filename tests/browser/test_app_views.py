"""MCP Apps on the page: a published App server's view rendered in the conversation, sandboxed.

The site's mcp.json gets ``@modelcontextprotocol/server-basic-vanillajs`` (pinned in
tests/node/package.json, run with node over stdio) for the test as server ``basic``. The
scripted model calls its ``get-time``; the view, in its frame below the card, receives the
call's result from the page through the official bridge and shows the time, and the frame
takes the height the view asks for. A reloaded page shows the view again from the stored result,
without calling the tool again.
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
    serious_violations,
    start_conversation,
)
from tests.support.llm import Call, Text, ToolCalls
from tests.support.processes import PYTHON, TOOLBOX

pytestmark = pytest.mark.browser

BASIC = NODE_MODULES / "@modelcontextprotocol" / "server-basic-vanillajs" / "dist" / "index.js"
ISO_TIME = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}")


@pytest.fixture
def basic_server(site: Site) -> Iterator[None]:
    """The site with the published basic App server (``basic``) for this test only."""
    with site.with_servers({"basic": {"command": "node", "args": [str(BASIC), "--stdio"]}}):
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

    # Reloaded: the view again, from the stored result (a new call would give another time).
    page.reload()
    expect(page.frame_locator(".app-view-frame").locator("#server-time")).to_have_text(time_shown)


@pytest.fixture
def apps_toolbox(site: Site) -> Iterator[None]:
    """The site with the toolbox's apps group (``boxapps``: views of our own, one of them hostile)."""
    with site.with_servers({"boxapps": {"command": PYTHON, "args": [str(TOOLBOX), "--feature", "apps"]}}):
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

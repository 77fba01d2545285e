"""MCP resources on the page: attach from the picker (search, a template filled in with a
completion suggestion), the model receives them, the message shows them after a reload, and a
tool's resource links open in the viewer (Markdown rendered safely, JSON pretty, a PNG shown).

The site's mcp.json gets the toolbox with its resources group as server ``box`` for the test
(the file is put back afterwards; the running server follows the file).
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from tests.support.browser import (
    WIDTHS,
    Site,
    landing,
    overflowing,
    screenshot,
    search_resources,
    start_conversation,
)
from tests.support.llm import Call, Text, ToolCalls

pytestmark = pytest.mark.browser


def _last_user_content(site: Site) -> str:
    return site.llm.requests[-1]["messages"][-1]["content"]


@pytest.mark.parametrize("width", WIDTHS)
def test_attach_from_the_picker_and_the_model_sees_it(
    open_page: Any, site: Site, width: int, box_server: None
) -> None:
    from playwright.sync_api import expect

    page = open_page(width)
    landing(page, site)
    picker = page.locator("#resource-picker")

    # Search, then pick a static resource.
    page.click(".attach-button")
    expect(picker).to_be_visible()
    readme = search_resources(page, "read me", "toolbox://notes/readme.txt")
    assert overflowing(page) == []
    screenshot(page, "resource-picker")
    readme.click()
    expect(picker).to_be_hidden()
    chips = page.locator(".attachment-chips .attachment-chip")
    expect(chips).to_have_count(1)
    expect(chips.first).to_contain_text("Read me")

    # A template: the server suggests values as one types.
    page.click(".attach-button")
    search_resources(page, "facts", "toolbox://cities/{city}").click()
    page.locator("#template-arg-0").fill("Be")
    suggestions = picker.locator(".suggestion")
    expect(suggestions).to_have_text(["Berlin", "Bern"])
    suggestions.nth(1).click()
    expect(page.locator("#template-arg-0")).to_have_value("Bern")
    expect(picker.locator(".template-preview")).to_have_text("toolbox://cities/Bern")
    screenshot(page, "resource-template")
    picker.get_by_role("button", name="Attach").click()
    expect(chips).to_have_count(2)
    expect(chips.nth(1).locator(".resource-name")).to_have_text("city: Bern")  # the template and its value

    # One removed and attached again: removable chips.
    page.get_by_role("button", name="Remove Read me").click()
    expect(chips).to_have_count(1)
    page.click(".attach-button")
    search_resources(page, "readme", "toolbox://notes/readme.txt").click()
    expect(chips).to_have_count(2)
    assert overflowing(page) == []

    site.llm.script(Text("I read both."))
    start_conversation(page, "What do these say?")
    expect(page.locator(".message.role-assistant").last).to_contain_text("I read both.")
    expect(chips).to_have_count(0)  # sent with the message
    content = _last_user_content(site)
    assert content.startswith("What do these say?")
    assert '<resource uri="toolbox://cities/Bern" server="box"' in content
    assert "Bern is a city in Europe." in content
    assert "The toolbox reads you this note." in content

    # The message shows them (after a reload too); a chip opens the viewer.
    page.reload()
    sent = page.locator(".message.role-user .message-attachments .attachment-chip")
    expect(sent).to_have_count(2)
    sent.filter(has_text="Bern").click()
    viewer = page.locator("#resource-viewer")
    expect(viewer).to_be_visible()
    expect(viewer.locator(".resource-text")).to_have_text("Bern is a city in Europe.")
    expect(viewer.locator(".resource-where")).to_have_text("box · toolbox://cities/Bern")
    viewer.get_by_role("button", name="Close").click()
    expect(viewer).to_be_hidden()


@pytest.mark.parametrize("width", WIDTHS)
def test_resource_links_of_a_tool_open_in_the_viewer(
    open_page: Any, site: Site, width: int, box_server: None
) -> None:
    from playwright.sync_api import expect

    page = open_page(width)
    landing(page, site)
    site.llm.script(ToolCalls([Call("box_link_resource", {})]), Text("There you go."))
    start_conversation(page, "link me")
    expect(page.locator(".message.role-assistant").last).to_contain_text("There you go.")
    links = page.locator(".tool-card .resource-link")
    expect(links).to_have_count(3)
    viewer = page.locator("#resource-viewer")

    # Markdown: rendered by the server's sanitising renderer; the script is gone.
    links.filter(has_text="guide").click()
    expect(viewer.locator(".resource-markdown h1")).to_have_text("Toolbox guide")
    assert viewer.locator("script").count() == 0
    link = viewer.locator(".resource-markdown a")
    expect(link).to_have_attribute("rel", re.compile(r"\bnoopener\b.*\bnoreferrer\b"))
    assert page.evaluate("window.__pwned") is None
    assert overflowing(page) == []
    screenshot(page, "resource-viewer")
    page.keyboard.press("Escape")
    expect(viewer).to_be_hidden()

    # A PNG from the bytes; JSON pretty-printed.
    links.filter(has_text="dot").click()
    image = viewer.locator("img.resource-image")
    expect(image).to_be_visible()
    assert image.get_attribute("src").startswith("data:image/png;base64,iVBOR")
    page.keyboard.press("Escape")
    links.filter(has_text="config.json").click()
    expect(viewer.locator(".resource-text")).to_have_text(
        '{\n  "theme": "dark",\n  "sizes": [\n    1,\n    2,\n    3\n  ]\n}'
    )

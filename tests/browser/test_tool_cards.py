"""Tool cards: server and tool (its title where given), arguments, a readable preview of the
result without a click (structured content as a table or tree, images inline, long output
folded with "Show all" fetching the stored output), duration, error state, one group per step.
Hostile text from tools stays text.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from tests.support.browser import (
    WIDTHS,
    XSS,
    Site,
    landing,
    overflowing,
    screenshot,
    send,
    start_conversation,
)
from tests.support.llm import Call, Text, ToolCalls

pytestmark = pytest.mark.browser


def _card(page: Any, name: str) -> Any:
    return page.locator(".tool-card", has=page.locator(".tool-name", has_text=name)).last


@pytest.mark.parametrize("width", WIDTHS)
def test_tool_cards_show_results_without_a_click(open_page: Any, site: Site, width: int) -> None:
    from playwright.sync_api import expect

    page = open_page(width)
    landing(page, site)
    site.llm.script(
        ToolCalls(
            [
                Call("toolbox_echo", {"text": XSS}),
                Call("catalog_rows", {"word": "tea"}),
                Call("catalog_tree", {}),
                Call("toolbox_forecast", {"city": "Paris"}),
                Call("catalog_lines", {"count": 14}),
                Call("toolbox_fail", {"message": "it broke"}),
            ]
        ),
        Text("All done."),
    )
    start_conversation(page, "use the tools")
    expect(page.locator(".message.role-assistant").last).to_contain_text("All done.")
    expect(page.locator(".tool-group-head")).to_have_text("6 tool calls in one step · 1 failed")

    # Server and tool apart; the preview is there without a click; duration shown.
    echo = _card(page, "echo")
    expect(echo.locator(".tool-server")).to_have_text("toolbox")
    expect(echo.locator(".badge")).to_have_text("done")
    expect(echo.locator(".tool-output")).to_be_visible()
    expect(echo.locator(".tool-output")).to_have_text(XSS)
    expect(echo.locator(".duration")).to_have_text(re.compile(r"^\d+(\.\d)? (ms|s)$"))

    # A tool's title where it has one; structured content as a table.
    expect(_card(page, "Weather forecast").locator(".structured")).to_contain_text("temperature")
    rows = _card(page, "Catalogue rows")
    expect(rows.locator(".tool-server")).to_have_text("catalog")
    table = rows.locator(".structured table")
    expect(table).to_be_visible()
    expect(table.locator("thead th")).to_have_text(["name", "qty", "price"])
    expect(table.locator("tbody tr").first.locator("td")).to_have_text(["tea", "3", "1.5"])
    expect(table.locator("tbody tr").nth(1).locator("td").first).to_contain_text("<img src=x onerror=")
    assert table.locator("img, script").count() == 0

    # Nested structured content as a tree.
    tree = _card(page, "tree").locator(".structured .tree")
    expect(tree).to_be_visible()
    expect(tree).to_contain_text("city: ")
    expect(tree).to_contain_text('"Paris"')

    # Long output folded to its first lines; "Show all" unfolds it.
    lines = _card(page, "lines")
    output = lines.locator(".tool-output")
    expect(output).to_have_class(re.compile(r"\bclamped\b"))
    lines.get_by_role("button", name="Show all (14 lines)").click()
    expect(output).not_to_have_class(re.compile(r"\bclamped\b"))
    expect(output).to_contain_text("line 0014")
    expect(lines.get_by_role("button", name="Show less")).to_be_visible()

    # The error state.
    failed = _card(page, "fail")
    expect(failed).to_have_class(re.compile(r"\bis-error\b"))
    expect(failed.locator(".badge")).to_have_text("error")
    expect(failed.locator(".tool-output")).to_have_text("it broke")

    # Arguments fold open.
    rows.locator("summary").click()
    expect(rows.locator(".tool-arguments")).to_contain_text('"word": "tea"')

    # An image inline, without a click.
    send(page, "/call toolbox_media")
    image = page.locator(".tool-card img.tool-image").last
    expect(image).to_be_visible()
    assert image.get_attribute("src").startswith("data:image/png;base64,")

    # Output cut in the preview: "Show all" fetches the whole stored output.
    send(page, '/call catalog_lines {"count": 400}')
    long = _card(page, "lines")
    expect(long.locator(".badge")).to_have_text("done")
    expect(long.locator(".tool-output")).not_to_contain_text("line 0400")
    long.get_by_role("button", name=re.compile(r"^Show all \([\d,]+ characters\)$")).click()
    expect(long.locator(".tool-output")).to_contain_text("line 0400 of the catalogue listing")

    assert page.evaluate("window.__pwned") is None
    assert page.locator(".tool-card script, .tool-card img:not(.tool-image)").count() == 0
    page.locator(".tool-card").first.scroll_into_view_if_needed()
    screenshot(page, "tool-cards")
    assert overflowing(page) == []

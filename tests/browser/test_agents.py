"""The agent picker: each agent's description and the tools it may use, read live from
AGENTS.md and the servers; a short agent card at the top of a new conversation.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.browser import AGENTS, WIDTHS, Site, landing, overflowing, screenshot, start_conversation
from tests.support.llm import Text

pytestmark = pytest.mark.browser


@pytest.mark.parametrize("width", WIDTHS)
def test_agent_picker_and_card(open_page: Any, site: Site, width: int) -> None:
    from playwright.sync_api import expect

    page = open_page(width)
    landing(page, site)
    button = page.locator("#agent-button")
    expect(button).to_contain_text("Assistant")
    card = page.locator(".agent-card")
    expect(card).to_contain_text("General assistant that may use every tool")
    # Every server of the site is a stdio server run once for everybody: marked "(shared)".
    expect(card).to_contain_text(
        "May use 20 tools: 14 from toolbox (shared), 3 built in, 3 from catalog (shared)."
    )

    # The panel: every agent with its description and its tools.
    button.click()
    panel = page.get_by_role("dialog", name="Choose an agent")
    expect(panel).to_be_visible()
    clerk = panel.locator(".agent-option", has_text="Clerk")
    expect(clerk).to_contain_text("Keeps the catalogue; uses only the catalog server")
    expect(clerk).to_contain_text("May use 3 tools: 3 from catalog (shared).")
    title = clerk.locator(".tool-chip").first.get_attribute("title") or ""
    assert "one process of this server serves everyone" in title
    expect(clerk.locator(".tool-chip")).to_have_text(
        ["catalog · lines", "catalog · Catalogue rows", "catalog · tree"]
    )
    box = panel.bounding_box()
    assert box["x"] >= 0 and box["x"] + box["width"] <= width
    screenshot(page, "agent-picker")

    # Choosing one: the button and the card follow; the conversation is created with it.
    clerk.click()
    expect(panel).to_be_hidden()
    expect(button).to_contain_text("Clerk")
    expect(card).to_contain_text("Keeps the catalogue")
    site.llm.script(Text("Catalogue at your service."))
    conversation = start_conversation(page, "hello clerk")
    expect(page.locator(".message.role-assistant")).to_contain_text("Catalogue at your service.")
    # The turn's last frames (status, turn_end, then the conversation's title) change the header
    # and the sidebar: the picker is clicked below once they are in, not while they land.
    expect(page).to_have_title("hello clerk · BooCode")
    agent = site.conversation(conversation)["agent_name"]
    assert agent == "Clerk"
    assert {tool["function"]["name"] for tool in site.llm.requests[-1]["tools"]} == {
        "catalog_rows",
        "catalog_tree",
        "catalog_lines",
    }

    # Live: an agent added to AGENTS.md shows up the next time the picker opens, no reload.
    hostile = r"Writes short poems <img src=x onerror=\"window.__pwned='agent'\">"
    site.write_agents(
        AGENTS + f'\n## Poet\n---\ndescription: "{hostile}"\ntools: []\n---\nYou write poems.\n'
    )
    try:
        button.click()
        expect(panel).to_be_visible()
        poet = panel.locator(".agent-option", has_text="Poet")
        expect(poet).to_contain_text("Writes short poems")
        expect(poet).to_contain_text("No tools")
        expect(poet).to_contain_text("<img src=x onerror=")
        assert panel.locator("img").count() == 0
        # Keyboard: Esc closes and gives the focus back to the button.
        page.keyboard.press("Escape")
        expect(panel).to_be_hidden()
        expect(button).to_be_focused()
        # Enter opens it, arrows choose (radio buttons), Enter closes.
        page.keyboard.press("Enter")
        expect(panel.locator("input[value='Clerk']")).to_be_focused()
        with page.expect_response(lambda response: response.url.endswith(f"/c/{conversation}/agent/")):
            page.keyboard.press("ArrowDown")
        page.keyboard.press("Enter")
        expect(panel).to_be_hidden()
        expect(button).to_contain_text("Poet")
        agent = site.conversation(conversation)["agent_name"]
        assert agent == "Poet"
        expect(page.locator(".agent-card")).to_have_count(0)
        assert page.evaluate("window.__pwned") is None
        assert overflowing(page) == []
    finally:
        site.write_agents(AGENTS)

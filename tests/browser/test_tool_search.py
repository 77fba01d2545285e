"""Tool search on the page: the agent card says its tools are searched, and a search is a tool card
that shows what was asked and what was found.

The site's first agent is given ``toolSearch: always`` for the test; the scripted model searches,
then calls a tool the search loaded.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.browser import AGENTS, WIDTHS, Site, landing, overflowing, screenshot, start_conversation
from tests.support.llm import Call, Text, ToolCalls

pytestmark = pytest.mark.browser


@pytest.mark.parametrize("width", WIDTHS)
def test_a_search_is_a_card_with_its_query_and_the_tools_it_found(
    open_page: Any, site: Site, width: int
) -> None:
    from playwright.sync_api import expect

    site.write_agents(
        AGENTS.replace(
            "description: General assistant that may use every tool\n",
            "description: General assistant that may use every tool\ntoolSearch: always\n",
        )
    )
    try:
        page = open_page(width)
        landing(page, site)
        # The card says the model searches the agent's tools rather than reading them all.
        expect(page.locator(".agent-card")).to_contain_text(
            "Searches 20 tools for what each request needs: 14 from toolbox (shared), 3 built in, "
            "3 from catalog (shared)."
        )
        site.llm.script(
            ToolCalls([Call("tool_search", {"query": "echo some text back to me"})]),
            ToolCalls([Call("toolbox_echo", {"text": "found it"})]),
            Text("Done."),
        )
        start_conversation(page, "Find a tool that echoes")
        expect(page.locator(".message.role-assistant").last).to_contain_text("Done.")
        card = page.locator(".tool-card").first
        expect(card).to_contain_text("tool_search")
        expect(card).to_contain_text("echo some text back to me")
        expect(card).to_contain_text("toolbox_echo")
        expect(page.locator(".tool-card").nth(1)).to_contain_text("found it")
        offered = [tool["function"]["name"] for tool in site.llm.requests[-2].get("tools", [])]
        assert "toolbox_echo" in offered and "tool_search" in offered
        assert overflowing(page) == []
        screenshot(page, "tool-search")
    finally:
        site.write_agents(AGENTS)

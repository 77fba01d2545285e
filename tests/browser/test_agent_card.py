"""The agent card at the top of an empty conversation: its tools follow the MCP servers (no
reload, no panel opened), it names the model the conversation will really use, and the header's
pickers read whole on a phone.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.browser import AGENTS, CATALOG, WIDTHS, Site, landing, overflowing, screenshot
from tests.support.processes import PYTHON

pytestmark = pytest.mark.browser

SHOTS = Path("/work/issue13/shots")
PINNED = (
    "\n## Pinned\n---\ndescription: Always answers with the other model\nmodel: other-model\n---\nPinned.\n"
)
EVERY_TOOL = "May use 20 tools: 14 from toolbox (shared), 3 built in, 3 from catalog (shared)."
WITH_SPARE = (
    "May use 23 tools: 14 from toolbox (shared), 3 built in, 3 from catalog (shared), 3 from spare (shared)."
)


class Spare:
    """A third server in mcp.json ("spare": the catalog's three tools), added and taken away."""

    def __init__(self, site: Site) -> None:
        self.site = site
        self.config = site.data / "mcp.json"
        self.original = self.config.read_text()

    def add(self) -> None:
        servers = json.loads(self.original)
        servers["mcpServers"]["spare"] = {"command": PYTHON, "args": [str(CATALOG)]}
        self.config.write_text(json.dumps(servers))

    def remove(self, page: Any) -> None:
        """Back to two servers, applied by the hub before the next test (reading the agents does)."""
        from playwright.sync_api import expect

        self.config.write_text(self.original)
        page.request.get(f"{self.site.url}/api/agents/")
        landing(page, self.site)
        expect(page.locator(".agent-card")).to_contain_text(EVERY_TOOL)


@pytest.fixture
def spare(site: Site) -> Iterator[Spare]:
    server = Spare(site)
    yield server
    server.config.write_text(server.original)


@pytest.mark.parametrize("width", WIDTHS)
def test_the_landing_card_follows_the_servers(open_page: Any, site: Site, spare: Spare, width: int) -> None:
    from playwright.sync_api import expect

    page = open_page(width)
    landing(page, site)
    card = page.locator(".agent-card")
    expect(card).to_contain_text(EVERY_TOOL)
    page.fill("#message-input", "half typed")
    page.focus("#message-input")
    try:
        spare.add()
        # No click, no panel: the landing re-reads the agents by itself.
        expect(card).to_contain_text(WITH_SPARE)
        expect(card.locator(".tool-chip.more")).to_have_text("+15 more")
        expect(page.locator("#message-input")).to_be_focused()
        expect(page.locator("#message-input")).to_have_value("half typed")
        expect(page.locator("#agent-panel")).to_be_hidden()
    finally:
        spare.remove(page)


@pytest.mark.parametrize("width", WIDTHS)
def test_a_conversation_card_follows_the_status_frame(
    open_page: Any, site: Site, spare: Spare, width: int
) -> None:
    from playwright.sync_api import expect

    conversation = site.db(
        "from django.contrib.auth import get_user_model\n"
        "from boocode.chat.models import Conversation\n"
        "owner = get_user_model().objects.get(username='admin')\n"
        "result = Conversation.objects.create(owner=owner).pk"
    )
    page = open_page(width)
    # The server lists of the status frames, as the page compares them (name, status, tools).
    server_lists: list[str] = []

    def on_frame(payload: str | bytes) -> None:
        frame = json.loads(payload)
        if frame.get("type") == "status":
            servers = frame.get("servers") or []
            server_lists.append(json.dumps([[s["name"], s["status"], s["tool_count"]] for s in servers]))

    page.on("websocket", lambda socket: socket.on("framereceived", on_frame))
    page.goto(f"{site.url}/c/{conversation}/")
    card = page.locator(".agent-card")
    expect(card).to_contain_text(EVERY_TOOL)
    expect(page.locator("#server-states [data-name=toolbox]")).to_have_count(1)
    requests: list[str] = []
    page.on(
        "request", lambda request: requests.append(request.url) if "/api/agents/" in request.url else None
    )
    try:
        spare.add()
        # Another page applies the edited mcp.json; this one only hears of it in the status frame.
        page.request.get(f"{site.url}/api/agents/")
        expect(page.locator("#server-states [data-name=spare]")).to_contain_text("ready")
        expect(card).to_contain_text(WITH_SPARE)
        # At most one re-read per server list (the first frame's, then each change; changes
        # close together make one, debounced 400 ms) and none for a frame that changes nothing.
        # How many lists the adding went through depends on the machine's speed (connecting
        # and ready may come in one frame or two), so they are counted, not assumed.
        page.wait_for_timeout(1000)  # the time under test: longer than the debounce
        lists = 1 + sum(after != before for before, after in itertools.pairwise(server_lists))
        assert 1 <= len(requests) <= lists, (requests, server_lists)
    finally:
        spare.remove(page)
        # (the conversation list stays as short as the other tests expect: keyboard walks)
        site.db(
            "from boocode.chat.models import Conversation\n"
            f"Conversation.objects.filter(pk={conversation}).delete()"
        )


@pytest.mark.parametrize("width", WIDTHS)
def test_the_card_names_the_effective_model(open_page: Any, site: Site, width: int) -> None:
    from playwright.sync_api import expect

    site.write_agents(AGENTS + PINNED)
    try:
        page = open_page(width)
        landing(page, site)
        card_model = page.locator(".agent-card-model")
        expect(card_model).to_have_text("test-model")  # Assistant: the default
        page.click("#agent-button")
        panel = page.get_by_role("dialog", name="Choose an agent")
        panel.locator(".agent-option", has_text="Pinned").click()
        expect(panel).to_be_hidden()
        expect(card_model).to_have_text("other-model")  # the agent's model:
        # The picker's choice wins over the agent's model:, as in the status line.
        page.locator("#model-select").select_option("test-model")
        expect(card_model).to_have_text("test-model")
        expect(page.locator("#model-state")).to_have_text("model: test-model")
        page.locator("#model-select").select_option("")
        expect(card_model).to_have_text("other-model")
    finally:
        site.write_agents(AGENTS)


_FIT = """() => {
  const select = document.getElementById('model-select');
  const style = getComputedStyle(select);
  const context = document.createElement('canvas').getContext('2d');
  context.font = `${style.fontStyle} ${style.fontWeight} ${style.fontSize} ${style.fontFamily}`;
  const text = select.options[select.selectedIndex].text;
  const room = select.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight);
  const button = document.querySelector('#agent-button .picker-value');
  return {text, need: context.measureText(text).width, room,
          agentClipped: button.scrollWidth > button.clientWidth};
}"""


@pytest.mark.parametrize("width", WIDTHS)
def test_the_pickers_read_whole(open_page: Any, site: Site, width: int) -> None:
    from playwright.sync_api import expect

    page = open_page(width)
    landing(page, site)
    model = page.get_by_role("combobox", name="Model")
    expect(model.locator("option")).to_have_text(["Default (test-model)", "test-model", "other-model"])
    expect(page.get_by_role("button", name="Agent: Assistant. Choose another")).to_be_visible()
    expect(page.locator(".agent-card")).to_contain_text(EVERY_TOOL)
    fit = page.evaluate(_FIT)
    assert fit["text"] == "Default (test-model)"
    assert fit["need"] <= fit["room"], fit
    assert not fit["agentClipped"], fit
    screenshot(page, "agent-card")  # (once the drawer's closing has ended)
    assert overflowing(page) == []
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"card-{width}.png"))

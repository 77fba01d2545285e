"""The landing and the composer, at phone and laptop width.

A new conversation opens on a composer; the first message creates the conversation (once),
the message list fills the height, the composer grows with its text up to a limit and stays at
the bottom; Enter sends, Shift+Enter adds a line, Esc stops the running turn.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.browser import (
    HEIGHTS,
    WIDTHS,
    Site,
    landing,
    open_drawer,
    overflowing,
    screenshot,
    start_conversation,
)
from tests.support.llm import Stall, Text

pytestmark = pytest.mark.browser


def _height(page: Any, selector: str) -> float:
    return page.evaluate(f"document.querySelector({selector!r}).getBoundingClientRect().height")


@pytest.mark.parametrize("width", WIDTHS)
def test_the_first_message_creates_the_conversation(open_page: Any, site: Site, width: int) -> None:
    from playwright.sync_api import expect

    page = open_page(width)
    landing(page, site)
    expect(page.locator("#message-input")).to_be_visible()
    page.reload()  # the landing has an address of its own
    expect(page.locator("#conversation-title")).to_have_text("New conversation")
    assert page.url.endswith("/c/new/") or page.url.endswith("/")
    # The empty chat: the message area takes most of the height, nothing sticks out sideways.
    assert _height(page, "#messages") >= 0.6 * HEIGHTS[width]
    composer = page.locator("#composer").bounding_box()
    assert composer["y"] + composer["height"] <= HEIGHTS[width]
    assert composer["y"] + composer["height"] >= HEIGHTS[width] - 80  # at the bottom (the status line below)
    assert overflowing(page) == []
    expect(page.locator(".agent-card")).to_contain_text("Assistant")
    screenshot(page, "landing")

    site.llm.script(Text("Hello **there**.", chunk_size=3, delay=0.01))
    conversation = start_conversation(page, "First words")
    expect(page.locator(".message.role-user")).to_contain_text("First words")
    expect(page.locator(".message.role-assistant strong")).to_have_text("there")
    expect(page.locator("#connection-state")).to_have_text("connected")
    assert page.locator(".agent-card").count() == 0
    open_drawer(page)
    expect(page.locator(f".conv-item.current[data-id='{conversation}'] .conv-link")).to_be_visible()

    # Sent exactly once, and still there after a reload.
    stored = site.db(
        "from boocode.chat.models import Message\n"
        f"result = list(Message.objects.filter(conversation_id={conversation}, role='user')"
        ".values_list('content', flat=True))"
    )
    assert stored == ["First words"]
    page.reload()
    expect(page.locator(".message.role-assistant strong")).to_have_text("there")
    expect(page.locator(".message.role-user")).to_have_count(1)
    assert overflowing(page) == []


@pytest.mark.parametrize("width", WIDTHS)
def test_the_composer_grows_and_its_keys(open_page: Any, site: Site, width: int) -> None:
    from playwright.sync_api import expect

    page = open_page(width)
    landing(page, site)
    box = page.locator("#message-input")
    one_line = _height(page, "#message-input")

    box.click()
    page.keyboard.type("line one")
    page.keyboard.press("Shift+Enter")
    page.keyboard.type("line two")
    page.keyboard.press("Shift+Enter")
    page.keyboard.type("line three")
    assert box.input_value() == "line one\nline two\nline three"  # Shift+Enter added lines, sent nothing
    three_lines = _height(page, "#message-input")
    assert three_lines > one_line * 1.8

    # It grows up to a limit, then scrolls; the composer stays inside the viewport.
    box.fill("\n".join(f"line {n}" for n in range(80)))
    tall = _height(page, "#message-input")
    assert three_lines < tall <= 0.45 * HEIGHTS[width]
    assert page.evaluate("(b => b.scrollHeight > b.clientHeight)(document.getElementById('message-input'))")
    composer = page.locator("#composer").bounding_box()
    assert composer["y"] + composer["height"] <= HEIGHTS[width]
    assert overflowing(page) == []

    # Enter sends (the box empties and shrinks); Esc stops the running turn.
    aborted = site.llm.aborted_streams
    site.llm.script(Stall(text="Thinking about it", seconds=60))
    box.fill("Think slowly")
    conversation = start_conversation(page, "Think slowly")
    expect(page.locator(".message.status-streaming")).to_contain_text("Thinking about it")
    assert box.input_value() == ""
    assert _height(page, "#message-input") < three_lines
    expect(page.locator("#stop-button")).to_be_visible()
    expect(page.locator("#send-button")).to_be_hidden()
    screenshot(page, "streaming")
    box.focus()
    page.keyboard.press("Escape")
    stopped = page.locator(".message.status-stopped")
    expect(stopped).to_contain_text("Thinking about it")
    expect(page.locator("#send-button")).to_be_visible()
    site.llm.wait_until(lambda server: server.aborted_streams > aborted, timeout=20)
    status = site.db(
        "from boocode.chat.models import Message\n"
        f"result = Message.objects.filter(conversation_id={conversation}, role='assistant').last().status"
    )
    assert status == "stopped"

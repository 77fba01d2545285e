"""A thinking model's answer: its thinking streams live into a folded "Thinking" section above
the answer, opens and closes from the keyboard, stays out of the answer's text (and its copy),
is there after a reload, fits a phone and a laptop, and axe finds nothing serious.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from tests.support.browser import (
    AXE,
    WIDTHS,
    Site,
    landing,
    overflowing,
    screenshot,
    serious_violations,
    start_conversation,
)
from tests.support.llm import Stall, Text

pytestmark = pytest.mark.browser

THOUGHT = (
    "The person asks how to boil an egg. Soft or hard was not said, so give both times, "
    "and say to start from boiling water so the times hold."
)
ANSWER = "Put the egg in boiling water: **6 minutes** for soft, **10 minutes** for hard."


@pytest.mark.parametrize("width", WIDTHS)
def test_thinking_is_folded_above_the_answer_and_keyboard_reachable(
    open_page: Any, site: Site, width: int
) -> None:
    from playwright.sync_api import expect

    page = open_page(width, permissions=["clipboard-read", "clipboard-write"])
    landing(page, site)
    # While it streams: the thinking arrives (inline <think>, as qwen3 on a server that does not
    # split it), the summary says the model is at it, the answer has not begun.
    site.llm.script(
        Stall(text="<think>" + THOUGHT[:40], seconds=60, after=THOUGHT[40:] + "</think>\n\n" + ANSWER)
    )
    start_conversation(page, "how do I boil an egg?")
    streaming = page.locator(".message.status-streaming")
    thinking = streaming.locator("details.thinking")
    expect(thinking.locator("summary")).to_have_text("Thinking…")
    expect(thinking).not_to_have_attribute("open", re.compile(".*"))
    expect(thinking.locator(".thinking-text")).to_have_text(THOUGHT[:40])  # there, folded
    if AXE.exists():
        assert serious_violations(page) == [], "thinking while streaming"
    site.llm.release_stalled()

    answer = page.locator(".message.role-assistant").last
    expect(answer).to_have_class(re.compile(r"\bstatus-complete\b"))
    expect(answer.locator(".message-body")).to_contain_text("6 minutes for soft")
    expect(answer.locator(".message-body")).not_to_contain_text("boil an egg. Soft")
    expect(answer.locator(".message-body")).not_to_contain_text("think")
    summary = answer.locator("details.thinking summary")
    expect(summary).to_have_text("Thinking")
    body_text = answer.locator(".thinking-text")
    expect(body_text).to_be_hidden()  # folded

    # Keyboard: the summary takes the focus, Enter opens it, Enter folds it again.
    summary.focus()
    assert page.evaluate("document.activeElement.tagName") == "SUMMARY"
    page.keyboard.press("Enter")
    expect(body_text).to_be_visible()
    expect(body_text).to_have_text(THOUGHT)
    assert overflowing(page) == []
    screenshot(page, "thinking-open")
    if AXE.exists():
        assert serious_violations(page) == [], "thinking open"
    page.keyboard.press("Enter")
    expect(body_text).to_be_hidden()

    # Copy takes the answer, not the thinking.
    answer.hover()
    answer.get_by_role("button", name="Copy message").click()
    assert page.evaluate("navigator.clipboard.readText()") == ANSWER

    # After a reload the thinking is there, folded, and still apart.
    page.reload()
    answer = page.locator(".message.role-assistant").last
    expect(answer.locator("details.thinking summary")).to_have_text("Thinking")
    answer.locator("details.thinking summary").click()
    expect(answer.locator(".thinking-text")).to_have_text(THOUGHT)
    screenshot(page, "thinking-reloaded")
    page.emulate_media(color_scheme="dark")
    screenshot(page, "thinking-dark")
    if AXE.exists():
        assert serious_violations(page) == [], "thinking open, dark"


def test_an_answer_without_thinking_shows_no_section(open_page: Any, site: Site) -> None:
    from playwright.sync_api import expect

    page = open_page(1280)
    landing(page, site)
    site.llm.script(Text("Plain answer."))
    start_conversation(page, "plain")
    answer = page.locator(".message.role-assistant").last
    expect(answer.locator(".message-body")).to_contain_text("Plain answer.")
    expect(answer.locator("details.thinking")).to_be_hidden()

"""The model's window on the page: the context meter beside the conversation's tokens (the warning
colour past the share where compaction starts) and the divider where the earlier messages were
summarised (/compact here), the summary one click away; axe clean at phone and laptop width."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.browser import (
    AXE,
    WIDTHS,
    Site,
    landing,
    overflowing,
    screenshot,
    send,
    serious_violations,
    start_conversation,
)
from tests.support.llm import Text

pytestmark = pytest.mark.browser


@pytest.mark.parametrize("width", WIDTHS)
def test_the_context_meter_and_the_summary_divider(open_page: Any, site: Site, width: int) -> None:
    from playwright.sync_api import expect

    page = open_page(width)
    landing(page, site)
    # The default window is 8,192 tokens, 2,048 of them kept for the answer: near its end past 6,144.
    site.llm.script(
        Text("First answer.", usage=(2500, 100)),
        Text("Second answer.", usage=(5000, 1200)),
        Text("The person said hello twice; the assistant answered both times."),
    )
    start_conversation(page, "Hello?")
    expect(page.locator(".message.role-assistant").last).to_contain_text("First answer.")
    meter = page.locator("#context-meter")
    if width < 800:
        page.click("#status-summary")  # the phone's status line shows the details on a tap
    expect(meter).to_be_visible()
    expect(meter).to_have_text("context: 2.6k / 8.2k")
    expect(meter).not_to_have_class("context-meter near")

    send(page, "Hello again?")
    expect(page.locator(".message.role-assistant").last).to_contain_text("Second answer.")
    expect(meter).to_have_text("context: 6.2k / 8.2k")
    expect(meter).to_have_class("context-meter near")  # past the share: the warning colour

    send(page, "/compact")
    divider = page.locator(".context-divider")
    expect(divider).to_have_count(1)
    expect(divider.locator("summary")).to_have_text("2 earlier messages summarised for the model")
    text = divider.locator(".context-divider-text")
    expect(text).to_be_hidden()
    divider.locator("summary").click()
    expect(text).to_have_text("The person said hello twice; the assistant answered both times.")
    # It sits after the last message it stands for: the first answer, before the second question.
    order = page.evaluate(
        "[...document.querySelectorAll('#messages > .message, #messages > .context-divider')]"
        ".map(n => n.classList.contains('context-divider') ? 'divider' : n.dataset.id)"
    )
    assert order.index("divider") == 2, order
    assert overflowing(page) == []
    screenshot(page, "context-window")
    if AXE.exists():
        assert serious_violations(page) == []

    # After a reload the divider comes back from the server, folded.
    page.reload()
    expect(page.locator(".context-divider")).to_have_count(1)
    expect(page.locator(".context-divider-text")).to_be_hidden()

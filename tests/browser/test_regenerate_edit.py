"""Regenerate the last answer; edit a user message and send it again. The replaced rows leave
the page (every tab: the ``superseded`` frame) but stay in the database.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from tests.support.browser import WIDTHS, Site, landing, overflowing, screenshot, start_conversation
from tests.support.llm import Text

pytestmark = pytest.mark.browser

ROWS = """
from boocode.chat.models import Message
result = [
    [m.role, m.content, m.superseded_at is not None]
    for m in Message.objects.filter(conversation_id={id}).order_by("id")
]
"""


@pytest.mark.parametrize("width", WIDTHS)
def test_regenerate_then_edit_and_resend(open_page: Any, site: Site, width: int) -> None:
    from playwright.sync_api import expect

    page = open_page(width)
    landing(page, site)
    site.llm.script(Text("First answer."), Text("Second answer."), Text("Answer to the edit."))
    conversation = start_conversation(page, "Tell me something")
    answers = page.locator(".message.role-assistant")
    expect(answers).to_have_text([re.compile("First answer.")])

    # A second tab on the same conversation sees the replacement too.
    other = page.context.new_page()
    other.goto(page.url)
    expect(other.locator(".message.role-assistant")).to_contain_text("First answer.")

    # Regenerate: only on the last answer; the old one leaves the page, stays in the database.
    last = answers.last
    last.hover()
    regenerate = last.get_by_role("button", name="Regenerate this answer")
    expect(regenerate).to_be_visible()
    expect(page.locator(".regenerate:visible")).to_have_count(1)
    regenerate.click()
    expect(answers).to_have_count(1)
    expect(answers.first).to_contain_text("Second answer.")
    # Shown as it streams; stored when it completes (the frame that says so follows the write).
    expect(answers.first).to_have_class(re.compile(r"\bstatus-complete\b"))
    expect(other.locator(".message.role-assistant")).to_have_count(1)
    expect(other.locator(".message.role-assistant")).to_contain_text("Second answer.")
    rows = site.db(ROWS.format(id=conversation))
    assert rows == [
        ["user", "Tell me something", False],
        ["assistant", "First answer.", True],
        ["assistant", "Second answer.", False],
    ]

    # Edit the user message and send it again.
    user = page.locator(".message.role-user").last
    user.hover()
    user.get_by_role("button", name="Edit and resend").click()
    box = page.get_by_label("Edit your message")
    expect(box).to_be_focused()
    expect(box).to_have_value("Tell me something")
    screenshot(page, "edit")
    assert overflowing(page) == []
    box.fill("Tell me something else")
    box.press("Enter")
    expect(page.locator(".message.role-user")).to_have_count(1)
    expect(page.locator(".message.role-user")).to_contain_text("Tell me something else")
    expect(answers).to_have_count(1)
    expect(answers.first).to_contain_text("Answer to the edit.")
    expect(answers.first).to_have_class(re.compile(r"\bstatus-complete\b"))
    expect(other.locator(".message.role-user")).to_contain_text("Tell me something else")
    rows = site.db(ROWS.format(id=conversation))
    assert rows == [
        ["user", "Tell me something", True],
        ["assistant", "First answer.", True],
        ["assistant", "Second answer.", True],
        ["user", "Tell me something else", False],
        ["assistant", "Answer to the edit.", False],
    ]
    # The model got the edited history only.
    sent = [m["content"] for m in site.llm.requests[-1]["messages"] if m["role"] == "user"]
    assert sent == ["Tell me something else"]

    # A reload shows the current rows only.
    page.reload()
    expect(page.locator(".message")).to_have_count(2)


@pytest.mark.parametrize("width", [375])
def test_an_edit_can_be_cancelled_with_escape(open_page: Any, site: Site, width: int) -> None:
    from playwright.sync_api import expect

    page = open_page(width)
    landing(page, site)
    site.llm.script(Text("Fine."))
    start_conversation(page, "Keep me")
    expect(page.locator(".message.role-assistant")).to_contain_text("Fine.")
    page.locator(".message.role-user").get_by_role("button", name="Edit and resend").click()
    box = page.get_by_label("Edit your message")
    box.fill("changed my mind")
    box.press("Escape")
    expect(box).to_have_count(0)
    expect(page.locator(".message.role-user .message-body")).to_have_text("Keep me")
    expect(page.locator(".message.role-user").get_by_role("button", name="Edit and resend")).to_be_focused()

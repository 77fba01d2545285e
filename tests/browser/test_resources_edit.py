"""Edit and resend a message with attached resources: the edit box shows them as removable chips,
more can be attached with the same picker, and the model's request after the edit carries them.

The site's mcp.json gets the toolbox with its resources group as server ``box`` (the
``box_server`` fixture of tests/browser/test_resources.py).
"""

from __future__ import annotations

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
from tests.support.llm import Text

pytestmark = pytest.mark.browser


def _resource_uris(site: Site) -> list[str]:
    """The URIs of the resources in the last user message the model received."""
    content = site.llm.requests[-1]["messages"][-1]["content"]
    return [line.split('"')[1] for line in content.splitlines() if line.startswith("<resource uri=")]


@pytest.mark.parametrize("width", WIDTHS)
def test_edit_keeps_removes_and_adds_attachments(
    open_page: Any,
    site: Site,
    width: int,
    box_server: None,
) -> None:
    from playwright.sync_api import expect

    page = open_page(width)
    landing(page, site)
    picker = page.locator("#resource-picker")
    page.click(".attach-button")
    search_resources(page, "read me", "toolbox://notes/readme.txt").click()
    site.llm.script(Text("First answer."))
    start_conversation(page, "What is this?")
    expect(page.locator(".message.role-assistant").last).to_contain_text("First answer.")
    asked = len(site.llm.requests)

    # The edit box shows the message's attachment as a removable chip.
    user = page.locator(".message.role-user").last
    user.locator(".edit").click()
    form = page.locator(".edit-form")
    chips = form.locator(".attachment-chip")
    expect(chips).to_have_count(1)
    expect(chips.first).to_contain_text("Read me")
    expect(user.locator(".message-attachments")).to_be_hidden()  # only the edit box shows them

    # More with the same picker: a template filled in; then the first one removed.
    form.locator(".edit-attach-button").click()
    expect(picker).to_be_visible()
    search_resources(page, "facts", "toolbox://cities/{city}").click()
    page.locator("#template-arg-0").fill("Paris")
    picker.get_by_role("button", name="Attach").click()
    expect(picker).to_be_hidden()
    expect(chips).to_have_count(2)
    expect(page.locator("#composer .attachment-chip")).to_have_count(0)  # not the composer's
    assert overflowing(page) == []
    screenshot(page, "resource-edit")
    form.get_by_role("button", name="Remove Read me").click()
    expect(chips).to_have_count(1)
    expect(chips.first).to_contain_text("Paris")

    site.llm.script(Text("About Paris."))
    form.locator("textarea").fill("And this one?")
    form.get_by_role("button", name="Send").click()
    expect(page.locator(".message.role-assistant").last).to_contain_text("About Paris.")
    assert len(site.llm.requests) == asked + 1
    assert _resource_uris(site) == ["toolbox://cities/Paris"]
    assert "Paris is a city in Europe." in site.llm.requests[-1]["messages"][-1]["content"]
    sent = page.locator(".message.role-user .message-attachments .attachment-chip")
    expect(sent).to_have_count(1)
    expect(sent.first).to_contain_text("Paris")

    # Edited again with the text only: the attachment stays.
    page.locator(".message.role-user").last.locator(".edit").click()
    expect(page.locator(".edit-form .attachment-chip")).to_have_count(1)
    site.llm.script(Text("Still Paris."))
    page.locator(".edit-form textarea").fill("Once more?")
    page.keyboard.press("Enter")
    expect(page.locator(".message.role-assistant").last).to_contain_text("Still Paris.")
    assert _resource_uris(site) == ["toolbox://cities/Paris"]
    page.reload()
    expect(page.locator(".message.role-user .message-attachments .attachment-chip")).to_have_count(1)

"""Questions from MCP servers in the page, at phone and laptop width: a form answered (a
validation error shown, then fixed) and declined, and a web page to open (URL mode): its full
URL shown as text, nothing opened before the click, Open opening a new tab without an opener,
and the turn resuming once the server reports the page completed.

Daphne runs the toolbox's "questions" group at 2026-07-28 ("q26") and 2025-11-25 ("q25")
(``questions_site`` of tests/support/browser.py); the timed-out form is in test_questions_timeout.py.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.browser import (
    WIDTHS,
    Site,
    ask,
    overflowing,
    questions_site,
    screenshot,
    tool_output,
)

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    yield from questions_site(tmp_path_factory.mktemp("questions-page"), elicitation_timeout=600)


@pytest.mark.parametrize("width", WIDTHS)
def test_a_form_is_answered_after_a_validation_error(open_page: Any, site: Site, width: int) -> None:
    from playwright.sync_api import expect

    page = open_page(width)
    ask(page, site, "q26_ask_form", "Thanks for the details.")
    form = page.locator("form.elicitation")
    expect(form).to_be_visible()
    expect(form.locator(".elicitation-message")).to_have_text("Tell me about <i>yourself</i>")
    assert form.locator(".elicitation-message i").count() == 0
    # Every kind of field, defaults filled in.
    expect(form.get_by_label("Age", exact=True)).to_have_value("30")
    expect(form.get_by_label("Colour")).to_have_value("blue")
    expect(form.get_by_label("Size")).to_have_value("")
    expect(form.get_by_label("I agree")).not_to_be_checked()
    expect(form.locator(".field-multi")).to_have_count(2)
    expect(form.locator(".field-multi").first.get_by_label("mon")).to_be_checked()
    expect(form.locator(".required-mark")).to_have_count(2)
    assert form.get_by_label("Email").get_attribute("type") == "email"
    assert form.get_by_label("Birthday").get_attribute("type") == "date"
    assert overflowing(page) == []

    form.get_by_label("Name").fill("A")  # shorter than its minLength
    form.get_by_label("Email").fill("not-an-email")
    form.get_by_role("button", name="Accept").click()
    error = form.locator(".elicitation-error")
    expect(error).to_be_visible()
    expect(error).to_contain_text('"Name" must be at least 2 characters')
    expect(error).to_contain_text('"Email" must be an email address')
    # Each problem also at its field: the field marked, described by it, the first one focused.
    invalid = form.locator(".elicitation-field.field-invalid")
    expect(invalid).to_have_count(2)
    expect(invalid.nth(0).locator(".field-error")).to_have_text('"Name" must be at least 2 characters')
    expect(invalid.nth(1).locator(".field-error")).to_have_text('"Email" must be an email address')
    expect(form.get_by_label("Name")).to_have_attribute("aria-invalid", "true")
    expect(form.get_by_label("Name")).to_have_accessible_description(
        __import__("re").compile('"Name" must be at least 2 characters')
    )
    expect(form.get_by_label("Name")).to_be_focused()
    expect(form.get_by_label("Age", exact=True)).not_to_have_attribute("aria-invalid", "true")
    screenshot(page, "questions-form-error")

    form.get_by_label("Name").fill("Ada")
    form.get_by_label("Email").fill("ada@example.com")
    form.get_by_label("Ratio").fill("0.5")
    form.get_by_label("Size").select_option("m")
    form.get_by_label("I agree").check()
    form.locator(".field-multi").last.get_by_label("Dog").check()
    form.get_by_role("button", name="Accept").click()
    expect(page.locator(".elicitation-done").last).to_have_text("You accepted.")
    expect(page.locator(".message.role-assistant").last).to_contain_text("Thanks for the details.")
    action, _, content = tool_output(site).partition(" ")
    assert action == "accept"
    assert json.loads(content) == {
        "age": 30,
        "agree": True,
        "color": "blue",
        "days": ["mon"],
        "email": "ada@example.com",
        "name": "Ada",
        "pets": ["dog"],
        "ratio": 0.5,
        "size": "m",
    }


@pytest.mark.parametrize("width", WIDTHS)
def test_a_form_is_declined(open_page: Any, site: Site, width: int) -> None:
    from playwright.sync_api import expect

    page = open_page(width)
    ask(page, site, "q25_ask_form", "Fine, no details.")
    page.locator("form.elicitation").get_by_role("button", name="Decline").click()
    expect(page.locator(".elicitation-done").last).to_have_text("You declined.")
    expect(page.locator(".message.role-assistant").last).to_contain_text("Fine, no details.")
    assert tool_output(site) == "decline"


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("server", ["q25", "q26"])
def test_a_page_to_open_is_shown_in_full_and_opens_only_on_click(
    open_page: Any, site: Site, width: int, server: str
) -> None:
    from playwright.sync_api import expect

    page = open_page(width)
    ask(page, site, f"{server}_ask_link", "You are connected.")
    card = page.locator("section.elicitation-link")
    expect(card).to_be_visible()
    expect(card.locator(".elicitation-from")).to_have_text(
        f"{server} ({server}_ask_link) asks you to open a web page:"
    )
    expect(card.locator(".elicitation-message")).to_have_text("Connect your Example account")
    expect(card.locator(".elicitation-host")).to_have_text("127.0.0.1")
    url = card.locator(".elicitation-url code").text_content()
    assert re.fullmatch(r"http://127\.0\.0\.1:\d+/connect/[0-9a-f]{32}", url), url
    assert card.locator("a").count() == 0  # the URL is text, not a link
    assert overflowing(page) == []
    screenshot(page, f"questions-link-{server}")
    # Nothing opened or navigated by itself.
    chat_url = page.url
    assert len(page.context.pages) == 1

    with page.context.expect_page() as opening:
        card.get_by_role("button", name="Open").click()
    opened = opening.value
    opened.wait_for_load_state()
    assert opened.url == url
    assert opened.evaluate("window.opener") is None  # noopener
    assert page.url == chat_url  # the chat stayed where it was
    expect(card.locator(".elicitation-status")).to_have_text(
        f"Waiting for {server} to report that you finished on the page…"
    )
    expect(card.get_by_role("button", name="I'm done")).to_be_visible()

    # The person finishes on the server's page; the server reports it and the turn goes on.
    opened.fill("#value", f"Ada at {width}")
    opened.click("button[type=submit]")
    expect(opened.locator("#done")).to_be_visible()
    expect(page.locator(".elicitation-done").last).to_have_text(
        "Completed: the server reported that you finished."
    )
    expect(page.locator(".message.role-assistant").last).to_contain_text("You are connected.")
    assert tool_output(site) == f"connected: Ada at {width}"


def test_a_page_whose_site_two_parsers_read_differently_is_never_shown(open_page: Any, site: Site) -> None:
    """Python reads the host after the "@", the browser before the backslash: refused unshown."""
    from playwright.sync_api import expect

    page = open_page(1280)
    disguised = "https://evil.example\\@accounts.example/login"
    ask(page, site, "q25_ask_link", "I could not ask.", {"url": disguised})
    expect(page.locator(".message.role-assistant").last).to_contain_text("I could not ask.")
    assert page.locator("section.elicitation-link").count() == 0
    assert tool_output(site) == (
        "refused: URL-mode elicitation refused: the URL has characters RFC 3986 does not allow "
        "(non-ASCII text must be percent-encoded)"
    )

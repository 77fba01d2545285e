"""Around the conversation: dark mode (the system's, or the person's choice, remembered), the
phone's drawer with its backdrop and close button, the admin link for staff, a status line
that tells the truth about the model, and a list that keeps its size while Latest comes and goes.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.browser import WIDTHS, Site, landing, open_drawer, screenshot, send, start_conversation
from tests.support.llm import ScriptedLLM, Text

pytestmark = pytest.mark.browser

DARK_BG = "rgb(22, 23, 27)"
LIGHT_BG = "rgb(255, 255, 255)"


def _background(page: Any) -> str:
    return page.evaluate("getComputedStyle(document.body).backgroundColor")


@pytest.mark.parametrize("width", WIDTHS)
def test_latest_coming_and_going_moves_nothing_in_the_list(open_page: Any, site: Site, width: int) -> None:
    """On a phone Latest has a row of its own: were the row to go with the button, the list would
    grow as the person reaches its end and move what they were about to tap down under their finger."""
    from playwright.sync_api import expect

    page = open_page(width)
    landing(page, site)
    site.llm.script(Text("\n\n".join(f"Paragraph {n} of a long answer." for n in range(60))))
    start_conversation(page, "a long answer, please")
    expect(page.locator(".message.role-assistant").last).to_contain_text("Paragraph 59 of a long answer.")
    latest = page.locator("#jump-latest")
    expect(latest).to_be_hidden()
    at_the_end = page.locator("#messages").bounding_box()
    page.evaluate("document.getElementById('messages').scrollTop = 0")
    expect(latest).to_be_visible()
    assert page.locator("#messages").bounding_box() == at_the_end
    latest.click()
    expect(latest).to_be_hidden()
    assert page.locator("#messages").bounding_box() == at_the_end


def _choose_theme(page: Any, label: str) -> None:
    open_drawer(page)
    with page.expect_response(lambda response: response.url.endswith("/prefs/theme/")) as saved:
        page.locator(f"#theme-switch input[value={label.lower()}]").click()
    assert saved.value.ok


@pytest.mark.parametrize("width", WIDTHS)
def test_dark_mode_follows_the_system_and_the_choice_is_remembered(
    open_page: Any, site: Site, width: int
) -> None:
    from playwright.sync_api import expect

    page = open_page(width, scheme="dark")
    landing(page, site)
    try:
        assert _background(page) == DARK_BG  # the system says dark, the person said nothing
        screenshot(page, "dark")
        _choose_theme(page, "Light")
        expect(page.locator("html")).to_have_attribute("data-theme", "light")
        assert _background(page) == LIGHT_BG
        page.reload()  # remembered for the person, by the server
        expect(page.locator("html")).to_have_attribute("data-theme", "light")
        assert _background(page) == LIGHT_BG
        expect(page.locator("#theme-switch input[value=light]")).to_be_checked()

        # Another browser of the same person, whose system is light, gets dark once chosen.
        other = open_page(width, scheme="light")
        _choose_theme(other, "Dark")
        assert _background(other) == DARK_BG
        other.reload()
        assert _background(other) == DARK_BG
        _choose_theme(page, "System")
        assert _background(page) == DARK_BG
    finally:
        # The choice is the account's: later tests start from the system's theme, whatever happened.
        site.db("from boocode.chat.models import Preference\nPreference.objects.update(theme='system')")


@pytest.mark.parametrize("width", [375])
def test_the_phone_drawer(open_page: Any, site: Site, width: int) -> None:
    from playwright.sync_api import expect

    page = open_page(width)
    landing(page, site)
    toggle = page.locator("#sidebar-toggle")
    sidebar = page.locator("#sidebar")
    backdrop = page.locator("#sidebar-backdrop")
    expect(sidebar).to_be_hidden()
    expect(toggle).to_have_attribute("aria-expanded", "false")

    toggle.click()
    expect(sidebar).to_be_visible()
    expect(backdrop).to_be_visible()
    expect(toggle).to_have_attribute("aria-expanded", "true")
    assert page.evaluate("document.querySelector('.main').inert")  # the page behind is out of reach
    screenshot(page, "drawer")
    page.mouse.click(width - 20, 400)  # the backdrop, beside the drawer
    expect(sidebar).to_be_hidden()
    expect(backdrop).to_be_hidden()
    expect(toggle).to_be_focused()

    toggle.click()
    page.get_by_role("button", name="Close the conversation list").click()
    expect(sidebar).to_be_hidden()

    toggle.click()
    expect(sidebar).to_be_visible()
    page.keyboard.press("Escape")
    expect(sidebar).to_be_hidden()
    expect(toggle).to_be_focused()
    assert not page.evaluate("document.querySelector('.main').inert")


@pytest.mark.parametrize("width", WIDTHS)
def test_staff_see_the_admin_link(open_page: Any, site: Site, width: int) -> None:
    from playwright.sync_api import expect

    admin = open_page(width)
    open_drawer(admin)
    link = admin.get_by_role("link", name="Admin")
    expect(link).to_be_visible()
    expect(link).to_have_attribute("href", "/admin/")
    if width >= 800:
        expect(admin.locator("#sidebar-toggle")).to_be_hidden()
        expect(admin.locator("#sidebar")).to_be_visible()

    reader = open_page(width, user="reader")
    open_drawer(reader)
    expect(reader.locator("#sidebar")).to_contain_text("reader")
    expect(reader.get_by_role("link", name="Admin")).to_have_count(0)


@pytest.mark.parametrize("width", [1280])
def test_the_status_line_tells_the_truth_about_the_model(open_page: Any, site: Site, width: int) -> None:
    from playwright.sync_api import expect

    page = open_page(width)
    landing(page, site)
    site.llm.script(Text("Up and running."))
    start_conversation(page, "are you there?")
    model = page.locator("#model-state")
    expect(model).to_have_text("model: test-model")

    # The model server goes away: the status line says so without anybody sending anything...
    port = site.llm.port
    site.llm.stop()
    try:
        expect(model).to_have_text("model: test-model (unreachable)", timeout=30_000)
        screenshot(page, "model-unreachable")
    finally:
        # ...and stops saying so once it is back (no reload, no message sent).
        site.llm = ScriptedLLM(
            models=("test-model", "other-model"), responder=lambda body: Text("(unscripted)"), port=port
        ).start()
    expect(model).to_have_text("model: test-model", timeout=30_000)
    site.llm.script(Text("Back again."))
    send(page, "and now?")
    expect(page.locator(".message.role-assistant").last).to_contain_text("Back again.")
    expect(model).to_have_text("model: test-model")

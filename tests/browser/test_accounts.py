"""A person's own password in Chromium at 375 and 1280 px: the sidebar's link, the change form
with each error at its field (marked, described, the first one focused), and the reset page
reached from the login page.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.browser import (
    AXE,
    WIDTHS,
    Site,
    log_in,
    open_drawer,
    overflowing,
    screenshot,
    serious_violations,
)

pytestmark = pytest.mark.browser

OLD, NEW = "walker's first passphrase", "walker's second passphrase"


@pytest.mark.parametrize("width", WIDTHS)
def test_a_person_changes_their_password_from_the_sidebar(browser: Any, site: Site, width: int) -> None:
    from playwright.sync_api import expect

    name = f"walker{width}"
    site.db(
        "from django.contrib.auth import get_user_model\n"
        f"get_user_model().objects.create_user({name!r}, password={OLD!r})\n"
        "result = None"
    )
    context = browser.new_context(viewport={"width": width, "height": 800})
    try:
        page = context.new_page()
        log_in(page, site.url, name, OLD)
        open_drawer(page)
        page.get_by_role("link", name="Password").click()
        expect(page.get_by_role("heading", name="Password change")).to_be_visible()
        old = page.get_by_label("Old password")
        expect(old).to_be_focused()

        old.fill("not my password")
        page.get_by_label("New password", exact=True).fill(NEW)
        page.get_by_label("New password confirmation").fill(NEW + "!")
        page.get_by_role("button", name="Change password").click()
        expect(page.locator(".field-invalid")).to_have_count(2)
        expect(old).to_have_attribute("aria-invalid", "true")
        expect(old).to_be_focused()  # the first field in error
        expect(page.locator(".field-invalid").first).to_contain_text(
            "Your old password was entered incorrectly"
        )
        assert overflowing(page) == []
        if AXE.exists():
            assert serious_violations(page) == []
        screenshot(page, "password-change-error")

        old.fill(OLD)
        page.get_by_label("New password", exact=True).fill(NEW)
        page.get_by_label("New password confirmation").fill(NEW)
        page.get_by_role("button", name="Change password").click()
        expect(page.locator("main")).to_contain_text("Your password is changed")
        page.get_by_role("link", name="Back to your conversations").click()
        expect(page.locator("#message-input")).to_be_visible()  # still signed in

        # The login page leads to a reset; the page says the same whatever the address.
        context.clear_cookies()
        page.goto(f"{site.url}/login/")
        page.get_by_role("link", name="Forgot your password?").click()
        page.get_by_label("Email").fill("nobody@example.org")
        page.get_by_role("button", name="Send the link").click()
        expect(page.locator("main")).to_contain_text("If an account has that address")
        assert overflowing(page) == []
        screenshot(page, "password-reset-sent")
        log_in(page, site.url, name, NEW)
    finally:
        context.close()

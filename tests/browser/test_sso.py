"""Single sign-on in Chromium at 375 and 1280 px: the login page with the provider's button (beside
the password form, and alone with passwords off), the whole sign-in through the real provider's
pages (tests/node/oidc_provider.mjs), and the logout that continues to the provider's and back.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from tests.support.browser import (
    AXE,
    HEIGHTS,
    WIDTHS,
    open_drawer,
    overflowing,
    screenshot,
    serious_violations,
)
from tests.support.live import Live, live_server
from tests.support.oidc import OpenIdProvider
from tests.support.processes import free_port

pytestmark = pytest.mark.browser

# The provider's development pages ask for a web font; nothing but this machine is reached.
ELSEWHERE = re.compile(r"^https?://(?!127\.0\.0\.1[:/]|localhost[:/])")


@dataclass
class Sites:
    both: Live  # passwords and the provider
    provider_only: Live  # passwords off
    provider: OpenIdProvider


@pytest.fixture(scope="module")
def sites(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sites]:
    port = free_port()
    provider = OpenIdProvider.start(tmp_path_factory.mktemp("browser-sso"), f"http://127.0.0.1:{port}", {})
    try:
        with (
            live_server(tmp_path_factory.mktemp("sso-both"), {}, provider.env(), port=port) as both,
            live_server(
                tmp_path_factory.mktemp("sso-only"), {}, provider.env(BOOCODE_LOCAL_LOGIN="false")
            ) as provider_only,
        ):
            yield Sites(both, provider_only, provider)
    finally:
        provider.stop()


def new_page(browser: Any, width: int, errors: list[str]) -> tuple[Any, Any]:
    context = browser.new_context(viewport={"width": width, "height": HEIGHTS[width]})
    context.set_default_timeout(20_000)
    context.route(ELSEWHERE, lambda route: route.abort())
    page = context.new_page()
    page.on("pageerror", lambda error: errors.append(str(error)))
    return context, page


def check_layout(page: Any) -> None:
    assert overflowing(page) == []
    if AXE.exists():
        assert serious_violations(page) == []


@pytest.mark.parametrize("width", WIDTHS)
def test_a_person_signs_in_and_out_through_the_provider(browser: Any, sites: Sites, width: int) -> None:
    from playwright.sync_api import expect

    errors: list[str] = []
    context, page = new_page(browser, width, errors)
    url = f"http://127.0.0.1:{sites.both.port}"
    try:
        page.goto(f"{url}/login/")
        button = page.get_by_role("link", name="Sign in with Example ID")
        expect(button).to_be_visible()
        expect(page.get_by_label("Username")).to_be_visible()  # the password form stays, after "or"
        check_layout(page)
        screenshot(page, "sso-login")

        button.click()
        page.wait_for_url(f"{sites.provider.issuer}/interaction/**")
        page.fill("input[name=login]", f"walker{width}")
        page.fill("input[name=password]", "any")
        page.click("button[type=submit]")
        page.wait_for_url(f"{sites.provider.issuer}/interaction/**")
        page.get_by_role("button", name="Continue").click()  # the provider's consent
        expect(page.locator("#message-input")).to_be_visible()
        assert page.url == f"{url}/"

        open_drawer(page)
        expect(page.locator("#password-link")).to_have_count(0)  # no password of their own
        page.get_by_role("button", name="Log out").click()
        # BooCode's page continues to the provider's logout (a link, which form-action allows).
        page.get_by_role("button", name="Yes, sign me out").click()
        page.wait_for_url(f"{url}/login/")
        expect(page.get_by_role("link", name="Sign in with Example ID")).to_be_visible()
        page.goto(f"{url}/")
        assert page.url.startswith(f"{url}/login/")  # logged out of BooCode
    finally:
        context.close()
    assert errors == []


@pytest.mark.parametrize("width", WIDTHS)
def test_with_passwords_off_the_page_offers_only_the_provider(browser: Any, sites: Sites, width: int) -> None:
    from playwright.sync_api import expect

    errors: list[str] = []
    context, page = new_page(browser, width, errors)
    try:
        page.goto(f"http://127.0.0.1:{sites.provider_only.port}/login/")
        expect(page.get_by_role("link", name="Sign in with Example ID")).to_be_visible()
        expect(page.locator("input[type=password]")).to_have_count(0)
        expect(page.get_by_text("Forgot your password?")).to_have_count(0)
        check_layout(page)
        screenshot(page, "sso-only-login")
    finally:
        context.close()
    assert errors == []

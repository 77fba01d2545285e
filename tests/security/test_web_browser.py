"""The login page and the admin in Debian's Chromium (Playwright), under the default CSP.

The admin's own JavaScript (actions, filters, the password form) must still work with
``script-src 'self'`` and no inline styles or scripts; the login page must say plainly when
logging in is locked.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.browser import CHROMIUM
from tests.support.live import PASSWORD, Live, live_server
from tests.support.web import Browserless

pytestmark = pytest.mark.browser

ACCOUNTS: dict[str, dict[str, Any]] = {"admin": {"admin": True}, "locked": {}, "someone": {}}
# Collects what the page's Content-Security-Policy blocked (added before any page script runs).
WATCH_CSP = """
window.__blocked = [];
document.addEventListener("securitypolicyviolation", (event) => {
  const where = `${event.sourceFile}:${event.lineNumber}`;
  window.__blocked.push(`${event.violatedDirective} ${event.blockedURI} ${where}`);
});
"""


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    if not Path(CHROMIUM).exists():
        pytest.skip("Chromium is not installed (make test-deps)")
    with live_server(tmp_path_factory.mktemp("web-browser"), ACCOUNTS) as server:
        yield server


@pytest.fixture
def page(browser: Any, live: Live) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1200, "height": 900})
    context.set_default_timeout(10_000)
    context.add_init_script(WATCH_CSP)
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    # Console errors include CSP refusals; a 404 favicon or the expected 429 are not faults.
    page.on(
        "console",
        lambda message: (
            errors.append(message.text)
            if message.type == "error" and not message.text.startswith("Failed to load resource")
            else None
        ),
    )
    yield page
    context.close()
    assert errors == [], errors


def visit(page: Any, url: str) -> None:
    """Open ``url``; it must carry the strict policy and the page must have nothing blocked."""
    response = page.goto(url)
    assert response is not None and response.ok, (url, response and response.status)
    policy = response.headers.get("content-security-policy", "")
    assert "script-src 'self'" in policy and "unsafe" not in policy, (url, policy)
    assert page.evaluate("window.__blocked") == [], url


def test_the_admin_works_under_the_content_security_policy(page: Any, live: Live) -> None:
    from playwright.sync_api import expect

    base = f"http://127.0.0.1:{live.port}"
    visit(page, f"{base}/admin/login/")
    page.fill("input[name=username]", "admin")
    page.fill("input[name=password]", PASSWORD)
    page.click("input[type=submit]")
    expect(page.locator("#site-name")).to_be_visible()
    assert page.evaluate("window.__blocked") == []

    # The user list: its actions script selects every row and counts them.
    visit(page, f"{base}/admin/auth/user/")
    page.click("#action-toggle")
    expect(page.locator(".action-counter")).to_contain_text("3 of 3 selected")
    assert page.locator("input.action-select:checked").count() == 3
    expect(page.locator("#changelist-filter")).to_be_visible()
    page.click("#changelist-filter a:text('Yes')")  # a filter: staff status
    expect(page.locator("#result_list tbody tr")).to_have_count(1)

    admin_id = live.accounts["admin"]["id"]
    for path in (
        "/admin/",
        "/admin/auth/user/add/",
        f"/admin/auth/user/{admin_id}/change/",
        f"/admin/auth/user/{admin_id}/password/",
        "/admin/auth/group/add/",  # the two-list permissions widget (SelectFilter2.js)
        "/admin/axes/accessattempt/",
        "/admin/mcpclient/mcpserver/",
    ):
        visit(page, base + path)
    # The permissions widget was built by its script: it adds a filter box.
    page.goto(f"{base}/admin/auth/group/add/")
    expect(page.locator("#id_permissions_input")).to_be_visible()
    assert page.evaluate("window.__blocked") == []


def test_the_login_page_says_when_logging_in_is_locked(page: Any, live: Live) -> None:
    from playwright.sync_api import expect

    attacker = Browserless(live.port, source="127.0.0.20")
    for n in range(5):
        attacker.log_in("locked", f"guess {n}")

    base = f"http://127.0.0.1:{live.port}"
    visit(page, f"{base}/login/")
    page.fill("input[name=username]", "locked")
    page.fill("input[name=password]", PASSWORD)
    with page.expect_response(lambda response: response.url.endswith("/login/")) as posted:
        page.click("button[type=submit]")
    assert posted.value.status == 429
    expect(page.locator("#locked-out")).to_contain_text("Too many failed logins")
    expect(page.locator("#locked-out")).to_contain_text("15 minutes")
    expect(page.locator("input[name=username]")).to_have_value("locked")
    assert page.evaluate("window.__blocked") == []

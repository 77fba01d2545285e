"""*Your servers* in Chromium: a person adds a remote server of their own, signs in to it with
OAuth, uses its tool, and nobody else sees it; at 1280 and 375 px.

Daphne serves BooCode with the hub running; the OAuth test server (tests/servers/oauth_server.py)
consents at once. The egress policy lets the loopback test server through
(``BOOCODE_EGRESS_ALLOW``): a person's server is checked like any address.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.support.browser import signed_in_page
from tests.support.live import live_server
from tests.support.oauth import OAuthServer
from tests.support.processes import free_port

pytestmark = pytest.mark.browser

SCREENSHOTS = Path("/tmp/boocode-screenshots")


def _state_becomes(page: Any, name: str, text: str) -> Any:
    """The server's line once its state reads ``text`` (the page is reloaded until then)."""
    from playwright.sync_api import expect

    deadline = time.monotonic() + 20
    line = page.locator(f".own-server[data-server={name}] .account-state")
    while line.count() == 0 or line.inner_text() != text:
        assert time.monotonic() < deadline, f"{name} never read {text!r}"
        page.wait_for_timeout(200)
        page.reload()
    expect(line).to_have_text(text)
    return page.locator(f".own-server[data-server={name}]")


def test_a_person_adds_a_server_of_their_own_signs_in_and_only_they_use_it(
    browser: Any, oauth_server: Callable[..., OAuthServer], tmp_path: Path
) -> None:
    from playwright.sync_api import expect

    server = oauth_server()
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    env = {"BOOCODE_MCP_AUTOSTART": "1", "BOOCODE_PUBLIC_URL": base, "BOOCODE_EGRESS_ALLOW": "127.0.0.1"}
    with live_server(tmp_path, {"ann": {}, "bob": {}}, env, port=port):
        SCREENSHOTS.mkdir(exist_ok=True)
        ann = signed_in_page(browser, base, "ann", 1280)
        section = ann.locator(".own-servers")
        expect(section.locator(".empty")).to_have_text("None yet: a server you add is used by you alone.")

        # A mistake first: the form comes back with what was typed and the field marked.
        section.locator("summary").click()
        ann.fill("#own-server-name", "my server")
        ann.fill("#own-server-url", server.url)
        ann.locator("#own-server-name").evaluate("input => input.removeAttribute('pattern')")
        ann.click("#own-server-submit")
        expect(ann.locator("#own-server-error")).to_contain_text("The name must be 1 to 40 letters")
        expect(ann.locator("#own-server-url")).to_have_value(server.url)
        expect(ann.locator("#own-server-name")).to_have_attribute("aria-invalid", "true")

        ann.fill("#own-server-name", "desk")
        ann.select_option("#own-server-sign-in", "oauth")
        ann.screenshot(path=str(SCREENSHOTS / "own-servers-form-1280.png"))
        ann.click("#own-server-submit")
        added = ann.locator(".banner.notice-success")
        expect(added).to_contain_text('Your server "desk" was added. Connect it')
        line = _state_becomes(ann, "desk", "not signed in")
        line.get_by_role("button", name="Connect").click()
        expect(ann.locator(".banner.notice-success")).to_contain_text('MCP server "desk" is connected')
        _state_becomes(ann, "desk", "connected · 3 tools")
        ann.fill("#message-input", "/call desk_whoami {}")
        ann.click("#send-button")
        card = ann.locator(".tool-card").last
        expect(card.locator(".badge")).to_have_text("done")
        card.locator("summary").click()
        expect(card.locator(".tool-output")).to_contain_text("alice")  # the account at the provider
        expect(ann.locator("#server-states [data-name=desk]")).to_have_text("desk: ready (3 tools)")
        ann.screenshot(path=str(SCREENSHOTS / "own-servers-1280.png"))
        ann.set_viewport_size({"width": 375, "height": 800})
        ann.click("#sidebar-toggle")
        ann.locator(".own-servers").scroll_into_view_if_needed()
        ann.screenshot(path=str(SCREENSHOTS / "own-servers-375.png"))
        width = ann.evaluate("document.querySelector('#sidebar').scrollWidth")
        assert width <= ann.evaluate("document.querySelector('#sidebar').clientWidth")  # nothing sticks out

        bob = signed_in_page(browser, base, "bob", 1280)
        expect(bob.locator(".own-servers .empty")).to_be_visible()
        bob.fill("#message-input", "/call desk_whoami {}")
        bob.click("#send-button")
        refused = bob.locator(".tool-card").last
        expect(refused.locator(".badge")).not_to_have_text("done")
        refused.locator("summary").click()
        expect(refused.locator(".tool-output")).to_contain_text("desk_whoami")

        # Removed: gone from the list, its tokens with it.
        ann.set_viewport_size({"width": 1280, "height": 900})
        ann.reload()
        ann.locator(".own-server[data-server=desk]").get_by_role("button", name="Remove desk").click()
        expect(ann.locator(".banner.notice-success")).to_contain_text('Your server "desk" was removed.')
        expect(ann.locator(".own-server[data-server=desk]")).to_have_count(0)
        ann.context.close()
        bob.context.close()

    whoami = [r for r in server.state()["mcp_requests"] if r.get("tool") == "whoami"]
    assert len(whoami) == 1  # bob's call never reached the server

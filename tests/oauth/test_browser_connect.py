"""A person connects their own account to a "perUser" server from the chat, in Chromium.

Daphne serves BooCode with the hub running; the OAuth test server (tests/servers/oauth_server.py)
consents at once, so Connect goes browser → provider → BooCode's callback → back to the chat.
The person then uses the server's tool; somebody else sees neither the account nor the tool.
"""

from __future__ import annotations

import json
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


def _accounts_shown(page: Any) -> Any:
    """The page once the hub runs (it starts with the first request): reloaded until it lists accounts."""
    deadline = time.monotonic() + 20
    while page.locator(".account[data-server=secure]").count() == 0:
        assert time.monotonic() < deadline, "the chat never listed the perUser server"
        page.wait_for_load_state()
        page.reload()
    return page.locator(".account[data-server=secure]")


def test_a_person_connects_their_account_and_only_they_use_it(
    browser: Any, oauth_server: Callable[..., OAuthServer], tmp_path: Path
) -> None:
    from playwright.sync_api import expect

    server = oauth_server()
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    entry = {"type": "http", "url": server.url, "oauth": {"mode": "perUser"}}
    env = {"BOOCODE_MCP_AUTOSTART": "1", "BOOCODE_PUBLIC_URL": base}
    accounts = {"ann": {}, "bob": {}}
    mcp_json = json.dumps({"mcpServers": {"secure": entry}})
    with live_server(tmp_path, accounts, env, port=port, mcp_json=mcp_json):
        SCREENSHOTS.mkdir(exist_ok=True)

        ann = signed_in_page(browser, base, "ann", 1280)
        account = _accounts_shown(ann)
        expect(account.locator(".account-state")).to_have_text("not connected")
        ann.screenshot(path=str(SCREENSHOTS / "accounts-1280.png"))
        account.get_by_role("button", name="Connect").click()
        # Back from the provider: connected, with the server's tools.
        expect(ann.locator(".banner.notice-success")).to_contain_text('MCP server "secure" is connected')
        account = ann.locator(".account[data-server=secure]")
        expect(account.locator(".account-state")).to_have_text("connected · 3 tools")
        ann.fill("#message-input", "/call secure_whoami {}")
        ann.click("#send-button")
        card = ann.locator(".tool-card").last
        expect(card.locator(".badge")).to_have_text("done")
        card.locator("summary").click()
        expect(card.locator(".tool-output")).to_contain_text("alice")  # the account at the provider
        status = ann.locator("#server-states [data-name=secure]")
        expect(status).to_have_text("secure: per person (Your accounts)")
        ann.screenshot(path=str(SCREENSHOTS / "connected-1280.png"))
        ann.set_viewport_size({"width": 375, "height": 800})
        ann.click("#sidebar-toggle")
        ann.screenshot(path=str(SCREENSHOTS / "accounts-375.png"))

        bob = signed_in_page(browser, base, "bob", 1280)
        expect(_accounts_shown(bob).locator(".account-state")).to_have_text("not connected")
        bob.fill("#message-input", "/call secure_whoami {}")
        bob.click("#send-button")
        refused = bob.locator(".tool-card").last
        expect(refused.locator(".badge")).not_to_have_text("done")
        refused.locator("summary").click()
        expect(refused.locator(".tool-output")).to_contain_text('Unknown tool "secure_whoami"')
        ann.context.close()
        bob.context.close()

    whoami = [r for r in server.state()["mcp_requests"] if r.get("tool") == "whoami"]
    assert len(whoami) == 1  # bob's call never reached the server

"""Accessibility, checked by axe-core (tests/node: npm axe-core) in Chromium: no serious or
critical violation on the login page, the empty chat, a streaming answer, tool cards, the
conversation list and the open menus, at phone and laptop width, light and dark; and every
control reachable with Tab shows where the focus is.

axe is evaluated through the DevTools protocol (page.evaluate), which the page's CSP does not
govern; a <script> tag would be refused by ``script-src 'self'``, as it should be.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.browser import (
    AXE,
    WIDTHS,
    Site,
    landing,
    open_drawer,
    screenshot,
    send,
    serious_violations,
    start_conversation,
)
from tests.support.llm import Call, Stall, Text, ToolCalls

pytestmark = pytest.mark.browser


@pytest.fixture(autouse=True)
def axe_installed() -> None:
    if not AXE.exists():
        pytest.skip("axe-core is not installed (make test-deps)")


@pytest.mark.parametrize("scheme", ["light", "dark"])
@pytest.mark.parametrize("width", WIDTHS)
def test_no_serious_violations(open_page: Any, browser: Any, site: Site, width: int, scheme: str) -> None:
    from playwright.sync_api import expect

    # The login page, logged out.
    context = browser.new_context(viewport={"width": width, "height": 800}, color_scheme=scheme)
    try:
        login = context.new_page()
        login.goto(f"{site.url}/login/")
        assert serious_violations(login) == [], "login"
        assert login.evaluate("typeof window.axe") == "object"
        # The page's own policy still refuses an inline script: axe came through DevTools.
        login.evaluate(
            """() => {
              const s = document.createElement('script');
              s.textContent = 'window.__inline = 1';
              document.body.append(s);
            }"""
        )
        assert login.evaluate("window.__inline") is None
    finally:
        context.close()

    page = open_page(width, scheme=scheme)
    landing(page, site)
    assert serious_violations(page) == [], "empty chat"

    site.llm.script(
        Stall(
            text="Working on **it**",
            seconds=60,
            after=" now.\n\n```python\nprint('hi')\n```\n\n| a | b |\n|---|---|\n| 1 | 2 |",
        ),
        ToolCalls(
            [
                Call("catalog_rows", {"word": "tea"}),
                Call("catalog_tree", {}),
                Call("toolbox_fail", {"message": "no"}),
                Call("catalog_lines", {"count": 30}),
            ]
        ),
        Text("Tools done."),
    )
    start_conversation(page, "accessible?")
    expect(page.locator(".message.status-streaming")).to_contain_text("Working on")
    assert serious_violations(page) == [], "streaming"
    site.llm.release_stalled()
    expect(page.locator(".message.role-assistant .code-block")).to_be_visible()
    send(page, "now the tools")
    expect(page.locator(".message.role-assistant").last).to_contain_text("Tools done.")
    page.locator(".tool-card .tool-args").first.locator("summary").click()
    assert serious_violations(page) == [], "tool cards"
    screenshot(page, f"a11y-tools-{scheme}")

    # The conversation list, a conversation's menu, the agent picker, a dialog.
    open_drawer(page)
    assert serious_violations(page) == [], "conversation list"
    page.locator(".conv-item.current .conv-menu-button").click()
    expect(page.locator("#menu")).to_be_visible()
    assert serious_violations(page) == [], "menu"
    page.get_by_role("menuitem", name="Rename").click()
    expect(page.locator("#rename-dialog")).to_be_visible()
    assert serious_violations(page) == [], "rename dialog"
    page.keyboard.press("Escape")
    if width < 800:
        page.keyboard.press("Escape")  # the drawer
    page.locator("#agent-button").click()
    expect(page.locator("#agent-panel")).to_be_visible()
    assert serious_violations(page) == [], "agent picker"


@pytest.mark.parametrize("width", WIDTHS)
def test_every_control_is_reachable_by_keyboard_with_a_visible_focus(
    open_page: Any, site: Site, width: int
) -> None:
    from playwright.sync_api import expect

    page = open_page(width)
    landing(page, site)
    site.llm.script(Text("Short answer with `code`."))
    start_conversation(page, "keyboard")
    expect(page.locator(".message.role-assistant")).to_contain_text("Short answer")
    # The answer's last words come before the frame that ends the turn: Send (not Stop) says it ended.
    expect(page.locator("#send-button")).to_be_visible()
    page.locator("body").focus()
    page.evaluate("document.activeElement.blur()")
    seen: list[str] = []
    # Until the focus comes round to a control it has been on: the sidebar holds every conversation
    # the session's other tests made, so how many stops a round takes depends on the order they ran.
    for _ in range(1000):
        page.keyboard.press("Tab")
        focus = page.evaluate(
            """() => {
              const node = document.activeElement;
              if (!node || node === document.body) return null;
              window.__visited = window.__visited || new WeakSet();
              const again = window.__visited.has(node);
              window.__visited.add(node);
              const style = getComputedStyle(node);
              const ring = style.outlineStyle !== 'none' && parseFloat(style.outlineWidth) > 0;
              // The message box shows its focus on the box around it.
              const around = node.closest('.composer-box');
              const boxRing = Boolean(around) && getComputedStyle(around).boxShadow !== 'none';
              const label = node.getAttribute('aria-label') || node.textContent.trim().slice(0, 30)
                || node.id || node.name;
              return {name: `${node.tagName.toLowerCase()}:${label}`, visible: ring || boxRing, again};
            }"""
        )
        if focus is None:
            continue
        assert focus["visible"], f"no visible focus on {focus['name']}"
        if focus["again"]:
            break
        seen.append(focus["name"])
    names = " | ".join(seen)
    for expected in ("Send", "Model", "Copy message", "Edit and resend", "Regenerate this answer"):
        assert expected.lower() in names.lower(), (expected, names)
    if width >= 800:
        for expected in ("New conversation", "Search", "Actions for"):
            assert expected.lower() in names.lower(), (expected, names)
    else:
        assert "Conversations" in names

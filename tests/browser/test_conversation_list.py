"""The conversation list: plain-text titles grouped by date, search, and each conversation's
menu (rename, export as Markdown and JSON, delete) fitting a phone's width.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.support.browser import (
    WIDTHS,
    XSS,
    Site,
    landing,
    open_drawer,
    overflowing,
    screenshot,
    send,
    start_conversation,
)
from tests.support.llm import Text

pytestmark = pytest.mark.browser


def _open_menu(page: Any, conversation: int) -> Any:
    open_drawer(page)
    page.locator(f".conv-item[data-id='{conversation}'] .conv-menu-button").click()
    menu = page.locator("#menu")
    menu.wait_for()
    return menu


@pytest.mark.parametrize("width", WIDTHS)
def test_titles_search_rename_export_delete(open_page: Any, site: Site, width: int, tmp_path: Path) -> None:
    from playwright.sync_api import expect

    page = open_page(width)
    landing(page, site)
    word = f"zebracorn{width}"
    site.llm.script(Text(f"The {word} lives in the **hills**. {XSS}"))
    conversation = start_conversation(page, f"**Plan** the `trip` {XSS}")
    expect(page.locator(".message.role-assistant").last).to_contain_text(f"The {word} lives")

    # The title is plain text, here and in the list (no Markdown marks, no markup).
    title = page.locator("#conversation-title")
    expect(title).not_to_have_text("New conversation")
    assert "**" not in title.inner_text() and "`" not in title.inner_text()
    open_drawer(page)
    link = page.locator(f".conv-item[data-id='{conversation}'] .conv-link")
    expect(link).to_have_text(title.inner_text())
    assert link.locator("*").count() == 0
    assert "<img src=x" in link.inner_text()  # the markup is shown, as text
    expect(page.locator(".conv-group-label").first).to_have_text("Today")

    # Search finds a word of the answer; the snippet is text with the word marked.
    page.fill("#search-input", word)
    result = page.locator(f"#search-results a[href='/c/{conversation}/']")
    expect(result).to_be_visible()
    expect(result.locator("mark")).to_have_text(word)
    expect(page.locator("#conversation-groups")).to_be_hidden()
    page.fill("#search-input", "onerror")
    expect(page.locator("#search-results a").first).to_be_visible()
    assert page.locator("#search-results img, #search-results script").count() == 0
    page.fill("#search-input", "nothing-matches-this-word")
    expect(page.locator("#search-results")).to_contain_text("Nothing found")
    page.locator("#search-input").press("Escape")
    expect(page.locator("#conversation-groups")).to_be_visible()

    # The menu fits inside the viewport, Rename included; keyboard: arrows move, Esc closes.
    menu = _open_menu(page, conversation)
    screenshot(page, "conversation-menu")
    for item in menu.locator("[role=menuitem]").all():
        box = item.bounding_box()
        assert box["x"] >= 0 and box["x"] + box["width"] <= width, item.inner_text()
    expect(menu.get_by_role("menuitem", name="Rename")).to_be_focused()
    page.keyboard.press("ArrowDown")
    expect(menu.get_by_role("menuitem", name="Export as Markdown")).to_be_focused()
    page.keyboard.press("Escape")
    expect(menu).to_be_hidden()
    expect(page.locator(f".conv-item[data-id='{conversation}'] .conv-menu-button")).to_be_focused()

    # Rename.
    _open_menu(page, conversation).get_by_role("menuitem", name="Rename").click()
    dialog = page.locator("#rename-dialog")
    expect(dialog).to_be_visible()
    dialog.locator("input").fill(XSS)
    dialog.get_by_role("button", name="Save").click()
    expect(dialog).to_be_hidden()
    expect(link).to_have_text(XSS)
    expect(title).to_have_text(XSS)
    assert page.locator("#sidebar img:not(.brand img), #conversation-title *").count() == 0
    _open_menu(page, conversation).get_by_role("menuitem", name="Rename").click()
    dialog.locator("input").fill("Trip <i>notes</i>")
    dialog.get_by_role("button", name="Save").click()
    expect(dialog).to_be_hidden()
    expect(link).to_have_text("Trip <i>notes</i>")
    expect(title).to_have_text("Trip <i>notes</i>")

    assert page.evaluate("window.__pwned") is None

    # Export as Markdown and as JSON: files that parse.
    with page.expect_download() as download:
        _open_menu(page, conversation).get_by_role("menuitem", name="Export as Markdown").click()
    markdown = Path(download.value.path()).read_text()
    assert markdown.startswith("# Trip") and f"The {word} lives in the **hills**." in markdown
    with page.expect_download() as download:
        _open_menu(page, conversation).get_by_role("menuitem", name="Export as JSON").click()
    exported = json.loads(Path(download.value.path()).read_text())
    assert json.dumps(exported).count(word) >= 1
    assert overflowing(page) == []

    # Delete (current conversation): confirmed in a dialog, gone from the list and the database.
    _open_menu(page, conversation).get_by_role("menuitem", name="Delete").click()
    confirm = page.locator("#delete-dialog")
    expect(confirm).to_contain_text("Trip <i>notes</i>")
    confirm.get_by_role("button", name="Delete").click()
    page.wait_for_url(lambda url: f"/c/{conversation}/" not in url)
    open_drawer(page)
    expect(page.locator(f".conv-item[data-id='{conversation}']")).to_have_count(0)
    assert site.conversation(conversation) is None


@pytest.mark.parametrize("width", WIDTHS)
def test_deleting_another_conversation_keeps_the_page(open_page: Any, site: Site, width: int) -> None:
    from playwright.sync_api import expect

    page = open_page(width)
    landing(page, site)
    site.llm.script(Text("first"), Text("second"))
    first = start_conversation(page, "the first one")
    expect(page.locator(".message.role-assistant")).to_contain_text("first")
    landing(page, site)
    second = start_conversation(page, "the second one")
    expect(page.locator(".message.role-assistant")).to_contain_text("second")
    _open_menu(page, first).get_by_role("menuitem", name="Delete").click()
    page.locator("#delete-dialog").get_by_role("button", name="Delete").click()
    expect(page.locator(f".conv-item[data-id='{first}']")).to_have_count(0)
    assert page.url.endswith(f"/c/{second}/")
    expect(page.locator(".message.role-user")).to_contain_text("the second one")


@pytest.mark.parametrize("width", WIDTHS)
def test_search_results_fit_the_sidebar(open_page: Any, site: Site, width: int) -> None:
    from playwright.sync_api import expect

    word = f"quokkaquest{width}"
    title = "Itinerary" + "-and-more" * 30  # no space to break at: 280 characters
    site.db(
        "from django.contrib.auth import get_user_model\n"
        "from boocode.chat.models import Conversation, Message\n"
        "owner = get_user_model().objects.get(username='admin')\n"
        f"conversation = Conversation.objects.create(owner=owner, title={title!r})\n"
        f"Message.objects.create(conversation=conversation, role='user', content='{word} ' + 'x y' * 200)\n"
    )
    page = open_page(width)
    landing(page, site)
    open_drawer(page)
    page.fill("#search-input", word)
    result = page.locator("#search-results a.search-result").first
    expect(result).to_be_visible()
    sidebar = page.locator("#sidebar").bounding_box()
    for part in (result, *(result.locator(f".search-result-{name}") for name in ("title", "snippet"))):
        box = part.bounding_box()
        right = sidebar["x"] + sidebar["width"] + 0.5
        assert box["x"] >= sidebar["x"] and box["x"] + box["width"] <= right, box
    # The long title is cut with an ellipsis, the snippet wraps.
    assert result.locator(".search-result-title").evaluate("node => node.scrollWidth > node.clientWidth")
    assert overflowing(page) == []
    screenshot(page, "search-results")


def test_console_commands_only_are_listed_by_the_first_command(open_page: Any, site: Site) -> None:
    """Not one more "New conversation": the first command names it, in the list and the top bar,
    until the person's first message does."""
    from playwright.sync_api import expect

    page = open_page(1280)
    landing(page, site)
    conversation = start_conversation(page, "/tools")
    expect(page.locator(".message.role-notice").last).to_contain_text("may use")
    link = page.locator(f".conv-item[data-id='{conversation}'] .conv-link")
    expect(page.locator("#conversation-title")).to_have_text("/tools")
    expect(link).to_have_text("/tools")
    page.reload()  # stored
    expect(link).to_have_text("/tools")
    site.llm.script(Text("Here."))
    send(page, "Which tool reads files?")
    expect(page.locator(".message.role-assistant").last).to_contain_text("Here.")
    expect(link).to_have_text("Which tool reads files?")
    expect(page.locator("#conversation-title")).to_have_text("Which tool reads files?")

"""The composer's "/" menu and MCP prompts, in Chromium at 375 and 1280 px.

This module runs its own Daphne (``site`` is overridden here): the toolbox with its prompts
group as server ``box``, so the other browser tests keep their tool counts. Typing "/" opens the
menu (console commands and prompts, filtered as one types, keyboard driven); a prompt with
arguments asks for them (a completion suggestion is chosen) and its text is put into the box,
where the person edits and sends it; a prompt with the assistant's turns in it is shown, then
goes in as it is; the scripted model's requests hold what was sent.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.browser import (
    AXE,
    WIDTHS,
    Site,
    landing,
    overflowing,
    running_site,
    screenshot,
    serious_violations,
)
from tests.support.llm import Text
from tests.support.processes import PYTHON, TOOLBOX

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    """A Daphne of this module's own, with the prompts server ``box``."""
    servers = {"box": {"command": PYTHON, "args": [str(TOOLBOX), "--feature", "prompts"]}}
    agents = "## Assistant\n---\ndescription: Test assistant\n---\nYou are a test assistant.\n"
    yield from running_site(tmp_path_factory.mktemp("browser-prompts"), servers, agents)


def _options(page: Any) -> Any:
    return page.locator(".slash-menu [role=option]")


@pytest.mark.parametrize("width", WIDTHS)
def test_the_slash_menu_filters_and_a_prompt_is_inserted_for_the_person_to_send(
    open_page: Any, site: Site, width: int
) -> None:
    from playwright.sync_api import expect

    page = open_page(width)
    landing(page, site)
    box = page.locator("#message-input")
    box.press_sequentially("/")

    # Commands and prompts, the server named, each with its description.
    menu = page.locator(".slash-menu")
    expect(menu).to_be_visible()
    expect(_options(page).first).to_contain_text("/tools")
    expect(_options(page)).to_have_count(8)
    expect(menu).to_contain_text("Code review (code_review)")
    expect(menu).to_contain_text("from box")
    expect(menu).to_contain_text("Review a piece of code.")
    expect(box).to_have_attribute("aria-activedescendant", _options(page).first.get_attribute("id"))

    # Arrows move, Escape closes; a command is put into the box as if typed.
    box.press("ArrowDown")
    expect(_options(page).nth(1)).to_have_attribute("aria-selected", "true")
    box.press("Escape")
    expect(menu).to_be_hidden()
    box.press_sequentially("c")
    expect(_options(page)).to_have_count(3)  # /call, /compact and Code review
    box.press("Enter")
    expect(box).to_have_value("/call ")
    expect(menu).to_be_hidden()

    # Filtered down to one prompt; Enter opens its form.
    box.fill("")
    box.press_sequentially("/revi")
    expect(_options(page)).to_have_count(1)
    screenshot(page, "slash-menu")
    assert overflowing(page) == []
    if AXE.exists():
        assert serious_violations(page) == []
    box.press("Enter")
    form = page.locator(".prompt-form")
    expect(form).to_be_visible()
    expect(form).to_contain_text("from box")
    language = form.get_by_role("textbox", name="language (required)")
    expect(language).to_be_focused()
    expect(language).to_have_attribute("aria-required", "true")
    expect(form.get_by_role("textbox", name="focus (optional)")).not_to_have_attribute(
        "aria-required", "true"
    )

    # Required arguments are asked for before anything is sent.
    form.get_by_role("button", name="Insert prompt").click()
    expect(form.locator(".prompt-form-error")).to_have_text("Fill in language, code.")

    # Suggestions come from the server's completion/complete as one types; one is chosen.
    language.press_sequentially("p")
    suggestions = form.locator(".prompt-suggestions [role=option]")
    expect(suggestions).to_have_count(4)  # python, pascal, perl, php
    language.press_sequentially("y")
    expect(suggestions).to_have_count(1)
    screenshot(page, "prompt-form")
    assert overflowing(page) == []
    if AXE.exists():
        assert serious_violations(page) == []
    suggestions.first.click()
    expect(language).to_have_value("python")
    form.get_by_role("textbox", name="code (required)").fill("print(1)")
    asked = len(site.llm.requests)
    form.get_by_role("button", name="Insert prompt").click()

    # The prompt's text is in the box, the "/revi" typed to find it gone, and nothing is sent yet.
    expect(form).to_have_count(0)
    expect(box).to_have_value("Please review this python code:\nprint(1)")
    expect(box).to_be_focused()
    screenshot(page, "prompt-inserted")
    assert overflowing(page) == []
    expect(page.locator(".message")).to_have_count(0)
    assert len(site.llm.requests) == asked and page.locator("#chat[data-conversation]").count() == 0

    # The person adds to it and sends it as their own message.
    box.press("End")
    box.press_sequentially(" Keep it short.")
    site.llm.script(Text("Looks tidy."))
    box.press("Enter")
    expect(page.locator(".message.role-user")).to_have_text(
        __import__("re").compile("Please review this python code:\\s*print\\(1\\) Keep it short.")
    )
    expect(page.locator(".message.role-assistant").last).to_contain_text("Looks tidy.")
    expect(page.locator(".message.role-console")).to_have_count(0)  # the person's message, no prompt mark
    sent = next(r for r in reversed(site.llm.requests) if r["messages"][-1]["role"] == "user")
    assert sent["messages"][-1] == {
        "role": "user",
        "content": "Please review this python code:\nprint(1) Keep it short.",
    }


@pytest.mark.parametrize("width", WIDTHS)
def test_a_prompt_with_the_assistants_turns_is_shown_then_sent_as_it_is(
    open_page: Any, site: Site, width: int
) -> None:
    from playwright.sync_api import expect

    page = open_page(width)
    landing(page, site)
    box = page.locator("#message-input")
    box.press_sequentially("/brief")
    expect(_options(page)).to_have_count(1)
    _options(page).first.click()

    # It cannot be one message of the person's: its messages are shown, each with its role.
    form = page.locator(".prompt-form")
    expect(form.locator(".prompt-form-note").first).to_contain_text("has the assistant's turns in it")
    roles = form.locator(".prompt-preview-role")
    expect(roles).to_have_text(["You", "Assistant", "You", "You"])
    expect(form.locator(".prompt-preview-message").nth(1)).to_contain_text("Here are the launch notes")
    send = form.get_by_role("button", name="Send prompt")
    expect(send).to_be_focused()
    screenshot(page, "prompt-whole")
    assert overflowing(page) == []
    expect(page.locator(".message")).to_have_count(0)
    site.llm.script(Text("Thursday, with Ada."))
    send.click()

    expect(page.locator(".message.role-assistant").last).to_contain_text("Thursday, with Ada.")
    users = page.locator(".message.role-user")
    expect(users).to_have_count(3)
    expect(users.nth(1)).to_contain_text("toolbox://notes/brief.txt")
    expect(page.locator(".message.role-assistant").first).to_contain_text("Here are the launch notes")
    expect(box).to_have_value("")
    sent = next(r for r in reversed(site.llm.requests) if r["messages"][-1]["role"] == "user")
    roles = [m["role"] for m in sent["messages"] if m["role"] != "system"]
    assert roles == ["user", "assistant", "user", "user"]


def test_enter_sends_a_command_typed_in_full_while_the_menu_is_open(open_page: Any, site: Site) -> None:
    from playwright.sync_api import expect

    page = open_page(1280)
    landing(page, site)
    box = page.locator("#message-input")
    box.press_sequentially("/tools")
    expect(_options(page).first).to_have_attribute("aria-selected", "true")  # the menu is open
    box.press("Enter")
    expect(page.locator(".message.role-notice").last).to_contain_text("box_echo")
    expect(box).to_have_value("")
    expect(page.locator(".slash-menu")).to_be_hidden()

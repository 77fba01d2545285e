"""MCP servers' skills in the composer's "/" menu, attached to a message, in Chromium at 375 and 1280 px.

This module runs its own Daphne (``site`` is overridden here): the toolbox with its skills group
as server ``box`` (tests/servers/toolbox_skills.py). Typing "/" lists the skills beside the console
commands, each with its server and description (one that cannot be loaded says why); choosing one
puts a "skill" chip beside the composer; the message goes out with it, the scripted model receives
the skill's SKILL.md in the message, and the sent message's chip opens the skill in the viewer.
"""

from __future__ import annotations

import re
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
    """A Daphne of this module's own, with the skills server ``box``."""
    servers = {"box": {"command": PYTHON, "args": [str(TOOLBOX), "--feature", "skills"]}}
    agents = "## Assistant\n---\ndescription: Test assistant\n---\nYou are a test assistant.\n"
    yield from running_site(tmp_path_factory.mktemp("browser-skills"), servers, agents)


def _options(page: Any) -> Any:
    return page.locator(".slash-menu [role=option]")


@pytest.mark.parametrize("width", WIDTHS)
def test_a_skill_is_chosen_in_the_slash_menu_and_sent_with_the_message(
    open_page: Any, site: Site, width: int
) -> None:
    from playwright.sync_api import expect

    page = open_page(width)
    landing(page, site)
    box = page.locator("#message-input")
    box.press_sequentially("/")

    # The skills, after the commands: each with its server and what it is for.
    menu = page.locator(".slash-menu")
    expect(menu.locator(".slash-group")).to_have_text(["Console commands", "Skills"])
    expect(_options(page)).to_have_count(8)  # four commands, four skills
    skill = _options(page).nth(4)
    expect(skill.locator(".slash-option-label")).to_have_text("pdf-forms")
    expect(skill.locator(".slash-option-note")).to_have_text("from box")
    expect(skill.locator(".slash-option-detail")).to_have_text(
        "Fill in PDF forms with the toolbox, field by field."
    )
    expect(_options(page).nth(7)).to_contain_text("Cannot be loaded: its content is generated")
    # The arrows reach every option (the list scrolls to the highlighted one).
    for _ in range(7):
        box.press("ArrowDown")
    expect(_options(page).nth(7)).to_have_attribute("aria-selected", "true")
    expect(_options(page).nth(7)).to_be_in_viewport()
    screenshot(page, "slash-skills")
    assert overflowing(page) == []

    # Filtered as one types; Enter attaches it: a chip, the "/…" gone from the box. (axe runs on
    # the short list: on a list that scrolls it flags the combobox pattern, where the focus stays
    # in the box and the arrows scroll the list, as a region the keyboard cannot reach.)
    box.press_sequentially("pdf")
    expect(_options(page)).to_have_count(1)
    if AXE.exists():
        assert serious_violations(page) == []
    box.press("Enter")
    expect(menu).to_be_hidden()
    expect(box).to_have_value("")
    chip = page.locator("#composer .attachment-chips .attachment-chip")
    expect(chip).to_have_count(1)
    expect(chip.locator(".chip-kind")).to_have_text("skill")
    expect(chip.locator(".resource-name")).to_have_text("pdf-forms")
    expect(chip.get_by_role("button", name="Remove skill pdf-forms")).to_be_visible()
    expect(box).to_be_focused()
    screenshot(page, "skill-attached")
    assert overflowing(page) == []

    # Sent with the message: the model reads the skill's SKILL.md in it, marked as box's.
    site.llm.script(Text("I will follow the form skill."))
    box.press_sequentially("Fill in my form, please.")
    box.press("Enter")
    expect(page.locator(".message.role-assistant").last).to_contain_text("I will follow the form skill.")
    expect(chip).to_have_count(0)
    sent = next(r for r in reversed(site.llm.requests) if r["messages"][-1]["role"] == "user")
    content = sent["messages"][-1]["content"]
    assert content.startswith('Fill in my form, please.\n\n<skill server="box" name="pdf-forms"')
    assert "# Filling PDF forms" in content
    attached = page.locator(".message.role-user .message-attachments .attachment-chip")
    expect(attached).to_have_count(1)
    expect(attached).to_contain_text(re.compile("skill\\s*pdf-forms"))
    screenshot(page, "skill-sent")
    assert overflowing(page) == []

    # Its chip opens the skill's SKILL.md (verified, rendered as Markdown; text only, no script).
    attached.click()
    viewer = page.locator("#resource-viewer")
    expect(viewer).to_be_visible()
    expect(viewer.locator("#resource-viewer-title")).to_have_text("Skill pdf-forms")
    expect(viewer.locator(".resource-where")).to_have_text("box · skill://pdf-forms/SKILL.md")
    expect(viewer.locator(".resource-markdown h1")).to_have_text("Filling PDF forms")
    screenshot(page, "skill-viewer")
    assert overflowing(page) == []
    if AXE.exists():
        assert serious_violations(page) == []
    viewer.get_by_role("button", name="Close").click()
    expect(viewer).to_be_hidden()


def test_a_skill_that_cannot_be_loaded_is_not_attached(open_page: Any, site: Site) -> None:
    from playwright.sync_api import expect

    page = open_page(1280)
    landing(page, site)
    box = page.locator("#message-input")
    box.press_sequentially("/daily")
    expect(_options(page)).to_have_count(1)
    box.press("Enter")
    said = 'The skill daily-report of box cannot be loaded: its content is generated ("resources": "dynamic")'
    expect(page.locator("#chat-error")).to_contain_text(said)
    expect(page.locator("#composer .attachment-chip")).to_have_count(0)
    expect(box).to_have_value("/daily")  # left as typed

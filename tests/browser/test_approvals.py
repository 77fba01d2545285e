"""Approval cards: a write tool's call waits in its card until the person decides; the card folds
to one line once decided, before the result, in the order things happened.

The site's mcp.json gets the toolbox's write group with ``writeTools: "approve"``
(server ``notes``, for the whole module; the file is put back afterwards, and the running
server follows the file before each turn). The server appends every write to a log file that
each test starts empty, so each test sees whether its call reached the server.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.browser import (
    WIDTHS,
    Site,
    landing,
    overflowing,
    screenshot,
    send,
    serious_violations,
    start_conversation,
)
from tests.support.llm import Call, Text, ToolCalls
from tests.support.processes import PYTHON, TOOLBOX

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def notes_server(site: Site) -> Iterator[Path]:
    """The site with a ``notes`` server (write tools behind approval) for this module's tests.

    One entry for the whole module: an entry that changes between tests would restart the
    server each time. The file its writes go to is emptied by :func:`writes_log` per test.
    """
    log = site.data / "notes-writes.jsonl"
    entry = {
        "command": PYTHON,
        "args": [str(TOOLBOX), "--feature", "writes"],
        "env": {"TOOLBOX_WRITES_LOG": str(log)},
        "writeTools": "approve",
    }
    with site.with_servers({"notes": entry}):
        yield log


@pytest.fixture
def writes_log(notes_server: Path) -> Path:
    """The log of the notes server's writes, empty at the start of the test."""
    notes_server.write_text("")
    return notes_server


def writes(log: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def pending_card(page: Any) -> Any:
    return page.get_by_role("region", name="Approve this tool call?")


@pytest.mark.parametrize("width", WIDTHS)
def test_approved_with_the_keyboard(open_page: Any, site: Site, width: int, writes_log: Path) -> None:
    from playwright.sync_api import expect

    page = open_page(width)
    landing(page, site)
    arguments = {"key": "plan", "text": '<img src=x onerror="window.__pwned=1">'}
    site.llm.script(ToolCalls([Call("notes_write_note", arguments)]), Text("Stored."))
    start_conversation(page, "write it down")

    card = pending_card(page)
    expect(card).to_be_visible()
    # In the tool call's card, saying what would run, with the server's hints as badges; the
    # card's badge says what the call waits for.
    expect(page.locator(".tool-card > .approval")).to_have_count(1)
    expect(page.locator(".tool-card .tool-status")).to_have_text("waiting for your approval")
    expect(card.locator(".approval-server")).to_have_text("notes")
    expect(card.locator(".approval-name")).to_have_text("write_note")
    expect(card.locator(".approval-title")).to_have_text("(Write a note)")
    expect(card.locator(".hint")).to_have_text(
        ["writes", "not destructive", "idempotent: safe to repeat", "closed world"]
    )
    expect(card.locator(".hint.warning")).to_have_count(0)
    args = card.locator(".approval-args")
    assert json.loads(args.text_content()) == arguments  # pretty JSON, as text
    assert page.evaluate("window.__pwned") is None
    assert writes(writes_log) == []
    assert overflowing(page) == []
    assert serious_violations(page) == []
    screenshot(page, "approval-pending")

    card.get_by_role("button", name="Approve", exact=True).focus()
    page.keyboard.press("Enter")
    decided = page.locator(".approval.decided")
    expect(decided.locator(".approval-outcome")).to_have_text("Approved: the call ran.")
    expect(decided.locator(".approval-buttons")).to_have_count(0)
    expect(page.locator(".tool-card").first).to_contain_text("stored note 'plan'")
    expect(page.locator(".message.role-assistant").last).to_contain_text("Stored.")
    assert [w["key"] for w in writes(writes_log)] == ["plan"]
    # Folded to one line, above the result it came before; what was asked opens from it.
    line = decided.bounding_box()
    assert line is not None and line["height"] < 48, line
    assert _order(page.locator(".tool-card").first) == ["tool-head", "tool-args", "approval", "tool-result"]
    expect(decided.locator(".approval-args")).to_be_hidden()
    decided.locator(".approval-line").click()
    expect(decided.locator(".approval-args")).to_be_visible()
    expect(page.locator(".tool-card .tool-status")).to_have_text("done")
    assert overflowing(page) == []
    screenshot(page, "approval-approved")


@pytest.mark.parametrize("width", WIDTHS)
def test_denied(open_page: Any, site: Site, width: int, writes_log: Path) -> None:
    from playwright.sync_api import expect

    page = open_page(width, scheme="dark")
    landing(page, site)
    site.llm.script(ToolCalls([Call("notes_delete_notes", {})]), Text("Left alone."))
    start_conversation(page, "clean up")

    card = pending_card(page)
    warning = card.locator(".hint.warning")
    expect(warning).to_have_text(["destructive"])
    # The warning colour, not the plain badge's.
    plain = page.evaluate("getComputedStyle(document.documentElement).getPropertyValue('--warn').trim()")
    assert warning.evaluate("node => getComputedStyle(node).color") == _rgb(plain)
    card.get_by_role("button", name="Deny").click()
    outcome = page.locator(".approval.decided .approval-outcome")
    expect(outcome).to_have_text("Denied: the tool was not called.")
    expect(page.locator(".tool-card").first).to_contain_text("the person denied this call")
    expect(page.locator(".message.role-assistant").last).to_contain_text("Left alone.")
    assert writes(writes_log) == []
    assert "the person denied this call" in json.dumps(site.llm.requests[-1]["messages"])
    assert serious_violations(page) == []  # the decided card, in the dark theme
    screenshot(page, "approval-denied")


@pytest.mark.parametrize("width", WIDTHS)
def test_remembered_tool_runs_without_a_card_the_second_time(
    open_page: Any, site: Site, width: int, writes_log: Path
) -> None:
    from playwright.sync_api import expect

    page = open_page(width)
    landing(page, site)
    site.llm.script(
        ToolCalls([Call("notes_write_note", {"key": "one", "text": "1"})]),
        Text("First."),
        ToolCalls([Call("notes_write_note", {"key": "two", "text": "2"})]),
        Text("Second."),
    )
    start_conversation(page, "write one")
    pending_card(page).get_by_role("button", name="Allow this tool for this conversation").click()
    expect(page.locator(".approval-outcome")).to_have_text(
        "Approved, and allowed for the rest of this conversation."
    )
    expect(page.locator(".message.role-assistant").last).to_contain_text("First.")

    send(page, "write two")
    expect(page.locator(".message.role-assistant").last).to_contain_text("Second.")
    expect(page.locator(".tool-card").last).to_contain_text("stored note 'two'")
    expect(page.locator(".approval")).to_have_count(1)  # only the first call's card
    assert [w["key"] for w in writes(writes_log)] == ["one", "two"]


@pytest.mark.parametrize("width", WIDTHS)
def test_left_pending_across_a_reload(open_page: Any, site: Site, width: int, writes_log: Path) -> None:
    from playwright.sync_api import expect

    page = open_page(width)
    landing(page, site)
    site.llm.script(ToolCalls([Call("notes_write_note", {"key": "later", "text": "x"})]), Text("Later."))
    start_conversation(page, "write later")
    expect(pending_card(page)).to_be_visible()

    page.reload()
    card = pending_card(page)
    expect(card).to_be_visible()  # from the history frame: the call is still waiting
    expect(card.locator(".approval-args")).to_contain_text('"later"')
    expect(page.locator(".tool-card").first).to_have_class(re.compile(r"\bstatus-running\b"))
    assert writes(writes_log) == []
    card.get_by_role("button", name="Approve", exact=True).click()
    expect(page.locator(".approval-outcome")).to_have_text("Approved: the call ran.")
    expect(page.locator(".message.role-assistant").last).to_contain_text("Later.")
    assert [w["key"] for w in writes(writes_log)] == ["later"]


@pytest.mark.parametrize("width", WIDTHS)
def test_an_approval_then_a_form_then_the_result_in_that_order(
    open_page: Any, site: Site, width: int
) -> None:
    from playwright.sync_api import expect

    entry = {"command": PYTHON, "args": [str(TOOLBOX), "--feature", "questions"], "trusted": False}
    with site.with_servers({"ask": entry}):
        page = open_page(width)
        landing(page, site)
        site.llm.script(ToolCalls([Call("ask_ask_form", {})]), Text("Noted."))
        start_conversation(page, "ask me, carefully")
        card = page.locator(".tool-card").first
        status = card.locator(".tool-status")
        expect(status).to_have_text("waiting for your approval")
        pending_card(page).get_by_role("button", name="Approve", exact=True).click()

        form = card.locator("form.elicitation")
        expect(form).to_be_visible()  # the server asks once the call runs: after the approval
        expect(status).to_have_text("waiting for your answer")
        assert _order(card) == ["tool-head", "tool-args", "approval", "elicitation"]
        form.get_by_role("button", name="Decline").click()
        expect(card.locator(".elicitation-done")).to_have_text("You declined.")
        expect(page.locator(".message.role-assistant").last).to_contain_text("Noted.")
        assert _order(card) == ["tool-head", "tool-args", "approval", "elicitation-done", "tool-result"]
        assert overflowing(page) == []
        screenshot(page, "approval-then-form")


def _order(card: Any) -> list[str]:
    """The kinds of the card's parts, top to bottom (a progress bar or resource links left out)."""
    kinds = ("tool-head", "tool-args", "approval", "elicitation-done", "elicitation", "tool-result")
    script = "(card, kinds) => [...card.children].map(c => kinds.find(k => c.classList.contains(k)))"
    return [kind for kind in card.evaluate(script, list(kinds)) if kind]


def _rgb(hex_colour: str) -> str:
    """``#815300`` as the ``rgb(129, 83, 0)`` getComputedStyle reports."""
    value = hex_colour.lstrip("#")
    red, green, blue = (int(value[index : index + 2], 16) for index in (0, 2, 4))
    return f"rgb({red}, {green}, {blue})"

"""A tool call's progress on its card: the bar moves with each step the server reports, shows
the server's message, is indeterminate without a total, and goes when the result arrives.

The site's mcp.json gets a toolbox with the progress tools for the test (server ``progress``;
the file is put back afterwards, and the running server follows the file before each turn).
The tool reports step N only once the test creates the file ``go-N``, so each value is seen.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.browser import WIDTHS, Site, landing, overflowing, screenshot, start_conversation
from tests.support.llm import Call, Text, ToolCalls
from tests.support.processes import PYTHON, TOOLBOX

pytestmark = pytest.mark.browser


@pytest.fixture
def progress_server(site: Site) -> Iterator[None]:
    """The site with a ``progress`` server (the toolbox's progress tools) for this test only."""
    with site.with_servers(
        {"progress": {"command": PYTHON, "args": [str(TOOLBOX), "--feature", "progress"]}}
    ):
        yield


def _card(page: Any, title: str) -> Any:
    return page.locator(".tool-card", has=page.locator(".tool-name", has_text=title)).last


@pytest.mark.parametrize("width", WIDTHS)
def test_the_bar_moves_with_each_step_and_ends_with_the_result(
    open_page: Any, site: Site, width: int, progress_server: None, tmp_path: Path
) -> None:
    from playwright.sync_api import expect

    known, unknown = tmp_path / "known", tmp_path / "unknown"
    known.mkdir()
    unknown.mkdir()
    page = open_page(width)
    landing(page, site)
    site.llm.script(
        ToolCalls(
            [
                Call(
                    "progress_count_steps",
                    {"steps": 3, "message": "Copying <b>files</b>", "gate": str(known)},
                )
            ]
        ),
        ToolCalls([Call("progress_count_steps", {"steps": 2, "with_total": False, "gate": str(unknown)})]),
        Text("Counted."),
    )
    start_conversation(page, "count for me")

    card = page.locator(".tool-card").first
    expect(card).to_have_class(re.compile(r"\bstatus-running\b"))
    bar = card.locator(".tool-progress progress")
    text = card.locator(".tool-progress-text")
    expect(bar).to_have_count(0)  # nothing reported yet

    observed = []
    for step in (1, 2):
        (known / f"go-{step}").touch()
        expect(bar).to_have_attribute("value", str(step))
        expect(bar).to_have_attribute("max", "3")
        observed.append(bar.get_attribute("value"))
    assert observed == ["1", "2"]  # the bar moved
    # The server's message as text (its markup is not interpreted), with the numbers.
    expect(text).to_have_text("Copying <b>files</b> 2 of 3 · 2 / 3 (67%)")
    assert card.locator(".tool-progress b").count() == 0
    expect(bar).to_have_accessible_name(re.compile("Progress of count_steps"))
    assert overflowing(page) == []
    screenshot(page, "tool-progress")

    (known / "go-3").touch()
    expect(card).to_have_class(re.compile(r"\bstatus-done\b"))
    expect(card.locator(".tool-progress")).to_have_count(0)  # ended with the result
    expect(card.locator(".tool-output")).to_have_text("counted 3 steps")

    # Without a total: an indeterminate bar, the step count as text.
    second = page.locator(".tool-card").nth(1)
    expect(second).to_have_class(re.compile(r"\bstatus-running\b"))
    (unknown / "go-1").touch()
    expect(second.locator(".tool-progress-text")).to_have_text("step 1 of 2 · 1")
    second_bar = second.locator(".tool-progress progress")
    assert second_bar.get_attribute("value") is None and second_bar.get_attribute("max") is None
    assert second_bar.evaluate("bar => bar.position") == -1  # indeterminate

    # A page opened mid-call shows the latest progress at once (the history frame).
    page.reload()
    second = page.locator(".tool-card").nth(1)
    expect(second.locator(".tool-progress-text")).to_have_text("step 1 of 2 · 1")
    (unknown / "go-2").touch()
    expect(page.locator(".message.role-assistant").last).to_contain_text("Counted.")
    expect(page.locator(".tool-progress")).to_have_count(0)

"""A form nobody answers, at phone and laptop width: it expires and the server hears "decline".

Its own Daphne (``questions_site`` of tests/support/browser.py) with ``BOOCODE_ELICITATION_TIMEOUT`` of 3 s.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.browser import WIDTHS, Site, ask, questions_site, tool_output

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    yield from questions_site(tmp_path_factory.mktemp("questions-timeout"), elicitation_timeout=3)


@pytest.mark.parametrize("width", WIDTHS)
def test_an_unanswered_form_expires(open_page: Any, site: Site, width: int) -> None:
    from playwright.sync_api import expect

    page = open_page(width)
    ask(page, site, "q26_ask_form", "No answer, then.")
    expect(page.locator("form.elicitation")).to_be_visible()
    expect(page.locator(".elicitation-done").last).to_have_text("No answer in time: declined.")
    expect(page.locator("form.elicitation")).to_have_count(0)
    expect(page.locator(".message.role-assistant").last).to_contain_text("No answer, then.")
    assert tool_output(site) == "decline"

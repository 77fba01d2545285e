"""Answers as people read them: the server's highlighted Markdown (code, tables, lists, links
that open safely in a new tab) while they stream and once they end, without a jump between the
two, a copy button on every code block and on every message that puts the text on the clipboard.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from tests.support.browser import (
    WIDTHS,
    XSS,
    Site,
    landing,
    overflowing,
    screenshot,
    start_conversation,
)
from tests.support.llm import Stall, Text

pytestmark = pytest.mark.browser

CODE = 'def greet(name):\n    return f"hello {name}"'
ANSWER = (
    "Here is **Python**:\n\n```python\n" + CODE + "\n```\n\n"
    "| tool | calls |\n|---|---|\n| echo | 2 |\n| add | 1 |\n\n"
    "- first\n- second\n\n1. one\n2. two\n\n"
    "See [the docs](https://example.com/docs) or [this](javascript:alert(1)).\n\n"
    f"Inline markup stays text: {XSS}"
)


@pytest.mark.parametrize("width", WIDTHS)
def test_markdown_code_and_copy(open_page: Any, site: Site, width: int) -> None:
    from playwright.sync_api import expect

    page = open_page(width, permissions=["clipboard-read", "clipboard-write"])
    landing(page, site)
    # Formatted while it streams (the fence not closed yet is an open code block).
    site.llm.script(Stall(text=ANSWER[:30], seconds=60, after=ANSWER[30:]))
    start_conversation(page, "show me code")
    streaming = page.locator(".message.status-streaming .message-body")
    expect(streaming.locator("strong")).to_have_text("Python")
    expect(streaming.locator(".code-block .code-lang")).to_have_text("python")
    screenshot(page, "markdown-open-fence")
    assert page.locator("#messages").get_attribute("aria-live") == "polite"
    site.llm.release_stalled()

    answer = page.locator(".message.role-assistant").last
    expect(answer).to_have_class(re.compile(r"\bstatus-complete\b"))  # (code shows while it streams)
    expect(answer.locator(".code-block pre code")).to_contain_text("def greet(name):")
    assert (
        answer.locator(".code-block [class^='tok-'], .code-block [class*=' tok-']").count() > 0
    )  # highlighted
    expect(answer.locator(".code-lang")).to_have_text("python")
    expect(answer.locator("table tbody tr")).to_have_count(2)
    expect(answer.locator("ul li")).to_have_count(2)
    expect(answer.locator("ol li")).to_have_count(2)
    link = answer.locator("a", has_text="the docs")
    expect(link).to_have_attribute("target", "_blank")
    expect(link).to_have_attribute("rel", re.compile(r"\bnoopener\b"))
    assert answer.locator("a[href^='javascript']").count() == 0
    expect(answer).to_contain_text("Inline markup stays text: <img src=x")
    assert page.evaluate("window.__pwned") is None

    # Copy the code block, then the whole message.
    answer.get_by_role("button", name="Copy").first.click()
    expect(answer.locator(".copy-code .copy-label")).to_have_text("Copied")
    assert page.evaluate("navigator.clipboard.readText()") == CODE
    answer.hover()
    answer.get_by_role("button", name="Copy message").click()
    clipboard = page.evaluate("navigator.clipboard.readText()")
    assert clipboard == ANSWER

    # The user's message has a copy button too.
    user = page.locator(".message.role-user").last
    user.hover()
    user.get_by_role("button", name="Copy message").click()
    expect(page.locator("#announcer")).to_have_text("Copied")
    assert page.evaluate("navigator.clipboard.readText()") == "show me code"
    screenshot(page, "markdown")
    assert overflowing(page) == []


@pytest.mark.parametrize("width", WIDTHS)
def test_stored_messages_come_highlighted(open_page: Any, site: Site, width: int) -> None:
    from playwright.sync_api import expect

    page = open_page(width)
    landing(page, site)
    site.llm.script(Text("```js\nconst x = 1;\n```", chunk_size=6))
    start_conversation(page, "js please")
    expect(page.locator(".message.role-assistant .code-lang")).to_have_text("javascript")
    page.reload()
    code = page.locator(".message.role-assistant .code-block code")
    expect(code).to_have_text("const x = 1;")
    assert page.locator(".message.role-assistant .code-block [class*='tok-']").count() > 0


STREAMED = (
    "## Plan\n\nThe **first** step, then the second.\n\n"
    "| tool | calls |\n|---|---|\n| echo | 2 |\n| add | 1 |\n\n"
    "- one\n- two\n\nDone with **everything**."
)


@pytest.mark.parametrize("width", WIDTHS)
def test_markdown_is_formatted_while_it_streams_and_stays_put_when_it_ends(
    open_page: Any, site: Site, width: int
) -> None:
    from playwright.sync_api import expect

    page = open_page(width)
    landing(page, site)
    site.llm.script(Stall(text=STREAMED, seconds=60))  # the whole answer, then the model waits
    start_conversation(page, "make a plan")
    body = page.locator(".message.role-assistant.status-streaming .message-body")
    expect(body.locator("h2")).to_have_text("Plan")
    expect(body.locator("p strong").first).to_have_text("first")
    expect(body.locator("table tbody tr")).to_have_count(2)
    expect(body.locator("ul li")).to_have_count(2)
    expect(body.locator("p strong", has_text="everything")).to_be_visible()  # rendered to its end
    assert "**" not in body.inner_text() and "|---|" not in body.inner_text()
    screenshot(page, "markdown-streaming")  # (once transitions have ended)
    before = body.bounding_box()
    assert before is not None
    body.locator("h2").evaluate("node => { node.kept = true; }")

    site.llm.release_stalled()
    done = page.locator(".message.role-assistant.status-complete .message-body")
    expect(done.locator("h2")).to_have_text("Plan")
    screenshot(page, "markdown-streamed")
    # The final HTML is what was shown: the same nodes, the same height.
    assert done.locator("h2").evaluate("node => node.kept === true")
    after = done.bounding_box()
    assert after is not None and abs(after["height"] - before["height"]) < 0.5, (before, after)
    assert overflowing(page) == []

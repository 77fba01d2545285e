"""The model picker (the endpoint's models, saved per conversation) and token usage per answer
and per conversation, with a plain note where the endpoint sent none; a turn of several model
steps reads as one answer with its usage added up.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.browser import WIDTHS, Site, landing, overflowing, screenshot, send, start_conversation
from tests.support.llm import Call, Text, ToolCalls

pytestmark = pytest.mark.browser


@pytest.mark.parametrize("width", WIDTHS)
def test_model_picker_and_usage(open_page: Any, site: Site, width: int) -> None:
    from playwright.sync_api import expect

    page = open_page(width)
    landing(page, site)
    picker = page.locator("#model-select")
    expect(picker.locator("option")).to_have_text(["Default (test-model)", "test-model", "other-model"])

    # Chosen on the landing: the conversation is created with it, and the first answer uses it.
    picker.select_option("other-model")
    site.llm.script(Text("Counted answer.", usage=(12, 30)), Text("Uncounted answer."))
    conversation = start_conversation(page, "Which model?")
    answer = page.locator(".message.role-assistant").last
    expect(answer).to_contain_text("Counted answer.")
    assert site.llm.requests[-1]["model"] == "other-model"
    expect(answer.locator(".model-name")).to_have_text("· other-model")
    saved = site.conversation(conversation)["model"]
    assert saved == "other-model"

    # Usage of that answer, and of the conversation.
    expect(answer.locator(".usage")).to_have_text("12 in · 30 out")
    usage = page.locator("#conversation-usage")
    expect(usage).to_have_text("tokens: 42 (12 in, 30 out)")

    # Back to the default model: the next answer uses it; the endpoint sends no usage for it.
    with page.expect_response(
        lambda response: response.url.endswith(f"/c/{conversation}/model/")
    ) as saved_model:
        picker.select_option("")
    assert saved_model.value.json() == {"id": conversation, "model": ""}
    send(page, "And now?")
    last = page.locator(".message.role-assistant").last
    expect(last).to_contain_text("Uncounted answer.")
    assert site.llm.requests[-1]["model"] == "test-model"
    expect(last.locator(".usage")).to_have_text("no usage reported")
    expect(usage).to_have_text("tokens: 42 (12 in, 30 out) · 1 answer without usage")
    screenshot(page, "usage")

    # After a reload: the saved choice and the totals come from the server.
    page.reload()
    expect(page.locator("#model-select")).to_have_value("")
    expect(page.locator("#conversation-usage")).to_have_text(
        "tokens: 42 (12 in, 30 out) · 1 answer without usage"
    )
    expect(page.locator(".message.role-assistant .usage").first).to_have_text("12 in · 30 out")


@pytest.mark.parametrize("width", WIDTHS)
def test_a_turn_of_several_steps_reads_as_one_answer(open_page: Any, site: Site, width: int) -> None:
    from playwright.sync_api import expect

    page = open_page(width)
    landing(page, site)
    site.llm.script(
        ToolCalls([Call("toolbox_echo", {"text": "first"})], text="Looking.", usage=(10, 5)),
        ToolCalls([Call("toolbox_echo", {"text": "second"})], usage=(20, 6)),
        Text("Both echoed.", usage=(30, 7)),
    )
    start_conversation(page, "echo twice")
    steps = page.locator(".message.role-assistant")
    expect(steps.last).to_contain_text("Both echoed.")
    expect(steps).to_have_count(3)  # one stored message per model step...
    # ...read as one answer: one header, the steps in order, one footer with the turn's usage.
    expect(page.locator(".message.role-assistant > .message-header:visible")).to_have_count(1)
    expect(page.locator(".message.role-assistant > .message-footer:visible")).to_have_count(1)
    expect(steps.last.locator(".usage")).to_have_text("60 in · 18 out")
    expect(steps.last.get_by_role("button", name="Regenerate this answer")).to_be_visible()
    order = page.evaluate(
        "[...document.querySelectorAll('.role-assistant .message-body, .role-assistant .tool-card')]"
        ".map(n => n.classList.contains('tool-card') ? 'card' : n.textContent.trim()).filter(Boolean)"
    )
    assert order == ["Looking.", "card", "card", "Both echoed."], order
    assert overflowing(page) == []
    screenshot(page, "one-answer")

    # A reload shows the same: the grouping is the page's reading of the stored steps.
    page.reload()
    expect(page.locator(".message.role-assistant > .message-header:visible")).to_have_count(1)
    expect(page.locator(".message.role-assistant").last.locator(".usage")).to_have_text("60 in · 18 out")

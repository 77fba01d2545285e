"""The model picker (the endpoint's models, saved per conversation) and token usage per answer
and per conversation, with a plain note where the endpoint sent none.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.browser import WIDTHS, Site, landing, screenshot, send, start_conversation
from tests.support.llm import Text

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

"""A person whose daily token budget is spent: the page shows why under their message, which is
kept, and the model is not asked."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.browser import (
    AXE,
    PASSWORD,
    WIDTHS,
    Site,
    landing,
    overflowing,
    screenshot,
    serious_violations,
    start_conversation,
)
from tests.support.llm import Text

pytestmark = pytest.mark.browser

BUDGETED = """
from django.contrib.auth import get_user_model
from django.utils import timezone
from boocode.chat.ledger.daily_usage import day_of
from boocode.chat.models import DailyUsage, TokenBudget
user = get_user_model().objects.create_user({name!r}, password={password!r})
TokenBudget.objects.create(user=user, tokens_per_day=50000)
DailyUsage.objects.create(user=user, day=day_of(timezone.now()), prompt_tokens=12000, completion_tokens=300)
"""

SPENT = """
from django.contrib.auth import get_user_model
from django.utils import timezone
from boocode.chat.ledger.daily_usage import day_of
from boocode.chat.models import DailyUsage, TokenBudget
user = get_user_model().objects.create_user({name!r}, password={password!r})
TokenBudget.objects.create(user=user, tokens_per_day=20000)
DailyUsage.objects.create(user=user, day=day_of(timezone.now()), prompt_tokens=19000, completion_tokens=1250)
"""


@pytest.mark.parametrize("width", WIDTHS)
def test_a_spent_budget_is_said_under_the_message_and_nothing_is_lost(
    open_page: Any, site: Site, width: int
) -> None:
    from playwright.sync_api import expect

    name = f"spender{width}"
    site.db(SPENT.format(name=name, password=PASSWORD))
    page = open_page(width, user=name)
    landing(page, site)
    asked = len(site.llm.requests)
    start_conversation(page, "Can I still ask something today?")

    answer = page.locator(".message.role-assistant").last
    expect(answer.locator(".message-error")).to_contain_text(
        "Your daily token budget is spent: 20,250 of 20,000 tokens used today (your own budget)."
    )
    expect(answer.locator(".message-error")).to_contain_text("It resets at midnight UTC")
    expect(page.locator(".message.role-user")).to_contain_text(["Can I still ask something today?"])
    expect(page.locator("#message-input")).to_have_value("")  # kept in the conversation, not put back
    expect(page.locator("#send-button")).to_be_visible()  # the turn is over
    assert len(site.llm.requests) == asked  # the model was not asked
    assert overflowing(page) == []
    screenshot(page, "budget-spent")

    page.reload()  # stored: the message and why it got no answer
    expect(page.locator(".message.role-user")).to_contain_text(["Can I still ask something today?"])
    refusal = page.locator(".message.role-assistant .message-error")
    expect(refusal).to_contain_text("Your daily token budget is spent")


@pytest.mark.parametrize("width", WIDTHS)
def test_the_usage_page_filters_by_days_under_the_content_security_policy(
    open_page: Any, site: Site, width: int
) -> None:
    from playwright.sync_api import expect

    site.db(
        "import datetime as dt\n"
        "from django.contrib.auth import get_user_model\n"
        "from boocode.chat.models import DailyUsage\n"
        f"user, _ = get_user_model().objects.get_or_create(username='reporter{width}')\n"
        "for day, tokens in (('2026-03-01', 111), ('2026-03-02', 222), ('2026-04-01', 333)):\n"
        "    DailyUsage.objects.create(user=user, day=dt.date.fromisoformat(day), prompt_tokens=tokens)\n"
    )
    page = open_page(width)  # the admin
    refused: list[str] = []
    page.on("console", lambda m: refused.append(m.text) if "Content Security Policy" in m.text else None)
    response = page.goto(f"{site.url}/admin/chat/dailyusage/?q=reporter{width}")
    assert 'style="' not in response.text()
    rows = page.locator("#result_list tbody tr")
    expect(rows).to_have_count(3)
    filters = page.locator(".day-range-filter")  # beside the list, or under it at phone width
    filters.locator("input[type=date]").first.fill("2026-03-01")
    filters.locator("input[type=date]").last.fill("2026-03-31")
    filters.get_by_role("button", name="Show these days").click()
    expect(rows).to_have_count(2)
    assert "q=reporter" in page.url  # the search rode along
    expect(page.locator("#result_list")).to_contain_text("222")
    expect(page.locator("#result_list")).not_to_contain_text("333")
    screenshot(page, "admin-usage")
    assert refused == []


@pytest.mark.parametrize("width", WIDTHS)
def test_a_person_sees_their_budget_use_where_they_see_usage_and_only_with_a_budget(
    open_page: Any, site: Site, width: int
) -> None:
    from playwright.sync_api import expect

    name = f"budgeted{width}"
    site.db(BUDGETED.format(name=name, password=PASSWORD))
    page = open_page(width, user=name)
    landing(page, site)
    site.llm.script(Text("Counted.", usage=(1200, 345)))
    start_conversation(page, "How much have I used?")
    expect(page.locator(".message.role-assistant")).to_contain_text("Counted.")
    usage, budget = page.locator("#conversation-usage"), page.locator("#budget-use")
    expect(usage).to_have_text("tokens: 1.5k (1.2k in, 345 out)")
    expect(budget).to_have_text("13,845 of 50,000 tokens today")  # 12,300 before, 1,545 now
    expect(budget).not_to_have_class("near")
    if width < 800:  # the phone: under the summary, with the usage
        expect(budget).to_be_hidden()
        page.locator("#status-summary").click()
    expect(budget).to_be_visible()
    assert overflowing(page) == []
    if AXE.exists():
        assert serious_violations(page) == []
    screenshot(page, "budget-use")

    # Nearly spent: the warning colour, and the phone's summary names it.
    site.db(
        "from django.utils import timezone\n"
        "from boocode.chat.ledger.daily_usage import day_of\n"
        "from boocode.chat.models import DailyUsage\n"
        f"DailyUsage.objects.filter(user__username={name!r}, day=day_of(timezone.now()))"
        ".update(prompt_tokens=45000, completion_tokens=0)"
    )
    page.reload()
    expect(budget).to_have_text("45,000 of 50,000 tokens today")
    expect(budget).to_have_class("budget-use near")
    if width < 800:
        expect(page.locator("#status-summary")).to_contain_text("45k of 50k today")

    # Someone no budget applies to sees none.
    other = open_page(width)
    landing(other, site)
    site.llm.script(Text("Free.", usage=(5, 2)))
    start_conversation(other, "and me?")
    expect(other.locator("#conversation-usage")).to_have_text("tokens: 7 (5 in, 2 out)")
    expect(other.locator("#budget-use")).to_be_hidden()
    expect(other.locator("#budget-use")).to_have_text("")

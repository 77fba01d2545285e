"""Usage per person and day, and daily token budgets, through the real stack.

The ASGI application (Channels' communicator, logged-in sessions), the scripted model over real
HTTP and a native tool (no MCP server, so no process), the admin through Django's test client.
Usage rows are counted by the writes that store answers and calls; a budget that is spent ends
the turn before any request reaches the model, with what the person sent stored. "The next
day" is a stored row dated yesterday, not a clock moved. Every test here runs again on
PostgreSQL (``postgres``).
"""

from __future__ import annotations

import asyncio
import csv
import datetime as dt
import gc
import importlib
import io
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.apps import apps
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db.backends.base.base import BaseDatabaseWrapper
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from boocode.chat.ledger import audit, budgets, daily_usage
from boocode.chat.models import Conversation, DailyUsage, Message, TokenBudget, ToolCallAudit
from boocode.chat.turn import titles
from tests.support.accounts import join, login, stored
from tests.support.llm import Call, Error, ScriptedLLM, Stall, Text, ToolCalls
from tests.support.tabs import Tab, finished, logged_in_tab

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.postgres,
    pytest.mark.usefixtures("closing"),
]


@pytest.fixture(autouse=True)
def workspace(settings: Any, tmp_path: Path) -> None:
    """A workspace with one file, for the native tool the model calls."""
    settings.WORKSPACE = tmp_path
    (tmp_path / "notes.txt").write_text("hello")


@pytest.fixture
def closing() -> Iterator[None]:
    """After a test with turns, the database connections its ORM calls opened on other threads
    (kept for ``CONN_MAX_AGE``) are closed: open, they keep PostgreSQL from dropping the test
    database at the end of the run. Not SQLite's: nothing waits on them, and closing a sqlite3
    connection that a late read of another thread is using crashes the process."""
    yield
    for wrapper in gc.get_objects():
        if isinstance(wrapper, BaseDatabaseWrapper) and wrapper.connection is not None:
            if wrapper.vendor == "sqlite":
                continue
            wrapper.inc_thread_sharing()  # closed from this thread, idle on theirs
            try:
                wrapper.close()
            finally:
                wrapper.dec_thread_sharing()


def today() -> dt.date:
    return daily_usage.day_of(timezone.now())


@sync_to_async
def usage_of(username: str) -> dict[dt.date, tuple[int, int, int, int, int]]:
    """``{day: (prompt, completion, answers, answers without usage, tool calls)}`` of a person."""
    rows = DailyUsage.objects.filter(user__username=username).values_list(
        "day", "prompt_tokens", "completion_tokens", "answers", "answers_without_usage", "tool_calls"
    )
    return {day: tuple(counts) for day, *counts in rows}


@sync_to_async
def spent(username: str, tokens: int, day: dt.date | None = None) -> None:
    """What ``username`` spent on ``day`` (today) so far, as if their earlier answers had."""
    user = get_user_model().objects.get(username=username)
    counts = {"prompt_tokens": tokens - tokens // 4, "completion_tokens": tokens // 4}
    DailyUsage.objects.update_or_create(user=user, day=day or today(), defaults=counts)


@sync_to_async
def budget(tokens: int, *, user: str | None = None, group: str | None = None) -> None:
    if user is not None:
        TokenBudget.objects.create(user=get_user_model().objects.get(username=user), tokens_per_day=tokens)
    else:
        TokenBudget.objects.create(group=Group.objects.get(name=group), tokens_per_day=tokens)


async def refused(tab: Tab, frame: dict[str, Any]) -> str:
    """Send ``frame``; the turn ends failed with code ``budget_spent``: its error."""
    await tab.send(frame)
    end = await tab.until_turn_end()
    assert (end["status"], end["code"]) == ("failed", "budget_spent"), end
    return end["error"]


# --- usage per person and day -------------------------------------------------------------------
async def test_usage_of_two_people_is_counted_per_person_and_day(llm: ScriptedLLM) -> None:
    alice, bob = await logged_in_tab(), await logged_in_tab("bob")
    llm.script(
        ToolCalls([Call("list_dir", {"path": "."})], usage=(100, 7)),
        Text("One file.", usage=(120, 5)),
    )
    await alice.send({"type": "user_message", "text": "what is there?"})
    await finished(alice)
    llm.script(Text("Hi Bob.", usage=(50, 5)), Text("No numbers."))
    await bob.send({"type": "user_message", "text": "hi"})
    await finished(bob)
    await bob.send({"type": "user_message", "text": "again"})
    await finished(bob)
    await alice.send({"type": "user_message", "text": '/call list_dir {"path": "."}'})  # no model
    await alice.until_turn_end()
    await audit.drain()  # the calls' rows (and counts) are written in tasks of their own

    assert await usage_of("alice") == {today(): (220, 12, 2, 0, 2)}
    assert await usage_of("bob") == {today(): (50, 5, 2, 1, 0)}
    await alice.close()
    await bob.close()


def test_a_title_from_the_model_counts_its_tokens_but_is_no_answer(django_user_model: Any) -> None:
    owner = django_user_model.objects.create_user("carol")
    conversation = Conversation.objects.create(owner=owner)
    titles.record_title_usage(conversation.pk, (30, 4))
    titles.record_title_usage(conversation.pk, (None, 2))  # type: ignore[arg-type]  # a server's partial usage
    row = DailyUsage.objects.get(user=owner)
    assert (row.day, row.prompt_tokens, row.completion_tokens, row.answers) == (today(), 30, 6, 0)


def test_the_admin_lists_usage_filtered_by_person_and_days_and_exports_it(django_user_model: Any) -> None:
    alice = django_user_model.objects.create_user("alice")
    dash = django_user_model.objects.create_user("-dash")  # a valid user name a spreadsheet would run
    yesterday = today() - dt.timedelta(days=1)
    add = DailyUsage.objects.create
    add(user=alice, day=today(), prompt_tokens=220, completion_tokens=12, answers=2, tool_calls=2)
    add(user=alice, day=yesterday, prompt_tokens=1000, completion_tokens=1, answers=1)
    add(user=dash, day=today(), prompt_tokens=5, completion_tokens=5, answers=1)
    staff = Client(raise_request_exception=False)
    staff.force_login(django_user_model.objects.create_superuser("auditor", password="x"))
    changelist = reverse("admin:chat_dailyusage_changelist")

    page = staff.get(changelist)
    assert page.status_code == 200
    text = page.content.decode()
    assert "-dash" in text and "1001" in text and "232" in text  # totals: 1000 + 1, 220 + 12
    only_today = staff.get(changelist, {"day__gte": today().isoformat(), "user__id__exact": alice.pk})
    assert only_today.context["cl"].result_count == 1
    assert [row.total_tokens for row in only_today.context["cl"].result_list] == [232]
    assert staff.get(changelist, {"day__lte": yesterday.isoformat()}).context["cl"].result_count == 1
    bad = staff.get(changelist, {"day__gte": "2026-13-01"})
    assert bad.status_code == 302 and "e=1" in bad["Location"]  # the admin's "incorrect lookup" page
    change = staff.get(reverse("admin:chat_dailyusage_change", args=[DailyUsage.objects.first().pk]))
    assert b'name="_save"' not in change.content  # read-only

    selected = list(DailyUsage.objects.values_list("pk", flat=True))
    response = staff.post(changelist, {"action": "export_csv", "_selected_action": selected})
    assert response["Content-Type"].startswith("text/csv")
    assert response["Content-Disposition"].startswith('attachment; filename="usage-')
    parsed = list(csv.DictReader(io.StringIO(response.content.decode())))
    columns = ("day", "username", "prompt_tokens", "completion_tokens", "total_tokens", "tool_calls")
    assert [tuple(r[column] for column in columns) for r in parsed] == [
        (today().isoformat(), "'-dash", "5", "5", "10", "0"),
        (today().isoformat(), "alice", "220", "12", "232", "2"),
        (yesterday.isoformat(), "alice", "1000", "1", "1001", "0"),
    ]

    reader = Client(raise_request_exception=False)
    reader.force_login(django_user_model.objects.create_user("reader", is_staff=True))  # no permission
    assert reader.get(changelist).status_code == 403


# --- budgets ----------------------------------------------------------------------------------------
async def test_a_persons_own_budget_refuses_the_turn_before_the_model_and_keeps_the_message(
    llm: ScriptedLLM,
) -> None:
    tab = await logged_in_tab()
    await budget(1000, user="alice")
    await spent("alice", 1000)
    error = await refused(tab, {"type": "user_message", "text": "Is there a limit?"})

    assert llm.requests == []  # nothing reached the model
    assert "Your daily token budget is spent: 1,000 of 1,000 tokens used today (your own budget)" in error
    assert "resets at midnight UTC" in error
    assert await stored(tab.history["conversation"]) == [
        ("user", "complete", "Is there a limit?"),
        ("assistant", "failed", ""),
    ]
    echoed = [f["message"] for f in tab.frames if f["type"] == "message"]
    assert [m["role"] for m in echoed] == ["user", "assistant"]
    assert echoed[1]["error"] == error  # the page shows it under the message it answers
    await tab.close()


async def test_the_answer_that_passes_the_budget_ends_and_the_next_turn_is_refused(llm: ScriptedLLM) -> None:
    tab = await logged_in_tab()
    await budget(100, user="alice")
    llm.script(Text("A long answer.", usage=(80, 30)))
    await tab.send({"type": "user_message", "text": "first"})
    await finished(tab)  # it started under the budget: it runs to its end
    error = await refused(tab, {"type": "user_message", "text": "second"})
    assert "110 of 100 tokens" in error and len(llm.requests) == 1
    await tab.close()


@sync_to_async
def held(username: str) -> int:
    """The tokens ``username``'s model requests in flight hold today."""
    row = DailyUsage.objects.filter(user__username=username, day=today()).first()
    return row.reserved_tokens if row is not None else 0


async def test_ten_turns_started_at_once_stop_at_the_budget(llm: ScriptedLLM) -> None:
    """1,100 tokens left and ten turns at once: one request goes out (it may take the day past the
    budget by what it spends), the nine others are refused before the model is asked, each
    with its message kept and a sentence saying why."""
    await login("alice")
    tabs = [await logged_in_tab() for _ in range(10)]
    await budget(51_600, user="alice")
    await spent("alice", 50_500)
    answer = (9_000, 90)  # one request's worth: 9,090 tokens
    llm.script(*(Stall("Part", seconds=20, after=" of the answer.", usage=answer) for _ in range(10)))
    ends = [asyncio.ensure_future(tab.until_turn_end()) for tab in tabs]
    await asyncio.gather(
        *(tab.send({"type": "user_message", "text": f"question {n}"}) for n, tab in enumerate(tabs))
    )
    async with asyncio.timeout(60):
        while sum(end.done() for end in ends) < 9:  # the refusals need no answer from the model
            await asyncio.wait([end for end in ends if not end.done()], return_when=asyncio.FIRST_COMPLETED)
    await llm.until(lambda server: len(server.requests) >= 1, within=30)  # the one let through
    assert len(llm.requests) == 1  # the others never reached the model
    llm.release()
    async with asyncio.timeout(60):
        finals = await asyncio.gather(*ends)
    statuses = sorted((end["status"], end["code"]) for end in finals)
    assert statuses == [("complete", None)] + [("failed", "budget_spent")] * 9
    for end in finals:
        if end["status"] == "failed":
            assert "token budget is nearly spent: 50,500 of 51,600 tokens used today" in end["error"]
            assert "your answers being written now hold" in end["error"]
    usage = (await usage_of("alice"))[today()]
    assert usage[0] + usage[1] == 50_500 + sum(answer) <= 51_600 + sum(answer)
    assert await held("alice") == 0  # the hold went back with the answer's usage
    for n, tab in enumerate(tabs):
        assert ("user", "complete", f"question {n}") in await stored(tab.history["conversation"])
        await tab.close()


async def test_a_turn_makes_no_request_past_the_budget_after_a_tool_step(llm: ScriptedLLM) -> None:
    tab = await logged_in_tab()
    await budget(100, user="alice")
    llm.script(ToolCalls([Call("list_dir", {"path": "."})], usage=(80, 30)), Text("Never asked."))
    await tab.send({"type": "user_message", "text": "look around"})
    end = await tab.until_turn_end()
    assert (end["status"], end["code"]) == ("failed", "budget_spent"), end
    assert "110 of 100 tokens used today (your own budget)" in end["error"]
    assert len(llm.requests) == 1
    assert [row[:2] for row in await stored(tab.history["conversation"])] == [
        ("user", "complete"),
        ("assistant", "complete"),  # the first answer, with its tool call
        ("assistant", "failed"),  # the refusal, where the next answer would have been
    ]
    assert await held("alice") == 0
    await tab.close()


async def test_a_failed_request_gives_its_hold_back(llm: ScriptedLLM) -> None:
    tab = await logged_in_tab()
    await budget(100_000, user="alice")
    llm.script(Error(400, "bad request"))
    await tab.send({"type": "user_message", "text": "hello"})
    assert (await tab.until_turn_end())["status"] == "failed"
    assert await held("alice") == 0
    llm.script(Text("Fine.", usage=(10, 2)))
    await tab.send({"type": "user_message", "text": "again"})
    await finished(tab)
    assert await held("alice") == 0
    await tab.close()


def test_a_hold_nobody_released_stops_counting(django_user_model: Any) -> None:
    user = django_user_model.objects.create_user("dora")
    standing = budgets.Standing(user.pk, 0, 10_000, "own")
    now = timezone.now().replace(hour=12, minute=0)  # "later" below is the same day (UTC) whenever this runs
    assert budgets.reserve(standing, 8_000, now) is None  # nothing in flight: it may go out
    refused = budgets.reserve(standing, 8_000, now)  # does not fit beside the first
    assert refused is not None and (refused.spent, refused.reserved) == (0, 8_000)
    assert budgets.reserve(standing, 2_000, now) is None  # fits beside it
    # A process died with its requests in flight: the holds stop counting after a while.
    later = now + dt.timedelta(seconds=budgets.RESERVATION_SECONDS + 1)
    assert budgets.reserve(standing, 8_000, later) is None
    budgets.release(user.pk, 8_000, later)
    assert DailyUsage.objects.get(user=user).reserved_tokens == 0


async def test_the_largest_group_budget_applies_and_names_its_group(llm: ScriptedLLM) -> None:
    tab = await logged_in_tab()
    await join("alice", "interns", "writers")
    await budget(500, group="interns")
    await budget(2000, group="writers")
    await spent("alice", 600)  # over the interns' budget, under the writers'
    llm.script(Text("Fine.", usage=(1400, 0)))
    await tab.send({"type": "user_message", "text": "one"})
    await finished(tab)
    error = await refused(tab, {"type": "user_message", "text": "two"})
    assert '2,000 of 2,000 tokens used today (the budget of the group "writers")' in error
    assert len(llm.requests) == 1

    # The person's own row comes first: 0 exempts them from their groups' budgets.
    await budget(0, user="alice")
    llm.script(Text("No limit for you."))
    await tab.send({"type": "user_message", "text": "three"})
    await finished(tab)
    await tab.close()


async def test_the_setting_is_everyones_budget(llm: ScriptedLLM, settings: Any) -> None:
    settings.DAILY_TOKEN_BUDGET = 50
    tab = await logged_in_tab("bob")
    await spent("bob", 50)
    error = await refused(tab, {"type": "user_message", "text": "hello"})
    assert "50 of 50 tokens used today (the budget everyone has, BOOCODE_DAILY_TOKEN_BUDGET)" in error
    assert llm.requests == []
    # A group's 0 is no limit, and so the largest of the groups' budgets.
    await join("bob", "unlimited")
    await budget(0, group="unlimited")
    llm.script(Text("Welcome back."))
    await tab.send({"type": "user_message", "text": "hello again"})
    await finished(tab)
    await tab.close()


async def test_yesterdays_usage_leaves_today_fresh(llm: ScriptedLLM) -> None:
    tab = await logged_in_tab()
    await budget(100, user="alice")
    await spent("alice", 5000, day=today() - dt.timedelta(days=1))
    llm.script(Text("A new day.", usage=(10, 2)))
    await tab.send({"type": "user_message", "text": "good morning"})
    await finished(tab)
    assert len(llm.requests) == 1
    usage = await usage_of("alice")
    assert usage[today()] == (10, 2, 1, 0, 0) and len(usage) == 2
    await tab.close()


async def test_regenerate_edit_and_console_when_the_budget_is_spent(llm: ScriptedLLM) -> None:
    tab = await logged_in_tab()
    await budget(100, user="alice")
    llm.script(Text("The first answer.", usage=(90, 20)))
    await tab.send({"type": "user_message", "text": "question"})
    await finished(tab)
    conversation = tab.history["conversation"]
    question = await Message.objects.filter(conversation_id=conversation, role="user").afirst()
    assert question is not None

    # Regenerate: refused before anything is superseded; the answer stays on the page.
    await refused(tab, {"type": "regenerate"})
    assert not [f for f in tab.frames if f["type"] == "superseded"]
    assert await stored(conversation) == [
        ("user", "complete", "question"),
        ("assistant", "complete", "The first answer."),
        ("assistant", "failed", ""),  # the refusal, under the answer it did not replace
    ]
    superseded = Message.objects.filter(conversation_id=conversation, superseded_at__isnull=False)
    assert not await superseded.aexists()

    # Edit: the new text is what the person typed: stored, then refused.
    await refused(tab, {"type": "edit", "message_id": question.pk, "text": "a better question"})
    assert ("user", "complete", "a better question") in await stored(conversation)

    # The tool console uses no model: it runs, and its call counts as the person's.
    tab.frames.clear()
    await tab.send({"type": "user_message", "text": '/call list_dir {"path": "."}'})
    end = await tab.until_turn_end()
    assert (end["status"], end["code"]) == ("complete", None)
    assert len(llm.requests) == 1
    await audit.drain()
    assert (await usage_of("alice"))[today()][4] == 1
    await tab.close()


def test_the_budget_rule_reads_own_then_largest_group_then_setting(
    django_user_model: Any, settings: Any
) -> None:
    settings.DAILY_TOKEN_BUDGET = 300
    user = django_user_model.objects.create_user("dora")
    conversation = Conversation.objects.create(owner=user, agent_name="Writer", model="big-model")

    def standing() -> budgets.Standing:
        agent, model, found = budgets.conversation_standing(conversation.pk)
        assert (agent, model) == ("Writer", "big-model")
        return found

    assert (standing().budget, standing().source, standing().spent) == (300, "setting", 0)
    small, large = Group.objects.create(name="small"), Group.objects.create(name="large")
    user.groups.add(small, large)
    TokenBudget.objects.create(group=small, tokens_per_day=100)
    TokenBudget.objects.create(group=large, tokens_per_day=1000)
    assert (standing().budget, standing().source) == (1000, "group")
    TokenBudget.objects.create(user=user, tokens_per_day=50)
    assert (standing().budget, standing().source) == (50, "own")
    daily_usage.record(user.pk, prompt_tokens=30, completion_tokens=20)
    assert standing().exhausted and standing().spent == 50
    with pytest.raises(Conversation.DoesNotExist):
        budgets.conversation_standing(conversation.pk + 1000)


def test_a_budget_is_for_a_person_or_a_group_once(django_user_model: Any) -> None:
    staff = Client(raise_request_exception=False)
    staff.force_login(django_user_model.objects.create_superuser("auditor", password="x"))
    alice = django_user_model.objects.create_user("alice")
    group = Group.objects.create(name="team")
    add = reverse("admin:chat_tokenbudget_add")
    both = staff.post(add, {"user": alice.pk, "group": group.pk, "tokens_per_day": 10})
    assert "Choose a person or a group (one of them)." in both.content.decode()
    neither = staff.post(add, {"tokens_per_day": 10})
    assert "Choose a person or a group (one of them)." in neither.content.decode()
    assert staff.post(add, {"user": alice.pk, "tokens_per_day": 10}).status_code == 302
    again = staff.post(add, {"user": alice.pk, "tokens_per_day": 20})
    assert "This person has a budget already" in again.content.decode()
    listing = staff.get(reverse("admin:chat_tokenbudget_changelist")).content.decode()
    assert "person: alice" in listing and "BOOCODE_DAILY_TOKEN_BUDGET (no budget)" in listing


def test_the_refusal_says_when_the_budget_resets() -> None:
    standing = budgets.Standing(1, 1200, 1000, "group", "interns")
    now = dt.datetime(2026, 5, 1, 21, 30, 15, tzinfo=dt.UTC)
    text = budgets.refusal(standing, now)
    assert '1,200 of 1,000 tokens used today (the budget of the group "interns")' in text
    assert "It resets at midnight UTC (2026-05-02 00:00 UTC, in 2 h 30 min)" in text


def test_usage_stored_before_is_counted_by_the_migration(django_user_model: Any) -> None:
    """The migration's backfill: the answers' tokens by the day each began, and the audit's calls."""
    owner = django_user_model.objects.create_user("erin")
    conversation = Conversation.objects.create(owner=owner)
    Message.objects.create(conversation=conversation, role="user", content="q")
    Message.objects.create(conversation=conversation, role="assistant", prompt_tokens=7, completion_tokens=3)
    Message.objects.create(conversation=conversation, role="assistant")  # no usage reported
    Message.objects.create(conversation=conversation, role="assistant", status="failed")
    audit_row = {"origin": "model", "server": "native", "tool": "t", "name": "t", "user": owner}
    ToolCallAudit.objects.create(outcome="ok", **audit_row)
    ToolCallAudit.objects.create(outcome="refused", **audit_row)
    DailyUsage.objects.all().delete()
    migration = importlib.import_module("boocode.chat.migrations.0007_usage_per_person_and_budgets")
    migration.backfill(apps, None)
    row = DailyUsage.objects.get(user=owner)
    assert (row.day, row.prompt_tokens, row.completion_tokens, row.answers, row.answers_without_usage) == (
        today(),
        7,
        3,
        2,
        1,
    )
    assert row.tool_calls == 1

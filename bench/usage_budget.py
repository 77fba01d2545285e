"""Usage per person and day, and the daily budget check: what they cost beside 100,000 messages.

Fills a fresh database (SQLite in a temporary data folder, or ``--database-url`` PostgreSQL,
dropped and created afresh) with ``--people`` people, each with conversations holding
``--messages`` assistant messages in all (with usage) spread over ``--days`` days, and their
rows of usage per day (built by the migration's backfill, as an upgraded database has them).
Then prints, as median and p95 microseconds over ``--reads`` calls:

  choices     the turn's read of its conversation as it was (conversations.conversation_choices)
  standing    the same read with the owner's tokens today and budget rows (budgets.conversation_standing):
              what the budget check adds to a turn is standing minus choices
  on the fly  the alternative not taken: the owner's tokens today summed over their messages
  answer      the turn's final write of an answer (conversations.finish_message), without
              and with counting it in its owner's row (``counted_for``): what counting adds

and, timed ``--pages`` times each, the admin's first page of usage per person and day read
from the table beside the same page grouped from the messages (TruncDate, GROUP BY).

    .venv/bin/python bench/usage_budget.py [--people 200] [--messages 100000] [--days 90]
        [--reads 2000] [--pages 20] [--database-url postgres://postgres@127.0.0.1:5432/boocode_usage]

This is a benchmark, not a test: it prints figures and asserts nothing about time.
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib
import os
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import django

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def options() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--people", type=int, default=200)
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--days", type=int, default=90)
    parser.add_argument("--reads", type=int, default=2000)
    parser.add_argument("--pages", type=int, default=20)
    parser.add_argument("--database-url", default="", help="PostgreSQL (dropped and created afresh)")
    return parser.parse_args()


def fresh_database(url: str) -> None:
    """Drop and create the PostgreSQL database of ``url`` (the bench's own)."""
    import psycopg
    from psycopg import sql

    base, name = url.rsplit("/", 1)
    with psycopg.connect(f"{base}/postgres", autocommit=True) as connection:
        connection.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))
        connection.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))


def timed(call: Callable[[], Any], times: int) -> tuple[float, float]:
    """Median and p95 of ``call``'s duration in microseconds."""
    spent = []
    for _ in range(times):
        started = time.perf_counter()
        call()
        spent.append((time.perf_counter() - started) * 1e6)
    spent.sort()
    return statistics.median(spent), spent[int(len(spent) * 0.95) - 1]


def fill(people: int, messages: int, days: int) -> list[tuple[int, int]]:
    """The people, their conversations and messages; ``(conversation, owner)`` of each conversation."""
    from django.apps import apps
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Group
    from django.db import transaction

    from boocode.chat.models import Conversation, Message, TokenBudget

    users = get_user_model().objects.bulk_create(
        [get_user_model()(username=f"person{n}") for n in range(people)]
    )
    groups = Group.objects.bulk_create([Group(name=f"team{n}") for n in range(10)])
    for n, user in enumerate(users):
        user.groups.add(groups[n % 10], groups[(n + 3) % 10])
    budgets = [TokenBudget(group=group, tokens_per_day=500_000) for group in groups[:5]]
    budgets += [TokenBudget(user=user, tokens_per_day=100_000) for user in users[::7]]
    TokenBudget.objects.bulk_create(budgets)
    conversations = Conversation.objects.bulk_create(
        [Conversation(owner=user) for user in users for _ in range(5)]
    )
    today = dt.datetime.now(dt.UTC).replace(hour=12, minute=0, second=0, microsecond=0)
    per_day = max(messages // days, 1)
    pick = random.Random(7)
    with transaction.atomic():
        for day in range(days):
            batch = [
                Message(
                    conversation=pick.choice(conversations),
                    role="assistant",
                    content="An answer of a few words.",
                    prompt_tokens=pick.randint(200, 4000),
                    completion_tokens=pick.randint(10, 400),
                )
                for _ in range(per_day)
            ]
            created = Message.objects.bulk_create(batch, batch_size=2000)
            Message.objects.filter(pk__in=[m.pk for m in created]).update(
                created_at=today - dt.timedelta(days=day)
            )
    migration = importlib.import_module("boocode.chat.migrations.0007_usage_per_person_and_budgets")
    migration.backfill(apps, None)
    return [(c.pk, c.owner_id) for c in conversations]


def main() -> None:
    args = options()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "boocode.settings")
    os.environ.setdefault("BOOCODE_DATA_DIR", tempfile.mkdtemp(prefix="boocode-bench-usage-"))
    os.environ["BOOCODE_MCP_AUTOSTART"] = "0"
    os.environ.pop("BOOCODE_DATABASE_URL", None)
    if args.database_url:
        fresh_database(args.database_url)
        os.environ["BOOCODE_DATABASE_URL"] = args.database_url
    django.setup()

    from django.core.management import call_command
    from django.db import connection
    from django.db.models import Count, F, Sum
    from django.db.models.functions import TruncDate

    from boocode.chat.ledger import budgets, daily_usage
    from boocode.chat.models import DailyUsage, Message
    from boocode.chat.turn import conversations

    call_command("migrate", verbosity=0)
    started = time.perf_counter()
    chats = fill(args.people, args.messages, args.days)
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE")  # as autovacuum would have by now: the plans of a live database
    print(
        f"{connection.vendor}: {Message.objects.count():,} messages, {DailyUsage.objects.count():,} rows of "
        f"usage per day, {args.people} people, filled in {time.perf_counter() - started:.1f} s"
    )
    pick = random.Random(11)
    midnight = dt.datetime.combine(daily_usage.day_of(dt.datetime.now(dt.UTC)), dt.time(), tzinfo=dt.UTC)

    def choices() -> None:
        conversations.conversation_choices(pick.choice(chats)[0])

    def standing() -> None:
        budgets.conversation_standing(pick.choice(chats)[0])

    def on_the_fly() -> None:
        owner = pick.choice(chats)[1]
        Message.objects.filter(conversation__owner_id=owner, created_at__gte=midnight).aggregate(
            prompt=Sum("prompt_tokens"), completion=Sum("completion_tokens")
        )

    for name, call in (("choices", choices), ("standing", standing), ("on the fly", on_the_fly)):
        timed(call, min(args.reads, 200))  # warm the caches
        p50, p95 = timed(call, args.reads)
        print(f"  {name:<22} p50 {p50:8.1f} µs   p95 {p95:8.1f} µs")

    # The answer's write, without and with counting it: alternate calls on fresh streaming messages.
    answers: dict[bool, list[float]] = {False: [], True: []}
    for n in range(args.reads):
        conversation, owner = pick.choice(chats)
        opened = conversations.add_message(conversation, "assistant", status="streaming", model="m")
        counted = bool(n % 2)
        began = time.perf_counter()
        conversations.finish_message(
            opened["id"],
            content="An answer.",
            status="complete",
            created_at=dt.datetime.fromisoformat(opened["created_at"]),
            conversation_id=conversation,
            model="m",
            usage=(1200, 80),
            counted_for=owner if counted else None,
        )
        answers[counted].append((time.perf_counter() - began) * 1e6)
    for counted, spent in answers.items():
        spent.sort()
        name = "answer, counted" if counted else "answer, not counted"
        p95 = spent[int(len(spent) * 0.95) - 1]
        print(f"  {name:<22} p50 {statistics.median(spent):8.1f} µs   p95 {p95:8.1f} µs")

    def page_from_table() -> None:
        total = F("prompt_tokens") + F("completion_tokens")
        rows = DailyUsage.objects.select_related("user").annotate(total=total)
        list(rows.order_by("-day", "user_id")[:100])
        rows.count()

    def page_from_messages() -> None:
        grouped = (
            Message.objects.filter(role="assistant")
            .annotate(on=TruncDate("created_at", tzinfo=dt.UTC))
            .values("conversation__owner_id", "on")
            .annotate(prompt=Sum("prompt_tokens"), completion=Sum("completion_tokens"), answers=Count("id"))
        )
        list(grouped.order_by("-on", "conversation__owner_id")[:100])
        grouped.count()

    for name, call in (("admin page, table", page_from_table), ("admin page, grouped", page_from_messages)):
        p50, p95 = timed(call, args.pages)
        print(f"  {name:<22} p50 {p50 / 1000:8.1f} ms   p95 {p95 / 1000:8.1f} ms")


if __name__ == "__main__":
    main()

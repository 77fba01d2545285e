"""Usage per person and day: tokens, model answers and tool calls, counted as they are stored.

One :class:`~boocode.chat.models.DailyUsage` row per (person, day). The day is the UTC date
(``TIME_ZONE`` is UTC): a day ends, and a daily budget resets, at midnight UTC. Each spending is
added in the write that stores it, so it costs no database hop of its own:

- a completed answer: its tokens and one answer, in the turn's final write of the message
  (:func:`boocode.chat.turn.conversations.finish_message`), on the day it completed;
- a title asked of the model (``BOOCODE_TITLE_FROM_MODEL``): its tokens, no answer
  (:func:`boocode.chat.turn.titles.record_title_usage`);
- a tool call that ran (the model's, ``/call``, a view's; not one refused at the approval gate):
  one call, with its audit row (:mod:`boocode.chat.ledger.audit`), on the day it began;
- the tokens a model request held while it was in flight (:func:`boocode.chat.ledger.budgets.reserve`)
  are released in the same write that counts its answer.

:func:`record` is one statement, ``INSERT ... ON CONFLICT (user_id, day) DO UPDATE SET n = n +
excluded.n`` (SQLite and PostgreSQL alike): the day's first write creates the row, every later
one adds to it in the database, so writers in several processes never lose one another's counts
and two first writes at once cannot both insert. Plain SQL: it runs in every answer's write, and
the ORM's update costs ten times the statement.

Why a table rather than a grouped query over the messages: the budget check before every model
request (:mod:`boocode.chat.ledger.budgets`) reads one row through its unique index however many
messages there are; the admin lists one row per person and day; and what was spent stays
counted when a conversation is deleted (its messages go with it) or the audit log is pruned.
"""

from __future__ import annotations

import datetime as dt
import functools
from collections.abc import Iterable
from typing import Any

from django.db import connection
from django.utils import timezone

from boocode.chat.ledger.spreadsheet import csv_text
from boocode.chat.models import DailyUsage

COUNTS = ("prompt_tokens", "completion_tokens", "answers", "answers_without_usage", "tool_calls")
EXPORT_FIELDS = (
    "day",
    "username",
    "prompt_tokens",
    "completion_tokens",
    "total_tokens",
    "answers",
    "answers_without_usage",
    "tool_calls",
)


def day_of(moment: dt.datetime) -> dt.date:
    """The UTC day of ``moment`` (an aware datetime)."""
    return moment.astimezone(dt.UTC).date()


def next_midnight(moment: dt.datetime) -> dt.datetime:
    """The midnight UTC after ``moment``: when the day's usage (and budget) starts again."""
    return dt.datetime.combine(day_of(moment) + dt.timedelta(days=1), dt.time(), tzinfo=dt.UTC)


@functools.cache
def _upsert() -> str:
    quote = connection.ops.quote_name
    table = quote(DailyUsage._meta.db_table)
    columns = ", ".join(quote(name) for name in COUNTS)
    added = ", ".join(f"{quote(name)} = {table}.{quote(name)} + excluded.{quote(name)}" for name in COUNTS)
    held = f"{table}.{quote('reserved_tokens')}"
    return (
        f"INSERT INTO {table} ({quote('user_id')}, {quote('day')}, {columns}, {quote('reserved_tokens')}) "
        f"VALUES (%s, %s, {', '.join('%s' for _ in COUNTS)}, 0) "
        f"ON CONFLICT ({quote('user_id')}, {quote('day')}) DO UPDATE SET {added}, "
        f"{quote('reserved_tokens')} = CASE WHEN {held} > %s THEN {held} - %s ELSE 0 END"
    )


def record(user_id: int, *, at: dt.datetime | None = None, released: int = 0, **counts: int) -> None:
    """Add ``counts`` (names of :data:`COUNTS`) to ``user_id``'s row of the day of ``at`` (now),
    and take ``released`` tokens off what its model requests in flight hold (never below 0;
    :func:`boocode.chat.ledger.budgets.reserve`).

    One statement, inside the caller's write (see the module's docstring).
    """
    unknown = set(counts) - set(COUNTS)
    if unknown:
        raise TypeError(f"unknown usage counts: {sorted(unknown)}")
    if not any(counts.values()) and not released:
        return
    day = connection.ops.adapt_datefield_value(day_of(at or timezone.now()))
    with connection.cursor() as cursor:
        added = [counts.get(name, 0) for name in COUNTS]
        cursor.execute(_upsert(), [user_id, day, *added, released, released])


def export_csv(rows: Iterable[DailyUsage]) -> str:
    """``rows`` (their ``user`` selected) as CSV with a header line (:data:`EXPORT_FIELDS`)."""
    return csv_text(EXPORT_FIELDS, (_values(row) for row in rows))


def _values(row: DailyUsage) -> list[Any]:
    return [
        row.day.isoformat(),
        row.user.get_username(),
        row.prompt_tokens,
        row.completion_tokens,
        row.total_tokens,
        row.answers,
        row.answers_without_usage,
        row.tool_calls,
    ]

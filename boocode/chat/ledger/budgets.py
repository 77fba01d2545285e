"""Daily token budgets: which one a person has, and the checks before the model is called.

Which budget applies (docs/teams.md, *Usage and budgets*): the person's own
:class:`~boocode.chat.models.TokenBudget` row; else the largest of their groups' rows; else
``BOOCODE_DAILY_TOKEN_BUDGET``. ``0`` means no limit wherever it is written, so a person's own
row of 0 exempts them from their groups' and the setting's budgets, and a group's 0 is the
largest of the groups' budgets.

Two checks. At a turn's start, :func:`conversation_standing` reads the conversation's choices
(agent and model) together with the owner's tokens of the day (UTC, :mod:`boocode.chat.ledger.daily_usage`)
and budget in one SQL statement, the turn's own read before the model request
(:mod:`boocode.chat.turn.loop`): a person whose budget is spent is refused there, at no query of its own
(a *Regenerate* reads it once more, before it supersedes anything). Then, when a budget applies,
before every model request (the first and each one after a tool step), :func:`reserve` holds the
request's estimate (the request as fitted to the window by :mod:`boocode.chat.llm.request_budget`, and
the room kept for its answer) on the person's usage row of the day, in one conditional statement, so
turns running at once in any process count one another. A request goes out when the day's tokens are
under the budget and either it fits beside what the requests in flight hold, or nothing else is in
flight: at most one request at a time may take the day past the budget, so the total passes it by at
most about one request's worth (ten turns started at once with 1,100 tokens left make one request,
not ten). The hold is released in the write that counts the answer's real usage
(:func:`boocode.chat.turn.conversations.finish_message`), or by :func:`release` when the request failed
or was stopped; a hold nobody released (a process that died mid-request) stops counting
:data:`RESERVATION_SECONDS` after the person's last hold. With no budget (0) nothing is held and the
check costs nothing. The tool console (``/call``, ``/tools``) never calls the model and is never
refused."""

from __future__ import annotations

import dataclasses
import datetime as dt
import functools
import json
from dataclasses import dataclass

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db import connection
from django.utils import timezone

from boocode.chat.ledger import daily_usage
from boocode.chat.ledger.daily_usage import COUNTS, day_of, next_midnight
from boocode.chat.models import Conversation, DailyUsage, TokenBudget
from mcpclient.models import PersonalServer

# A group's 0 (no limit) read as the largest budget there is, so that MAX() picks it.
UNLIMITED = 2**62
# A hold nobody released stops counting this long after the person's last hold.
RESERVATION_SECONDS = 600


class BudgetSpent(Exception):
    """The person's daily token budget is spent: the turn ends before the model is called."""


@dataclass(frozen=True)
class Standing:
    """A person's tokens of the day and the budget that applies to them."""

    user_id: int
    spent: int  # prompt + completion tokens of the day
    budget: int  # tokens a day; 0: no limit
    source: str  # "own", "group" or "setting"
    group: str = ""  # the group whose budget applies (read only when it is spent)
    reserved: int = 0  # tokens held by the person's model requests in flight (read by reserve())

    @property
    def exhausted(self) -> bool:
        """The budget is spent: no model request until the day ends."""
        return self.budget > 0 and self.spent >= self.budget


@functools.cache
def _statement() -> str:
    """The conversation's choices, its owner's tokens today and budget rows: one SELECT."""
    quote = connection.ops.quote_name
    user_model = get_user_model()
    groups_field = user_model._meta.get_field("groups")
    memberships = groups_field.remote_field.through._meta
    member = memberships.get_field(user_model._meta.model_name).column
    member_group = memberships.get_field("group").column
    conversation, usage, budget = (
        quote(model._meta.db_table) for model in (Conversation, DailyUsage, TokenBudget)
    )
    return (
        "SELECT c.agent_name, c.model, c.owner_id, "
        f"(SELECT u.prompt_tokens + u.completion_tokens FROM {usage} u "
        "WHERE u.user_id = c.owner_id AND u.day = %s), "
        f"(SELECT b.tokens_per_day FROM {budget} b WHERE b.user_id = c.owner_id), "
        f"(SELECT MAX(CASE WHEN b.tokens_per_day = 0 THEN {UNLIMITED} ELSE b.tokens_per_day END) "
        f"FROM {budget} b JOIN {quote(memberships.db_table)} m ON m.{quote(member_group)} = b.group_id "
        f"WHERE m.{quote(member)} = c.owner_id), "
        # The owner's groups and whether they have servers of their own (the turn's one read:
        # mcpclient.runtime.signin.remember_person), with no query of their own.
        f"(SELECT {_json_names('g.' + quote('name'))} FROM {quote(Group._meta.db_table)} g "
        f"JOIN {quote(memberships.db_table)} m ON m.{quote(member_group)} = g.id "
        f"WHERE m.{quote(member)} = c.owner_id), "
        f"EXISTS (SELECT 1 FROM {quote(PersonalServer._meta.db_table)} p "
        f"WHERE p.{quote(PersonalServer._meta.get_field('owner').column)} = c.owner_id) "
        f"FROM {conversation} c WHERE c.id = %s"
    )


def _json_names(column: str) -> str:
    """The SQL aggregating ``column`` into a JSON array (``NULL`` for no rows) on this database."""
    if connection.vendor == "postgresql":
        return f"json_agg({column})"
    return f"json_group_array({column})"  # SQLite (its JSON functions are built in)


@dataclass(frozen=True)
class Owner:
    """Of the turn's read: the conversation's owner's groups, and whether they have own servers."""

    groups: frozenset[str]
    own_servers: bool


def conversation_standing(conversation_id: int, now: dt.datetime | None = None) -> tuple[str, str, Standing]:
    """``(agent name, model, standing of the owner)``: :func:`conversation_read` without the owner."""
    agent_name, model, standing, _ = conversation_read(conversation_id, now)
    return agent_name, model, standing


def conversation_read(
    conversation_id: int, now: dt.datetime | None = None
) -> tuple[str, str, Standing, Owner]:
    """``(agent name, model, standing of the owner, the owner)``: the turn's read of its conversation.

    ``Conversation.DoesNotExist`` if it is gone. When the budget is a group's and it is spent,
    a second query names the group (only then).
    """
    day = day_of(now or timezone.now())
    with connection.cursor() as cursor:  # plain SQL: read before every model request
        cursor.execute(_statement(), [connection.ops.adapt_datefield_value(day), conversation_id])
        row = cursor.fetchone()
    if row is None:
        raise Conversation.DoesNotExist(f"conversation {conversation_id} does not exist")
    agent_name, model, owner, spent, own, groups, names, own_servers = row
    if isinstance(names, str):  # SQLite gives the JSON text; PostgreSQL's driver parses it
        names = json.loads(names)
    person = Owner(frozenset(name for name in names or () if name is not None), bool(own_servers))
    if own is not None:
        standing = Standing(owner, spent or 0, own, "own")
    elif groups is not None:
        standing = Standing(owner, spent or 0, 0 if groups >= UNLIMITED else groups, "group")
    else:
        standing = Standing(owner, spent or 0, int(settings.DAILY_TOKEN_BUDGET), "setting")
    if standing.exhausted and standing.source == "group":
        standing = dataclasses.replace(standing, group=_group_of(owner, standing.budget))
    return agent_name, model, standing, person


def _group_of(user_id: int, tokens: int) -> str:
    """The name of ``user_id``'s group whose budget is ``tokens`` (the first by name)."""
    budgets = TokenBudget.objects.filter(tokens_per_day=tokens).values("group_id")
    names = Group.objects.filter(user=user_id, id__in=budgets).order_by("name").values_list("name", flat=True)
    return names.first() or ""


@functools.cache
def _hold_statement() -> str:
    """Hold tokens on the person's row of the day when the rule allows (module docstring): one
    upsert whose update is conditional, atomic on SQLite and PostgreSQL alike."""
    quote = connection.ops.quote_name
    table = quote(DailyUsage._meta.db_table)
    spent = f"{table}.{quote('prompt_tokens')} + {table}.{quote('completion_tokens')}"
    until, tokens = f"{table}.{quote('reserved_until')}", f"{table}.{quote('reserved_tokens')}"
    held = f"(CASE WHEN {until} > %s THEN {tokens} ELSE 0 END)"
    counts = ", ".join(quote(name) for name in COUNTS)
    return (
        f"INSERT INTO {table} ({quote('user_id')}, {quote('day')}, {counts}, {quote('reserved_tokens')}, "
        f"{quote('reserved_until')}) VALUES (%s, %s, {', '.join('0' for _ in COUNTS)}, %s, %s) "
        f"ON CONFLICT ({quote('user_id')}, {quote('day')}) DO UPDATE SET "
        f"{quote('reserved_tokens')} = {held} + excluded.{quote('reserved_tokens')}, "
        f"{quote('reserved_until')} = excluded.{quote('reserved_until')} "
        f"WHERE {spent} < %s AND ({held} = 0 OR {spent} + {held} + excluded.{quote('reserved_tokens')} <= %s)"
    )


def reserve(standing: Standing, tokens: int, now: dt.datetime | None = None) -> Standing | None:
    """Hold ``tokens`` for a model request of ``standing``'s person, whose budget applies (> 0).

    ``None``: held, the request may go out (release it with the write that counts its usage, or
    :func:`release`). Otherwise the request may not go out now: the person's standing as it is
    (tokens of the day and those held by their requests in flight), for :func:`refusal`.
    """
    now = now or timezone.now()
    day = connection.ops.adapt_datefield_value(day_of(now))
    at = connection.ops.adapt_datetimefield_value(now)
    until = connection.ops.adapt_datetimefield_value(now + dt.timedelta(seconds=RESERVATION_SECONDS))
    budget = standing.budget
    with connection.cursor() as cursor:
        cursor.execute(_hold_statement(), [standing.user_id, day, tokens, until, at, budget, at, at, budget])
        if cursor.rowcount:
            return None
    row = (
        DailyUsage.objects.filter(user_id=standing.user_id, day=day_of(now))
        .values_list("prompt_tokens", "completion_tokens", "reserved_tokens", "reserved_until")
        .first()
    )
    prompt, completion, held, until_at = row or (0, 0, 0, None)
    live = held if until_at is not None and until_at > now else 0
    return dataclasses.replace(standing, spent=prompt + completion, reserved=live)


def release(user_id: int, tokens: int, now: dt.datetime | None = None) -> None:
    """Give back ``tokens`` held by a request that ended without its usage counted (failed, stopped)."""
    daily_usage.record(user_id, at=now, released=tokens)


def refusal(standing: Standing, now: dt.datetime | None = None) -> str:
    """What the person reads when the model is not asked: the budget is spent, or what is left of
    it is held by their requests in flight; which budget, and when it resets."""
    now = now or timezone.now()
    if standing.source == "own":
        whose = "your own budget"
    elif standing.source == "group":
        whose = f'the budget of the group "{standing.group}"' if standing.group else "your group's budget"
    else:
        whose = "the budget everyone has, BOOCODE_DAILY_TOKEN_BUDGET"
    reset = next_midnight(now)
    left = max(int((reset - now).total_seconds() + 59) // 60, 1)  # minutes, rounded up
    hours, minutes = divmod(left, 60)
    wait = f"{hours} h {minutes} min" if hours else f"{minutes} min"
    if standing.spent < standing.budget:
        return (
            f"Your daily token budget is nearly spent: {standing.spent:,} of {standing.budget:,} tokens "
            f"used today ({whose}), and your answers being written now hold {standing.reserved:,} more. "
            "The model was not asked; what you sent is kept, so regenerate the answer once they have "
            f"finished, if the budget has room left, or after it resets at midnight UTC "
            f"({reset:%Y-%m-%d %H:%M} UTC, in {wait})."
        )
    return (
        f"Your daily token budget is spent: {standing.spent:,} of {standing.budget:,} tokens used today "
        f"({whose}). It resets at midnight UTC ({reset:%Y-%m-%d %H:%M} UTC, in {wait}). The model was not "
        "asked; what you sent is kept, so regenerate the answer once the budget has reset."
    )

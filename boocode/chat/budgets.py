"""Daily token budgets: which one a person has, and the check before a turn calls the model.

Which budget applies (docs/teams.md, *Usage and budgets*): the person's own
:class:`~boocode.chat.models.TokenBudget` row; else the largest of their groups' rows; else
``BOOCODE_DAILY_TOKEN_BUDGET``. ``0`` means no limit wherever it is written, so a person's own
row of 0 exempts them from their groups' and the setting's budgets, and a group's 0 is the
largest of the groups' budgets.

The check: a turn that would call the model is refused when the person's tokens of the day
(UTC, :mod:`boocode.chat.daily_usage`) have reached their budget. The person is the
conversation's owner. :func:`conversation_standing` reads the conversation's choices (agent and
model) together with that standing in one SQL statement, which is the turn's own read before the
model request (:mod:`boocode.chat.turn`): the check adds no query of its own and no database hop
to a turn (a *Regenerate* reads it once more, before it supersedes anything). A turn that starts
under the budget runs to its end, so a day's total may pass the budget by what one turn spends.
The tool console (``/call``, ``/tools``) never calls the model and is never refused.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import functools
from dataclasses import dataclass

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db import connection
from django.utils import timezone

from boocode.chat.daily_usage import day_of, next_midnight
from boocode.chat.models import Conversation, DailyUsage, TokenBudget

# A group's 0 (no limit) read as the largest budget there is, so that MAX() picks it.
UNLIMITED = 2**62


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
        f"WHERE m.{quote(member)} = c.owner_id) "
        f"FROM {conversation} c WHERE c.id = %s"
    )


def conversation_standing(conversation_id: int, now: dt.datetime | None = None) -> tuple[str, str, Standing]:
    """``(agent name, model, standing of the owner)``: the turn's read of its conversation.

    ``Conversation.DoesNotExist`` if it is gone. When the budget is a group's and it is spent,
    a second query names the group (only then).
    """
    day = day_of(now or timezone.now())
    with connection.cursor() as cursor:  # plain SQL: read before every model request
        cursor.execute(_statement(), [connection.ops.adapt_datefield_value(day), conversation_id])
        row = cursor.fetchone()
    if row is None:
        raise Conversation.DoesNotExist(f"conversation {conversation_id} does not exist")
    agent_name, model, owner, spent, own, groups = row
    if own is not None:
        standing = Standing(owner, spent or 0, own, "own")
    elif groups is not None:
        standing = Standing(owner, spent or 0, 0 if groups >= UNLIMITED else groups, "group")
    else:
        standing = Standing(owner, spent or 0, int(settings.DAILY_TOKEN_BUDGET), "setting")
    if standing.exhausted and standing.source == "group":
        standing = dataclasses.replace(standing, group=_group_of(owner, standing.budget))
    return agent_name, model, standing


def _group_of(user_id: int, tokens: int) -> str:
    """The name of ``user_id``'s group whose budget is ``tokens`` (the first by name)."""
    budgets = TokenBudget.objects.filter(tokens_per_day=tokens).values("group_id")
    names = Group.objects.filter(user=user_id, id__in=budgets).order_by("name").values_list("name", flat=True)
    return names.first() or ""


def refusal(standing: Standing, now: dt.datetime | None = None) -> str:
    """What the person reads when their budget is spent: which budget, and when it resets."""
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
    return (
        f"Your daily token budget is spent: {standing.spent:,} of {standing.budget:,} tokens used today "
        f"({whose}). It resets at midnight UTC ({reset:%Y-%m-%d %H:%M} UTC, in {wait}). The model was not "
        "asked; what you sent is kept, so regenerate the answer once the budget has reset."
    )

"""The owner's daily budget as one turn uses it (:mod:`boocode.chat.ledger.budgets`).

Whose usage of the day the turn's answers count in (the conversation's owner), their budget when
one applies, and the tokens the model request in flight holds on it: :meth:`BudgetHold.reserve`
before each model request, given back with the write that counts the request's answer
(:meth:`BudgetHold.given_back`, for ``finish_message``) or by :meth:`BudgetHold.release` when the
turn ends without it (failed or stopped).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from functools import partial

from channels.db import database_sync_to_async
from django.db import DatabaseError

from boocode.chat.ledger import budgets

logger = logging.getLogger(__name__)

db = database_sync_to_async
# Reads on the loop's worker threads: they do not wait behind the writes on the database thread.
db_read = partial(database_sync_to_async, thread_sensitive=False)


class BudgetHold:
    """One turn's hold on its owner's budget (see the module docstring)."""

    def __init__(self) -> None:
        self.spender: int | None = None  # whose usage of the day the answers count in (the owner)
        self.standing: budgets.Standing | None = None  # the owner's budget, when one applies (> 0)
        self.held = 0  # tokens the model request in flight holds on the owner's budget (budgets.reserve)

    def start(self, standing: budgets.Standing) -> None:
        """The turn's read found the owner's ``standing``: their usage counts, their budget holds."""
        self.spender = standing.user_id
        self.standing = standing if standing.budget > 0 else None

    async def reserve(self, tokens: int) -> None:
        """Hold the next model request's ``tokens`` on the owner's budget, or raise ``BudgetSpent``;
        nothing when no budget applies.

        One statement, on the loop's worker threads: it does not queue behind the start being
        stored on the database thread, which the first request goes out beside.
        """
        if self.standing is None:
            return
        hold = asyncio.ensure_future(db_read(budgets.reserve)(self.standing, tokens))
        try:
            refused = await asyncio.shield(hold)
        except asyncio.CancelledError:  # stopped meanwhile: a hold made all the same is given back
            with contextlib.suppress(Exception):
                if await hold is None:
                    self.held = tokens
            raise
        if refused is not None:
            raise budgets.BudgetSpent(budgets.refusal(refused))
        self.held = tokens

    def given_back(self) -> int:
        """The tokens held, for the write that counts the answer and gives them back."""
        held, self.held = self.held, 0
        return held

    async def release(self) -> None:
        """Give back the hold of a request whose answer was not counted (the turn failed or stopped)."""
        held, self.held = self.held, 0
        if held and self.spender is not None:
            try:
                await db(budgets.release)(self.spender, held)
            except DatabaseError:  # the hold stops counting on its own (budgets.RESERVATION_SECONDS)
                logger.warning(
                    "could not release %s held tokens (user %s)", held, self.spender, exc_info=True
                )

"""What a server asks the person behind a tool call, and their answer: values and the asker's type.

A form is :class:`mcpclient.core.elicitation_form.Form`; a URL-mode request is a :class:`Link`.
The protocol's side (routing a request to the call it belongs to, the time off the clock, the
retry after a required link) is :mod:`mcpclient.engine.elicitation`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import urlsplit

from mcpclient.core.elicitation_form import MAX_TEXT, Form

Action = Literal["accept", "decline", "cancel"]


@dataclass(frozen=True)
class Answer:
    """What the person (or the defaults) said: ``accept`` with content, ``decline`` or ``cancel``."""

    action: Action
    content: dict[str, Any] | None = None


LinkOutcome = Literal["completed", "done", "expired", "stopped", "withdrawn"]


class Link:
    """A URL-mode elicitation: a web page of the server's that the person is asked to open.

    ``finished`` is resolved once, with how the link ended after the person consented:
    ``completed`` (the server reported completion, or the retried 2026-07-28 call returned),
    ``done`` (the person said they finished: the spec's manual control for a server that never
    reports), ``expired`` (the asker's time limit), ``stopped`` (the turn was stopped) or
    ``withdrawn`` (the call ended first).
    """

    def __init__(
        self,
        *,
        message: str,
        url: str,
        tool: str = "",
        elicitation_id: str | None = None,
        required: bool = False,
    ) -> None:
        self.message = message[:MAX_TEXT]
        self.url = url
        self.host = _host(url)
        self.tool = tool
        self.elicitation_id = elicitation_id
        self.required = required  # from a -32042 error: the call is retried once it is done
        self.finished: asyncio.Future[LinkOutcome] = asyncio.get_running_loop().create_future()

    def finish(self, outcome: LinkOutcome) -> None:
        """End the wait (the first outcome wins; later ones are ignored)."""
        if not self.finished.done():
            self.finished.set_result(outcome)


Asker = Callable[[Form | Link], Awaitable[Answer]]
"""Shows a form or a link to the person behind the current call and returns their answer (the chat's).

For a :class:`Link`, ``accept`` is the person's consent (they opened the page); the asker
then follows ``link.finished`` to show how it ended and bounds that wait itself.
"""


def _host(url: str) -> str:
    try:
        return urlsplit(url).hostname or ""
    except ValueError:
        return ""

"""The status line: MCP servers and their state, and whether the model server answers.

The model's state is checked, not remembered: every chat socket that connects asks for a check
(:func:`check_model_soon`) and, while at least one is open, :func:`watch` keeps a background task
on the server's loop that checks every ``BOOCODE_LLM_CHECK_INTERVAL`` seconds. A check is a
``GET /models`` (:func:`boocode.chat.llm.client.check_server`); its outcome lands in the model's
``last_error``, which each socket's status loop sends on when it changes.

Lifecycle: the background task starts with the first :func:`watch` on a loop and ends when the
last socket calls :func:`unwatch` (or the loop closes). Checks closer together than
:data:`MIN_CHECK_GAP` seconds are skipped, so a page reloaded in a loop costs one request.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from django.conf import settings as django_settings

from boocode.chat.ledger import metrics as chat_metrics
from boocode.chat.llm import client as llm_client
from boocode.chat.llm.client import LLMSettings
from mcpclient.runtime import hub_statuses

logger = logging.getLogger(__name__)

MIN_CHECK_GAP = 5.0  # seconds: checks asked for sooner after the last one are skipped

_last_check = float("-inf")
_checking: asyncio.Task[None] | None = None
_watchers = 0
_loop_task: asyncio.Task[None] | None = None


def status_payload(user_id: int | None, *, staff: bool = False) -> dict[str, Any]:
    """The ``status`` frame for ``user_id`` (see docs/protocol.md): the servers they may use;
    their errors only for ``staff``."""
    settings = LLMSettings.from_settings()
    return {
        "type": "status",
        "servers": hub_statuses(staff=staff, user_id=user_id),
        "model": {
            "configured": settings.configured,
            "name": settings.model,
            "last_error": llm_client.last_error,
        },
    }


async def check_model(*, min_gap: float = MIN_CHECK_GAP) -> None:
    """Check the model server now, unless it was checked less than ``min_gap`` seconds ago.

    Concurrent callers share the check that is running.
    """
    global _last_check, _checking
    llm = LLMSettings.from_settings()
    if not llm.base_url:
        return
    running = _checking
    if running is not None and not running.done() and running.get_loop() is asyncio.get_running_loop():
        await asyncio.shield(running)
        return
    if time.monotonic() - _last_check < min_gap:
        return
    _last_check = time.monotonic()
    _checking = asyncio.ensure_future(_check(llm))
    await asyncio.shield(_checking)


async def _check(llm: LLMSettings) -> None:
    error = await llm_client.check_server(llm)
    if error is not None:
        logger.info("model server check failed: %s", error)


def check_model_soon() -> None:
    """Start a check in the background (a socket connected); the status loop reports the outcome."""
    _keep(asyncio.ensure_future(check_model()))


_tasks: set[asyncio.Task[None]] = set()


def _keep(task: asyncio.Task[None]) -> None:
    _tasks.add(task)
    task.add_done_callback(_tasks.discard)
    task.add_done_callback(_log_failure)


def _log_failure(task: asyncio.Task[None]) -> None:
    if not task.cancelled() and task.exception() is not None:
        logger.error("the model server check failed unexpectedly", exc_info=task.exception())


def watch() -> None:
    """A chat socket opened: keep checking the model server in the background while any is open."""
    global _watchers, _loop_task
    _watchers += 1
    interval = float(django_settings.LLM_CHECK_INTERVAL)
    if interval <= 0:
        return
    loop = asyncio.get_running_loop()
    if _loop_task is None or _loop_task.done() or _loop_task.get_loop() is not loop:
        _loop_task = asyncio.ensure_future(_check_loop(interval))
        _keep(_loop_task)


def open_sockets() -> int:
    """How many chat sockets are open in this process (each one watches; ``boocode_websockets_open``)."""
    return _watchers


chat_metrics.SOCKETS.set_function(open_sockets)


def unwatch() -> None:
    """A chat socket closed; the background checks stop with the last one."""
    global _watchers, _loop_task
    _watchers = max(_watchers - 1, 0)
    if _watchers == 0 and _loop_task is not None:
        _loop_task.cancel()
        _loop_task = None


async def _check_loop(interval: float) -> None:
    while True:
        await asyncio.sleep(interval)
        if _watchers:
            await check_model(min_gap=0)

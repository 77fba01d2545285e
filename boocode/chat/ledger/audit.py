"""The audit log of tool calls: one append-only row per call, from every process that runs calls.

:func:`boocode.chat.calls.execution.execute` is the one path of every call (the model's, the tool console's
and a view's), so it opens an :class:`AuditRecord` for the call (:func:`auditing`); the approval
gate notes its decision on it (:func:`note_approval`); when the call ends, :func:`write` queues
the row for the process's audit writer (a task of its own, which writes the rows of the calls
that ended meanwhile in one transaction), so the audit never delays a result and a stopped
turn's call is recorded as "cancelled". Who, which conversation and agent, which server and tool (with its
accepted definition's digest), when, the arguments with secrets masked (:func:`kept_arguments`),
the argument and result sizes, the outcome and the time taken. The same write counts the call
in the person's usage of the day (:mod:`boocode.chat.ledger.daily_usage`), unless it was refused.

Retention: rows older than ``BOOCODE_AUDIT_DAYS`` days (0 keeps them all) are deleted by
:func:`prune`, which each process runs at most once an hour after a write, and by
``manage.py audit_prune``. Exports (:func:`export_csv`, :func:`export_json`) are the admin's.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import datetime as dt
import json
import logging
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from channels.db import database_sync_to_async
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from boocode.chat.ledger import daily_usage
from boocode.chat.ledger.spreadsheet import csv_text
from boocode.chat.models import ToolCallAudit
from mcpclient.core.redaction import redact_arguments, redact_text
from mcpclient.core.results import ToolResult

logger = logging.getLogger(__name__)

# Decisions of the approval gate after which the call was not run.
REFUSALS = ("denied", "expired", "stopped")
MAX_ARGUMENTS = 4096  # characters of the masked arguments kept
PRUNE_EVERY = 3600.0  # seconds between a process's retention passes
EXPORT_FIELDS = (
    "id",
    "created_at",
    "username",
    "conversation_id",
    "agent",
    "origin",
    "server",
    "tool",
    "name",
    "digest",
    "arguments",
    "argument_bytes",
    "result_bytes",
    "outcome",
    "error",
    "duration_ms",
    "approval",
    "decided_by",
)


@dataclass
class AuditRecord:
    """Who runs a call and how it came; the gate adds its decision while the call waits."""

    origin: str  # ToolCallAudit.Origin
    user_id: int | None
    conversation_id: int | None
    agent: str = ""
    approval: str = ""
    decided_by: int | None = None


_current: contextvars.ContextVar[AuditRecord | None] = contextvars.ContextVar("boocode_audit", default=None)
_writes: set[asyncio.Task[None]] = set()
_pending: list[tuple[dict[str, Any], dt.datetime]] = []  # rows waiting for the writer (write order)
_flusher: asyncio.Task[None] | None = None
MAX_BATCH = 500  # rows a transaction writes at most
_pruned_at = 0.0


@contextlib.contextmanager
def auditing(record: AuditRecord | None) -> Iterator[None]:
    """Run one call with ``record`` as its audit record (the gate's :func:`note_approval` fills it)."""
    token = _current.set(record)
    try:
        yield
    finally:
        _current.reset(token)


def note_approval(decision: str, user_id: int | None, *, remembered: bool = False) -> None:
    """The approval gate's decision on the call being run (nothing outside :func:`auditing`).

    ``remembered``: allowed for the conversation earlier, by its owner (who runs the call).
    """
    record = _current.get()
    if record is not None:
        record.approval = decision
        record.decided_by = record.user_id if remembered else user_id


def kept_arguments(arguments: str) -> str:
    """The call's arguments as kept: parsed, secrets masked, cut at :data:`MAX_ARGUMENTS`."""
    try:
        shown = json.dumps(redact_arguments(json.loads(arguments or "{}")), ensure_ascii=False)
    except (ValueError, RecursionError):
        shown = redact_text(arguments)  # the model wrote something that is not JSON: kept as text
    return shown if len(shown) <= MAX_ARGUMENTS else shown[: MAX_ARGUMENTS - 1] + "…"


def _outcome(result: ToolResult | None, refused: bool) -> str:
    if result is None:
        return ToolCallAudit.Outcome.CANCELLED
    if refused:
        return ToolCallAudit.Outcome.REFUSED
    return ToolCallAudit.Outcome.ERROR if result.is_error else ToolCallAudit.Outcome.OK


def write(
    record: AuditRecord,
    *,
    server: str,
    tool: str,
    name: str,
    digest: str,
    arguments: str,
    result: ToolResult | None,
    refused: bool,
    began: dt.datetime,
    seconds: float,
) -> None:
    """Store the row of one finished call: queued for the process's audit writer (never awaited
    by the call), which writes the rows that ended meanwhile in one transaction."""
    fields = {
        "user_id": record.user_id,
        "conversation_id": record.conversation_id,
        "agent": record.agent[:100],
        "origin": record.origin,
        "server": server[:100],
        "tool": tool[:255],
        "name": name[:200],
        "digest": digest[:64],
        "arguments": kept_arguments(arguments),
        "argument_bytes": len(arguments.encode(errors="replace")),
        "result_bytes": len(result.output.encode(errors="replace")) if result is not None else 0,
        "outcome": _outcome(result, refused),
        "error": redact_text(result.output[:300]) if result is not None and result.is_error else "",
        "duration_ms": min(int(seconds * 1000), 2**31 - 1),
        "approval": record.approval[:10],
        "decided_by_id": record.decided_by,
    }
    _pending.append((fields, began))
    if _flusher is None or _flusher.done() or _flusher.get_loop() is not asyncio.get_running_loop():
        _start_flusher()


def _start_flusher() -> None:
    global _flusher
    _flusher = asyncio.ensure_future(_flush())
    _writes.add(_flusher)
    _flusher.add_done_callback(_writes.discard)


async def _flush() -> None:
    """Write what is pending, in batches: the rows of the calls that ended while a batch was
    being written go together in the next one (one transaction each), so the audit costs a
    busy server one write now and then, not one per call beside the turns' own writes."""
    store = database_sync_to_async(_store, thread_sensitive=False)
    while _pending:
        batch = _pending[:MAX_BATCH]
        del _pending[: len(batch)]
        try:
            await store(batch)
        except Exception:
            logger.exception("%d audit row(s) of tool calls could not be written", len(batch))


def _store(batch: list[tuple[dict[str, Any], dt.datetime]]) -> None:
    global _pruned_at
    from django.contrib.auth import get_user_model

    people = {fields["user_id"] for fields, _ in batch if fields["user_id"] is not None}
    users = get_user_model().objects.filter(pk__in=people)
    names = dict(users.values_list("pk", "username")) if people else {}
    calls: dict[tuple[int, dt.date], tuple[dt.datetime, int]] = {}  # (person, day) -> (a time of it, calls)
    for fields, began in batch:
        if fields["user_id"] is not None and fields["outcome"] != ToolCallAudit.Outcome.REFUSED:
            key = (fields["user_id"], daily_usage.day_of(began))
            calls[key] = (began, calls.get(key, (began, 0))[1] + 1)
    with transaction.atomic():
        ToolCallAudit.objects.bulk_create(
            ToolCallAudit(username=names.get(fields["user_id"], ""), created_at=began, **fields)
            for fields, began in batch
        )
        for (user_id, _), (began, count) in calls.items():
            daily_usage.record(user_id, at=began, tool_calls=count)  # the person's day (not pruned with rows)
    if time.monotonic() - _pruned_at > PRUNE_EVERY:
        _pruned_at = time.monotonic()
        prune()


async def drain() -> None:
    """Wait for the audit rows being written on this loop (tests; a shutdown).

    A write of a loop that is gone (a stopped server's, an earlier test's) never reports its end
    there: it is dropped, not waited for (waiting would spin on it).
    """
    loop = asyncio.get_running_loop()
    if _pending and (_flusher is None or _flusher.done() or _flusher.get_loop() is not loop):
        _start_flusher()  # rows left by a writer of a loop that is gone
    while True:
        for task in [task for task in _writes if task.done() or task.get_loop() is not loop]:
            _writes.discard(task)
        if not _writes:
            return
        await asyncio.gather(*list(_writes), return_exceptions=True)


def prune(now: dt.datetime | None = None) -> int:
    """Delete the rows older than ``BOOCODE_AUDIT_DAYS`` days (0 keeps every row); how many went."""
    days = int(settings.AUDIT_DAYS)
    if days <= 0:
        return 0
    cutoff = (now or timezone.now()) - dt.timedelta(days=days)
    deleted, _ = ToolCallAudit.objects.filter(created_at__lt=cutoff).delete()
    if deleted:
        logger.info("audit log: %d tool call row(s) older than %d days deleted", deleted, days)
    return deleted


def _values(row: ToolCallAudit) -> list[Any]:
    values = {field: getattr(row, field) for field in EXPORT_FIELDS if field != "decided_by"}
    values["created_at"] = row.created_at.isoformat()
    values["decided_by"] = row.decided_by.get_username() if row.decided_by else ""
    return [values[field] for field in EXPORT_FIELDS]


def export_csv(rows: Iterable[ToolCallAudit]) -> str:
    """``rows`` as CSV with a header line (:data:`EXPORT_FIELDS`); no cell reads as a formula."""
    return csv_text(EXPORT_FIELDS, (_values(row) for row in rows))


def export_json(rows: Iterable[ToolCallAudit]) -> str:
    """``rows`` as a JSON array of objects (:data:`EXPORT_FIELDS`)."""
    return json.dumps(
        [dict(zip(EXPORT_FIELDS, _values(row), strict=True)) for row in rows], ensure_ascii=False
    )

"""The agents' roster: AGENTS.md mirrored into ``Agent`` rows, and those rows read back.

``sync_agents()`` parses the file and upserts the rows in one transaction: agents that left the
file are deleted, an agent whose section became invalid keeps its last valid definition (marked
with the error), problems are reported, never raised. It fails closed: no error in the file can
give an agent more tools than it had (see :func:`sync_agents`). Each process
remembers the file's signature (mtime, size, inode) at its last sync, so
``refresh_agents_if_changed()`` costs one ``stat()`` when nothing changed and the chat can call it
before every turn: editing the file never needs a restart.

Reads (:func:`get_agent`, :func:`list_agents`, :func:`default_agent`) come from a per-process
copy of the rows, loaded with one query on first use and dropped by every sync of this
process. The rows change only when the file does, and a process syncs (so reloads) as soon as
it sees the file change, so a turn resolves its agent without a query.
"""

from __future__ import annotations

import logging
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path

from django.conf import settings
from django.db import IntegrityError, transaction

from agents.models import Agent
from agents.parser import LOCKED_AGENT, AgentError, AgentSpec, load_agents

__all__ = [
    "SyncReport",
    "agents_file_errors",
    "default_agent",
    "get_agent",
    "list_agents",
    "refresh_agents_if_changed",
    "reset_sync_state",
    "sync_agents",
]

logger = logging.getLogger(__name__)

_Signature = tuple[int, int, int] | None
_lock = threading.Lock()
_synced: dict[Path, _Signature] = {}  # file -> signature at this process's last sync
_rows: list[Agent] | None = None  # this process's copy of the rows, in file order (None: not loaded)
_generation = 0  # bumped by every sync: a copy read before one is not kept


@dataclass
class SyncReport:
    """What one sync did. ``errors`` are the file's problems (the bad agents were skipped)."""

    path: str
    exists: bool
    created: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)  # invalid now: their last valid definition stays
    errors: list[AgentError] = field(default_factory=list)
    unusable: bool = False  # the file could not be read at all: nothing was changed

    @property
    def changed(self) -> bool:
        """Whether any row was written."""
        return bool(self.created or self.updated or self.deleted)

    def reset(self) -> None:
        """Forget the rows counted by a pass that was rolled back."""
        self.created, self.updated, self.deleted, self.unchanged, self.kept = [], [], [], [], []

    def summary(self) -> str:
        """One line for logs and commands."""
        total = len(self.created) + len(self.updated) + len(self.unchanged) + len(self.kept)
        source = self.path if self.exists else f"{self.path} (missing: built-in default agent)"
        if self.unusable:
            return f"{source}: cannot be used; {len(self.kept)} agents kept as they were"
        text = (
            f"{source}: {total} agent{'s' if total != 1 else ''} "
            f"({len(self.created)} created, {len(self.updated)} updated, {len(self.deleted)} deleted"
            + (f", {len(self.kept)} kept at their last valid definition" if self.kept else "")
            + ")"
        )
        if self.errors:
            text += f", {len(self.errors)} error{'s' if len(self.errors) != 1 else ''}"
        return text


def agents_file_path() -> Path:
    """The configured agents file (``BOOCODE_AGENTS_FILE``, default ``<data dir>/AGENTS.md``)."""
    return Path(settings.AGENTS_FILE)


def _display(path: Path) -> str:
    """The path as shown in messages: relative to the project when inside it."""
    try:
        return str(path.resolve().relative_to(Path(settings.BASE_DIR).resolve()))
    except ValueError:
        return str(path)


def _signature(path: Path) -> _Signature:
    try:
        stat = os.stat(path)
    except FileNotFoundError:
        return None
    return (stat.st_mtime_ns, stat.st_size, stat.st_ino)


@dataclass
class _Plan:
    """What the file says: its valid agents, every section's name in order, its errors."""

    exists: bool
    unusable: bool  # the file could not be read at all: keep every row as it is
    specs: dict[str, tuple[AgentSpec, bool]]  # name -> (spec, is_builtin), valid agents only
    sections: list[str]  # every agent section's name, in file order, valid or not
    errors: list[AgentError]


def _plan(path: Path) -> _Plan:
    """Parse the file into a :class:`_Plan` (nothing is written)."""
    parsed = load_agents(path, display=_display(path))
    is_builtin = not parsed.exists
    specs = {spec.name: (spec, is_builtin) for spec in parsed.agents}
    sections = parsed.sections if parsed.exists else [spec.name for spec in parsed.agents]
    return _Plan(parsed.exists, parsed.unusable, specs, sections, list(parsed.errors))


def sync_agents(path: Path | None = None) -> SyncReport:
    """Parse the agents file and make the ``Agent`` rows match it; return what changed.

    Fails closed, so that a broken file never widens what the model may call:

    - a missing file yields the built-in default agent (every tool);
    - an agent whose section has an error keeps its last valid definition, marked with the
      error (a new agent that was never valid is not created);
    - a file that cannot be read at all changes nothing;
    - a file that leaves no agent at all yields :data:`LOCKED_AGENT`, which has no tools.
    """
    path = Path(path) if path is not None else agents_file_path()
    with _lock:
        # Taken before reading: an edit that lands during the read changes the signature again.
        signature = _signature(path)
        plan = _plan(path)
        report = SyncReport(
            path=_display(path), exists=plan.exists, errors=plan.errors, unusable=plan.unusable
        )
        for attempt in range(2):
            try:
                with transaction.atomic():
                    _apply(plan, report)
                break
            except IntegrityError:
                # Another process inserted the same name between our read and write; its rows
                # are now visible, so one more pass settles it.
                if attempt:
                    raise
                report.reset()
        _synced[path] = signature
        _forget_rows()
    return report


def _apply(plan: _Plan, report: SyncReport) -> None:
    """Upsert the rows the plan keeps and delete the others (inside a transaction)."""
    existing = {agent.name: agent for agent in Agent.objects.all()}
    if plan.unusable:
        report.kept.extend(existing)
        if not existing:
            _lock_down(plan, report)
        return
    problems: dict[str, str] = {}
    for error in plan.errors:
        if error.agent is not None:
            problems.setdefault(error.agent, str(error))
    position = 0
    for name in plan.sections:
        row = existing.pop(name, None)
        if name in plan.specs:
            spec, is_builtin = plan.specs[name]
            _upsert(spec, position=position, is_builtin=is_builtin, error="", row=row, report=report)
        elif row is not None:
            # Invalid now, valid before: the last valid definition stays in use, marked.
            message = problems.get(name, "invalid section")
            if (row.position, row.error) != (position, message):
                row.position, row.error = position, message
                row.save(update_fields=["position", "error", "updated_at"])
            report.kept.append(name)
        else:
            continue  # never valid: nothing to fall back on, and nothing is created
        position += 1
    if existing:
        Agent.objects.filter(pk__in=[agent.pk for agent in existing.values()]).delete()
        report.deleted.extend(sorted(existing))
    if position == 0:
        _lock_down(plan, report)


def _lock_down(plan: _Plan, report: SyncReport) -> None:
    """No agent is left: the stand-in without tools, marked with the file's first error."""
    first = f" ({plan.errors[0]})" if plan.errors else ""
    error = f"AGENTS.md defines no valid agent{first}: this stand-in has no tools until the file is fixed"
    _upsert(LOCKED_AGENT, position=0, is_builtin=True, error=error, row=None, report=report)
    report.errors.append(
        AgentError(
            report.path, 0, "defines no valid agent; a stand-in agent with no tools answers until it is fixed"
        )
    )


def _upsert(
    spec: AgentSpec, *, position: int, is_builtin: bool, error: str, row: Agent | None, report: SyncReport
) -> None:
    values = {**Agent.fields_from_spec(spec, position=position, is_builtin=is_builtin), "error": error}
    if row is None:
        row = Agent.objects.filter(name=spec.name).first()
    if row is None:
        Agent.objects.create(name=spec.name, **values)
        report.created.append(spec.name)
    elif {**row.spec_fields(), "error": row.error} != values:
        for key, value in values.items():
            setattr(row, key, value)
        row.save()
        report.updated.append(spec.name)
    else:
        report.unchanged.append(spec.name)


def refresh_agents_if_changed() -> SyncReport | None:
    """Sync when the agents file changed since this process last synced it (or never did).

    One ``stat()`` and no query when nothing changed; returns the report when it synced.
    """
    path = agents_file_path()
    if path in _synced and _synced[path] == _signature(path):
        return None
    report = sync_agents(path)
    for error in report.errors:
        logger.warning("%s", error)
    if report.changed:
        logger.info("%s", report.summary())
    return report


def reset_sync_state() -> None:
    """Forget what this process synced, so the next refresh re-reads the file (tests)."""
    with _lock:
        _synced.clear()
        _forget_rows()


def agents_file_errors() -> list[AgentError]:
    """The current problems in the agents file (parsed now, nothing written)."""
    return _plan(agents_file_path()).errors


def _forget_rows() -> None:
    """Drop this process's copy of the rows (called with ``_lock`` held)."""
    global _rows, _generation
    _rows = None
    _generation += 1


def _cached_rows() -> list[Agent]:
    """The rows in file order, from this process's copy (one query when it is not loaded)."""
    global _rows
    rows = _rows
    if rows is None:
        generation = _generation
        rows = list(Agent.objects.all())
        with _lock:
            if generation == _generation:
                _rows = rows
    return rows


def get_agent(name: str) -> Agent | None:
    """The agent called ``name``, or ``None``."""
    return next((agent for agent in _cached_rows() if agent.name == name), None)


def list_agents() -> list[Agent]:
    """Every agent, in file order."""
    return list(_cached_rows())


def default_agent() -> Agent:
    """The first agent of the file (the built-in default when there is no file).

    Syncs first if there are no rows yet, so it always returns an agent.
    """
    rows = _cached_rows()
    if not rows:
        sync_agents()
        rows = _cached_rows()
    if not rows:  # pragma: no cover - sync always leaves at least one agent
        raise RuntimeError("no agent after syncing the agents file")
    return rows[0]

"""Agents services: mirror AGENTS.md into ``Agent`` rows and read them back.

``sync_agents()`` parses the file and upserts the rows in one transaction: agents that left the
file (or are now invalid) are deleted, problems are reported, never raised. Each process
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
from agents.parser import BUILTIN_AGENT, AgentError, AgentSpec, load_agents

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
    errors: list[AgentError] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        """Whether any row was written."""
        return bool(self.created or self.updated or self.deleted)

    def summary(self) -> str:
        """One line for logs and commands."""
        total = len(self.created) + len(self.updated) + len(self.unchanged)
        source = self.path if self.exists else f"{self.path} (missing: built-in default agent)"
        text = (
            f"{source}: {total} agent{'s' if total != 1 else ''} "
            f"({len(self.created)} created, {len(self.updated)} updated, {len(self.deleted)} deleted)"
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


def _specs(path: Path) -> tuple[bool, list[tuple[AgentSpec, bool]], list[AgentError]]:
    """Parse the file: ``(exists, [(spec, is_builtin)], errors)``; never an empty agent list."""
    parsed = load_agents(path, display=_display(path))
    errors = list(parsed.errors)
    if not parsed.exists:
        return False, [(BUILTIN_AGENT, True)], errors
    if not parsed.agents:
        errors.append(
            AgentError(parsed.path, 0, "defines no valid agent; using the built-in default agent (all tools)")
        )
        return True, [(BUILTIN_AGENT, True)], errors
    return True, [(spec, False) for spec in parsed.agents], errors


def sync_agents(path: Path | None = None) -> SyncReport:
    """Parse the agents file and make the ``Agent`` rows match it; return what changed.

    A missing file (or one without a single valid agent) yields the built-in default agent.
    """
    path = Path(path) if path is not None else agents_file_path()
    with _lock:
        # Taken before reading: an edit that lands during the read changes the signature again.
        signature = _signature(path)
        exists, specs, errors = _specs(path)
        report = SyncReport(path=_display(path), exists=exists, errors=errors)
        for attempt in range(2):
            try:
                with transaction.atomic():
                    _apply(specs, report)
                break
            except IntegrityError:
                # Another process inserted the same name between our read and write; its rows
                # are now visible, so one more pass settles it.
                if attempt:
                    raise
                report.created, report.updated, report.deleted, report.unchanged = [], [], [], []
        _synced[path] = signature
        _forget_rows()
    return report


def _apply(specs: list[tuple[AgentSpec, bool]], report: SyncReport) -> None:
    """Upsert the rows for ``specs`` and delete the others (inside a transaction)."""
    existing = {agent.name: agent for agent in Agent.objects.all()}
    for position, (spec, is_builtin) in enumerate(specs):
        values = Agent.fields_from_spec(spec, position=position, is_builtin=is_builtin)
        agent = existing.pop(spec.name, None)
        if agent is None:
            Agent.objects.create(name=spec.name, **values)
            report.created.append(spec.name)
        elif agent.spec_fields() != values:
            for key, value in values.items():
                setattr(agent, key, value)
            agent.save()
            report.updated.append(spec.name)
        else:
            report.unchanged.append(spec.name)
    if existing:
        Agent.objects.filter(pk__in=[agent.pk for agent in existing.values()]).delete()
        report.deleted.extend(sorted(existing))


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
    return _specs(agents_file_path())[2]


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

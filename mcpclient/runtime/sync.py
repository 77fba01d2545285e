"""Services that keep the database in step with mcp.json and with the hub.

``sync_servers`` mirrors the file into ``McpServer`` rows (the file is the source of truth);
``persist_snapshot`` writes a server's live state and discovered tools; ``bump_version``
tells other processes that servers changed.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import F

from mcpclient.config.entries import parse_server
from mcpclient.config.loading import load_config
from mcpclient.config.model import ConfigError, ServerConfig
from mcpclient.config.resolve import lookup_path
from mcpclient.config.sandbox import MISSING_BWRAP, find_bwrap, sandboxed
from mcpclient.config.shapes import MCP_SERVERS, Shape
from mcpclient.core import mcp_apps
from mcpclient.core.state import ServerSnapshot, Status
from mcpclient.models import McpServer, McpState, McpTool, ToolPin

logger = logging.getLogger(__name__)


@dataclass
class SyncReport:
    """What ``sync_servers`` changed."""

    created: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    errors: dict[str, str] = field(default_factory=dict)
    exists: bool = True
    shape: Shape = MCP_SERVERS  # the host shape the file is written in

    @property
    def changed(self) -> bool:
        """True when any row was created, updated or deleted."""
        return bool(self.created or self.updated or self.deleted)

    def summary(self) -> str:
        """One line for logs and commands."""
        if not self.exists:
            return "mcp.json not found: no MCP servers"
        parts = [
            f"{len(self.created)} created",
            f"{len(self.updated)} updated",
            f"{len(self.deleted)} deleted",
            f"{len(self.unchanged)} unchanged",
        ]
        if self.errors:
            parts.append(f"{len(self.errors)} invalid")
        return ", ".join(parts)


def _guess_transport(entry: Any) -> str:
    if isinstance(entry, dict):
        kind = entry.get("type")
        if kind in ("stdio", "local") or (kind is None and "command" in entry):
            return "stdio"
        if kind == "sse":
            return "sse"
        if kind in ("streamableHttp", "streamable-http", "http", "remote") or "url" in entry:
            return "streamableHttp"
    return ""


def config_mtime_ns(path: Path | None = None) -> int:
    """The modification time of mcp.json in nanoseconds (0 when there is no file)."""
    try:
        return (path or settings.MCP_CONFIG).stat().st_mtime_ns
    except FileNotFoundError:
        return 0


def current_state() -> McpState:
    """The single McpState row (created on first use)."""
    state, _ = McpState.objects.get_or_create(pk=1)
    return state


def bump_version() -> None:
    """Tell every process that servers changed (their config, enabled flag or tools)."""
    current_state()
    McpState.objects.filter(pk=1).update(version=F("version") + 1)


@transaction.atomic
def sync_servers(path: Path | None = None) -> SyncReport:
    """Mirror mcp.json into McpServer rows: create new, update changed, delete removed.

    Raises ``ConfigError`` when the file as a whole is unreadable (nothing is changed then).
    """
    path = path or settings.MCP_CONFIG
    # The time is read before the text: a write while this runs leaves a newer time on the file,
    # so the next check syncs again (read after, it would hide that write for good).
    mtime = config_mtime_ns(path)
    loaded = load_config(path)
    report = SyncReport(exists=loaded.exists, errors=dict(loaded.errors), shape=loaded.shape)
    existing = {server.name: server for server in McpServer.objects.select_for_update()}
    for position, (name, entry) in enumerate(loaded.raw_servers.items()):
        parsed = loaded.servers.get(name)
        values = {
            "position": position,
            "config": entry,
            "transport": parsed.transport if parsed else _guess_transport(entry),
            "enabled": parsed.enabled
            if parsed
            else bool(isinstance(entry, dict) and entry.get("enabled", True)),
            "config_error": loaded.errors.get(name, ""),
        }
        row = existing.pop(name, None)
        if row is None:
            row = McpServer(name=name, **values)
            _initial_status(row)
            row.save()
            report.created.append(name)
            continue
        if any(getattr(row, key) != value for key, value in values.items()):
            for key, value in values.items():
                setattr(row, key, value)
            if row.config_error or not row.enabled:
                _initial_status(row)
            row.save()
            report.updated.append(name)
        else:
            report.unchanged.append(name)
    for name, row in existing.items():
        row.delete()
        report.deleted.append(name)
    if report.deleted:
        # What was accepted of a server goes with its entry: one declared again under the name is
        # a server seen for the first time (mcpclient.core.pinning).
        ToolPin.objects.filter(server__in=report.deleted).delete()
    state = current_state()
    if report.changed or state.config_mtime_ns != mtime:
        McpState.objects.filter(pk=1).update(
            version=F("version") + (1 if report.changed else 0), config_mtime_ns=mtime
        )
    if report.errors:
        for message in report.errors.values():
            logger.warning("%s", message)
    _tell_sandboxed(loaded.servers.values(), source=path.name)
    return report


def _tell_sandboxed(servers: Iterable[ServerConfig], *, source: str) -> None:
    """Name the enabled sandboxed servers at every sync (a sync comes first at start), and say at
    once when they cannot start without bubblewrap (each fails with that error when connected)."""
    required = settings.MCP_STDIO_SANDBOX == "required"
    names = [
        f'"{server.name}"' for server in servers if server.enabled and sandboxed(server, required=required)
    ]
    if not names:
        return
    if find_bwrap(lookup_path(os.environ.get("PATH"))) is None:
        logger.error("%s: sandboxed servers %s will not start: %s", source, ", ".join(names), MISSING_BWRAP)
        return
    rule = " (BOOCODE_STDIO_SANDBOX=required)" if required else ""
    logger.info("%s: sandboxed stdio servers%s: %s", source, rule, ", ".join(names))


def _initial_status(row: McpServer) -> None:
    if row.config_error:
        row.status, row.last_error = McpServer.Status.FAILED, row.config_error
    elif not row.enabled:
        row.status, row.last_error = McpServer.Status.DISABLED, ""
    else:
        row.status = McpServer.Status.CONNECTING


def server_configs() -> list[ServerConfig]:
    """Valid server configs from the database rows, in file order.

    A row whose entry failed validation in the file (``config_error``) is left out even when its
    stored value would parse: a duplicate key, for one, is gone from the stored JSON, and an
    invalid entry must never run, whatever part of it would have worked.
    """
    configs = []
    for row in McpServer.objects.filter(config_error=""):
        try:
            configs.append(parse_server(row.name, row.config, source=settings.MCP_CONFIG.name))
        except ConfigError:
            continue  # recorded on the row by sync_servers
    return configs


# Every column but the log fields, which the admin (log_level) and the log writer (log_tail) set.
_LOG_FIELDS = ("log_level", "log_tail")
_SNAPSHOT_FIELDS = [
    f.name for f in McpServer._meta.concrete_fields if not f.primary_key and f.name not in _LOG_FIELDS
]


_TOOL_FIELDS = [
    "prefixed_name",
    "title",
    "description",
    "input_schema",
    "output_schema",
    "icons",
    "annotations",
    "rejected",
    "filtered",
    "reject_reason",
    "warning",
    "position",
    "ui_resource_uri",
    "visibility",
    "digest",
    "held",
    "pin_note",
    "findings",
]


# Tool rows written per transaction. A listing is stored in short writes, so a turn that writes
# meanwhile waits for one batch at most (SQLite has one writer at a time), never for the listing.
STORE_BATCH = 100


def persist_snapshot(snapshot: ServerSnapshot) -> None:
    """Write a server's live state and its discovered tools (offered, rejected and filtered).

    The tool rows are written in batches of :data:`STORE_BATCH`, each its own transaction, and
    the server's row (its counts and notes) last, in one short transaction: no write holds the
    database for the whole listing.
    """
    row = McpServer.objects.filter(name=snapshot.name).first()
    if row is None:
        return  # removed from the file meanwhile
    row.status = snapshot.status.value
    if snapshot.status is Status.DISABLED and row.config_error:
        row.status = McpServer.Status.FAILED
    else:
        row.last_error = snapshot.last_error
    row.connected_at = snapshot.connected_at
    row.protocol_version = snapshot.protocol_version
    row.server_info = snapshot.server_info
    row.active_transport = snapshot.transport
    row.stderr_tail = "\n".join(snapshot.stderr_tail)
    row.reconnect_attempts = snapshot.attempts
    row.next_retry_at = snapshot.next_retry_at
    row.circuit_open = snapshot.circuit_open
    row.tools_note = snapshot.tools_note
    try:
        if snapshot.status in (Status.READY, Status.UNAVAILABLE) or snapshot.tools:
            _store_tools(row, snapshot)
        elif snapshot.status in (Status.FAILED, Status.DISABLED):
            row.tools.all().delete()
            row.tool_count = row.rejected_count = row.filtered_count = 0
        with transaction.atomic():
            # Not the log fields: other threads set them (a save of the whole row would undo their writes).
            if McpServer.objects.select_for_update().filter(pk=row.pk).exists():
                row.save(update_fields=_SNAPSHOT_FIELDS)
    except IntegrityError:
        if McpServer.objects.filter(pk=row.pk).exists():
            raise
        # The server was removed from the file while its tools were stored: its rows went with it.


def _store_tools(row: McpServer, snapshot: ServerSnapshot) -> None:
    """The server's tool rows made to match the snapshot: created, changed and removed in bulk."""
    current = {tool.name: tool for tool in row.tools.all()}
    added, changed = [], []
    for position, tool in enumerate(snapshot.tools):
        values = {
            "prefixed_name": snapshot.prefixed_names.get(tool.name, ""),
            "title": tool.title,
            "description": tool.description,
            "input_schema": tool.input_schema,
            "output_schema": tool.output_schema,
            "icons": list(tool.icons),
            "annotations": tool.annotations,
            "rejected": tool.rejected,
            "filtered": tool.filtered,
            # A usable tool the model is not offered says why too (its _meta.ui.visibility).
            "reject_reason": tool.reject_reason or mcp_apps.visibility_note(tool.visibility),
            "warning": "; ".join(filter(None, (snapshot.warnings.get(tool.name, ""), tool.ui_note))),
            "position": position,
            "ui_resource_uri": tool.ui_resource_uri,
            "visibility": list(tool.visibility),
            "digest": tool.digest,
            "held": tool.held,
            "pin_note": tool.pin_note,
            "findings": list(tool.findings),
        }
        existing = current.pop(tool.name, None)
        if existing is None:
            added.append(McpTool(server=row, name=tool.name, **values))
        elif any(getattr(existing, key) != value for key, value in values.items()):
            for key, value in values.items():
                setattr(existing, key, value)
            changed.append(existing)
    gone = [tool.pk for tool in current.values()]
    for start in range(0, len(gone), STORE_BATCH):
        McpTool.objects.filter(pk__in=gone[start : start + STORE_BATCH]).delete()
    for start in range(0, len(added), STORE_BATCH):
        with transaction.atomic():  # (another process storing the same listing wrote the same rows)
            McpTool.objects.bulk_create(added[start : start + STORE_BATCH], ignore_conflicts=True)
    for start in range(0, len(changed), STORE_BATCH):
        with transaction.atomic():
            McpTool.objects.bulk_update(changed[start : start + STORE_BATCH], _TOOL_FIELDS)
    row.tool_count = sum(tool.offered for tool in snapshot.tools)
    row.rejected_count = sum(tool.rejected for tool in snapshot.tools)
    row.filtered_count = sum(tool.filtered for tool in snapshot.tools)

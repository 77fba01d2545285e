"""Server logs: the ``notifications/message`` a server sends, kept per session, and its log level.

Invariants. Each session keeps its last :data:`MAX_ENTRIES` messages in one :class:`ServerLogs`
ring, created with the session; ``data`` is kept as text (JSON for anything but a string), cut at
:data:`MAX_DATA` characters and redacted like error messages
(:func:`mcpclient.core.redaction.redact_text`), whatever the server promises. Log messages are for
staff only: they never reach the model or the chat. The level goes out as ``logging/setLevel`` on
2025-11-25 (when the session is ready and at each change, only to a server declaring ``logging``;
blank sends nothing) and in the ``_meta`` of every ``tools/call`` on 2026-07-28
(:meth:`ServerLogs.call_meta`; blank opts out). The hub listens to the shared sessions' logs only
(a person's session is nobody else's business); a listener must be cheap (the runtime coalesces
its writes).

The tour: docs/configuration.md (*Server logs and the log level*), docs/architecture.md (*Progress
and server logs*).
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import warnings
from collections import deque
from collections.abc import Callable
from typing import Any

import anyio
import mcp.types as types
from mcp import Client, MCPError
from mcp.shared.exceptions import MCPDeprecationWarning
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from mcpclient.core.redaction import redact_text

logger = logging.getLogger(__name__)

# RFC 5424 severities as MCP names them, least severe first (as mcpclient.models.LOG_LEVELS).
LEVELS = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")
MAX_ENTRIES = 200
MAX_DATA = 2000  # characters of one message's data kept
MAX_LOGGER = 100
LOG_LEVEL_META_KEY = "io.modelcontextprotocol/logLevel"
SET_LEVEL_TIMEOUT = 10.0  # seconds a logging/setLevel may take before it is given up (the call goes on)

LogEntry = dict[str, str]
EntryListener = Callable[[str, tuple[LogEntry, ...]], None]


def entry_from(params: types.LoggingMessageNotificationParams) -> LogEntry:
    """A stored entry for one ``notifications/message``: capped and redacted."""
    data = params.data
    if isinstance(data, str):
        text = data
    else:
        try:
            text = json.dumps(data, ensure_ascii=False, default=str)
        except (TypeError, ValueError):
            text = repr(data)
    if len(text) > MAX_DATA:
        text = text[:MAX_DATA] + f"… ({len(text) - MAX_DATA} characters cut)"
    level = params.level if params.level in LEVELS else "info"
    return {
        "time": dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds"),
        "level": level,
        "logger": redact_text((params.logger or "")[:MAX_LOGGER]),
        "data": redact_text(text),
    }


def declares_logging(client: Client) -> bool:
    """True when the server declared the ``logging`` capability."""
    try:
        return client.server_capabilities.logging is not None
    except RuntimeError:  # not entered
        return False


def _modern(client: Client) -> bool:
    try:
        return client.protocol_version in MODERN_PROTOCOL_VERSIONS
    except RuntimeError:
        return False


class ServerLogs:
    """One session's log ring, the level asked of the server, and how it was applied."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.entries: deque[LogEntry] = deque(maxlen=MAX_ENTRIES)
        self.level = ""  # "" = the server's default (2026-07-28: no log messages)
        self.listener: EntryListener | None = None
        self.client: Client | None = None
        self.note = ""  # what became of the level on the live session, for the admin

    # -- messages -----------------------------------------------------------------------
    def receive(self, params: types.LoggingMessageNotificationParams) -> None:
        """Keep one ``notifications/message`` and tell the listener."""
        self.entries.append(entry_from(params))
        if self.listener is not None:
            try:
                self.listener(self.name, tuple(self.entries))
            except Exception:  # a listener must never break the session's message handling
                logger.exception('MCP server "%s": the log listener failed', self.name)

    # -- the level ------------------------------------------------------------------------
    def call_meta(self) -> dict[str, Any] | None:
        """The ``_meta`` a ``tools/call`` carries on a 2026-07-28 session (the log-level opt-in)."""
        client = self.client
        if not self.level or client is None or not _modern(client) or not declares_logging(client):
            return None
        return {LOG_LEVEL_META_KEY: self.level}

    async def apply(self, client: Client | None = None) -> str:
        """Apply the level to the live session (``client``, or the one remembered); a sentence saying how."""
        if client is not None:
            self.client = client
        client = self.client
        if client is None:
            self.note = "not connected: the level is applied when the server next connects"
        elif not declares_logging(client):
            self.note = "the server does not declare the logging capability: it sends no log messages"
        elif _modern(client):
            version = client.protocol_version
            self.note = (
                f"protocol {version}: each tool call asks for messages at {self.level} and above"
                if self.level
                else f"protocol {version}: no level chosen, so the server sends no log messages"
            )
        elif not self.level:
            self.note = "no level chosen: the server's default applies (set at the next connect)"
        else:
            self.note = await self._set_level(client)
        return self.note

    async def _set_level(self, client: Client) -> str:
        level: Any = self.level
        with warnings.catch_warnings():  # deprecated as of 2026-07-28; this is a 2025-11-25 session
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            request = client.session.set_logging_level(level)
        try:
            with anyio.fail_after(SET_LEVEL_TIMEOUT):
                await request
        except TimeoutError:
            return f"logging/setLevel {level} got no answer within {SET_LEVEL_TIMEOUT:g} s"
        except MCPError as exc:
            return f"logging/setLevel {level} failed: {redact_text(exc.error.message)}"
        logger.info('MCP server "%s": log level set to %s', self.name, level)
        return f"sent logging/setLevel {level} to the live session"

    def forget_client(self) -> None:
        """The session ended: the level is applied again at the next connect."""
        self.client = None

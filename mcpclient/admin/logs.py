"""The server page's "Server logs" part: the log level asked of the server and its last messages.

A mixin of :class:`mcpclient.admin.servers.McpServerAdmin`. Staff who may change the server pick a
level and press "Set level": the button posts the change form to :meth:`log_level_view`
(a form inside the admin's form is not allowed; the view reads only the level and the CSRF
token), which stores it and applies it to the live session at once
(:func:`mcpclient.admin.changes.set_log_level`) and says what became of it: sent with
``logging/setLevel`` (2025-11-25), carried by each tool call (2026-07-28), or not possible
because the server does not declare the ``logging`` capability. The messages
(``McpServer.log_tail``, already redacted and capped by the hub) are shown as escaped text,
newest last, beside the stderr tail; like stderr they are for staff only.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, HttpResponseNotAllowed, HttpResponseRedirect
from django.urls import URLPattern, path, reverse
from django.utils.html import format_html, format_html_join

import mcpclient.admin.changes as changes
from mcpclient.admin.changes import ServerChangeError
from mcpclient.models import LOG_LEVELS, McpServer
from mcpclient.runtime.composition import get_hub

LEVEL_FIELD = "mcp_log_level"  # the select's name (not a field of the server's form)


def live_note(name: str) -> str:
    """What became of the level on this process's live session of ``name`` ("" when unknown)."""
    hub = get_hub()
    connection = hub.connection(name) if hub is not None else None
    return connection.logs.note if connection is not None else ""


class ServerLogsAdmin:
    """Adds the log level control, the log view and their URL to the server admin."""

    def log_level_urls(self) -> list[URLPattern]:
        """The URL the "Set level" button posts to."""
        site: Any = self.admin_site  # type: ignore[attr-defined]
        return [
            path(
                "<path:object_id>/log-level/",
                site.admin_view(self.log_level_view),
                name="mcpclient_mcpserver_log_level",
            )
        ]

    def log_level_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        """POST ``mcp_log_level``: store the level and apply it to the live session."""
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        admin: Any = self
        server = admin.get_object(request, object_id)
        if server is None:
            return HttpResponseRedirect(reverse("admin:mcpclient_mcpserver_changelist"))
        if not admin.has_change_permission(request, server):
            raise PermissionDenied
        level = request.POST.get(LEVEL_FIELD, "")
        try:
            note = changes.set_log_level(name=server.name, level=level)
        except ServerChangeError as exc:
            admin.message_user(request, str(exc), messages.ERROR)
        else:
            shown = level or "the server's default"
            admin.message_user(
                request,
                f"Log level of {server.name}: {shown}. {note[:1].upper()}{note[1:]}.",
                messages.WARNING if "does not declare" in note else messages.SUCCESS,
            )
        return HttpResponseRedirect(reverse("admin:mcpclient_mcpserver_change", args=[server.pk]))

    def logs_fieldset(self, *, can_change: bool) -> tuple[str, dict[str, Any]]:
        """The "Server logs" fieldset: the level (a control for those who may change it) and the log."""
        level = "log_level_display" if can_change else "log_level_text"
        return ("Server logs (notifications/message)", {"fields": (level, "log_tail_display")})

    @admin.display(description="log level")
    def log_level_text(self, server: McpServer) -> str:
        """The level and its effect on the live session (read-only)."""
        note = live_note(server.name)
        shown = format_html("<p>Now: {}.</p>", note) if note else ""
        return format_html("<p>{}</p>{}", server.log_level or "the server's default", shown)

    @admin.display(description="log level")
    def log_level_display(self, server: McpServer) -> str:
        """The level in a select with "Set level", and its effect on the live session."""
        note = live_note(server.name)
        shown = format_html("<p>Now: {}.</p>", note) if note else ""
        options = format_html_join(
            "",
            '<option value="{}"{}>{}</option>',
            (
                (value, " selected" if value == server.log_level else "", label)
                for value, label in [("", "the server's default"), *((lvl, lvl) for lvl in LOG_LEVELS)]
            ),
        )
        url = reverse("admin:mcpclient_mcpserver_log_level", args=[server.pk])
        return format_html(
            '<p><label for="id_{}">Messages at</label> <select name="{}" id="id_{}">{}</select> and above '
            '<button type="submit" class="button" formaction="{}" formmethod="post" formnovalidate '
            'id="mcp-set-log-level">Set level</button></p>{}',
            LEVEL_FIELD,
            LEVEL_FIELD,
            LEVEL_FIELD,
            options,
            url,
            shown,
        )

    @admin.display(description="log messages (last 200)")
    def log_tail_display(self, server: McpServer) -> str:
        """The server's last log messages (oldest first), as escaped text."""
        entries = [entry for entry in server.log_tail or () if isinstance(entry, dict)]
        if not entries:
            return "-"
        rows = format_html_join(
            "",
            '<tr class="mcp-log-{}"><td><code>{}</code></td><td>{}</td><td>{}</td>'
            "<td><code>{}</code></td></tr>",
            (
                (
                    str(e.get("level", "")),
                    str(e.get("time", "")),
                    str(e.get("level", "")),
                    str(e.get("logger", "")),
                    str(e.get("data", "")),
                )
                for e in entries
            ),
        )
        return format_html(
            '<div class="mcp-log-tail"><table>'
            "<thead><tr><th>time (UTC)</th><th>level</th><th>logger</th><th>message</th></tr></thead>"
            "<tbody>{}</tbody></table></div>",
            rows,
        )

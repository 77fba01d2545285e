"""MCP servers in the Django admin: live toggles, edits written back to mcp.json, rediscovery.

The admin only parses requests, calls :mod:`mcpclient.admin.changes` and reports the
outcome; the services validate, write mcp.json, mirror it into the rows and apply the change
to the running hub. Secrets are never rendered: ``env`` and ``headers`` values are masked
unless they are placeholders, and the raw ``config`` column is never shown.

A server whose entry uses ``${input:ID}`` placeholders gets an "inputs" page (its own URL,
linked from the change page): where each value comes from, and for staff who may change the
server a password field per input. Values go to the encrypted secret store
(:mod:`mcpclient.secrets.inputs`), never to mcp.json, and are never rendered back.

The server's page lists its discovered tools (:class:`mcpclient.admin.tools.McpToolInline`) and
its log part (:class:`mcpclient.admin.logs.ServerLogsAdmin`).

The admin site carries the product's name (:data:`SITE_NAME`), and the server list keeps to
seven short columns so that it fits a 1280-pixel screen next to the admin's navigation.

Registered with the admin site on import (the package's face imports this module, so Django's
admin autodiscovery registers it): :class:`McpServerAdmin`.
"""

from __future__ import annotations

import datetime as dt
import json
from typing import Any
from urllib.parse import urlencode

from django.contrib import admin, messages
from django.contrib.admin import ActionLocation
from django.contrib.admin.actions import delete_selected as django_delete_selected
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.db.models import Count, Q, QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseNotAllowed, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils.html import format_html, format_html_join
from django.utils.http import url_has_allowed_host_and_scheme
from django.utils.text import Truncator
from django.utils.timesince import timesince

import mcpclient.admin.changes as changes
from mcpclient.admin.access import server_groups, who_can_use
from mcpclient.admin.changes import ServerChangeError
from mcpclient.admin.forms import McpServerForm
from mcpclient.admin.logs import ServerLogsAdmin
from mcpclient.admin.tools import McpToolInline, approval_reasons
from mcpclient.core.approval import asking_summary
from mcpclient.core.redaction import masked_entry
from mcpclient.core.words import counted
from mcpclient.models import McpServer
from mcpclient.runtime.composition import get_hub
from mcpclient.secrets import inputs
from mcpclient.secrets.store import SecretStoreError

SITE_NAME = "BooCode"
admin.site.site_header = f"{SITE_NAME} administration"
admin.site.site_title = f"{SITE_NAME} admin"
admin.site.index_title = f"{SITE_NAME}: MCP servers, agents, conversations and users"

BOTH = [ActionLocation.CHANGE_LIST, ActionLocation.CHANGE_FORM]
ERROR_SHOWN = 60  # characters of a last error in the server list (the whole error is its tooltip)
CHANGE_ACTIONS = ("enable", "disable", "reconnect", "rediscover")


def with_held_count(servers: QuerySet[McpServer]) -> QuerySet[McpServer]:
    """``servers`` each with ``held_count``: its tools held for review that would be offered otherwise."""
    held = Q(tools__held=True, tools__rejected=False, tools__filtered=False)
    return servers.annotate(held_count=Count("tools", filter=held))


def _retry_plan(server: McpServer) -> str:
    """When the hub tries the server again by itself, with the attempts so far ("" when it does not)."""
    if server.next_retry_at is None:
        return ""
    at = server.next_retry_at.astimezone(dt.UTC).strftime("%H:%M:%S UTC")
    if server.circuit_open:
        return f"circuit open after {server.reconnect_attempts} failed attempts: next try at {at}"
    tried = f" (attempt {server.reconnect_attempts + 1})" if server.reconnect_attempts else ""
    return f"reconnecting at {at}{tried}"


@admin.register(McpServer)
class McpServerAdmin(ServerLogsAdmin, admin.ModelAdmin):
    """List, inspect, add, edit, toggle and delete the servers of mcp.json."""

    form = McpServerForm
    inlines = [McpToolInline]
    list_display = (
        "name",
        "transport_display",
        "enabled_toggle",
        "status_badge",
        "tools_summary",
        "short_error",
        "connected_since",
    )
    list_filter = ("status", "transport")
    search_fields = ("name",)
    actions = ["enable", "disable", "reconnect", "rediscover", "delete_selected"]
    readonly_fields = (
        "status_badge",
        "last_error",
        "connected_since",
        "server_display",
        "protocol_version",
        "active_transport",
        "tool_count",
        "held_summary",
        "approval_display",
        "tools_note",
        "rejected_count",
        "filtered_count",
        "stderr_display",
        "entry_display",
        "inputs_display",
        "sign_in_display",
        "log_level_display",
        "log_level_text",
        "log_tail_display",
        "who_can_use",
    )
    connection_fieldset = (
        "Connection",
        {
            "fields": (
                "status_badge",
                "last_error",
                "connected_since",
                "server_display",
                "protocol_version",
                "active_transport",
                ("tool_count", "held_summary", "rejected_count", "filtered_count"),
                "approval_display",
                "tools_note",
                "stderr_display",
            )
        },
    )
    inputs_fieldset = ("Inputs (${input:ID} values)", {"fields": ("inputs_display",)})
    sign_in_fieldset = ("Sign-in (OAuth)", {"fields": ("sign_in_display",)})

    # -- pages ----------------------------------------------------------------------------
    def get_fieldsets(self, request: HttpRequest, obj: McpServer | None = None) -> list[tuple[Any, dict]]:
        """Editable entry fields for those who may change it; the entry as written for all."""
        with_inputs = [self.inputs_fieldset] if obj is not None and inputs.input_ids(obj.config) else []
        if obj is not None and changes.oauth_mode(obj) is not None:
            with_inputs.append(self.sign_in_fieldset)
        if obj is not None and not self.has_change_permission(request, obj):
            return [
                (None, {"fields": ("name", "transport", "enabled", "who_can_use", "entry_display")}),
                *with_inputs,
                self.connection_fieldset,
                self.logs_fieldset(can_change=False),  # beside the stderr tail
            ]
        fieldsets: list[tuple[Any, dict]] = [
            (None, {"fields": ("name", "transport", "enabled", "loaded")}),
            ("stdio", {"fields": ("command", "args", "env", "env_file", "cwd")}),
            ("Streamable HTTP / SSE", {"fields": ("url", "headers")}),
            (
                "Safety",
                {
                    "fields": (
                        "write_tools",
                        "trusted",
                        "read_only",
                        "apps",
                        "pin_tools",
                        "accept_new_tools",
                        "include_tools",
                        "exclude_tools",
                    )
                },
            ),
            ("Who may use it", {"fields": ("groups", "who_can_use")}),
            ("Limits and other keys", {"fields": (("timeout", "init_timeout"), "extra")}),
        ]
        if obj is not None:
            fieldsets.append(("As written in mcp.json", {"fields": ("entry_display",)}))
            fieldsets.extend(with_inputs)
            fieldsets.append(self.connection_fieldset)
            fieldsets.append(self.logs_fieldset(can_change=True))  # beside the stderr tail
        return fieldsets

    def get_form(self, request: HttpRequest, obj: McpServer | None = None, **kwargs: Any) -> type:
        form = super().get_form(request, obj, **kwargs)
        save_error = getattr(request, "_mcp_save_error", None)
        if save_error:
            message, field = save_error
            form = type(form.__name__, (form,), {"save_error": message, "save_error_field": field})
        return form

    def get_list_display(self, request: HttpRequest) -> tuple[str, ...]:
        if self.has_change_permission(request):
            return self.list_display
        return tuple("enabled" if name == "enabled_toggle" else name for name in self.list_display)

    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        """Refuse actions the user may not run (403); re-read mcp.json if it changed on disk."""
        if request.method == "POST" and "action" in request.POST:
            action = request.POST.get("action")
            if action in CHANGE_ACTIONS and not self.has_change_permission(request):
                raise PermissionDenied
            if action == "delete_selected" and not self.has_delete_permission(request):
                raise PermissionDenied
        else:
            self._refresh(request)
        return super().changelist_view(request, extra_context)

    def changeform_view(
        self,
        request: HttpRequest,
        object_id: str | None = None,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        """Show the form again with the error when mcp.json could not be written."""
        if request.method == "GET":
            self._refresh(request)
        try:
            return super().changeform_view(request, object_id, form_url, extra_context)
        except ServerChangeError as exc:
            # Nothing was changed (the transaction rolled back): show the submitted form again.
            request._mcp_save_error = (str(exc), exc.field)
            return super().changeform_view(request, object_id, form_url, extra_context)

    def delete_view(
        self, request: HttpRequest, object_id: str, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        """Django's delete page; a failed write is reported on the server's page."""
        try:
            return super().delete_view(request, object_id, extra_context)
        except ServerChangeError as exc:
            self.message_user(request, str(exc), messages.ERROR)
            return HttpResponseRedirect(reverse("admin:mcpclient_mcpserver_change", args=[object_id]))

    def get_urls(self) -> list[URLPattern]:
        toggle = path(
            "<path:object_id>/toggle/",
            self.admin_site.admin_view(self.toggle_view),
            name="mcpclient_mcpserver_toggle",
        )
        inputs_page = path(
            "<path:object_id>/inputs/",
            self.admin_site.admin_view(self.inputs_view),
            name="mcpclient_mcpserver_inputs",
        )
        return [toggle, inputs_page, *self.log_level_urls(), *super().get_urls()]

    def toggle_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        """POST ``enabled=1|0``: the list's per-row enable/disable button."""
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        server = self.get_object(request, object_id)
        if server is None:
            return HttpResponseRedirect(reverse("admin:mcpclient_mcpserver_changelist"))
        if not self.has_change_permission(request, server):
            raise PermissionDenied
        self._set_enabled(request, [server.name], request.POST.get("enabled") == "1")
        back = request.headers.get("referer", "")
        if not url_has_allowed_host_and_scheme(back, {request.get_host()}, request.is_secure()):
            back = reverse("admin:mcpclient_mcpserver_changelist")
        return HttpResponseRedirect(back)

    def inputs_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        """GET: where each ``${input:ID}`` value comes from. POST: store or clear values, reconnect."""
        server = self.get_object(request, object_id)
        if server is None:
            return HttpResponseRedirect(reverse("admin:mcpclient_mcpserver_changelist"))
        if not self.has_view_or_change_permission(request, server):
            raise PermissionDenied
        ids = inputs.input_ids(server.config)
        can_change = self.has_change_permission(request, server)
        if request.method == "POST":
            if not can_change:
                raise PermissionDenied
            self._update_inputs(request, ids)
            return HttpResponseRedirect(request.path)
        if request.method != "GET":
            return HttpResponseNotAllowed(["GET", "POST"])
        context = {
            **self.admin_site.each_context(request),
            "opts": self.opts,
            "title": f"Inputs of {server.name}",
            "server": server,
            "statuses": inputs.input_statuses(ids),
            "can_change": can_change,
        }
        return TemplateResponse(request, "admin/mcpclient/mcpserver/inputs.html", context)

    def _update_inputs(self, request: HttpRequest, ids: list[str]) -> None:
        values = {input_id: request.POST.get(f"value:{input_id}", "") for input_id in ids}
        clear = [input_id for input_id in ids if request.POST.get(f"clear:{input_id}")]
        try:
            update = inputs.update_inputs(allowed=ids, values=values, clear=clear)
        except (inputs.InputError, SecretStoreError) as exc:
            self.message_user(request, f"Nothing was changed: {exc}", messages.ERROR)
            return
        if not update.changed:
            self.message_user(request, "No value entered: nothing to change.", messages.INFO)
            return
        parts = [f"stored {', '.join(update.stored)}"] if update.stored else []
        parts += [f"cleared {', '.join(update.cleared)}"] if update.cleared else []
        names, live = changes.reconnect_servers_using(update.changed)
        if names and live:
            parts.append(f"reconnected {', '.join(names)}")
        elif names:
            users = ", ".join(names)
            parts.append(f"no MCP hub runs in this process: {users} will use it when next connected")
        self.message_user(request, f"Inputs: {'; '.join(parts)}.", messages.SUCCESS)

    def _refresh(self, request: HttpRequest) -> None:
        error = changes.refresh_from_file()
        if error:
            self.message_user(request, f"mcp.json cannot be used: {error}", messages.ERROR)
        if get_hub() is None:
            self.message_user(
                request,
                "The MCP hub does not run in this process: changes are written to mcp.json and the "
                "web server applies them before its next chat turn.",
                messages.INFO,
            )

    # -- saving ---------------------------------------------------------------------------
    def save_model(self, request: HttpRequest, obj: McpServer, form: McpServerForm, change: bool) -> None:
        """Write the entry through to mcp.json (the service saves the row)."""
        assert form.entry is not None  # a valid form always built one
        row = changes.save_server(
            name=form.cleaned_data["name"],
            entry=form.entry,
            original_name=form.original_name,
            expected=form.original,
        )
        obj.pk = row.pk
        obj.refresh_from_db()
        obj._state.adding = False

    def delete_model(self, request: HttpRequest, obj: McpServer) -> None:
        """Remove the entry from mcp.json (the service deletes the row)."""
        changes.delete_servers(names=[obj.name])

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[McpServer]) -> None:
        """Remove the entries from mcp.json in one write."""
        changes.delete_servers(names=list(queryset.values_list("name", flat=True)))

    # -- actions --------------------------------------------------------------------------
    def _set_enabled(self, request: HttpRequest, names: list[str], enabled: bool) -> None:
        try:
            changed = changes.set_servers_enabled(names=names, enabled=enabled)
        except ServerChangeError as exc:
            self.message_user(request, str(exc), messages.ERROR)
            return
        verb = "enabled" if enabled else "disabled"
        if changed:
            summary = f"{verb.title()}: {', '.join(changed)} (mcp.json updated)."
            self.message_user(request, summary, messages.SUCCESS)
        else:
            self.message_user(request, f"Already {verb}: nothing to change.", messages.INFO)

    def _live(self, request: HttpRequest, queryset: QuerySet[McpServer], verb: str) -> list[str]:
        """The enabled, valid servers of ``queryset``; the others are reported and skipped."""
        names: list[str] = []
        skipped: list[str] = []
        for server in queryset:
            (names if server.enabled and not server.config_error else skipped).append(server.name)
        if skipped:
            self.message_user(
                request, f"Not {verb} (disabled or invalid): {', '.join(skipped)}.", messages.WARNING
            )
        return names

    def _report(self, request: HttpRequest, names: list[str], verb: str) -> None:
        rows = with_held_count(McpServer.objects.filter(name__in=names))
        summary = "; ".join(
            f"{row.name}: {row.status}, {counted(row.tool_count, 'tool')}"
            + (f", {row.held_count} held for review" if row.held_count else "")
            for row in rows
        )
        self.message_user(request, f"{verb}: {summary}.", messages.SUCCESS)

    @admin.action(description="Enable", permissions=["change"], location=BOTH)
    def enable(self, request: HttpRequest, queryset: QuerySet[McpServer]) -> None:
        """Write ``"enabled": true`` where it was false; the hub connects the servers."""
        self._set_enabled(request, list(queryset.values_list("name", flat=True)), True)

    @admin.action(description="Disable", permissions=["change"], location=BOTH)
    def disable(self, request: HttpRequest, queryset: QuerySet[McpServer]) -> None:
        """Write ``"enabled": false``; the hub closes the sessions and stops the children."""
        self._set_enabled(request, list(queryset.values_list("name", flat=True)), False)

    @admin.action(description="Reconnect", permissions=["change"], location=BOTH)
    def reconnect(self, request: HttpRequest, queryset: QuerySet[McpServer]) -> None:
        """Close and reopen the sessions of the enabled servers in this process's hub."""
        names = self._live(request, queryset, "reconnected")
        if names:
            # After the commit: the change page runs actions inside a transaction, and the hub
            # writes the servers' state from other threads while this request waits for it.
            transaction.on_commit(lambda: self._reconnect_now(request, names))

    def _reconnect_now(self, request: HttpRequest, names: list[str]) -> None:
        if changes.reconnect_servers(names=names):
            self._report(request, names, "Reconnected")
        else:
            self.message_user(
                request, "The MCP hub does not run in this process: nothing to reconnect.", messages.WARNING
            )

    @admin.action(
        description="Rediscover tools, resources and prompts", permissions=["change"], location=BOTH
    )
    def rediscover(self, request: HttpRequest, queryset: QuerySet[McpServer]) -> None:
        """List the enabled servers' tools again and store them."""
        names = self._live(request, queryset, "rediscovered")
        if names:
            transaction.on_commit(lambda: self._rediscover_now(request, names))  # see reconnect()

    def _rediscover_now(self, request: HttpRequest, names: list[str]) -> None:
        try:
            changes.rediscover_servers(names=names)
        except ServerChangeError as exc:
            self.message_user(request, str(exc), messages.ERROR)
            return
        self._report(request, names, "Tools listed again")

    @admin.action(description="Delete selected MCP servers", permissions=["delete"])
    def delete_selected(self, request: HttpRequest, queryset: QuerySet[McpServer]) -> HttpResponse | None:
        """Django's confirmation page and deletion, with a write failure shown as a message."""
        try:
            return django_delete_selected(self, request, queryset)
        except ServerChangeError as exc:
            self.message_user(request, str(exc), messages.ERROR)
            return None

    # -- columns and read-only fields -------------------------------------------------------
    @admin.display(description="enabled", ordering="enabled")
    def enabled_toggle(self, server: McpServer) -> str:
        url = reverse("admin:mcpclient_mcpserver_toggle", args=[server.pk])
        label, value, title = ("on", "0", "Disable") if server.enabled else ("off", "1", "Enable")
        return format_html(
            '<button type="submit" class="button mcp-toggle" formaction="{}" name="enabled" value="{}" '
            'title="{} {}">{}</button>',
            url,
            value,
            title,
            server.name,
            label,
        )

    @admin.display(description="status", ordering="status")
    def status_badge(self, server: McpServer) -> str:
        # Colours in static/boocode/admin.css: the Content-Security-Policy refuses inline styles.
        badge = format_html(
            '<span class="mcp-status mcp-status-{}">● {}</span>', server.status, server.get_status_display()
        )
        plan = _retry_plan(server)
        return format_html('{}<br><small class="mcp-retry">{}</small>', badge, plan) if plan else badge

    def get_queryset(self, request: HttpRequest) -> QuerySet[McpServer]:
        """The servers, each with how many of its tools are held for review (list and page), and
        their tools (how many ask before each call)."""
        return with_held_count(super().get_queryset(request)).prefetch_related("tools")

    @admin.display(description="held for review")
    def held_summary(self, server: McpServer) -> str:
        """How many tools wait for an administrator's review, linking to their definitions."""
        held = getattr(server, "held_count", 0)
        if not held:
            return "0"
        query = urlencode({"review": "pending", "server": server.name})
        url = reverse("admin:mcpclient_toolpin_changelist") + "?" + query
        return format_html('<a href="{}">{} held for review</a>', url, held)

    @admin.display(description="tools", ordering="tool_count")
    def tools_summary(self, server: McpServer) -> str:
        """Tools offered, then (small) how many ask before each call, how many are held for review,
        how many the read-only guard rejected and the filters left out."""
        held = getattr(server, "held_count", 0)
        asking = sum(bool(reason) for reason in approval_reasons(server))
        left_out = [f"{asking} ask before each call"] if asking else []
        left_out += [
            f"{count} {what}"
            for count, what in (
                (held, "held for review"),
                (server.rejected_count, "rejected"),
                (server.filtered_count, "filtered"),
            )
            if count
        ]
        if server.tools_note:
            left_out.append("see the listing note")
        if not left_out:
            return str(server.tool_count)
        return format_html(
            '{}<br><small class="mcp-left-out">{}</small>', server.tool_count, ", ".join(left_out)
        )

    @admin.display(description="ask before each call")
    def approval_display(self, server: McpServer) -> str:
        """How many offered tools wait for the person's approval before each call, and why."""
        none = "none: every offered tool declares readOnlyHint: true or is vouched for"
        return asking_summary(approval_reasons(server)) or none

    @admin.display(description="last error")
    def short_error(self, server: McpServer) -> str:
        if not server.last_error:
            return "-"
        short = Truncator(server.last_error).chars(ERROR_SHOWN)
        return format_html('<span title="{}">{}</span>', server.last_error, short)

    @admin.display(description="connected", ordering="connected_at")
    def connected_since(self, server: McpServer) -> str:
        """How long ago the session opened ("-" when not connected); the time itself is its tooltip."""
        if server.connected_at is None:
            return "-"
        since = timesince(server.connected_at, depth=1)
        return format_html('<span title="{}">{} ago</span>', server.connected_at.isoformat(), since)

    @admin.display(description="server")
    def server_display(self, server: McpServer) -> str:
        info = server.server_info or {}
        text = " ".join(str(info[key]) for key in ("name", "version") if info.get(key))
        if info.get("title"):
            text += f" ({info['title']})"
        return text or "-"

    @admin.display(description="stderr (last lines)")
    def stderr_display(self, server: McpServer) -> str:
        if not server.stderr_tail:
            return "-"
        return format_html('<pre class="mcp-stderr">{}</pre>', server.stderr_tail)

    @admin.display(description="transport", ordering="transport")
    def transport_display(self, server: McpServer) -> str:
        """The configured transport, and the one in use when a fallback chose another."""
        configured = server.get_transport_display()
        if server.active_transport and server.active_transport != server.transport:
            return f"{configured} → {server.get_active_transport_display()}"
        return configured

    @admin.display(description="inputs")
    def inputs_display(self, server: McpServer) -> str:
        """Each ``${input:ID}`` of the entry and where its value comes from (never the value)."""
        statuses = inputs.input_statuses(inputs.input_ids(server.config))
        items = format_html_join(
            "",
            '<li class="mcp-input mcp-input-{}"><code>${{input:{}}}</code>: {}</li>',
            ((status.state, status.input_id, status.detail) for status in statuses),
        )
        url = reverse("admin:mcpclient_mcpserver_inputs", args=[server.pk])
        return format_html('<ul class="mcp-inputs">{}</ul><a href="{}">Enter or clear values</a>', items, url)

    @admin.display(description="sign-in")
    def sign_in_display(self, server: McpServer) -> str:
        """Whether the server is signed in (never a token), with Connect / Disconnect for shared ones.

        The buttons submit the change form to the OAuth views (a form inside the admin's form
        is not allowed), which only read the CSRF token from it.
        """
        mode = changes.oauth_mode(server)
        if mode == "perUser":
            return "Each person connects their own account from the chat; no shared sign-in."
        back = reverse("admin:mcpclient_mcpserver_change", args=[server.pk])
        signed_in = changes.has_shared_credential(server.name)
        state = "signed in (tokens stored encrypted)" if signed_in else "not signed in"
        connect = reverse("oauth:connect", args=[server.name]) + "?" + urlencode({"next": back})
        buttons = format_html(
            '<button type="submit" class="button" formaction="{}" formmethod="post" formnovalidate '
            'id="oauth-connect">{}</button>',
            connect,
            "Connect again" if signed_in else "Connect",
        )
        if signed_in:
            disconnect = reverse("oauth:disconnect", args=[server.name]) + "?" + urlencode({"next": back})
            buttons += format_html(
                ' <button type="submit" class="button" formaction="{}" formmethod="post" formnovalidate '
                'id="oauth-disconnect">Disconnect</button>',
                disconnect,
            )
        return format_html("<p>Shared: one sign-in for everybody. Now: {}.</p><p>{}</p>", state, buttons)

    @admin.display(description="who can use it now")
    def who_can_use(self, server: McpServer) -> str:
        return who_can_use(server_groups(server))

    @admin.display(description="entry (secrets masked)")
    def entry_display(self, server: McpServer) -> str:
        entry = masked_entry(changes.current_entry(server))
        text = json.dumps(entry, indent=2, ensure_ascii=False)
        return format_html('<pre class="mcp-entry">{}</pre>', text)

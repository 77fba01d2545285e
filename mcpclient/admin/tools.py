"""Discovered tools in the Django admin: read-only pages, the server is their source.

The server's page lists its tools (:class:`McpToolInline`) with their titles, each links to its
own page (:class:`McpToolAdmin`) with the schemas and icons. Whoever may see the servers sees
their tools. Everything a server sent is shown as escaped text; an icon is its address, never an
``<img>`` or a link. Whether a tool is read-only is written as "yes" or "no": a rejected tool is
the guard doing its job, not a failure, so it gets no red icon.

Registered with the admin site on import (the package's face imports this module):
:class:`McpToolAdmin`.
"""

from __future__ import annotations

import json
from typing import Any

from django.contrib import admin
from django.http import HttpRequest
from django.utils.html import format_html, format_html_join

from mcpclient.admin.pins import findings_list
from mcpclient.core import mcp_apps
from mcpclient.core.approval import stored_approval_reason
from mcpclient.models import McpServer, McpTool

DATA_URI_SHOWN = 48  # characters of a data: icon shown before "…"


def yes_no(value: bool) -> str:
    """ "yes" or "no" as text (Django's boolean icons make a rejected tool look like a failure)."""
    return "yes" if value else "no"


def read_only_text(tool: McpTool) -> str:
    """What the server declares: "yes" (readOnlyHint true), "no" (false) or that it says nothing,
    which the MCP schema reads as "may change things"."""
    declared = (tool.annotations or {}).get("readOnlyHint")
    if isinstance(declared, bool):
        return yes_no(declared)
    return "not declared (may change things)"


def _offered(tool: McpTool) -> bool:
    return not (tool.filtered or tool.rejected or tool.held) and mcp_apps.MODEL in (tool.visibility or ())


def approval_reasons(server: McpServer) -> list[str]:
    """Why each offered tool of ``server`` asks before each call ("" for one that does not)."""
    return [
        stored_approval_reason(server.config, tool.name, tool.annotations)
        for tool in server.tools.all()
        if _offered(tool)
    ]


def tool_state(tool: McpTool) -> str:
    """offered, rejected (read-only guard), filtered (includeTools/excludeTools), or "views only"
    / "not callable" (its ``_meta.ui.visibility`` leaves the model out), as a span."""
    if tool.filtered or tool.rejected:
        state = label = "filtered" if tool.filtered else "rejected"
    elif tool.held:
        state, label = "held", "held for review"
    elif mcp_apps.MODEL in (tool.visibility or ()):
        state = label = "offered"
    else:
        state, label = "hidden", "views only" if mcp_apps.APP in (tool.visibility or ()) else "not callable"
    return format_html('<span class="mcp-tool-{}">{}</span>', state, label)


def approval_text(tool: McpTool) -> str:
    """Why each call of an offered tool needs the person's approval ("no" when it does not)."""
    if tool.rejected or tool.filtered:
        return "-"
    return stored_approval_reason(tool.server.config, tool.name, tool.annotations) or "no"


def json_block(value: Any, css_class: str) -> str:
    """``value`` as indented JSON in a ``<pre>`` (escaped), or "-" when there is none."""
    if value is None:
        return "-"
    return format_html('<pre class="{}">{}</pre>', css_class, json.dumps(value, indent=2, ensure_ascii=False))


def icon_text(src: str) -> str:
    """An icon's address as text: a data: URI is cut short and its size given instead."""
    if src[:5].lower() == "data:" and len(src) > DATA_URI_SHOWN:
        return f"{src[:DATA_URI_SHOWN]}… ({len(src.encode())} bytes)"
    return src


class McpToolInline(admin.TabularInline):
    """The tools discovered on a server, read-only (the server is their source)."""

    model = McpTool
    fields = (
        "prefixed_name",
        "title",
        "description",
        "read_only",
        "offered",
        "approval",
        "reject_reason",
        "warning",
    )
    readonly_fields = fields
    extra = 0
    can_delete = False
    show_change_link = True
    verbose_name_plural = "discovered tools"

    def has_add_permission(self, request: HttpRequest, obj: McpServer | None = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: McpServer | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: McpServer | None = None) -> bool:
        return False

    def has_view_permission(self, request: HttpRequest, obj: McpServer | None = None) -> bool:
        """Whoever may see the server sees its tools."""
        user = request.user
        return user.has_perm("mcpclient.view_mcpserver") or user.has_perm("mcpclient.change_mcpserver")

    @admin.display(description="read-only")
    def read_only(self, tool: McpTool) -> str:
        return read_only_text(tool)

    @admin.display(description="offered")
    def offered(self, tool: McpTool) -> str:
        """The tool's state: offered, rejected (read-only guard) or filtered (includeTools/excludeTools)."""
        return tool_state(tool)

    @admin.display(description="needs approval")
    def approval(self, tool: McpTool) -> str:
        return approval_text(tool)


@admin.register(McpTool)
class McpToolAdmin(admin.ModelAdmin):
    """Discovered tools, read-only: whoever may see the servers sees their tools' pages."""

    list_display = ("prefixed_name", "title", "server", "state", "read_only", "approval")
    list_filter = ("server", "rejected", "filtered", "held")
    list_select_related = ("server",)
    search_fields = ("name", "prefixed_name", "title", "description")
    fieldsets = (
        (None, {"fields": ("server", "name", "prefixed_name", "title", "description")}),
        ("State", {"fields": ("state", "read_only", "approval", "reject_reason", "warning")}),
        ("Definition", {"fields": ("digest", "pin_note", "flagged")}),
        ("View (MCP Apps)", {"fields": ("ui_resource_uri", "visibility")}),
        ("Schemas", {"fields": ("input_schema_display", "output_schema_display")}),
        ("Annotations and icons", {"fields": ("annotations_display", "icons_display")}),
    )
    readonly_fields = (
        "server",
        "name",
        "prefixed_name",
        "title",
        "description",
        "state",
        "read_only",
        "approval",
        "reject_reason",
        "warning",
        "digest",
        "pin_note",
        "flagged",
        "ui_resource_uri",
        "visibility",
        "input_schema_display",
        "output_schema_display",
        "annotations_display",
        "icons_display",
    )

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: McpTool | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: McpTool | None = None) -> bool:
        return False

    def has_view_permission(self, request: HttpRequest, obj: McpTool | None = None) -> bool:
        """Whoever may see the servers sees their tools (as on the server's page)."""
        user = request.user
        return user.has_perm("mcpclient.view_mcpserver") or user.has_perm("mcpclient.change_mcpserver")

    @admin.display(description="state")
    def state(self, tool: McpTool) -> str:
        return tool_state(tool)

    @admin.display(description="needs approval")
    def approval(self, tool: McpTool) -> str:
        return approval_text(tool)

    @admin.display(description="read-only")
    def read_only(self, tool: McpTool) -> str:
        return read_only_text(tool)

    @admin.display(description="flagged")
    def flagged(self, tool: McpTool) -> str:
        """What the poisoning check found in its description."""
        return findings_list(tool.findings)

    @admin.display(description="input schema")
    def input_schema_display(self, tool: McpTool) -> str:
        return json_block(tool.input_schema, "mcp-input-schema")

    @admin.display(description="output schema")
    def output_schema_display(self, tool: McpTool) -> str:
        return json_block(tool.output_schema, "mcp-output-schema")

    @admin.display(description="annotations")
    def annotations_display(self, tool: McpTool) -> str:
        return json_block(tool.annotations, "mcp-annotations")

    @admin.display(description="icons")
    def icons_display(self, tool: McpTool) -> str:
        """Each icon's address as text with its type, sizes and theme: never fetched or linked."""
        icons = [icon for icon in tool.icons or () if isinstance(icon, dict)]
        if not icons:
            return "-"
        rows = []
        for icon in icons:
            details = [
                str(icon.get("mimeType") or ""),
                " ".join(map(str, icon.get("sizes") or ())),
                str(icon.get("theme") or ""),
            ]
            shown = ", ".join(detail for detail in details if detail)
            rows.append((icon_text(str(icon.get("src", ""))), f" ({shown})" if shown else ""))
        items = format_html_join("", '<li><code class="mcp-icon-src">{}</code>{}</li>', rows)
        return format_html('<ul class="mcp-icons">{}</ul>', items)

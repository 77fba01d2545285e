"""Conversations in the Django admin (read-mostly: for support and cleanup).

Superseded messages (replaced by a regenerated answer or an edit) are listed with the others,
with the time they were replaced: nothing a user replaces is lost.

The audit log of tool calls (:mod:`boocode.chat.audit`) is append-only here as well, with
filters and CSV / JSON export of the selected rows ("select all" takes every filtered row).

Tool approvals are an audit trail: staff see every decision (who, when, which tool and
arguments, whether it was remembered for the conversation), filterable, and nobody can add,
change or delete one here.

Agents are read-only too (AGENTS.md is their source): each shows its patterns as written, the
tools they resolve to right now (native tools and the tools of MCP servers ready in this
process) and the patterns that match nothing, usually a typo or a server that is down. Opening
the list re-reads the file if it changed and shows its errors. Their admin lives here, above
the tool registry it asks, so that ``agents`` stays below the tools.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.utils import timezone
from django.utils.html import format_html, format_html_join

from agents import roster
from agents.models import Agent
from agents.policy import unmatched_patterns
from boocode.chat import audit
from boocode.chat.models import Conversation, Message, ToolApproval, ToolCall, ToolCallAudit
from boocode.tools.registry import Tool, agent_tools, available_tools
from mcpclient.runtime import get_hub


class MessageInline(admin.TabularInline):
    model = Message
    fields = ("role", "status", "content", "error", "superseded_at")
    readonly_fields = fields
    extra = 0
    can_delete = False
    show_change_link = True


@admin.register(Conversation)
class ConversationAdmin(admin.ModelAdmin):
    list_display = ("title", "owner", "agent_name", "model", "updated_at")
    list_filter = ("agent_name",)
    search_fields = ("title", "owner__username")
    inlines = [MessageInline]


class ToolCallInline(admin.TabularInline):
    model = ToolCall
    fields = ("name", "server", "status", "arguments", "is_error", "duration_ms")
    readonly_fields = fields
    extra = 0
    can_delete = False


@admin.register(Message)
class MessageAdmin(admin.ModelAdmin):
    list_display = ("id", "conversation", "role", "status", "model", "superseded_at", "created_at")
    list_filter = ("role", "status", ("superseded_at", admin.EmptyFieldListFilter))
    readonly_fields = (
        "conversation",
        "role",
        "status",
        "content",
        "error",
        "model",
        "prompt_tokens",
        "completion_tokens",
        "superseded_at",
        "created_at",
        "updated_at",
    )
    inlines = [ToolCallInline]


@admin.register(ToolApproval)
class ToolApprovalAdmin(admin.ModelAdmin):
    """Every approval decision, read-only (what the person decided is not for staff to rewrite)."""

    list_display = (
        "created_at",
        "name",
        "server",
        "decision",
        "remember",
        "decided_by",
        "decided_at",
        "conversation",
    )
    list_filter = ("decision", "remember", "server", "created_at")
    search_fields = ("name", "server", "tool", "decided_by__username", "conversation__title")
    date_hierarchy = "created_at"
    list_select_related = ("decided_by", "conversation")
    fields = (
        "conversation",
        "tool_call",
        "server",
        "tool",
        "name",
        "arguments",
        "hints",
        "reason",
        "decision",
        "remember",
        "decided_by",
        "created_at",
        "decided_at",
    )
    readonly_fields = fields

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: ToolApproval | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: ToolApproval | None = None) -> bool:
        return False


@admin.register(ToolCallAudit)
class ToolCallAuditAdmin(admin.ModelAdmin):
    """The audit log of tool calls: append-only (no add, change or delete), filtered, exported."""

    list_display = (
        "created_at", "name", "server", "origin", "outcome", "username", "agent", "approval", "duration_ms",
        "result_bytes",
    )
    list_filter = ("origin", "outcome", "server", "approval", "agent", "created_at")
    search_fields = ("name", "tool", "server", "username", "agent", "arguments")
    date_hierarchy = "created_at"
    list_select_related = ("decided_by",)
    actions = ["export_csv", "export_json"]
    fields = (
        "created_at", "username", "user", "conversation_id", "agent", "origin", "server", "tool", "name",
        "digest", "arguments", "argument_bytes", "result_bytes", "outcome", "error", "duration_ms",
        "approval", "decided_by",
    )
    readonly_fields = fields

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: ToolCallAudit | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: ToolCallAudit | None = None) -> bool:
        return False

    def has_export_permission(self, request: HttpRequest) -> bool:
        """Who may see the rows may export them."""
        return self.has_view_permission(request)

    @admin.action(description="Export the selected calls as CSV", permissions=["export"])
    def export_csv(self, request: HttpRequest, queryset: QuerySet[ToolCallAudit]) -> HttpResponse:
        return _download(audit.export_csv(queryset.select_related("decided_by")), "text/csv", "csv")

    @admin.action(description="Export the selected calls as JSON", permissions=["export"])
    def export_json(self, request: HttpRequest, queryset: QuerySet[ToolCallAudit]) -> HttpResponse:
        rows = queryset.select_related("decided_by")
        return _download(audit.export_json(rows), "application/json", "json")


def _download(body: str, content_type: str, extension: str) -> HttpResponse:
    stamp = timezone.now().strftime("%Y%m%d-%H%M%S")
    response = HttpResponse(body, content_type=f"{content_type}; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="tool-calls-{stamp}.{extension}"'
    return response


def _patterns_text(agent: Agent) -> str:
    if agent.tools is None:
        return "all tools (no tools: key)"
    if not agent.tools:
        return "no tools ([])"
    return ", ".join(agent.tools)


@admin.register(Agent)
class AgentAdmin(admin.ModelAdmin):
    """View-only admin for agents, with the tools each one resolves to."""

    list_display = ("name", "description", "model_display", "patterns", "tool_count", "unmatched", "error")
    search_fields = ("name", "description")
    fields = (
        "name", "description", "patterns", "resolved_tools", "unmatched", "model_display", "temperature",
        "top_p", "max_tool_calls", "tool_search", "pinned", "skills", "approve", "prompt", "extra", "line",
        "is_builtin",
        "error", "updated_at",
    )
    readonly_fields = ("patterns", "resolved_tools", "unmatched", "model_display")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Agent | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Agent | None = None) -> bool:
        return False

    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        """Re-read AGENTS.md if it changed, then show its errors above the list."""
        roster.refresh_agents_if_changed()
        for error in roster.agents_file_errors():
            messages.warning(request, str(error))
        if get_hub() is None:
            messages.info(request, "The MCP hub is not running in this process: only native tools are shown.")
        return super().changelist_view(request, extra_context)

    def _tools(self, agent: Agent) -> list[Tool]:
        return agent_tools(agent)

    @admin.display(description="tool patterns")
    def patterns(self, agent: Agent) -> str:
        return _patterns_text(agent)

    @admin.display(description="model")
    def model_display(self, agent: Agent) -> str:
        return agent.model or "(default model)"

    @admin.display(description="tools now")
    def tool_count(self, agent: Agent) -> int:
        return len(self._tools(agent))

    @admin.display(description="resolved tools")
    def resolved_tools(self, agent: Agent) -> str:
        tools = self._tools(agent)
        if not tools:
            return "(none)"
        return format_html(
            "<ul>{}</ul>",
            format_html_join("", "<li><code>{}</code> ({})</li>", ((t.name, t.source) for t in tools)),
        )

    @admin.display(description="patterns matching nothing")
    def unmatched(self, agent: Agent) -> str:
        names = [tool.name for tool in available_tools()]
        return ", ".join(unmatched_patterns(agent.tools, names)) or "-"

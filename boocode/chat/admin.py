"""Conversations in the Django admin (read-mostly: for support and cleanup).

Superseded messages (replaced by a regenerated answer or an edit) are listed with the others,
with the time they were replaced: nothing a user replaces is lost.

The audit log of tool calls (:mod:`boocode.chat.ledger.audit`) is append-only here as well, with
filters and CSV / JSON export of the selected rows ("select all" takes every filtered row).

Tool approvals are an audit trail: staff see every decision (who, when, which tool and
arguments, whether it was remembered for the conversation), filterable, and nobody can add,
change or delete one here.

Usage per person and day (:mod:`boocode.chat.ledger.daily_usage`) is read-only, filtered by person and
by a range of days, and exported as CSV; daily token budgets (:mod:`boocode.chat.ledger.budgets`) of a
person or a group are set here.

Agents are read-only too (AGENTS.md is their source): each shows its patterns as written, the
tools they resolve to right now (native tools and the tools of MCP servers ready in this
process) and the patterns that match nothing, usually a typo or a server that is down. Opening
the list re-reads the file if it changed and shows its errors. Their admin lives here, above
the tool registry it asks, so that ``agents`` stays below the tools.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from typing import Any

from django.conf import settings
from django.contrib import admin, messages
from django.contrib.admin.options import IncorrectLookupParameters
from django.contrib.admin.views.main import ChangeList
from django.contrib.auth import admin as auth_admin
from django.contrib.auth.models import Group
from django.db.models import F, Field, Model, QuerySet
from django.http import HttpRequest, HttpResponse
from django.utils import timezone
from django.utils.html import format_html, format_html_join

from agents import roster
from agents.models import Agent
from agents.policy import unmatched_patterns
from boocode.chat.ledger import audit, daily_usage
from boocode.chat.llm.windows import configured_window, window_problem
from boocode.chat.models import (
    Conversation,
    DailyUsage,
    Message,
    TokenBudget,
    ToolApproval,
    ToolCall,
    ToolCallAudit,
)
from boocode.chat.turn.context import fixed_tokens
from boocode.tools.agent_rules import agent_tools
from boocode.tools.registry import available_tools
from boocode.tools.tool import Tool
from mcpclient.admin.access import groups_summary, server_groups, who_can_use
from mcpclient.models import McpServer
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
        "reasoning",
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
        "created_at",
        "name",
        "server",
        "origin",
        "outcome",
        "username",
        "agent",
        "approval",
        "duration_ms",
        "result_bytes",
    )
    list_filter = ("origin", "outcome", "server", "approval", "agent", "created_at")
    search_fields = ("name", "tool", "server", "username", "agent", "arguments")
    date_hierarchy = "created_at"
    list_select_related = ("decided_by",)
    actions = ["export_csv", "export_json"]
    fields = (
        "created_at",
        "username",
        "user",
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


def _download(body: str, content_type: str, extension: str, name: str = "tool-calls") -> HttpResponse:
    stamp = timezone.now().strftime("%Y%m%d-%H%M%S")
    response = HttpResponse(body, content_type=f"{content_type}; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{name}-{stamp}.{extension}"'
    return response


class DayRangeFilter(admin.FieldListFilter):
    """A range of days, both ends included, typed as dates: ``?day__gte=2026-05-01&day__lte=2026-05-31``.

    Either end may be left empty. A date that is not one (``2026-13-01``) is the admin's usual
    "incorrect lookup" page, never a server error.
    """

    template = "admin/chat/day_range_filter.html"

    def __init__(
        self,
        field: Field[Any, Any],
        request: HttpRequest,
        params: dict[str, list[str]],
        model: type[Model],
        model_admin: admin.ModelAdmin[Any],
        field_path: str,
    ) -> None:
        self.since_key, self.until_key = f"{field_path}__gte", f"{field_path}__lte"
        super().__init__(field, request, params, model, model_admin, field_path)
        self.title = "day (UTC)"

    def expected_parameters(self) -> list[str]:
        return [self.since_key, self.until_key]

    def _bounds(self) -> dict[str, dt.date]:
        bounds = {}
        for key, given in self.used_parameters.items():
            value = (given[-1] if isinstance(given, list) else given).strip()
            if not value:
                continue
            try:
                bounds[key] = dt.date.fromisoformat(value)
            except ValueError:
                problem = f"{key}: expected a date like 2026-05-01, got {value!r}"
                raise IncorrectLookupParameters(problem) from None
        return bounds

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        return queryset.filter(**self._bounds())

    def choices(self, changelist: ChangeList) -> Iterator[dict[str, Any]]:
        bounds = self._bounds()
        ours = (self.since_key, self.until_key)
        yield {
            "since_key": self.since_key,
            "until_key": self.until_key,
            "since": bounds[self.since_key].isoformat() if self.since_key in bounds else "",
            "until": bounds[self.until_key].isoformat() if self.until_key in bounds else "",
            # The other filters and the ordering ride along when the form is sent.
            "hidden": [
                (name, value)
                for name, values in changelist.filter_params.items()
                if name not in ours
                for value in values
            ],
            "selected": bool(bounds),
            "clear": changelist.get_query_string(remove=list(ours)),
        }


@admin.register(DailyUsage)
class DailyUsageAdmin(admin.ModelAdmin):
    """Usage per person and day: read-only (it is what was spent), filtered, exported as CSV."""

    list_display = (
        "day",
        "user",
        "prompt_tokens",
        "completion_tokens",
        "total",
        "answers",
        "answers_without_usage",
        "tool_calls",
    )
    list_filter = (("day", DayRangeFilter), ("user", admin.RelatedOnlyFieldListFilter))
    search_fields = ("user__username",)
    list_select_related = ("user",)
    show_facets = admin.ShowFacets.NEVER
    actions = ["export_csv"]
    fields = list_display
    readonly_fields = fields

    def get_queryset(self, request: HttpRequest) -> QuerySet[DailyUsage]:
        return super().get_queryset(request).annotate(total=F("prompt_tokens") + F("completion_tokens"))

    @admin.display(description="total tokens", ordering="total")
    def total(self, row: DailyUsage) -> int:
        return row.total_tokens

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: DailyUsage | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: DailyUsage | None = None) -> bool:
        return False

    def has_export_permission(self, request: HttpRequest) -> bool:
        """Who may see the rows may export them."""
        return self.has_view_permission(request)

    @admin.action(description="Export the selected rows as CSV", permissions=["export"])
    def export_csv(self, request: HttpRequest, queryset: QuerySet[DailyUsage]) -> HttpResponse:
        rows = queryset.select_related("user").order_by("-day", "user__username")
        return _download(daily_usage.export_csv(rows), "text/csv", "csv", name="usage")


@admin.register(TokenBudget)
class TokenBudgetAdmin(admin.ModelAdmin):
    """Daily token budgets of people and groups; the rule that picks one is shown above the list."""

    list_display = ("who", "tokens", "updated_at")
    search_fields = ("user__username", "group__name")
    list_select_related = ("user", "group")
    fields = ("user", "group", "tokens_per_day")

    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        """Say which budget applies to whom, and what the setting gives everyone else."""
        default = int(settings.DAILY_TOKEN_BUDGET)
        everyone = f"{default:,} tokens a day" if default else "no budget"
        messages.info(
            request,
            "A person's budget is their own row; else the largest of their groups' rows; else "
            f"BOOCODE_DAILY_TOKEN_BUDGET ({everyone}). 0 means no limit. Days are in UTC.",
        )
        return super().changelist_view(request, extra_context)

    @admin.display(description="person or group", ordering="group__name")
    def who(self, budget: TokenBudget) -> str:
        if budget.user is not None:
            return f"person: {budget.user.get_username()}"
        return f"group: {budget.group.name}" if budget.group is not None else "-"

    @admin.display(description="tokens a day", ordering="tokens_per_day")
    def tokens(self, budget: TokenBudget) -> str:
        return f"{budget.tokens_per_day:,}" if budget.tokens_per_day else "no limit"


def _patterns_text(agent: Agent) -> str:
    if agent.tools is None:
        return "all tools (no tools: key)"
    if not agent.tools:
        return "no tools ([])"
    return ", ".join(agent.tools)


@admin.register(Agent)
class AgentAdmin(admin.ModelAdmin):
    """View-only admin for agents, with the tools each one resolves to."""

    list_display = (
        "name",
        "description",
        "model_display",
        "window_display",
        "patterns",
        "tool_count",
        "groups_display",
        "unmatched",
        "error",
    )
    search_fields = ("name", "description")
    fields = (
        "name",
        "description",
        "who_can_pick",
        "patterns",
        "resolved_tools",
        "unmatched",
        "model_display",
        "window_display",
        "temperature",
        "top_p",
        "max_tool_calls",
        "tool_search",
        "pinned",
        "skills",
        "approve",
        "prompt",
        "extra",
        "line",
        "is_builtin",
        "error",
        "updated_at",
    )
    readonly_fields = (
        "patterns",
        "resolved_tools",
        "unmatched",
        "model_display",
        "who_can_pick",
        "window_display",
    )

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

    @admin.display(description="who can pick it")
    def groups_display(self, agent: Agent) -> str:
        return groups_summary(agent.groups)

    @admin.display(description="who can pick it now")
    def who_can_pick(self, agent: Agent) -> str:
        return who_can_use(agent.groups)

    @admin.display(description="model")
    def model_display(self, agent: Agent) -> str:
        return agent.model or "(default model)"

    @admin.display(description="context window")
    def window_display(self, agent: Agent) -> str:
        """The model's window as BooCode knows it (docs/models.md), and why it is too small if it is."""
        window = configured_window(agent, "")
        prompt, tools = fixed_tokens(agent, window)  # as the turn counts them
        problem = window_problem(agent.model or settings.LLM_MODEL, window, prompt, tools, agent.name)
        return f"{window.describe()}. {problem}" if problem else window.describe()

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


class GroupAdmin(auth_admin.GroupAdmin):
    """Django's group page, with the agents and MCP servers the group opens (docs/teams.md)."""

    readonly_fields = ("opens",)

    def get_fields(self, request: HttpRequest, obj: Any = None) -> list[str]:
        fields = [name for name in super().get_fields(request, obj) if name != "opens"]
        return [*fields, "opens"] if obj is not None else fields

    @admin.display(description="what it opens")
    def opens(self, group: Group) -> str:
        agents = [agent.name for agent in Agent.objects.all() if group.name in (agent.groups or [])]
        servers = [server.name for server in McpServer.objects.all() if group.name in server_groups(server)]
        return format_html(
            "<p>Agents for this group: {}</p><p>MCP servers for this group: {}</p>"
            "<p>Agents and servers without groups are everybody's.</p>",
            ", ".join(agents) or "none",
            ", ".join(servers) or "none",
        )


admin.site.unregister(Group)
admin.site.register(Group, GroupAdmin)

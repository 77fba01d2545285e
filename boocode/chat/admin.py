"""Conversations in the Django admin (read-mostly: for support and cleanup).

Superseded messages (replaced by a regenerated answer or an edit) are listed with the others,
with the time they were replaced: nothing a user replaces is lost.

Tool approvals are an audit trail: staff see every decision (who, when, which tool and
arguments, whether it was remembered for the conversation), filterable, and nobody can add,
change or delete one here.
"""

from django.contrib import admin
from django.http import HttpRequest

from boocode.chat.models import Conversation, Message, ToolApproval, ToolCall


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

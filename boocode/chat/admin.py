"""Conversations in the Django admin (read-mostly: for support and cleanup).

Superseded messages (replaced by a regenerated answer or an edit) are listed with the others,
with the time they were replaced: nothing a user replaces is lost.
"""

from django.contrib import admin

from boocode.chat.models import Conversation, Message, ToolCall


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
        "conversation", "role", "status", "content", "error", "model", "prompt_tokens", "completion_tokens",
        "superseded_at", "created_at", "updated_at",
    )
    inlines = [ToolCallInline]

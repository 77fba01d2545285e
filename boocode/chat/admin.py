"""Conversations in the Django admin (read-mostly: for support and cleanup)."""

from django.contrib import admin

from boocode.chat.models import Conversation, Message, ToolCall


class MessageInline(admin.TabularInline):
    model = Message
    fields = ("role", "status", "content", "error")
    readonly_fields = fields
    extra = 0
    can_delete = False
    show_change_link = True


@admin.register(Conversation)
class ConversationAdmin(admin.ModelAdmin):
    list_display = ("title", "owner", "agent_name", "updated_at")
    list_filter = ("agent_name",)
    search_fields = ("title", "owner__username")
    inlines = [MessageInline]


class ToolCallInline(admin.TabularInline):
    model = ToolCall
    fields = ("name", "status", "arguments", "is_error", "duration_ms")
    readonly_fields = fields
    extra = 0
    can_delete = False


@admin.register(Message)
class MessageAdmin(admin.ModelAdmin):
    list_display = ("id", "conversation", "role", "status", "created_at")
    list_filter = ("role", "status")
    readonly_fields = ("conversation", "role", "status", "content", "error", "created_at", "updated_at")
    inlines = [ToolCallInline]

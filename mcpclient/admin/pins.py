"""Tool definitions in the admin: what was accepted, what a server lists now, the diff, Accept.

A pin whose listed definition differs from the accepted one is *pending*: with the server's
``pinTools`` "block" (the default) its tool is held back from the model, the console and views
until somebody who may change servers accepts it here (a bulk action, and on the definition's
own page). Accepting lists the servers again, so the tool is offered at once. Pages are
read-only otherwise: what a server sent is shown as escaped text.
"""

from __future__ import annotations

from django.contrib import admin, messages
from django.contrib.admin import ActionLocation
from django.db import transaction
from django.db.models import F, Q, QuerySet
from django.http import HttpRequest
from django.utils.html import format_html, format_html_join

import mcpclient.admin.changes as changes
from mcpclient.admin.changes import ServerChangeError
from mcpclient.models import ToolPin
from mcpclient.runtime import pins

BOTH = [ActionLocation.CHANGE_LIST, ActionLocation.CHANGE_FORM]


class PendingFilter(admin.SimpleListFilter):
    """Accepted, or waiting for a review (changed since accepted, or new)."""

    title = "review"
    parameter_name = "review"

    def lookups(self, request: HttpRequest, model_admin: admin.ModelAdmin) -> list[tuple[str, str]]:
        return [
            ("pending", "waiting for review"),
            ("changed", "changed"),
            ("new", "new"),
            ("accepted", "accepted"),
        ]

    def queryset(self, request: HttpRequest, queryset: QuerySet[ToolPin]) -> QuerySet[ToolPin]:
        pending = ~Q(listed_digest="") & ~Q(listed_digest=F("digest"))
        chosen = {
            "pending": pending,
            "changed": pending & ~Q(digest=""),
            "new": pending & Q(digest=""),
            "accepted": ~pending,
        }.get(self.value() or "")
        return queryset.filter(chosen) if chosen is not None else queryset


def review_state(pin: ToolPin) -> str:
    """ "accepted", "changed" or "new", as a span."""
    if not pin.pending:
        return format_html('<span class="mcp-pin-accepted">{}</span>', "accepted")
    state = "changed" if pin.digest else "new"
    return format_html('<span class="mcp-pin-{}">{}</span>', state, state)


def findings_list(findings: list[str] | None) -> str:
    """What the poisoning check found (mcpclient.core.pinning.findings), as a list ("-" for nothing)."""
    if not findings:
        return "-"
    items = format_html_join("", "<li>{}</li>", ((finding,) for finding in findings))
    return format_html('<ul class="mcp-pin-findings">{}</ul>', items)


def diff_block(text: str) -> str:
    """A unified diff as a ``<pre>`` whose added and removed lines are marked (escaped)."""
    if not text:
        return "-"
    kinds = {"+": "mcp-diff-add", "-": "mcp-diff-del", "@": "mcp-diff-hunk"}
    lines = format_html_join(
        "",
        '<span class="{}">{}</span>',
        ((_kind(line, kinds), line) for line in text.splitlines()),
    )
    return format_html('<pre class="mcp-pin-diff">{}</pre>', lines)


def _kind(line: str, kinds: dict[str, str]) -> str:
    if line.startswith(("--- ", "+++ ")):
        return "mcp-diff-file"  # which side is which, not a changed line
    return kinds.get(line[:1], "mcp-diff-same")


@admin.register(ToolPin)
class ToolPinAdmin(admin.ModelAdmin):
    """Accepted tool definitions and the changes waiting for a review."""

    list_display = ("tool", "server", "review", "flagged", "accepted_at", "accepted_by", "listed_at")
    list_filter = (PendingFilter, "server")
    search_fields = ("server", "tool")
    actions = ["accept"]
    fieldsets = (
        (None, {"fields": ("server", "tool", "review", "flagged")}),
        ("The change", {"fields": ("change",)}),
        ("Accepted", {"fields": ("digest", "accepted_at", "accepted_by")}),
        ("Listed now", {"fields": ("listed_digest", "listed_at")}),
    )
    readonly_fields = (
        "server",
        "tool",
        "review",
        "flagged",
        "change",
        "digest",
        "accepted_at",
        "accepted_by",
        "listed_digest",
        "listed_at",
    )

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: ToolPin | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: ToolPin | None = None) -> bool:
        return False

    def has_view_permission(self, request: HttpRequest, obj: ToolPin | None = None) -> bool:
        """Whoever may see the servers sees their tools' definitions."""
        user = request.user
        return user.has_perm("mcpclient.view_mcpserver") or user.has_perm("mcpclient.change_mcpserver")

    def has_accept_permission(self, request: HttpRequest) -> bool:
        """Accepting a definition is changing what a server may offer: who may change servers."""
        return request.user.has_perm("mcpclient.change_mcpserver")

    @admin.display(description="review")
    def review(self, pin: ToolPin) -> str:
        return review_state(pin)

    @admin.display(description="flagged")
    def flagged(self, pin: ToolPin) -> str:
        """What the poisoning check found in the listed description."""
        return findings_list(pin.findings)

    @admin.display(description="accepted → listed now")
    def change(self, pin: ToolPin) -> str:
        if not pin.pending:
            return "The server lists the accepted definition."
        return diff_block(pins.change_of(pin))

    @admin.action(description="Accept the listed definition", permissions=["accept"], location=BOTH)
    def accept(self, request: HttpRequest, queryset: QuerySet[ToolPin]) -> None:
        """Accept the selected pending definitions; their servers list their tools again."""
        chosen = [pin for pin in queryset if pin.pending]
        servers = pins.accept(chosen, request.user)
        if not servers:
            self.message_user(request, "Nothing to accept: the selected definitions are accepted already.")
            return
        names = ", ".join(f"{pin.server} / {pin.tool}" for pin in chosen)
        self.message_user(request, f"Accepted: {names}.", messages.SUCCESS)
        transaction.on_commit(lambda: self._relist(request, servers))

    def _relist(self, request: HttpRequest, servers: list[str]) -> None:
        try:
            changes.rediscover_servers(names=servers)
        except ServerChangeError as exc:
            self.message_user(request, f"Accepted, but listing again failed: {exc}", messages.WARNING)

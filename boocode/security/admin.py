"""Single sign-on identities in the admin: who is linked to which account, and how.

Read-only but for deleting: deleting an identity unlinks it, and the person's next sign-in is
linked again by the rules of ``BOOCODE_OIDC_LINK`` (docs/teams.md, *Account linking*).
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from boocode.security.models import SsoIdentity


@admin.register(SsoIdentity)
class SsoIdentityAdmin(admin.ModelAdmin):
    """The identities, searchable by username and subject; nothing here is edited by hand."""

    list_display = ("user", "subject", "issuer", "linked_by", "last_sign_in")
    list_filter = ("linked_by", "issuer")
    search_fields = ("user__username", "subject")
    readonly_fields = ("user", "issuer", "subject", "linked_by", "groups", "created", "last_sign_in")

    def has_add_permission(self, request: HttpRequest) -> bool:
        """Identities are made by signing in, never by hand."""
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        """Shown, never changed (an identity's account is what it signed in to)."""
        return False

"""People's own servers in the Django admin (:mod:`mcpclient.runtime.personal`): read-only.

Who added which server is shown; nothing can be added or changed here (a person adds their own
on the chat page). Deleting one deletes its header's value and OAuth tokens too, as the person's
*Remove* does.

Registered with the admin site on import (the package's face imports this module):
:class:`PersonalServerAdmin`.
"""

from __future__ import annotations

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest

from mcpclient.models import PersonalServer
from mcpclient.runtime import personal


@admin.register(PersonalServer)
class PersonalServerAdmin(admin.ModelAdmin):
    """People's own servers (mcpclient.runtime.personal): who added which, read-only; deleting one
    deletes its header's value and OAuth tokens too, as the person's *Remove* does."""

    list_display = ("name", "owner", "url", "transport", "sign_in", "header_name", "writes", "created_at")
    list_filter = ("transport", "sign_in", "writes")
    search_fields = ("name", "url", "owner__username")
    readonly_fields = ("owner", "name", "url", "transport", "sign_in", "header_name", "writes", "created_at")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # a person adds their own on the chat page

    def has_change_permission(self, request: HttpRequest, obj: PersonalServer | None = None) -> bool:
        return False

    def delete_model(self, request: HttpRequest, obj: PersonalServer) -> None:
        personal.remove(obj.owner_id, obj.pk)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[PersonalServer]) -> None:
        for row in list(queryset):
            personal.remove(row.owner_id, row.pk)

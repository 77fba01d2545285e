"""Who can use what, as the admin shows it: a server's or an agent's ``groups`` and their people,
and on a group's page the servers and agents it opens (docs/teams.md)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.contrib.auth.models import Group
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

__all__ = ["MAX_PEOPLE_SHOWN", "groups_summary", "server_groups", "who_can_use"]

MAX_PEOPLE_SHOWN = 20  # per group, on a server's or an agent's page


def server_groups(server: Any) -> list[str]:
    """The ``groups`` of an ``McpServer`` row's entry (as synced from mcp.json)."""
    groups = server.config.get("groups") if isinstance(server.config, dict) else None
    return [group for group in groups if isinstance(group, str)] if isinstance(groups, list) else []


def groups_summary(groups: Sequence[str]) -> str:
    """One line for a list: "everybody", or the group names."""
    return ", ".join(groups) if groups else "everybody"


def who_can_use(groups: Sequence[str]) -> SafeString:
    """Everybody, or each group with its active people (a group named that no group is, said so)."""
    if not groups:
        return format_html("<p>{}</p>", "Everybody who can sign in (no groups).")
    found = {group.name: group for group in Group.objects.filter(name__in=groups)}
    items = []
    for name in groups:
        group = found.get(name)
        if group is None:
            items.append(format_html("<li><strong>{}</strong>: no such group yet, so nobody</li>", name))
            continue
        people = list(
            group.user_set.filter(is_active=True).order_by("username").values_list("username", flat=True)
        )
        shown = ", ".join(people[:MAX_PEOPLE_SHOWN])
        if len(people) > MAX_PEOPLE_SHOWN:
            shown += f" and {len(people) - MAX_PEOPLE_SHOWN} more"
        items.append(
            format_html(
                "<li><strong>{}</strong>: {} {}{}</li>",
                name,
                len(people),
                "person" if len(people) == 1 else "people",
                f" ({shown})" if people else "",
            )
        )
    listed = format_html_join("", "{}", ((item,) for item in items))
    return format_html("<p>Only the people of these groups:</p><ul>{}</ul>", listed)

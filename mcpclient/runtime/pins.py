"""The database's pin book: accepted tool definitions, what servers list now, and accepting.

:class:`DatabasePins` is the hub's :class:`~mcpclient.core.pinning.PinBook`: each listing of a
server is reviewed against the ``ToolPin`` rows (in a thread; the database is the truth every web
process and the hub worker share) and recorded, so the admin can show a held tool's change as a
diff. :func:`accept` is the administrator's side (the admin's *Accept*, and
:func:`accept_recorded` for ``manage.py mcp_discover --accept``); the hub then lists the server
again and offers the tool under its new definition.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from channels.db import database_sync_to_async
from django.db import transaction
from django.utils import timezone

from mcpclient.core import pinning
from mcpclient.models import McpTool, ToolPin


def review_listing(
    server: str, seen: Sequence[pinning.Seen], *, mode: str, accept_new: bool
) -> dict[str, pinning.Verdict]:
    """Review ``seen`` against the accepted definitions of ``server`` and record the listing."""
    with transaction.atomic():
        rows = {row.tool: row for row in ToolPin.objects.select_for_update().filter(server=server)}
        accepted = {name: row.digest for name, row in rows.items() if row.digest}
        others = pinning.OtherTools(
            McpTool.objects.exclude(server__name=server).values_list("server__name", "name", "prefixed_name")
        )
        # The poisoning check first: a flagged definition nobody accepted is held, not pinned.
        seen = [
            dataclasses.replace(
                item, findings=tuple(pinning.findings(_description(item), server=server, other_tools=others))
            )
            for item in seen
        ]
        verdicts = pinning.review(seen, accepted, mode=mode, accept_new=accept_new)
        now = timezone.now()
        added: list[ToolPin] = []
        for item in seen:
            verdict = verdicts[item.name]
            found = item.findings
            verdicts[item.name] = dataclasses.replace(verdict, findings=found)
            row = rows.get(item.name)
            if row is None:
                row = ToolPin(server=server, tool=item.name)
            before = (row.digest, row.listed_digest, row.findings)
            if not verdict.kind and row.digest != item.digest:  # accepted as it is listed
                row.digest, row.definition, row.accepted_at, row.accepted_by = (
                    item.digest,
                    item.definition,
                    now,
                    None,
                )
            if row.listed_digest != item.digest:
                row.listed_digest, row.listed, row.listed_at = item.digest, item.definition, now
            row.findings = list(found)
            if row.pk is None:
                added.append(row)
            elif (row.digest, row.listed_digest, row.findings) != before:
                row.save()
        # Another process listing the same server at the same moment recorded the same rows.
        ToolPin.objects.bulk_create(added, ignore_conflicts=True)
    return verdicts


class ListingRecorder:
    """The pin book of a short-lived hub a command runs (``manage.py mcp_discover``).

    Each listing is reviewed against the pins read when the recorder was made (in the command's
    thread, before the run) and kept; :meth:`record` then reviews and records them in the
    database from the calling thread, whose verdicts are the ones stored. The run's event loop
    never touches the database (its thread may not: a command's ``asyncio.run``).
    """

    def __init__(self, servers: Sequence[str]) -> None:
        self._accepted: dict[str, dict[str, str]] = {}
        rows = ToolPin.objects.filter(server__in=servers).exclude(digest="")
        for server, tool, digest in rows.values_list("server", "tool", "digest"):
            self._accepted.setdefault(server, {})[tool] = digest
        tools = McpTool.objects.values_list("server__name", "name", "prefixed_name")
        self._others = pinning.OtherTools(tools)
        self._listings: dict[str, tuple[list[pinning.Seen], str, bool]] = {}

    async def review(
        self, server: str, seen: Sequence[pinning.Seen], *, mode: str, accept_new: bool
    ) -> dict[str, pinning.Verdict]:
        others = self._others
        checked = [
            dataclasses.replace(
                item, findings=tuple(pinning.findings(_description(item), server=server, other_tools=others))
            )
            for item in seen
        ]
        self._listings[server] = (checked, mode, accept_new)
        verdicts = pinning.review(checked, self._accepted.get(server, {}), mode=mode, accept_new=accept_new)
        return {
            item.name: dataclasses.replace(verdicts[item.name], findings=item.findings) for item in checked
        }

    def record(self) -> dict[str, dict[str, pinning.Verdict]]:
        """Review and record every listing kept (sync ORM): each server's verdicts, by tool name."""
        return {
            server: review_listing(server, seen, mode=mode, accept_new=accept_new)
            for server, (seen, mode, accept_new) in self._listings.items()
        }


def _description(item: pinning.Seen) -> str:
    return str(item.definition.get("description") or "")


class DatabasePins:
    """The pin book the long-lived hubs use (:func:`mcpclient.runtime.new_hub`)."""

    async def review(
        self, server: str, seen: Sequence[pinning.Seen], *, mode: str, accept_new: bool
    ) -> dict[str, pinning.Verdict]:
        review = database_sync_to_async(review_listing, thread_sensitive=False)
        return await review(server, seen, mode=mode, accept_new=accept_new)


def accept(pins: Sequence[ToolPin], user: Any) -> list[str]:
    """Accept the listed definition of each of ``pins`` (by ``user``); the servers to list again."""
    now = timezone.now()
    servers: list[str] = []
    for pin in pins:
        if not pin.pending or pin.listed is None:
            continue
        pin.digest, pin.definition = pin.listed_digest, pin.listed
        pin.accepted_at, pin.accepted_by = now, user
        pin.save(update_fields=["digest", "definition", "accepted_at", "accepted_by"])
        if pin.server not in servers:
            servers.append(pin.server)
    return servers


def accept_recorded(servers: Sequence[str]) -> list[ToolPin]:
    """Accept the definitions last listed and recorded for ``servers`` that wait for a review.

    ``manage.py mcp_discover --accept``: what a review recorded (and the operator read, or can
    read as a diff in the admin) is accepted, not what the servers list next; a later listing
    that differs is held again as changed. Returns the definitions accepted.
    """
    with transaction.atomic():
        rows = ToolPin.objects.select_for_update().filter(server__in=servers)
        pending = [pin for pin in rows if pin.pending]
        accept(pending, None)
    return pending


def change_of(pin: ToolPin) -> str:
    """The change between a pin's accepted and listed definitions, as a unified diff."""
    return pinning.diff(pin.definition if pin.digest else None, pin.listed or {})

"""Who may use a server: its ``groups`` and the groups a person is in.

A server entry's ``groups`` (BooCode's key, kept in every file shape) names the groups whose
people get its tools, prompts, resources, completions and skills; without the key everybody
does. The decision is this one function, asked by :func:`mcpclient.engine.serving.session_for`
and by the hub's catalog of a person's tools, so every path that reaches a server (the model's
turn, the tool console, a view's call, the ``/`` menu, attachments, completions, sign-in) gets
the same answer, in a web process and in the hub worker alike.

It fails closed: a person whose groups are not known (not read yet, or unreadable) uses only
the servers without ``groups``. ``None`` for the person is the process itself (a management
command, the conformance client), which has no person to restrict.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

__all__ = ["MAX_GROUP_NAME", "may_use"]

MAX_GROUP_NAME = 150  # as Django's Group.name


def may_use(groups: Sequence[str], user_id: int | None, person_groups: Collection[str] | None) -> bool:
    """Whether ``user_id`` (in ``person_groups``; ``None``: not known) may use a server for ``groups``."""
    if not groups or user_id is None:
        return True
    if person_groups is None:
        return False
    return any(group in person_groups for group in groups)

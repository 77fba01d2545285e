"""The groups each person is in, as this process last read them, for the servers with ``groups``.

The hub asks :func:`groups_of` on every use of such a server (a dictionary read: the event loop
never waits on the database for it); the reads happen before, off the loop: :func:`refresh`
when a person's turn, console command or request prepares the hub (at most once a
:data:`MAX_AGE`), :func:`load` in the synchronous views. The hub worker refreshes the person of
each request it serves the same way, so it decides on its own read, not on a web process's word.

Fail closed: a person never read, or read longer than :data:`FORGET_AFTER` seconds ago, is in
no group. A change in the admin (a person added to or removed from a group, a group renamed or
deleted) drops this process's reads at once (``boocode.security`` connects the signals); other
processes read again within :data:`MAX_AGE` of the person's next use.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Collection

from channels.db import database_sync_to_async

__all__ = ["MAX_AGE", "forget", "groups_of", "load", "refresh", "remember"]

MAX_AGE = 2.0  # seconds a read serves before a person's next use reads again
FORGET_AFTER = 300.0  # seconds after which a read is no longer trusted at all

_read: dict[int, tuple[float, frozenset[str]]] = {}
_lock = threading.Lock()
_forgot_at = -float("inf")  # time.monotonic() of the last forget()


def groups_of(user_id: int) -> Collection[str] | None:
    """The groups ``user_id`` was last read in; ``None`` when not read (recently enough)."""
    found = _read.get(user_id)
    if found is None or time.monotonic() - found[0] > FORGET_AFTER:
        return None
    return found[1]


def load(user_id: int, *, max_age: float = MAX_AGE) -> frozenset[str]:
    """Read ``user_id``'s groups from the database unless read within ``max_age`` seconds."""
    from django.contrib.auth.models import Group  # the app registry is ready by the first call

    found = _read.get(user_id)
    if found is not None and time.monotonic() - found[0] <= max_age:
        return found[1]
    read_at = time.monotonic()
    names = frozenset(Group.objects.filter(user__pk=user_id).values_list("name", flat=True))
    remember(user_id, names, read_at)
    return names


def remember(user_id: int, names: frozenset[str], read_at: float) -> None:
    """Keep ``names``, ``user_id``'s groups as a read begun at ``read_at`` (``time.monotonic()``)
    found them: a caller that read them with its own query (the chat turn's one read) says so."""
    with _lock:
        current = _read.get(user_id)
        # A forget() since the read began drops it: the read may predate the change.
        if (current is None or current[0] < read_at) and _forgot_at < read_at:
            _read[user_id] = (read_at, names)


async def refresh(user_id: int | None, *, max_age: float = MAX_AGE) -> None:
    """:func:`load` off the event loop (nothing for no person, or a read within ``max_age``)."""
    if user_id is None:
        return
    found = _read.get(user_id)
    if found is not None and time.monotonic() - found[0] <= max_age:
        return
    # A read: on the loop's worker threads, not queued behind the turns' writes on the database
    # thread (a tool call that waited for an approval refreshes here, just before it goes out).
    await database_sync_to_async(load, thread_sensitive=False)(user_id, max_age=max_age)


def forget(user_id: int | None = None) -> None:
    """Drop the reads of ``user_id`` (``None``: everybody's), so the next use reads again."""
    global _forgot_at
    with _lock:
        _forgot_at = time.monotonic()
        if user_id is None:
            _read.clear()
        else:
            _read.pop(user_id, None)


def _changed(sender: object, **kwargs: object) -> None:
    forget()


def connect_receivers() -> None:
    """Forget every read when a person joins or leaves a group, or a group is renamed or deleted."""
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Group
    from django.db.models.signals import m2m_changed, post_delete, post_save

    m2m_changed.connect(_changed, sender=get_user_model().groups.through, dispatch_uid="people-groups")
    post_save.connect(_changed, sender=Group, dispatch_uid="people-group-saved")
    post_delete.connect(_changed, sender=Group, dispatch_uid="people-group-deleted")

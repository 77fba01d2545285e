"""Chat sockets end with the session that opened them.

A websocket is authenticated once, at the handshake; without this module it would outlive a
logout, a password change or a deactivation. So:

- every chat socket joins its user's channel-layer group (:func:`user_group`);
- on logout (``user_logged_out``) the group gets ``session.ended`` with a digest of the
  session key (:func:`session_tag`): the sockets of that session close;
- on any other change to the user (``post_save``: password, ``is_active``; ``post_delete``)
  the group gets ``session.check``: every socket of the user re-checks its session;
- before handling an incoming frame, and every ``SESSION_CHECK_INTERVAL`` seconds (expiry with
  no frames), the socket re-checks (:func:`session_is_current`); a ``user_message``'s check runs
  in its turn's first database read (``boocode.chat.turn.loop.Admission``), before the turn has any
  effect.

A socket whose session is gone, expired, no longer matches the user's password (Django's
session auth hash) or whose user is inactive or deleted is closed with code 4401, the code
the page already reads as "logged out". The events go through the channel layer after the
database commit, so with Redis they reach sockets in every process; a change the signals do
not see (a row deleted by hand, ``QuerySet.update()``) is caught by the next check.
"""

from __future__ import annotations

import hashlib
import logging
from functools import partial
from importlib import import_module
from typing import Any, Literal

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.conf import settings
from django.contrib import auth
from django.contrib.auth.signals import user_logged_out
from django.db import transaction
from django.db.models.signals import post_delete, post_save
from django.http import HttpRequest

logger = logging.getLogger(__name__)

# Fields a login itself saves: not a reason to re-check every open socket of the user.
_ROUTINE_FIELDS = frozenset({"last_login"})


def user_group(user_id: int) -> str:
    """The channel-layer group of a user's open sockets."""
    return f"user_{user_id}"


def session_tag(session_key: str | None) -> str:
    """A digest naming a session in channel-layer events (a live session key is a credential)."""
    return hashlib.sha256(f"boocode-session:{session_key or ''}".encode()).hexdigest()[:32]


def session_is_current(session_key: str | None, user_id: int) -> bool:
    """Whether ``session_key`` still logs ``user_id`` in, exactly as an HTTP request would.

    Django's own check (:func:`_django_says`): the session exists and has not expired, names
    this user, the user exists and is active, and the session's auth hash matches the current
    password. Its session decoding and hash are most of a chat turn's admission, and a socket
    asks it before every frame; so, with the database session engine, one query reads what that
    verdict depends on (the session's stored data and expiry, the user's password and
    ``is_active``) and Django's check runs again only when any of it changed since its last
    verdict for this session and user. A session gone or expired is refused by that query.
    """
    if not session_key:
        return False
    mark = _fingerprint(session_key, user_id)
    if mark is False:
        return False
    key = (session_key, user_id)
    if mark is not None and (known := _verdicts.get(key)) is not None and known[0] == mark:
        return known[1]
    verdict = _django_says(session_key, user_id)
    if mark is not None:
        if len(_verdicts) >= MAX_VERDICTS:
            _verdicts.pop(next(iter(_verdicts)))  # the oldest
        _verdicts[key] = (mark, verdict)
    return verdict


def _django_says(session_key: str, user_id: int) -> bool:
    request = HttpRequest()
    request.session = import_module(settings.SESSION_ENGINE).SessionStore(session_key)
    user = auth.get_user(request)
    return bool(user.is_authenticated and user.pk == user_id)


MAX_VERDICTS = 10_000  # (session, user) verdicts kept with what they were decided on
_verdicts: dict[tuple[str, int], tuple[tuple[Any, ...], bool]] = {}
DB_SESSIONS = "django.contrib.sessions.backends.db"


def _fingerprint(session_key: str, user_id: int) -> tuple[Any, ...] | Literal[False] | None:
    """What Django's verdict depends on, in one query: ``False`` when the session is gone or
    expired, ``None`` when sessions are not kept in the database (no shortcut then)."""
    if settings.SESSION_ENGINE != DB_SESSIONS:
        return None
    from django.contrib.sessions.models import Session
    from django.db import connection
    from django.utils import timezone

    user_model = auth.get_user_model()
    quote = connection.ops.quote_name
    users = quote(user_model._meta.db_table)
    password = quote(user_model._meta.get_field("password").column)
    fields = {field.name: field for field in user_model._meta.concrete_fields}
    active = f"u.{quote(fields['is_active'].column)}" if "is_active" in fields else "1"
    statement = (
        f"SELECT s.{quote('session_data')}, s.{quote('expire_date')}, u.{password}, {active} "
        f"FROM {quote(Session._meta.db_table)} s "
        f"LEFT JOIN {users} u ON u.{quote(user_model._meta.pk.column)} = %s "
        f"WHERE s.{quote('session_key')} = %s AND s.{quote('expire_date')} > %s"
    )
    now = connection.ops.adapt_datetimefield_value(timezone.now())
    with connection.cursor() as cursor:
        cursor.execute(statement, [user_id, session_key, now])
        row = cursor.fetchone()
    return False if row is None else tuple(row)


def _send(user_id: int, message: dict[str, Any]) -> None:
    layer = get_channel_layer()
    if layer is None:
        return
    try:
        async_to_sync(layer.group_send)(user_group(user_id), message)
    except Exception:  # a channel-layer outage must not fail a logout or a password change
        logger.exception("could not tell user %s's sockets that a session changed", user_id)


def notify(user_id: int, message: dict[str, Any]) -> None:
    """Send ``message`` to the user's sockets once the current transaction (if any) commits."""
    transaction.on_commit(partial(_send, user_id, message))


def _logged_out(sender: Any, request: HttpRequest | None = None, user: Any = None, **kwargs: Any) -> None:
    # Sent before the session is flushed, so a re-check could still find it: name it instead.
    if user is None or request is None or not getattr(request, "session", None):
        return
    notify(user.pk, {"type": "session.ended", "session": session_tag(request.session.session_key)})


def _user_saved(sender: Any, instance: Any, update_fields: Any = None, **kwargs: Any) -> None:
    if update_fields is not None and set(update_fields) <= _ROUTINE_FIELDS:
        return
    notify(instance.pk, {"type": "session.check"})


def _user_deleted(sender: Any, instance: Any, **kwargs: Any) -> None:
    notify(instance.pk, {"type": "session.check"})


def connect_receivers() -> None:
    """Connect the receivers (called once, from the app's ``ready()``)."""
    user_model = auth.get_user_model()
    user_logged_out.connect(_logged_out, dispatch_uid="boocode.security.sessions.logged_out")
    post_save.connect(_user_saved, sender=user_model, dispatch_uid="boocode.security.sessions.saved")
    post_delete.connect(_user_deleted, sender=user_model, dispatch_uid="boocode.security.sessions.deleted")

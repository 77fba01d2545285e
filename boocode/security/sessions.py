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
  in its turn's first database read (``boocode.chat.turn.Admission``), before the turn has any
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
from typing import Any

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

    Django's own check: the session exists and has not expired, names this user, the user
    exists and is active, and the session's auth hash matches the current password. One
    session read and one user read.
    """
    if not session_key:
        return False
    request = HttpRequest()
    request.session = import_module(settings.SESSION_ENGINE).SessionStore(session_key)
    user = auth.get_user(request)
    return bool(user.is_authenticated and user.pk == user_id)


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

"""The one encrypted store for every secret BooCode keeps (``${input:}`` values, OAuth credentials).

Invariants. Nothing else stores a secret or touches the :class:`~mcpclient.models.StoredSecret`
table: the API is :func:`put_secret`, :func:`get_secret`, :func:`delete_secret`,
:func:`secret_names` and :func:`rotate_key`. They use the sync ORM; async code calls them through
``database_sync_to_async``. A value is encrypted together with its kind and name, so a row copied
over another is refused, never served under the wrong name. The keys are never in the database
(``BOOCODE_SECRETS_KEY``, else the generated key file, mode 0600); the first key encrypts, every
one decrypts, and :func:`rotate_key` is all or nothing. Values never appear in messages or logs: a
:class:`SecretStoreError` names the kind and name and says what to do.

The tour (keys, the key file, rotation): docs/configuration.md, *Secrets at rest*.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import json
import logging
import os
import tempfile
from pathlib import Path

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from django.conf import settings
from django.db import transaction

from mcpclient.models import StoredSecret

logger = logging.getLogger(__name__)

KEY_VARIABLE = "BOOCODE_SECRETS_KEY"
_KIND_MAX = StoredSecret._meta.get_field("kind").max_length
_NAME_MAX = StoredSecret._meta.get_field("name").max_length


class SecretStoreError(Exception):
    """The store cannot do what was asked; ``str()`` says why, never showing a value."""


class SecretKeyError(SecretStoreError):
    """The encryption key is missing or malformed (``BOOCODE_SECRETS_KEY`` or the key file)."""


class SecretUnreadable(SecretStoreError):
    """A stored secret cannot be decrypted with the configured keys (or was tampered with)."""


# --- Keys ----------------------------------------------------------------------------------


def _key_source() -> str:
    """Where the keys come from, for error messages."""
    if settings.SECRETS_KEYS:
        return KEY_VARIABLE
    return f"{settings.SECRETS_KEY_FILE} ({KEY_VARIABLE} is unset)"


def _checked_key(key: str, where: str) -> bytes:
    """``key`` as Fernet wants it, or ``SecretKeyError`` naming ``where`` (never the key)."""
    try:
        raw = base64.urlsafe_b64decode(key.encode("ascii"))
    except (binascii.Error, UnicodeEncodeError, ValueError):
        raw = b""
    if len(raw) != 32:
        raise SecretKeyError(
            f"{where} is not a Fernet key (32 bytes in url-safe base64, 44 characters); make one with "
            "`manage.py secrets_rotate --generate-key`"
        )
    return key.encode("ascii")


def _read_key_file(path: Path, *, create: bool) -> bytes | None:
    """The generated key, creating the file first when ``create`` and it does not exist yet."""
    try:
        text = path.read_text().strip()
    except FileNotFoundError:
        if not create:
            return None
        return _create_key_file(path)
    except OSError as exc:
        reason = exc.strerror or exc
        raise SecretKeyError(f"cannot read the secret store's key file {path}: {reason}") from None
    return _checked_key(text, f"the key in {path}")


def _create_key_file(path: Path) -> bytes:
    """Write a new key to ``path`` (0600) unless another process just did; return the key in it.

    The key is written to a temporary file and hard-linked into place: a reader never sees a
    half-written file, and of two processes racing, one key wins and both use it.
    """
    key = Fernet.generate_key()
    try:
        fd, temp = tempfile.mkstemp(prefix=".secrets.key.", dir=path.parent)
        try:
            with os.fdopen(fd, "wb") as handle:  # mkstemp creates the file with mode 0600
                handle.write(key + b"\n")
            os.link(temp, path)
        finally:
            with contextlib.suppress(OSError):
                os.unlink(temp)
    except FileExistsError:
        existing = _read_key_file(path, create=False)
        assert existing is not None  # it exists: os.link said so
        return existing
    except OSError as exc:
        raise SecretKeyError(
            f"cannot create the secret store's key file {path}: {exc.strerror or exc}; "
            f"set {KEY_VARIABLE} instead"
        ) from None
    logger.info("generated the secret store's key in %s (back it up apart from the database)", path)
    return key


def _fernet(*, create: bool = False) -> MultiFernet | None:
    """The configured keys (first one encrypts); None when there is none and ``create`` is false."""
    keys = list(settings.SECRETS_KEYS)
    if keys:
        count = len(keys)
        checked = [
            _checked_key(key, f"{KEY_VARIABLE}: key {index + 1} of {count}" if count > 1 else KEY_VARIABLE)
            for index, key in enumerate(keys)
        ]
        return MultiFernet([Fernet(key) for key in checked])
    key = _read_key_file(Path(settings.SECRETS_KEY_FILE), create=create)
    return None if key is None else MultiFernet([Fernet(key)])


def generate_key() -> str:
    """A new random Fernet key, as text to put in ``BOOCODE_SECRETS_KEY``."""
    return Fernet.generate_key().decode("ascii")


# --- Rows ----------------------------------------------------------------------------------


def _check_names(kind: str, name: str) -> None:
    if not isinstance(kind, str) or not kind or len(kind) > _KIND_MAX:
        raise SecretStoreError(f"secret store: the kind must be 1 to {_KIND_MAX} characters")
    if not isinstance(name, str) or not name or len(name) > _NAME_MAX:
        raise SecretStoreError(f"secret store: a {kind} secret name must be 1 to {_NAME_MAX} characters")


def _label(kind: str, name: str) -> str:
    return f'{kind} "{name}"'


def _encrypt(fernet: MultiFernet, kind: str, name: str, value: str) -> str:
    payload = json.dumps({"kind": kind, "name": name, "value": value}, ensure_ascii=False)
    return fernet.encrypt(payload.encode("utf-8")).decode("ascii")


def _decrypt(fernet: MultiFernet | None, row: StoredSecret) -> str:
    """The value of ``row``; ``SecretUnreadable`` naming it when the keys cannot read it."""
    label = _label(row.kind, row.name)
    if fernet is None:
        raise SecretUnreadable(
            f"secret store: cannot decrypt {label}: the encryption key is missing "
            f"({KEY_VARIABLE} is unset and {settings.SECRETS_KEY_FILE} does not exist)"
        )
    try:
        payload = json.loads(fernet.decrypt(row.ciphertext.encode("ascii")))
    except (InvalidToken, UnicodeError, ValueError):
        raise SecretUnreadable(
            f"secret store: cannot decrypt {label}: the encryption key is wrong or missing "
            f"(keys from {_key_source()}); restore the key it was stored with, or enter the value again"
        ) from None
    if not isinstance(payload, dict) or (payload.get("kind"), payload.get("name")) != (row.kind, row.name):
        raise SecretUnreadable(
            f"secret store: {label} holds the value of another secret: the row was altered outside "
            "BooCode; enter the value again"
        )
    value = payload.get("value")
    if not isinstance(value, str):
        raise SecretUnreadable(f"secret store: {label} is malformed; enter the value again")
    return value


# --- API -----------------------------------------------------------------------------------


def put_secret(kind: str, name: str, value: str) -> None:
    """Store ``value`` encrypted under (``kind``, ``name``), replacing any previous value.

    Generates the key file on first use when ``BOOCODE_SECRETS_KEY`` is unset.
    """
    _check_names(kind, name)
    if not isinstance(value, str):
        raise SecretStoreError(f"secret store: the value of {_label(kind, name)} must be text")
    fernet = _fernet(create=True)
    assert fernet is not None  # create=True always gives a key
    ciphertext = _encrypt(fernet, kind, name, value)
    StoredSecret.objects.update_or_create(kind=kind, name=name, defaults={"ciphertext": ciphertext})
    logger.info("secret store: stored %s", _label(kind, name))


def get_secret(kind: str, name: str) -> str | None:
    """The value stored under (``kind``, ``name``), or None when there is none.

    Raises ``SecretUnreadable`` when a row exists but the keys cannot decrypt it, and
    ``SecretKeyError`` when the configured key is malformed.
    """
    _check_names(kind, name)
    row = StoredSecret.objects.filter(kind=kind, name=name).first()
    if row is None:
        return None
    return _decrypt(_fernet(), row)


def delete_secret(kind: str, name: str) -> bool:
    """Remove the secret stored under (``kind``, ``name``); True if there was one."""
    _check_names(kind, name)
    deleted, _ = StoredSecret.objects.filter(kind=kind, name=name).delete()
    if deleted:
        logger.info("secret store: deleted %s", _label(kind, name))
    return bool(deleted)


def secret_names(kind: str) -> list[str]:
    """The names stored under ``kind``, sorted (no value is decrypted)."""
    return list(StoredSecret.objects.filter(kind=kind).order_by("name").values_list("name", flat=True))


@transaction.atomic
def rotate_key() -> int:
    """Re-encrypt every stored secret with the first configured key; the number of rows.

    All or nothing: when any row cannot be decrypted with the configured keys, nothing is
    changed and ``SecretUnreadable`` names every such row (put the key they were stored with
    after the new one in ``BOOCODE_SECRETS_KEY``).
    """
    rows = list(StoredSecret.objects.select_for_update().order_by("kind", "name"))
    if not rows:
        return 0
    fernet = _fernet()
    unreadable: list[str] = []
    fresh: list[tuple[StoredSecret, str]] = []
    for row in rows:
        try:
            value = _decrypt(fernet, row)
        except SecretUnreadable:
            unreadable.append(_label(row.kind, row.name))
            continue
        assert fernet is not None  # _decrypt refuses a missing key
        fresh.append((row, _encrypt(fernet, row.kind, row.name, value)))
    if unreadable:
        raise SecretUnreadable(
            f"secret store: cannot decrypt {', '.join(unreadable)}: the encryption key is wrong or missing "
            f"(keys from {_key_source()}); keep the old key after the new one until the rotation is done. "
            "Nothing was changed"
        )
    for row, ciphertext in fresh:
        StoredSecret.objects.filter(pk=row.pk).update(ciphertext=ciphertext)
    logger.info("secret store: re-encrypted %d secrets with the first key", len(fresh))
    return len(fresh)

"""Strict parsing of BOOCODE_* environment variables.

Every helper raises ``ImproperlyConfigured`` naming the variable and what was expected,
so a typo in the environment stops the process at start-up instead of being guessed at.

An empty value is the same as an unset one: the default. ``.env.example`` lists every variable,
most of them empty, and a copy of it must start BooCode as the defaults do. The few variables
whose empty value means something else say so (``when_empty``): the groups claim (groups left
alone) and the stdio commands (none: an empty value never widens what may run).
"""

from __future__ import annotations

import ipaddress
import math
import os
from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit

from django.core.exceptions import ImproperlyConfigured

from mcpclient.core.egress import EgressAllow

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


def env_str(name: str, default: str = "", *, when_empty: str | None = None) -> str:
    """The variable's value with surrounding whitespace removed; ``default`` if unset or empty.

    ``when_empty``: what an empty value means when that is not the default (a variable whose
    documentation gives its empty value a meaning of its own).
    """
    value = os.environ.get(name)
    if value is None:
        return default
    value = value.strip()
    if not value:
        return default if when_empty is None else when_empty
    return value


def env_bool(name: str, default: bool = False) -> bool:
    """A boolean: 1/true/yes/on or 0/false/no/off (case-insensitive); ``default`` if unset or empty."""
    value = os.environ.get(name)
    if value is None or not value.strip():
        return default
    lowered = value.strip().lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise ImproperlyConfigured(f"{name}={value!r}: expected one of 1/0, true/false, yes/no, on/off")


def env_int(name: str, default: int, *, minimum: int | None = None, maximum: int | None = None) -> int:
    """An integer, optionally bounded."""
    value = os.environ.get(name)
    if value is None or not value.strip():
        return default
    try:
        number = int(value.strip())
    except ValueError:
        raise ImproperlyConfigured(f"{name}={value!r}: expected an integer") from None
    if minimum is not None and number < minimum:
        raise ImproperlyConfigured(f"{name}={number}: must be at least {minimum}")
    if maximum is not None and number > maximum:
        raise ImproperlyConfigured(f"{name}={number}: must be at most {maximum}")
    return number


def env_float(name: str, default: float, *, minimum: float | None = None) -> float:
    """A finite float (``nan`` and ``inf`` are refused: a time limit must end), optionally bounded below."""
    value = os.environ.get(name)
    if value is None or not value.strip():
        return default
    try:
        number = float(value.strip())
    except ValueError:
        raise ImproperlyConfigured(f"{name}={value!r}: expected a number") from None
    if not math.isfinite(number):
        raise ImproperlyConfigured(f"{name}={value!r}: expected a finite number")
    if minimum is not None and number < minimum:
        raise ImproperlyConfigured(f"{name}={number}: must be at least {minimum}")
    return number


def env_list(name: str, default: list[str], *, when_empty: list[str] | None = None) -> list[str]:
    """A comma-separated list; empty items are dropped; ``default`` if unset or empty.

    ``when_empty``: what a value set but without any item means when that is not the default.
    """
    value = os.environ.get(name)
    items = [item.strip() for item in (value or "").split(",") if item.strip()]
    if items:
        return items
    return list(default if value is None or when_empty is None else when_empty)


def env_path(name: str, default: Path, *, kind: Literal["file", "folder"]) -> Path:
    """An absolute path (a relative one is taken from the working folder); ``default`` if unset or empty.

    A path that exists must be a ``kind``: a file where a file is read, a folder where one is.
    """
    path = Path(env_str(name) or default).expanduser().resolve()
    if kind == "file" and path.is_dir():
        raise ImproperlyConfigured(f"{name}={path}: is a folder; expected a file's path (unset: {default})")
    if kind == "folder" and path.exists() and not path.is_dir():
        raise ImproperlyConfigured(f"{name}={path}: is a file; expected a folder (unset: {default})")
    return path


def env_log_level(name: str, default: str = "INFO") -> str:
    """One of Python's log levels (case-insensitive), upper-cased; ``default`` if unset or empty."""
    value = env_str(name, default).upper()
    if value not in LOG_LEVELS:
        raise ImproperlyConfigured(f"{name}={value!r}: expected one of {', '.join(LOG_LEVELS)}")
    return value


def env_url(name: str, default: str) -> str:
    """An http(s) URL with a host, without a trailing slash; ``default`` if unset or empty."""
    value = env_str(name, default)
    parts = urlsplit(value)
    try:
        parts.port  # noqa: B018 - raises ValueError for a port that is not a number
    except ValueError:
        parts = parts._replace(netloc="")
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.query or parts.fragment:
        raise ImproperlyConfigured(
            f"{name}={value!r}: expected an http(s) URL without query, e.g. https://chat.example.org"
        )
    return value.rstrip("/")


def _is_origin(value: str) -> bool:
    parts = urlsplit(value)
    try:
        parts.port  # noqa: B018 - raises ValueError for a port that is not a number
    except ValueError:
        return False
    return (
        parts.scheme in ("http", "https")
        and bool(parts.hostname)
        and parts.path in ("", "/")
        and not (parts.query or parts.fragment or parts.username)
    )


def env_origins(name: str) -> list[str]:
    """A comma-separated list of origins (``scheme://host[:port]``), without trailing slashes."""
    origins = env_list(name, [])
    for value in origins:
        if not _is_origin(value):
            raise ImproperlyConfigured(
                f"{name}: {value!r} is not an origin; expected scheme://host[:port], e.g. https://chat.example.com"
            )
    return [value.rstrip("/") for value in origins]


def env_egress_allow(name: str) -> EgressAllow:
    """Networks (CIDR) and host names, comma- or space-separated, that connections made on a
    server's word may reach beyond public addresses (:mod:`mcpclient.core.egress`)."""
    try:
        return EgressAllow.parse(env_str(name))
    except ValueError as exc:
        raise ImproperlyConfigured(f"{name}: {exc}") from None


def env_choice(name: str, choices: tuple[str, ...], default: str) -> str:
    """One of ``choices`` (case-insensitive), or ``default`` when unset or empty."""
    value = env_str(name).lower() or default
    if value not in choices:
        raise ImproperlyConfigured(f"{name}={value!r}: expected one of {', '.join(choices)}")
    return value


def _loopback(host: str) -> bool:
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def env_issuer(name: str) -> str:
    """An OpenID issuer URL exactly as written (its ``issuer`` must match it), or "" when unset.

    ``https://`` with a host, no query or fragment; ``http://`` only for this machine (localhost,
    127.0.0.0/8, ::1), where nothing travels over a network.
    """
    value = env_str(name)
    if not value:
        return ""
    parts = urlsplit(value)
    try:
        parts.port  # noqa: B018 - raises ValueError for a port that is not a number
    except ValueError:
        parts = parts._replace(netloc="")
    host = parts.hostname or ""
    secure = parts.scheme == "https" or (parts.scheme == "http" and _loopback(host))
    if not host or not secure or parts.query or parts.fragment or parts.username:
        raise ImproperlyConfigured(
            f"{name}={value!r}: expected the provider's issuer URL, https://host[/path] without query or "
            "fragment (http:// only for localhost), e.g. https://login.example.com/realms/staff"
        )
    return value

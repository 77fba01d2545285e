"""The optional extras: what scaling out, tracing and single sign-on add to the single-box install.

``make run`` installs ``requirements.txt``: what BooCode needs on one machine (SQLite, the
in-memory channel layer, local accounts). Each extra is ``requirements-<name>.txt``, installed
with ``make install-<name>``; ``make test`` installs them all. A setting that needs an extra
checks it when the settings are read (:func:`require`, called by :mod:`boocode.settings`), so a
process stops at start with the line that installs it rather than failing at the first request
that reaches the missing package. The check only looks the modules up (no import: the sign-on
and tracing packages are imported when first used, not at start).
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass

from django.core.exceptions import ImproperlyConfigured


@dataclass(frozen=True)
class Extra:
    """One optional extra: what it is for and the modules it brings (all needed)."""

    name: str
    purpose: str
    modules: tuple[str, ...]

    @property
    def install(self) -> str:
        """How to install it, in a checkout and in a virtualenv of one's own."""
        return f"`make install-{self.name}` (or `pip install -r requirements-{self.name}.txt`)"


EXTRAS = {
    extra.name: extra
    for extra in (
        Extra("postgres", "PostgreSQL as the database", ("psycopg",)),
        Extra(
            "redis",
            "Redis for several processes and the hub worker",
            ("channels_redis", "redis"),
        ),
        Extra(
            "tracing",
            "traces exported over OTLP",
            ("opentelemetry.sdk", "opentelemetry.exporter.otlp.proto.http"),
        ),
        Extra("sso", "single sign-on with OpenID Connect", ("authlib", "joserfc", "requests")),
        # Asked for by no setting: tool search ranks lexically without it (docs/tools.md).
        Extra(
            "semantic",
            "the embedding model of tool search",
            ("numpy", "tokenizers", "safetensors", "threadpoolctl", "all_minilm_l6_v2"),
        ),
    )
}


def missing(name: str) -> list[str]:
    """The modules of the extra ``name`` that cannot be imported here (``[]``: it is installed)."""
    absent = []
    for module in EXTRAS[name].modules:
        try:
            found = importlib.util.find_spec(module) is not None
        except (ImportError, ValueError):  # its parent package is absent, or was blocked
            found = False
        if not found:
            absent.append(module)
    return absent


def require(name: str, setting: str) -> None:
    """Raise :class:`ImproperlyConfigured` naming ``setting`` and how to install the extra
    ``name`` when it is not installed."""
    absent = missing(name)
    if not absent:
        return
    extra = EXTRAS[name]
    raise ImproperlyConfigured(
        f"{setting} needs the {extra.name} extra ({extra.purpose}), which is not installed (no module "
        f"{', '.join(absent)}): install it with {extra.install}, or unset {setting}"
    )

"""The process interface of mcpclient: the composition root and the glue between the hub and Django.

Owns: the process-wide hub and what the chat asks of it (``composition``: :func:`ensure_hub`,
:func:`get_hub`, :func:`new_hub`, :func:`hub_call`, listeners, hooks), file↔database sync
(``sync``), stored server logs (``log_store``), sign-in steps (``signin``), the people's groups
as this process read them (``people``), servers of one's own (``personal``), pinned tool
definitions (``pins``), what the hub worker's server needs of this process (``worker_host``) and
its ``/metrics`` (``metrics_endpoint``), the management commands' services (``commands``), the
conformance client (``conformance``), shutdown under Daphne (``shutdown``), the serving
processes' start-up heap (``heap``). May import every layer below (worker, engine, secrets,
config, telemetry, core) and the app's models; nothing below imports it.

This face only names the public API of ``composition`` for the layers above (the chat, the
admin's callers, tests): ``from mcpclient.runtime import ensure_hub`` imports
:mod:`mcpclient.runtime.composition` on first use, so importing a submodule (``people``,
``sync``, …) does not start the composition root. The package's own modules import
``composition`` by its name, never this face.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mcpclient.runtime.composition import (
        STATUS_GROUP,
        TURN_CHECK_INTERVAL,
        WorkerUnavailable,
        broadcast_listener,
        ensure_hub,
        get_hub,
        heal_policy,
        held_for_review,
        hub_call,
        hub_statuses,
        hub_tools,
        id_tokens_from,
        new_hub,
        on_hub_started,
        on_tools_changed,
        persist_listener,
        remote,
        run_on_hub_loop,
        seen_version,
        serve_for_web_processes,
        set_hub,
        start_hub_soon,
        username_of,
    )

__all__ = [
    "STATUS_GROUP",
    "TURN_CHECK_INTERVAL",
    "WorkerUnavailable",
    "broadcast_listener",
    "ensure_hub",
    "get_hub",
    "heal_policy",
    "held_for_review",
    "hub_call",
    "hub_statuses",
    "hub_tools",
    "id_tokens_from",
    "new_hub",
    "on_hub_started",
    "on_tools_changed",
    "persist_listener",
    "remote",
    "run_on_hub_loop",
    "seen_version",
    "serve_for_web_processes",
    "set_hub",
    "start_hub_soon",
    "username_of",
]


def __getattr__(name: str) -> Any:
    """A public name of :mod:`mcpclient.runtime.composition`, imported on first use."""
    if name in __all__:
        return getattr(importlib.import_module("mcpclient.runtime.composition"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

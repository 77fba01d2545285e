"""What the hub worker's server (:mod:`mcpclient.worker.server`) needs of this process, composed here.

The worker package sits below the runtime and makes no ORM query of its own; the hub worker
runs the process-wide hub of :mod:`mcpclient.runtime.composition`, reads the people's groups
(:mod:`mcpclient.runtime.people`) and own servers (:mod:`mcpclient.runtime.personal`) and runs
the sign-in steps (:mod:`mcpclient.runtime.signin`) a web process forwards. :func:`worker_host`
hands these to the server as one :class:`~mcpclient.worker.server.WorkerHost`.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from channels.db import database_sync_to_async
from django.conf import settings

from mcpclient.config.model import ServerConfig
from mcpclient.engine.hub import Hub
from mcpclient.runtime import composition, people, personal, signin
from mcpclient.runtime.heap import freeze_start_up
from mcpclient.runtime.metrics_endpoint import serve_metrics
from mcpclient.worker.server import MetricsRunner, WorkerHost


async def _local_hub(max_age: float) -> Hub:
    """The hub this process holds (the hub worker serves the web processes: never a RemoteHub)."""
    hub = await composition.ensure_hub(max_age=max_age)
    if not isinstance(hub, Hub):
        raise RuntimeError("the hub worker must hold the hub itself (serve_for_web_processes first)")
    return hub


async def _personal_configs(user_id: int) -> list[ServerConfig]:
    """A person's own servers as the database says, read here, not taken on a web process's word."""
    return await database_sync_to_async(personal.configs_for)(user_id)


async def _signin(args: dict[str, Any]) -> dict[str, Any]:
    """A sign-in step a web process forwarded: the flow lives here, with the session it opens."""
    step, back = args["step"], ""
    if step == "connect":
        outcome = await signin.connect(
            args["name"], args["user_id"], staff=args["staff"], return_to=args["return_to"]
        )
    elif step == "finish":
        outcome, back = await signin.finish(args["state"], args["user_id"], args["query"])
    elif step == "disconnect":
        outcome = await signin.disconnect(args["name"], args["user_id"], staff=args["staff"])
    else:
        raise ValueError(f"unknown sign-in step {step!r}")
    return {"outcome": dataclasses.asdict(outcome), "back": back}


async def _serve_metrics() -> MetricsRunner | None:
    """The worker's own ``/metrics`` with ``BOOCODE_HUB_WORKER_METRICS_PORT`` (else none)."""
    if not settings.HUB_WORKER_METRICS_PORT:
        return None
    return await serve_metrics(
        settings.HUB_WORKER_METRICS_HOST, settings.HUB_WORKER_METRICS_PORT, settings.METRICS_TOKEN
    )


def worker_host() -> WorkerHost:
    """The hub worker's server's view of this process."""
    return WorkerHost(
        ensure_hub=_local_hub,
        seen_version=composition.seen_version,
        check_interval=composition.TURN_CHECK_INTERVAL,
        refresh_person=people.refresh,
        personal_configs=_personal_configs,
        signin=_signin,
        serve_for_web_processes=composition.serve_for_web_processes,
        serve_metrics=_serve_metrics,
        freeze_start_up=freeze_start_up,
    )

"""``manage.py hub_worker``: run the one process that holds every MCP session (BOOCODE_HUB=worker).

Channels' worker (what ``manage.py runworker`` runs; :class:`mcpclient.runtime.hub_worker.HubWorker`)
listens on the hub channel; see
:mod:`mcpclient.runtime.hub_worker` for what it does and docs/deployment.md for how to run it. With
``BOOCODE_HUB_WORKER_METRICS_PORT`` it serves its own ``/metrics``, and with an OTLP endpoint it
exports its spans (docs/operations.md).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from typing import Any

from channels.routing import ChannelNameRouter
from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from mcpclient import runtime
from mcpclient.runtime.heap import freeze_start_up
from mcpclient.runtime.hub_worker import (
    HubConsumer,
    HubWorker,
    broadcast_state,
    heartbeat,
    poll_changes,
    stop_all_calls,
)
from mcpclient.runtime.metrics_endpoint import serve_metrics
from mcpclient.telemetry import tracing
from mcpclient.worker import wire as worker_wire

logger = logging.getLogger("mcpclient.runtime.hub_worker")


class Command(BaseCommand):
    help = "Run the MCP hub worker: every MCP session of every web process (BOOCODE_HUB=worker)."

    def handle(self, *args: Any, **options: Any) -> None:
        if settings.MCP_HUB != "worker":
            raise CommandError("the hub worker runs with BOOCODE_HUB=worker (and BOOCODE_REDIS_URL)")
        asyncio.run(self._serve())

    async def _serve(self) -> None:
        tracing.configure("hub_worker", settings.VERSION)  # only with an OTLP endpoint (docs/operations.md)
        layer = worker_wire.hub_layer()
        channel = settings.MCP_HUB_CHANNEL
        # The web processes send to the group named after the hub channel. The worker joins it
        # with a channel of its own before the hub starts, whose state changes announce this
        # worker: pub/sub drops what is sent before anyone listens, and a web process calls as
        # soon as it hears of a worker (messages wait in the channel's queue until read).
        name = await layer.new_channel(prefix=f"{channel}.worker.")
        await layer.group_add(channel, name)
        runtime.serve_for_web_processes(broadcast_state)
        hub = await runtime.ensure_hub()
        worker = HubWorker(
            application=ChannelNameRouter({name: HubConsumer.as_asgi()}),
            channels=[name],
            channel_layer=layer,
        )
        main = asyncio.current_task()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, main.cancel)
        metrics_runner = None
        if settings.HUB_WORKER_METRICS_PORT:
            metrics_runner = await serve_metrics(
                settings.HUB_WORKER_METRICS_HOST, settings.HUB_WORKER_METRICS_PORT, settings.METRICS_TOKEN
            )
        freeze_start_up()  # the hub and its sessions are up: out of the collector's way (runtime/heap.py)
        self.stdout.write(f'hub worker listening on channel "{channel}"', ending="\n")
        self.stdout.flush()
        await broadcast_state(hub)  # web processes learn of this boot (calls to an earlier one fail)
        tasks = [
            asyncio.ensure_future(worker.handle()),
            asyncio.ensure_future(worker.application_checker()),
            asyncio.ensure_future(poll_changes(runtime.TURN_CHECK_INTERVAL)),
            asyncio.ensure_future(heartbeat()),
        ]
        try:
            await asyncio.gather(*tasks)
        except asyncio.CancelledError:
            logger.info("hub worker stopping")
        finally:
            with contextlib.suppress(Exception):
                await stop_all_calls()
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await hub.stop()
            if metrics_runner is not None:
                await metrics_runner.cleanup()
            tracing.shutdown()  # what is still batched goes out

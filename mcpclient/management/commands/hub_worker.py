"""``manage.py hub_worker``: run the one process that holds every MCP session (BOOCODE_HUB=worker).

A thin entry: it checks the setting and runs :func:`mcpclient.worker.server.serve` with this
process's :func:`~mcpclient.runtime.worker_host.worker_host`; see :mod:`mcpclient.worker.server`
for what the worker does and docs/deployment.md for how to run it. With
``BOOCODE_HUB_WORKER_METRICS_PORT`` it serves its own ``/metrics``, and with an OTLP endpoint it
exports its spans (docs/operations.md).
"""

from __future__ import annotations

import asyncio
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from mcpclient.runtime.worker_host import worker_host
from mcpclient.worker.server import serve


class Command(BaseCommand):
    help = "Run the MCP hub worker: every MCP session of every web process (BOOCODE_HUB=worker)."

    def handle(self, *args: Any, **options: Any) -> None:
        if settings.MCP_HUB != "worker":
            raise CommandError("the hub worker runs with BOOCODE_HUB=worker (and BOOCODE_REDIS_URL)")
        asyncio.run(serve(worker_host(), self._announce))

    def _announce(self, line: str) -> None:
        self.stdout.write(line, ending="\n")
        self.stdout.flush()

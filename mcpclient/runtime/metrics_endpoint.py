"""The hub worker's ``/metrics``: its own figures over HTTP, for the holder of the metrics token.

The hub worker serves no web pages, so it has no endpoint to add a path to: with
``BOOCODE_HUB_WORKER_METRICS_PORT`` set, ``manage.py hub_worker`` serves ``GET /metrics`` on
that port (``BOOCODE_HUB_WORKER_METRICS_HOST``, 127.0.0.1 by default) on its own event loop,
where the hub runs, so the servers' states are read where they change. A request without
``Authorization`` gets 404, one with another token 403 (there are no staff sessions here: the
token is the only key, which is why the settings refuse the port without one).
"""

from __future__ import annotations

from aiohttp import web

from mcpclient.telemetry.metrics import bearer_allows, exposition


def metrics_app(token: str) -> web.Application:
    """The application answering ``GET /metrics`` for ``Authorization: Bearer <token>``."""

    async def metrics(request: web.Request) -> web.Response:
        authorization = request.headers.get("Authorization")
        if not authorization:
            raise web.HTTPNotFound()
        if not bearer_allows(authorization, token):
            raise web.HTTPForbidden()
        body, content_type = exposition(request.headers.get("Accept", ""))
        return web.Response(body=body, headers={"Content-Type": content_type})

    app = web.Application()
    app.router.add_get("/metrics", metrics)
    return app


async def serve_metrics(host: str, port: int, token: str) -> web.AppRunner:
    """Serve :func:`metrics_app` on ``host:port`` until the returned runner is cleaned up."""
    runner = web.AppRunner(metrics_app(token), access_log=None)
    await runner.setup()
    await web.TCPSite(runner, host, port).start()
    return runner

"""ASGI entry point: HTTP goes to Django, websockets to the chat consumers.

Websockets are accepted only from the origin they are opened at (or one the operator
trusts; see boocode/security/origins.py) and authenticated with the Django session. Static
files are served by Django's ASGI static handler so `make run` needs no separate web server;
that handler bypasses the middleware, so the security headers are added around it. With an
OTLP endpoint configured, the process exports its spans (mcpclient.telemetry.tracing).
"""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "boocode.settings")
django_asgi_app = get_asgi_application()

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from django.conf import settings  # noqa: E402
from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler  # noqa: E402

from boocode.chat.routing import websocket_urlpatterns  # noqa: E402
from boocode.security.headers import StaticFilesHeaders  # noqa: E402
from boocode.security.origins import WebsocketOriginCheck  # noqa: E402
from mcpclient.runtime import start_hub_soon  # noqa: E402
from mcpclient.runtime.heap import freeze_start_up  # noqa: E402
from mcpclient.telemetry import tracing  # noqa: E402

# Spans go out only with an OTLP endpoint in the environment (docs/operations.md, *Traces*).
tracing.configure("web", settings.VERSION)


class StartHubOnFirstConnection:
    """Start the MCP hub on the first HTTP request or websocket (Daphne has no lifespan)."""

    def __init__(self, app):
        self.app = app
        self.started = False

    async def __call__(self, scope, receive, send):
        if not self.started and scope["type"] in ("http", "websocket"):
            self.started = True
            start_hub_soon()
        return await self.app(scope, receive, send)


application = StartHubOnFirstConnection(
    ProtocolTypeRouter(
        {
            "http": StaticFilesHeaders(ASGIStaticFilesHandler(django_asgi_app)),
            "websocket": WebsocketOriginCheck(AuthMiddlewareStack(URLRouter(websocket_urlpatterns))),
        }
    )
)
# Everything above lives as long as the process: out of the collector's way (mcpclient/runtime/heap.py).
freeze_start_up()

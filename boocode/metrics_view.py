"""``GET /metrics``: this web process's figures for Prometheus, for staff or the holder of the token.

Allowed: ``Authorization: Bearer <BOOCODE_METRICS_TOKEN>`` (compared in constant time; with the
variable empty no token is accepted) or the session of an active staff account. Refused: 404
when the request presents neither (nothing to tell a stranger), 403 when it presents a wrong
token or a session without staff rights. Each Daphne process answers with its own figures
(docs/operations.md: scrape every process, and the hub worker on its own port). The view is
async so the MCP servers' states are read on the loop where the hub changes them.
"""

from __future__ import annotations

from django.conf import settings
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseForbidden
from django.views.decorators.http import require_GET

from mcpclient.telemetry.metrics import bearer_allows, exposition


@require_GET
async def metrics(request: HttpRequest) -> HttpResponse:
    """Every metric of this process (Prometheus text, or OpenMetrics if the scraper asks for it)."""
    authorization = request.headers.get("Authorization")
    if authorization:
        allowed = bearer_allows(authorization, settings.METRICS_TOKEN)
    else:
        user = await request.auser()
        if not user.is_authenticated:
            raise Http404
        allowed = user.is_active and user.is_staff
    if not allowed:
        return HttpResponseForbidden("Not allowed to read the metrics.", content_type="text/plain")
    body, content_type = exposition(request.headers.get("Accept", ""))
    response = HttpResponse(body, content_type=content_type)
    response["Cache-Control"] = "no-store"
    return response

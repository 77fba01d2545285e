"""Security headers on every HTTP response: pages, error pages and static files.

Responses made by Django get them from its middleware: SecurityMiddleware (nosniff,
Referrer-Policy, Cross-Origin-Opener-Policy, HSTS when BOOCODE_HSTS_SECONDS is set and the
request is secure), XFrameOptionsMiddleware (DENY) and ContentSecurityPolicyMiddleware (the
strict default policy SECURE_CSP; a view that sets its own header, such as the chat page with
its websocket ``connect-src``, keeps it). Static files are served by ASGIStaticFilesHandler,
which bypasses the middleware: :class:`StaticFilesHeaders` gives its responses (files and its
404 pages) the same headers when they lack them.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings


def policy_header(policy: dict[str, list[str]]) -> str:
    """A Content-Security-Policy header value from ``{"directive": ["source", ...]}``."""
    return "; ".join(" ".join([directive, *sources]) for directive, sources in policy.items())


def with_sources(policy: dict[str, list[str]], directive: str, *sources: str) -> dict[str, list[str]]:
    """A copy of ``policy`` with ``sources`` added to ``directive``."""
    return {**policy, directive: [*policy.get(directive, []), *sources]}


def default_headers() -> list[tuple[bytes, bytes]]:
    """The headers every response carries unless it sets its own (names in lower case)."""
    referrer = settings.SECURE_REFERRER_POLICY
    if not isinstance(referrer, str):  # Django also takes a list of policies
        referrer = ",".join(referrer)
    headers = [
        (b"x-content-type-options", b"nosniff"),
        (b"x-frame-options", settings.X_FRAME_OPTIONS.encode()),
        (b"referrer-policy", referrer.encode()),
    ]
    if settings.SECURE_CSP:
        headers.append((b"content-security-policy", policy_header(settings.SECURE_CSP).encode()))
    return headers


class StaticFilesHeaders:
    """ASGI middleware for HTTP: add the default security headers a response lacks."""

    def __init__(self, application: Any) -> None:
        self.application = application

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> Any:
        """Run the application, filling in missing headers on its ``http.response.start``."""
        if scope["type"] != "http":
            return await self.application(scope, receive, send)

        async def send_with_headers(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                present = {name.lower() for name, _ in message.get("headers", ())}
                missing = [(name, value) for name, value in default_headers() if name not in present]
                if missing:
                    message = {**message, "headers": [*message.get("headers", ()), *missing]}
            await send(message)

        return await self.application(scope, receive, send_with_headers)

"""Login throttling with django-axes: the client address, the backend and the locked-out page.

Axes counts failed logins per username and per client address separately
(AXES_LOCKOUT_PARAMETERS): BOOCODE_LOGIN_FAILURE_LIMIT failures lock that username, or that
address, for BOOCODE_LOGIN_COOLOFF_MINUTES (further failures meanwhile restart the wait).
A successful login does not clear the count: it would let anyone with an account reset the
count of the address they guess other accounts' passwords from. Administrators see and clear
lockouts in the admin (Axes: access attempts).
"""

from __future__ import annotations

import ipaddress
from typing import Any

from axes.backends import AxesStandaloneBackend
from django.conf import settings
from django.contrib.auth.forms import AuthenticationForm
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render


def client_ip(request: HttpRequest) -> str:
    """The address failed logins are counted against.

    ``REMOTE_ADDR`` unless BOOCODE_TRUSTED_PROXY_COUNT is ``n > 0``: then the ``n``-th address
    from the right of ``X-Forwarded-For``, the one the outermost trusted proxy saw. Each proxy
    appends the address it received from, so what a client writes there itself is further left
    and never read. A missing or malformed entry falls back to ``REMOTE_ADDR``.
    """
    remote = request.META.get("REMOTE_ADDR", "")
    count = settings.TRUSTED_PROXY_COUNT
    if count <= 0:
        return remote
    forwarded = [part.strip() for part in request.META.get("HTTP_X_FORWARDED_FOR", "").split(",")]
    forwarded = [part for part in forwarded if part]
    if len(forwarded) < count:
        return remote
    candidate = forwarded[-count]
    try:
        return str(ipaddress.ip_address(candidate))
    except ValueError:
        return remote


class LoginThrottleBackend(AxesStandaloneBackend):
    """Axes' lockout check before the real backend; skipped when there is no request.

    Every login form (ours and the admin's) passes the request. ``authenticate()`` without one
    comes from code (management commands, ``Client.login`` in tests), where there is no client
    to count failures against; Axes itself would raise there.
    """

    def authenticate(
        self,
        request: HttpRequest | None,
        username: str | None = None,
        password: str | None = None,
        **kwargs: Any,
    ) -> None:
        """Raise ``PermissionDenied`` for a locked-out username or address; never logs anyone in."""
        if request is None:
            return None
        return super().authenticate(request, username=username, password=password, **kwargs)


def lockout_response(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
    """The login page saying the login is locked and for how long (HTTP 429).

    Axes calls this as ``(request, response, credentials)`` from its synchronous middleware and
    ``(request, credentials)`` from its asynchronous one; neither extra argument is needed here.
    """
    form = AuthenticationForm(request)
    username = request.POST.get("username", "") if request.method == "POST" else ""
    form.fields["username"].initial = username
    return render(
        request,
        "registration/login.html",
        {
            "form": form,
            "locked_out": True,
            "cooloff_minutes": settings.LOGIN_COOLOFF_MINUTES,
            "next": request.POST.get("next", "") or request.GET.get("next", ""),
        },
        status=429,
    )

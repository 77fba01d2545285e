"""Password reset requests, limited: a reset form must not become a way to flood an inbox.

Each request counts against the client's address (:func:`boocode.security.logins.client_ip`)
and against the email address asked for, :data:`RESETS_PER_HOUR` each in an hour. A request over
either limit gets the same answer as any other (the page never says whether an address has an
account, nor whether an email went out) and sends nothing; the log says so. The counts live in
Django's cache: without ``CACHES`` set, each web process counts on its own.
"""

from __future__ import annotations

import hashlib
import logging

from django.contrib.auth import views as auth_views
from django.contrib.auth.forms import PasswordResetForm
from django.core.cache import cache
from django.http import HttpResponse, HttpResponseRedirect

from boocode.security.logins import client_ip

logger = logging.getLogger(__name__)

RESETS_PER_HOUR = 5
WINDOW_SECONDS = 3600


def _over_limit(key: str) -> bool:
    """Count one request under ``key``; whether that one is past the hour's limit."""
    cache.add(key, 0, WINDOW_SECONDS)  # the window starts with the first request
    try:
        return cache.incr(key) > RESETS_PER_HOUR
    except ValueError:  # expired between add and incr: a new window
        cache.add(key, 1, WINDOW_SECONDS)
        return False


class PasswordResetView(auth_views.PasswordResetView):
    """Django's reset view, at most :data:`RESETS_PER_HOUR` emails an hour per client and per address."""

    def form_valid(self, form: PasswordResetForm) -> HttpResponse:
        email = form.cleaned_data["email"].strip().lower()
        keys = (
            "boocode-reset-client:" + hashlib.sha256(client_ip(self.request).encode()).hexdigest(),
            "boocode-reset-email:" + hashlib.sha256(email.encode()).hexdigest(),
        )
        if any([_over_limit(key) for key in keys]):  # (both counted, not just the first)
            logger.warning("password reset not sent: over %d an hour (client or address)", RESETS_PER_HOUR)
            return HttpResponseRedirect(self.get_success_url())
        return super().form_valid(form)

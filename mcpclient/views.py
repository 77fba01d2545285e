"""OAuth pages: Connect / Disconnect, the authorization callback, the client metadata document.

The views are async: they run on the loop that holds the hub (see :mod:`mcpclient.runtime.signin`).
Connect and Disconnect are POSTs (CSRF-checked); the callback is a GET from the provider's
redirect and only completes a sign-in the same logged-in person started.
"""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_POST, require_safe

from mcpclient.engine import authorization
from mcpclient.runtime import signin

# The callback's parameters handed to the flow (RFC 6749 §4.1.2, RFC 9207).
CALLBACK_KEYS = ("code", "state", "iss", "error", "error_description")


def _next_url(request: HttpRequest) -> str:
    target = request.POST.get("next") or request.GET.get("next") or "/"
    if url_has_allowed_host_and_scheme(
        target, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    ):
        return target
    return "/"


def _report(request: HttpRequest, outcome: signin.Outcome) -> None:
    if outcome.message:
        (messages.success if outcome.ok else messages.error)(request, outcome.message)


@require_POST
@login_required
async def connect(request: HttpRequest, name: str) -> HttpResponse:
    """Start a sign-in: a page that takes the browser to the provider, or back with what happened."""
    user = await request.auser()
    back = _next_url(request)
    staff = user.is_staff and await user.ahas_perm("mcpclient.change_mcpserver")
    outcome = await signin.connect(name, user.pk, staff=staff, return_to=back)
    if outcome.url:
        # Not a redirect: the CSP's form-action 'self' stops a form's redirect to another origin.
        context = {"server": name, "url": outcome.url, "back": back}
        return render(request, "oauth/continue.html", context)
    _report(request, outcome)
    return redirect(back)


@require_safe
@never_cache
@login_required
async def callback(request: HttpRequest) -> HttpResponse:
    """The provider's redirect back: finish the sign-in it belongs to."""
    user = await request.auser()
    query = {key: request.GET[key] for key in CALLBACK_KEYS if key in request.GET}
    outcome, return_to = await signin.finish(query.get("state", ""), user.pk, query)
    _report(request, outcome)
    return redirect(return_to)


@require_POST
@login_required
async def disconnect(request: HttpRequest, name: str) -> HttpResponse:
    """Close the session and revoke the tokens (the person's own, or the shared ones for admins)."""
    user = await request.auser()
    staff = user.is_staff and await user.ahas_perm("mcpclient.change_mcpserver")
    _report(request, await signin.disconnect(name, user.pk, staff=staff))
    return redirect(_next_url(request))


@require_safe
def client_metadata(request: HttpRequest) -> JsonResponse:
    """BooCode's Client ID Metadata Document (public: authorization servers fetch it)."""
    response = JsonResponse(authorization.client_metadata_document())
    response["Cache-Control"] = "public, max-age=3600"
    return response

"""The ways in: the login page, single sign-on's two views, logout, and local accounts on or off.

- ``/login/`` offers the password form while ``BOOCODE_LOCAL_LOGIN`` is on and a "Sign in with
  <name>" link while an OpenID provider is configured (``BOOCODE_OIDC_ISSUER``); with local login
  off a password sent to it is refused (403), the password pages answer 404 and the admin's login
  page leads here.
- ``/login/sso/`` sends the person to the provider (:func:`boocode.security.oidc.start`);
  ``/login/sso/callback/`` completes the sign-in (:func:`boocode.security.oidc.finish`), finds the
  account (:mod:`boocode.security.sso_accounts`), keeps the tokens and logs the person in.
- ``/logout/`` ends the session; Django's ``user_logged_out`` closes its sockets
  (:mod:`boocode.security.sessions`). A session that single sign-on opened also forgets the
  person's tokens and, when the provider has a logout, answers with a page that continues there
  (the page's ``form-action 'self'`` would stop a redirect answering the form).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any
from urllib.parse import urlencode

from django.conf import settings
from django.contrib import admin
from django.contrib.auth import login
from django.contrib.auth import views as auth_views
from django.contrib.auth.backends import ModelBackend
from django.contrib.auth.forms import AuthenticationForm
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render, resolve_url
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.cache import never_cache

from boocode.security.sso_accounts import SignInRefused, account_for

BACKEND = "boocode.security.signin.SignedInBackend"
SSO_SESSION_KEY = "boocode_sso"  # set in a session single sign-on opened
_NEXT_KEY = "boocode_sso_next"  # where to go once signed in, kept between the two views


class SignedInBackend(ModelBackend):
    """Restores the people single sign-on logged in (``get_user``); it authenticates nobody.

    A sign-in by the provider is the callback's verified ID token, never a password: this
    backend's ``authenticate`` always answers None, so with local login off no password works.
    """

    def authenticate(self, request: HttpRequest | None, *args: Any, **credentials: Any) -> None:
        """Never: see the class."""
        return None


def sign_in_options(request: HttpRequest) -> dict[str, Any]:
    """Template context: whether passwords are on (``local_login``) and the provider's button
    name (``sso_name``, empty without a provider)."""
    return {
        "local_login": settings.LOCAL_LOGIN,
        "sso_name": settings.OIDC_NAME if settings.OIDC_ISSUER else "",
    }


def local_login_only(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """``view`` while local accounts' passwords are on; 404 once they are off."""

    @wraps(view)
    def guarded(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if not settings.LOCAL_LOGIN:
            raise Http404("password sign-in is off")
        return view(request, *args, **kwargs)

    return guarded


def _safe_next(request: HttpRequest, value: str) -> str:
    """``value`` when it is a place on this site, else ""."""
    if value and url_has_allowed_host_and_scheme(
        value, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    ):
        return value
    return ""


def _sso_url(next_url: str) -> str:
    url = reverse("sso_login")
    return f"{url}?{urlencode({'next': next_url})}" if next_url else url


def login_page(request: HttpRequest, *, status: int, error: str = "", next_url: str = "") -> HttpResponse:
    """The login page with ``error`` said at its top."""
    context = {
        "form": AuthenticationForm(request),
        "next": next_url,
        "sso_url": _sso_url(next_url),
        "sso_error": error,
    }
    return render(request, "registration/login.html", context, status=status)


class LoginView(auth_views.LoginView):
    """Django's login with the provider's link, refusing passwords while local login is off."""

    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        """Check a password, unless passwords are off (403, the page says so)."""
        if not settings.LOCAL_LOGIN:
            return login_page(
                request,
                status=403,
                error="Signing in with a password is turned off here.",
                next_url=_safe_next(request, request.POST.get("next", "")),
            )
        return super().post(request, *args, **kwargs)

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        """The page's context, with the provider's link keeping ``next``."""
        context = super().get_context_data(**kwargs)
        context["sso_url"] = _sso_url(self.get_redirect_url())
        return context


@never_cache
def sso_login(request: HttpRequest) -> HttpResponse:
    """Send the person to the provider (``next``: where to land afterwards)."""
    if not settings.OIDC_ISSUER:
        raise Http404("single sign-on is not configured")
    from boocode.security import oidc  # (with authlib: imported by the first sign-on, not at start)

    next_url = _safe_next(request, request.GET.get("next", ""))
    try:
        response = oidc.start(request)
    except oidc.SignInFailed as failure:
        return login_page(request, status=failure.status, error=str(failure), next_url=next_url)
    request.session[_NEXT_KEY] = next_url
    return response


@never_cache
def sso_callback(request: HttpRequest) -> HttpResponse:
    """Complete the sign-in the provider sent the person back from, and log them in."""
    if not settings.OIDC_ISSUER:
        raise Http404("single sign-on is not configured")
    from boocode.security import oidc

    next_url = request.session.pop(_NEXT_KEY, "")
    try:
        signed_in = oidc.finish(request)
        user = account_for(signed_in.issuer, signed_in.claims)
    except oidc.SignInFailed as failure:
        return login_page(request, status=failure.status, error=str(failure), next_url=next_url)
    except SignInRefused as refusal:
        return login_page(request, status=403, error=str(refusal), next_url=next_url)
    login(request, user, backend=BACKEND)
    request.session[SSO_SESSION_KEY] = True
    oidc.store_tokens(user.pk, signed_in)
    return HttpResponseRedirect(_safe_next(request, next_url) or resolve_url(settings.LOGIN_REDIRECT_URL))


class LogoutView(auth_views.LogoutView):
    """Django's logout; after a single sign-on session, on to the provider's logout."""

    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        """End the session (its sockets close); continue to the provider's logout when there is one."""
        user_id = request.user.pk if request.user.is_authenticated else None
        provider_logout = None
        if user_id is not None and request.session.get(SSO_SESSION_KEY) and settings.OIDC_ISSUER:
            from boocode.security import oidc

            provider_logout = oidc.end_session_url(user_id)
            oidc.forget_tokens(user_id)
        response = super().post(request, *args, **kwargs)
        if provider_logout is None:
            return response
        return render(
            request, "registration/sso_logout.html", {"url": provider_logout, "back": reverse("login")}
        )


def admin_login(request: HttpRequest) -> HttpResponse:
    """The admin's login page while passwords are on; the login page (and back) once they are off."""
    if settings.LOCAL_LOGIN:
        return admin.site.login(request)
    next_url = _safe_next(request, request.GET.get("next", "")) or reverse("admin:index")
    return HttpResponseRedirect(f"{reverse('login')}?{urlencode({'next': next_url})}")


@local_login_only
def admin_password_change(request: HttpRequest) -> HttpResponse:
    """The admin's password change, while passwords are on."""
    return admin.site.admin_view(admin.site.password_change)(request)

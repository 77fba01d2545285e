"""Single sign-on with OpenID Connect: the provider, the sign-in's two steps, the person's tokens.

The protocol is Authlib's Django client: discovery (``<issuer>/.well-known/openid-configuration``),
the authorization request with ``state``, ``nonce`` and PKCE (S256) kept in the person's session,
the code exchanged at the token endpoint, the ID token's signature checked against the provider's
JWKS (fetched again once for an unknown key id) and its claims: ``iss``, ``aud``, ``azp``, ``exp``,
``iat``, ``nonce``, ``at_hash``. BooCode adds what the library leaves to it: the discovered
``issuer`` must be exactly ``BOOCODE_OIDC_ISSUER`` and every endpoint as secure as it (OpenID
Connect Discovery §4.3), ``aud`` must name BooCode's client id, an answer without an ID token is
refused, and the userinfo answer only fills in claims the ID token lacks, its ``sub`` the same.

Lifecycle: one client per process, made at first use (a provider that cannot be reached then is
asked again at the next sign-in), made again when the settings change or its metadata is a day
old. Every request to the provider is bounded by :data:`TIMEOUT`. All of it is synchronous (the
network and the ORM): Django runs the views in threads; async code calls :func:`id_token_for`
through ``sync_to_async``.

Tokens: a sign-in's ID token and refresh token go to the encrypted secret store (kind ``oidc``,
name ``user:<id>``), never to the session, a cookie or a page. :func:`id_token_for` gives a
person's ID token to later work (a token exchange per person, SEP-990), refreshed first when it
is about to expire and a refresh token exists. Logging out forgets them (:func:`forget_tokens`);
the ID token then goes once to the browser, as the ``id_token_hint`` of the provider's logout
(:func:`end_session_url`), where RP-Initiated Logout needs it.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import requests
from authlib.common.urls import add_params_to_uri
from authlib.integrations.base_client import MismatchingStateError
from authlib.integrations.django_client import DjangoOAuth2App, OAuth, OAuthError
from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.urls import reverse
from joserfc.errors import JoseError

from mcpclient.secrets.store import SecretStoreError, delete_secret, get_secret, put_secret

logger = logging.getLogger(__name__)

TIMEOUT = 10.0  # seconds for each request to the provider
METADATA_MAX_AGE = 24 * 3600.0  # seconds before the provider's metadata is read again
LEEWAY = 120  # seconds of clock skew allowed on exp and iat
_KIND = "oidc"


class SignInFailed(Exception):
    """The sign-in cannot go on; ``str()`` is the sentence the person reads, ``status`` the HTTP
    status of the page that says it."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class SignIn:
    """What a completed sign-in gives BooCode: the verified claims and the tokens to keep."""

    issuer: str
    claims: dict[str, Any]
    id_token: str
    expires_at: int
    refresh_token: str | None


# --- The provider ----------------------------------------------------------------------------

_lock = threading.Lock()
_client: tuple[tuple[Any, ...], DjangoOAuth2App, float] | None = None


def _settings_key() -> tuple[Any, ...]:
    return (
        settings.OIDC_ISSUER,
        settings.OIDC_CLIENT_ID,
        settings.OIDC_CLIENT_SECRET,
        tuple(settings.OIDC_SCOPES),
    )


def _unreachable() -> SignInFailed:
    return SignInFailed(f"{settings.OIDC_NAME} cannot be reached right now: try again later.", 502)


def _misconfigured() -> SignInFailed:
    return SignInFailed(
        f"Signing in with {settings.OIDC_NAME} is not set up correctly: ask an administrator.", 502
    )


def _as_secure_as_issuer(url: Any, issuer: str) -> bool:
    """An endpoint over https, or over http on the issuer's own loopback host (settings allow
    http only there)."""
    if not isinstance(url, str):
        return False
    parts = urlsplit(url)
    if parts.scheme == "https":
        return bool(parts.hostname)
    return parts.scheme == "http" and parts.hostname == urlsplit(issuer).hostname


def _discovered() -> DjangoOAuth2App:
    """A new client, the provider's metadata read and checked."""
    issuer = settings.OIDC_ISSUER
    secret = settings.OIDC_CLIENT_SECRET
    app = OAuth().register(
        name="boocode",
        client_id=settings.OIDC_CLIENT_ID,
        client_secret=secret or None,
        server_metadata_url=issuer.rstrip("/") + "/.well-known/openid-configuration",
        client_kwargs={
            "scope": " ".join(settings.OIDC_SCOPES),
            "code_challenge_method": "S256",
            "default_timeout": TIMEOUT,
        },
    )
    try:
        metadata = app.load_server_metadata()
    except (requests.RequestException, ValueError) as exc:
        logger.warning("single sign-on: cannot read the provider's metadata at %s: %s", issuer, exc)
        raise _unreachable() from None
    if metadata.get("issuer") != issuer:
        logger.error(
            "single sign-on: the provider says its issuer is %r, not BOOCODE_OIDC_ISSUER=%r "
            "(set the variable to exactly that)",
            metadata.get("issuer"),
            issuer,
        )
        raise _misconfigured()
    endpoints = ("authorization_endpoint", "token_endpoint", "jwks_uri")
    optional = ("userinfo_endpoint", "end_session_endpoint")
    for key in endpoints + optional:
        if (key in endpoints or key in metadata) and not _as_secure_as_issuer(metadata.get(key), issuer):
            logger.error(
                "single sign-on: the provider's %s is missing or not https: %r", key, metadata.get(key)
            )
            raise _misconfigured()
    methods = metadata.get("token_endpoint_auth_methods_supported") or ["client_secret_basic"]
    if not secret:
        method = "none"
    elif "client_secret_basic" in methods:
        method = "client_secret_basic"
    elif "client_secret_post" in methods:
        method = "client_secret_post"
    else:
        logger.error("single sign-on: the provider takes a client secret in none of these ways: %s", methods)
        raise _misconfigured()
    app.client_kwargs["token_endpoint_auth_method"] = method
    return app


def provider() -> DjangoOAuth2App:
    """The provider's client, its metadata discovered; ``SignInFailed`` (502) when it cannot be."""
    global _client
    key = _settings_key()
    with _lock:
        if _client is not None and _client[0] == key and time.monotonic() - _client[2] < METADATA_MAX_AGE:
            return _client[1]
    app = _discovered()  # outside the lock: a slow provider must not hold up the other threads
    with _lock:
        _client = (key, app, time.monotonic())
    return app


def callback_url() -> str:
    """The redirect URI registered at the provider: ``<BOOCODE_PUBLIC_URL>/login/sso/callback/``."""
    return settings.PUBLIC_URL + reverse("sso_callback")


def post_logout_url() -> str:
    """Where the provider sends the person after its logout: ``<BOOCODE_PUBLIC_URL>/login/``."""
    return settings.PUBLIC_URL + reverse("login")


# --- The sign-in ------------------------------------------------------------------------------


def start(request: HttpRequest) -> HttpResponse:
    """The redirect to the provider's authorization endpoint; state, nonce and the PKCE verifier
    are kept in ``request.session`` for :func:`finish`."""
    return provider().authorize_redirect(request, callback_url())


def _claims_options() -> dict[str, Any]:
    """What an ID token's ``iss`` and ``aud`` must be, beyond Authlib's own checks (a new dict
    each time: Authlib takes hooks out of it)."""
    return {
        "iss": {"essential": True, "value": settings.OIDC_ISSUER},
        "aud": {"essential": True, "value": settings.OIDC_CLIENT_ID},
    }


def _checked_id_token(app: DjangoOAuth2App, token: dict[str, Any]) -> dict[str, Any]:
    """A renewed ID token's claims once its signature and claims hold (``JoseError`` otherwise);
    it carries no nonce of this session."""
    claims = app.parse_id_token(token, nonce=None, claims_options=_claims_options(), leeway=LEEWAY)
    if claims is None:
        raise ValueError("no ID token")
    return dict(claims)


def _with_userinfo(app: DjangoOAuth2App, token: dict[str, Any], claims: dict[str, Any]) -> dict[str, Any]:
    """The ID token's claims, with those only the userinfo endpoint gives added (never replaced)."""
    if "userinfo_endpoint" not in app.server_metadata or "access_token" not in token:
        return claims
    try:
        info = dict(app.userinfo(token=token))
    except (requests.RequestException, ValueError) as exc:
        logger.warning("single sign-on: the userinfo endpoint failed: %s", exc)
        raise _unreachable() from None
    if info.get("sub") != claims["sub"]:
        logger.warning("single sign-on: the userinfo answer is about another subject; refused")
        raise SignInFailed(f"{settings.OIDC_NAME}'s answer could not be verified: try again.", 502)
    return {**info, **claims}


def finish(request: HttpRequest) -> SignIn:
    """Complete the sign-in the provider sent the person back from (the callback's query).

    Refused (``SignInFailed``) when the provider reports an error, the ``state`` is not one this
    session started (or was used already), the code exchange fails, or the ID token does not
    hold (signature, issuer, audience, expiry, nonce).
    """
    error = request.GET.get("error")
    if error:
        code = error if error.isascii() and error.replace("_", "").isalpha() and len(error) <= 40 else "error"
        description = request.GET.get("error_description", "")[:300]
        logger.info("single sign-on: the provider answered %s: %r", code, description)
        raise SignInFailed(f"Signing in with {settings.OIDC_NAME} did not complete ({code}).", 403)
    app = provider()
    try:
        token = app.authorize_access_token(request, claims_options=_claims_options(), leeway=LEEWAY)
    except MismatchingStateError:
        raise SignInFailed(
            "This sign-in was not started in this browser, or it was completed already: start again.", 400
        ) from None
    except OAuthError as exc:
        logger.warning("single sign-on: the token request failed: %s %s", exc.error, exc.description)
        raise SignInFailed(
            f"{settings.OIDC_NAME} refused the sign-in ({exc.error}): start again.", 403
        ) from None
    except requests.RequestException as exc:
        logger.warning("single sign-on: the token request failed: %s", exc)
        raise _unreachable() from None
    except (JoseError, ValueError) as exc:
        logger.warning("single sign-on: an ID token was refused: %s", exc)
        raise SignInFailed(
            f"{settings.OIDC_NAME}'s answer could not be verified: start again.", 403
        ) from None
    id_token = token.get("id_token")
    verified = token.get("userinfo")  # the ID token's claims, checked with the session's nonce
    if not isinstance(id_token, str) or verified is None:
        logger.warning("single sign-on: the token answer has no ID token (is openid among the scopes?)")
        raise _misconfigured()
    claims = _with_userinfo(app, token, dict(verified))
    return SignIn(
        issuer=settings.OIDC_ISSUER,
        claims=claims,
        id_token=id_token,
        expires_at=int(claims["exp"]),
        refresh_token=token.get("refresh_token") or None,
    )


# --- The person's tokens ------------------------------------------------------------------------

_refreshing: dict[int, threading.Lock] = {}


def _name(user_id: int) -> str:
    return f"user:{user_id}"


def _stored(user_id: int) -> dict[str, Any] | None:
    try:
        value = get_secret(_KIND, _name(user_id))
    except SecretStoreError as exc:
        logger.warning("single sign-on: %s", exc)
        return None
    return None if value is None else json.loads(value)


def _store(user_id: int, record: dict[str, Any]) -> None:
    put_secret(_KIND, _name(user_id), json.dumps(record))


def store_tokens(user_id: int, sign_in: SignIn) -> None:
    """Keep the sign-in's ID token and refresh token for the person (the secret store). A store
    that cannot encrypt (its key missing or malformed) is logged: the sign-in still counts."""
    record = {
        "issuer": sign_in.issuer,
        "subject": str(sign_in.claims["sub"]),
        "id_token": sign_in.id_token,
        "expires_at": sign_in.expires_at,
        "refresh_token": sign_in.refresh_token,
    }
    try:
        _store(user_id, record)
    except SecretStoreError as exc:
        logger.error("single sign-on: user %s's tokens are not kept: %s", user_id, exc)


def forget_tokens(user_id: int) -> None:
    """Delete the person's stored tokens (at logout, or when their account goes)."""
    delete_secret(_KIND, _name(user_id))


def id_token_for(user_id: int, *, min_validity: float = 60.0) -> str | None:
    """The person's ID token from their last sign-in, valid ``min_validity`` seconds more; None
    when there is none (not signed in by the provider, logged out, or expired with no way to
    renew it).

    A token about to expire is renewed first with the refresh token, when the provider gave one
    (and the renewed ID token is checked as at sign-in, its ``sub`` the same). A refresh token the
    provider refuses is dropped, so a rotated one is never replayed. Synchronous (the secret
    store, maybe the provider): call it through ``sync_to_async`` from async code.
    """
    record = _stored(user_id)
    if record is None or record.get("issuer") != settings.OIDC_ISSUER:
        return None
    if record["expires_at"] - min_validity > time.time():
        return record["id_token"]
    if not record.get("refresh_token"):
        return None
    with _lock:
        lock = _refreshing.setdefault(user_id, threading.Lock())
    with lock:  # one refresh per person at a time: a rotated refresh token works once
        record = _stored(user_id)
        if record is None or not record.get("refresh_token"):
            return None
        if record["expires_at"] - min_validity > time.time():
            return record["id_token"]  # another thread renewed it meanwhile
        return _refreshed(user_id, record)


def _refreshed(user_id: int, record: dict[str, Any]) -> str | None:
    try:
        app = provider()
        token = app.fetch_access_token(grant_type="refresh_token", refresh_token=record["refresh_token"])
    except SignInFailed:
        return None
    except OAuthError as exc:
        logger.info(
            "single sign-on: the refresh token of user %s was refused (%s); dropped", user_id, exc.error
        )
        _store(user_id, {**record, "refresh_token": None})
        return None
    except requests.RequestException as exc:
        logger.warning("single sign-on: refreshing user %s's ID token failed: %s", user_id, exc)
        return None
    refresh_token = token.get("refresh_token") or record["refresh_token"]
    id_token = token.get("id_token")
    if not isinstance(id_token, str):
        _store(user_id, {**record, "refresh_token": refresh_token})
        return None
    try:
        claims = _checked_id_token(app, dict(token))
    except (JoseError, ValueError) as exc:
        logger.warning("single sign-on: a renewed ID token of user %s was refused: %s", user_id, exc)
        return None
    if str(claims.get("sub")) != record["subject"]:
        logger.warning(
            "single sign-on: a renewed ID token of user %s names another subject; refused", user_id
        )
        return None
    _store(
        user_id,
        {**record, "id_token": id_token, "expires_at": int(claims["exp"]), "refresh_token": refresh_token},
    )
    return id_token


# --- Logout -----------------------------------------------------------------------------------


def end_session_url(user_id: int) -> str | None:
    """The provider's logout (its ``end_session_endpoint``), back to BooCode's login page after
    it; None when the provider has none or cannot be reached now. Read before the tokens are
    forgotten: the ID token is its ``id_token_hint``."""
    try:
        metadata = provider().server_metadata
    except SignInFailed:
        return None
    endpoint = metadata.get("end_session_endpoint")
    if not endpoint:
        return None
    params = {"client_id": settings.OIDC_CLIENT_ID, "post_logout_redirect_uri": post_logout_url()}
    record = _stored(user_id)
    if record is not None and record.get("issuer") == settings.OIDC_ISSUER:
        params["id_token_hint"] = record["id_token"]
    return add_params_to_uri(endpoint, params)

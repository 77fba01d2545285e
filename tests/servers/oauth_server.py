"""An OAuth 2.1 authorization server, identity provider and protected MCP server in one process, for tests.

    python tests/servers/oauth_server.py --port N        # AS at /auth, MCP at /mcp, on 127.0.0.1:N
    python tests/servers/oauth_server.py --port N --required-scope read --token-lifetime 60
    python tests/servers/oauth_server.py --port N --no-registration --pre-registered app:s3cret
    python tests/servers/oauth_server.py --port N --jwt-client svc:/tmp/svc-public.pem
    python tests/servers/oauth_server.py --port N --pre-registered app:s3cret --idp-client idp-app::app

Built from the ``mcp`` SDK's server-side auth pieces (its authorize, token, registration,
revocation and metadata handlers, its client authenticator, its bearer-token backend and its
Protected Resource Metadata route) around an in-memory ``OAuthAuthorizationServerProvider``,
and the SDK's ``MCPServer`` over Streamable HTTP (2026-07-28 and 2025-11-25, like
``modern.py``; ``--handshake-only`` refuses ``server/discover``: a pure 2025-11-25 server).
JWTs (client assertions, ID tokens, ID-JAGs) are signed and checked with PyJWT.

Layout on ``http://127.0.0.1:N``:

- ``/mcp``: the MCP server. Without a valid bearer token it answers 401 with
  ``WWW-Authenticate: Bearer resource_metadata="…/.well-known/oauth-protected-resource/mcp"``
  (plus ``scope="…"`` under ``--required-scope``). Tools: ``whoami`` (the user the token was
  issued to, its client and scopes), ``echo`` and ``admin_report``, which needs scope ``admin``:
  calling it without answers HTTP 403 ``Bearer error="insufficient_scope", scope="… admin"`` so
  a client can step up. Tokens must have been issued for this URL (RFC 8707 ``resource``).
- ``/auth``: the issuer (a path issuer, so metadata sits at
  ``/.well-known/oauth-authorization-server/auth``, RFC 8414 §3.1); ``/auth/authorize``,
  ``/auth/token``, ``/auth/register`` (RFC 7591), ``/auth/revoke`` (RFC 7009).
- ``/idp``: an enterprise identity provider (issuer ``…/idp``) for SEP-990 "enterprise-managed
  authorization": ``POST /idp/token`` (RFC 8693 token exchange: an ID token it issued for an
  ID-JAG), ``GET /idp/jwks`` (its public key), ``GET /idp/.well-known/openid-configuration``.
- ``/_control/``: JSON inspection and levers for tests (below).

Behaviour of the authorization server:

- Consent is automatic: ``/auth/authorize`` never shows a page, it answers 302 to the
  ``redirect_uri`` with ``code``, ``state`` and ``iss`` (RFC 9207; errors carry ``iss`` too).
  The consenting user is ``alice`` until ``POST /_control/next-user {"user": "bob"}`` changes it
  (it stays changed for later authorizations).
- PKCE S256 is required; ``resource`` must name the MCP server (else ``invalid_target``), at the
  authorization and at the token endpoint. A token requested without ``resource`` (any grant)
  is bound to no resource, and ``/mcp`` refuses it.
- Token endpoint: ``authorization_code`` and ``refresh_token`` grants; client authentication
  ``client_secret_basic``, ``client_secret_post`` or ``none`` (as the client registered), or
  ``private_key_jwt`` for ``--jwt-client`` clients.
  Refresh tokens rotate: each refresh returns a new one and retires the old. Presenting a
  retired refresh token (or a spent code) answers ``invalid_grant`` and, like real providers,
  revokes the whole grant (every access and refresh token descended from that consent).
  Refresh tokens are issued to clients registered for the ``refresh_token`` grant.
- ``client_credentials`` (RFC 6749 §4.4) for pre-registered confidential clients
  (``--pre-registered`` with a secret, ``--jwt-client``; a public client gets
  ``unauthorized_client``): the token's user is the client itself (``whoami`` shows the client
  id), its scopes those asked for (all of ``--scopes`` without ``scope``; one outside
  ``scopes_supported`` is ``invalid_scope``). No refresh token: the client asks again.
- ``private_key_jwt`` (RFC 7523 §2.2): ``client_assertion_type`` must be
  ``urn:ietf:params:oauth:client-assertion-type:jwt-bearer`` and ``client_assertion`` a JWT
  signed with the key of ``--jwt-client`` (RS*/PS* for RSA, ES256/384/512 by curve, EdDSA),
  ``iss`` = ``sub`` = the client id, ``aud`` = the issuer (with or without a trailing slash),
  ``exp`` in the future; a ``jti`` seen before is a replay. ``client_id`` in the form may be left
  out (the assertion names the client). Anything wrong answers 401 ``invalid_client``.
- ``urn:ietf:params:oauth:grant-type:jwt-bearer`` with an ID-JAG (SEP-990 leg 2, the SDK's
  handler around this provider): confidential pre-registered clients only
  (``client_secret_basic`` or ``client_secret_post``). The ``assertion`` must be a JWT of this
  process's identity provider with header ``typ`` ``oauth-id-jag+jwt``, ``iss`` = ``…/idp``,
  ``aud`` = the issuer, ``client_id`` = the authenticated client, ``resource`` = the MCP server
  (a ``resource`` in the request must name it too, else ``invalid_target``), unexpired and not
  replayed (``jti``); else ``invalid_grant``. The token's user is the assertion's ``sub``, its
  scopes those asked for within the ID-JAG's ``scope`` (when it has one). No refresh token.
- Any client may be granted any supported scope (auto-consent); an authorization without
  ``scope`` gets all of ``--scopes``. ``offline_access`` is listed in ``scopes_supported``.
- Client ID Metadata Documents: a ``client_id`` that is an https URL, or an http URL on a
  loopback host, is fetched; its ``client_id`` must equal the URL, it must list
  ``redirect_uris`` and use ``token_endpoint_auth_method`` ``none``.
- Pre-registered clients (``--pre-registered``, ``--jwt-client``) may use every grant above and
  accept any loopback ``http`` redirect URI (RFC 8252 §7.3).
- Metadata lists ``client_credentials`` and the JWT-bearer grant in ``grant_types_supported``,
  the ID-JAG grant profile, and ``private_key_jwt`` (with its algorithms) only when a
  ``--jwt-client`` is configured.
- Access and refresh tokens and codes are opaque random strings; no token, code, secret or
  assertion is ever logged or shown by the control API (except the ID tokens
  ``/_control/id-token`` exists to hand out).

Behaviour of the identity provider (``/idp``):

- It signs with its own ES256 key, made at start (``kid`` ``idp-1``, published at ``/idp/jwks``).
  Its users are ``--idp-users`` (default ``alice bob``); its clients ``--idp-client``.
- ``POST /idp/token``: RFC 8693 with ``grant_type``
  ``urn:ietf:params:oauth:grant-type:token-exchange``, ``requested_token_type``
  ``urn:ietf:params:oauth:token-type:id-jag``, ``subject_token_type``
  ``urn:ietf:params:oauth:token-type:id_token``, ``subject_token`` an ID token it issued to
  the requesting client (signature, ``iss``, ``aud`` = that client, ``exp``) for a user in its
  directory, ``audience`` = this process's authorization server issuer (trailing slash aside,
  else ``invalid_target``), optional ``resource`` (must be the MCP server) and ``scope``. The
  client authenticates with HTTP Basic or ``client_secret`` in the form when it has a secret,
  else by ``client_id`` alone (401 ``invalid_client`` otherwise). The answer is
  ``{"access_token": <ID-JAG>, "issued_token_type": "urn:ietf:params:oauth:token-type:id-jag",
  "token_type": "N_A", "expires_in": 300}``; the ID-JAG's claims: ``iss``, ``sub`` (the user),
  ``aud`` (the ``audience``), ``client_id`` (the client's id at the authorization server),
  ``resource``, ``scope`` (when asked), ``jti``, ``iat``, ``exp``. A bad subject token or an
  unknown user is ``invalid_grant``.

Knobs: ``--token-lifetime SECONDS`` (access tokens, default 3600), ``--no-registration``,
``--pre-registered CLIENT_ID:SECRET[:METHOD]`` (repeatable; METHOD defaults to
``client_secret_basic``; ``none`` wants an empty SECRET: ``app::none``),
``--jwt-client CLIENT_ID:PUBLIC_KEY_PEM_FILE`` (repeatable; a pre-registered client
authenticating with ``private_key_jwt``), ``--idp-client CLIENT_ID:SECRET[:AS_CLIENT_ID]``
(repeatable; a client of the identity provider, public with an empty SECRET; AS_CLIENT_ID, by
default CLIENT_ID, is who its ID-JAGs are for at ``/auth``), ``--idp-users "alice bob"``,
``--no-cimd``, ``--wrong-issuer`` (metadata names an ``issuer`` other than the one it was
fetched for), ``--registration-status CODE`` (a registration is answered with this status
instead of RFC 7591's 201, its body unchanged: the client's id and secret), ``--scopes "read
write admin"``, ``--required-scope SCOPE`` (needed for any MCP request), ``--handshake-only``.

Control API (JSON): ``GET /_control/state`` (clients, authorization requests, token requests,
token exchanges at the identity provider, revocations, MCP requests, active tokens, counts),
``POST /_control/revoke-all`` (the user revokes access at the provider),
``POST /_control/expire-access`` (every current access token expires now),
``POST /_control/next-user {"user": NAME}``,
``GET /_control/id-token?user=NAME[&client_id=ID][&expires_in=SECONDS]`` (``{"id_token": …}``:
an ID token of the identity provider for NAME, issued to the identity provider client ID, by
default the first ``--idp-client``; NAME need not be in ``--idp-users``, and a negative
``expires_in`` gives an expired token, so tests can present ID tokens the exchange refuses).
Token requests are journaled with ``grant_type``, ``client_id``, ``client_auth_method``
(``client_secret_basic``, ``client_secret_post``, ``private_key_jwt`` or ``none``),
``resource``, ``scope``, ``status`` and ``error``; token exchanges with ``client_id``,
``client_auth_method``, ``grant_type``, the token types, ``audience``, ``resource``,
``scope``, ``user`` (of a valid subject token), ``status`` and ``error``.

One line per HTTP request (method, path, status; never a query string) goes to stderr.
Stop it with SIGTERM; it keeps nothing on disk.
"""

from __future__ import annotations

import argparse
import base64
import binascii
import contextlib
import contextvars
import hmac
import json
import math
import os
import secrets
import sys
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, TypedDict
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit, urlunsplit

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # for common.py, even when run via runpy

import common
import httpx2
import jwt
import uvicorn
from common import READ_ONLY
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed448, ed25519, rsa
from mcp.server.apps import APP_MIME_TYPE
from mcp.server.auth.handlers.authorize import AuthorizationHandler
from mcp.server.auth.handlers.metadata import MetadataHandler
from mcp.server.auth.handlers.register import RegistrationHandler
from mcp.server.auth.handlers.revoke import RevocationHandler
from mcp.server.auth.handlers.token import TokenErrorResponse, TokenHandler
from mcp.server.auth.json_response import PydanticJSONResponse
from mcp.server.auth.middleware.auth_context import AuthContextMiddleware, get_access_token
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser, BearerAuthBackend
from mcp.server.auth.middleware.client_auth import AuthenticationError, ClientAuthenticator
from mcp.server.auth.provider import (
    AccessToken,
    AuthorizationCode,
    AuthorizationParams,
    AuthorizeError,
    IdentityAssertionParams,
    OAuthAuthorizationServerProvider,
    RefreshToken,
    TokenError,
    construct_redirect_uri,
)
from mcp.server.auth.routes import (
    build_metadata,
    build_resource_metadata_url,
    create_protected_resource_routes,
)
from mcp.server.auth.settings import ClientRegistrationOptions, RevocationOptions
from mcp.server.mcpserver import MCPServer
from mcp.shared.auth import JWT_BEARER_GRANT_TYPE, OAuthClientInformationFull, OAuthToken
from pydantic import AnyHttpUrl, AnyUrl
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.authentication import AuthenticationMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

AUTH_METHODS = ("client_secret_basic", "client_secret_post", "none")
PRIVATE_KEY_JWT = "private_key_jwt"
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "[::1]", "::1")
CODE_LIFETIME = 300
CLIENT_CREDENTIALS = "client_credentials"
# Every grant a pre-registered client may use.
PRE_REGISTERED_GRANTS = ["authorization_code", "refresh_token", CLIENT_CREDENTIALS, JWT_BEARER_GRANT_TYPE]
CLIENT_ASSERTION_TYPE = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
# SEP-990: RFC 8693 token exchange of an ID token for an Identity Assertion JWT Authorization Grant.
TOKEN_EXCHANGE_GRANT_TYPE = "urn:ietf:params:oauth:grant-type:token-exchange"
ID_JAG_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:id-jag"
ID_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:id_token"
ID_JAG_TYP = "oauth-id-jag+jwt"
ID_JAG_GRANT_PROFILE = "urn:ietf:params:oauth:grant-profile:id-jag"
ID_JAG_LIFETIME = 300
IDP_KEY_ID = "idp-1"
RSA_ALGORITHMS = ["RS256", "RS384", "RS512", "PS256", "PS384", "PS512"]
EC_ALGORITHMS = {"secp256r1": "ES256", "secp384r1": "ES384", "secp521r1": "ES512"}
# Per-tool scopes on top of --required-scope; a call without them gets an HTTP 403 step-up.
TOOL_SCOPES = {"admin_report": "admin"}


@dataclass(frozen=True)
class PreRegistered:
    """A client configured out of band (``--pre-registered``)."""

    client_id: str
    secret: str
    method: str

    @classmethod
    def parse(cls, text: str) -> PreRegistered:
        """Parse ``CLIENT_ID:SECRET[:METHOD]`` (an argparse type: raises ``ArgumentTypeError``)."""
        parts = text.split(":")
        if len(parts) not in (2, 3) or not parts[0]:
            raise argparse.ArgumentTypeError(f"expected CLIENT_ID:SECRET[:METHOD], got {text!r}")
        method = parts[2] if len(parts) == 3 else "client_secret_basic"
        if method not in AUTH_METHODS:
            raise argparse.ArgumentTypeError(
                f"METHOD must be one of {', '.join(AUTH_METHODS)}, got {method!r}"
            )
        if (method == "none") != (parts[1] == ""):
            raise argparse.ArgumentTypeError(
                f"{text!r}: method 'none' takes an empty SECRET, the others need one"
            )
        return cls(client_id=parts[0], secret=parts[1], method=method)


PublicKey = rsa.RSAPublicKey | ec.EllipticCurvePublicKey | ed25519.Ed25519PublicKey | ed448.Ed448PublicKey


def algorithms_for(key: PublicKey) -> list[str]:
    """The JWS algorithms a public key verifies (never a symmetric one: no HS256 confusion)."""
    if isinstance(key, rsa.RSAPublicKey):
        return list(RSA_ALGORITHMS)
    if isinstance(key, ec.EllipticCurvePublicKey):
        return [EC_ALGORITHMS[key.curve.name]] if key.curve.name in EC_ALGORITHMS else []
    return ["EdDSA"]


@dataclass(frozen=True)
class JwtClient:
    """A client configured out of band that authenticates with ``private_key_jwt`` (``--jwt-client``)."""

    client_id: str
    public_key: PublicKey

    @property
    def algorithms(self) -> list[str]:
        return algorithms_for(self.public_key)

    @classmethod
    def parse(cls, text: str) -> JwtClient:
        """Parse ``CLIENT_ID:PUBLIC_KEY_PEM_FILE`` and load the key (an argparse type)."""
        client_id, _, path = text.partition(":")
        if not client_id or not path:
            raise argparse.ArgumentTypeError(f"expected CLIENT_ID:PUBLIC_KEY_PEM_FILE, got {text!r}")
        try:
            with open(path, "rb") as pem:
                key = serialization.load_pem_public_key(pem.read())
        except (OSError, ValueError) as exc:
            raise argparse.ArgumentTypeError(f"{path}: not a readable PEM public key ({exc})") from None
        if not isinstance(key, PublicKey) or not algorithms_for(key):
            raise argparse.ArgumentTypeError(f"{path}: a {type(key).__name__} signs no supported algorithm")
        return cls(client_id=client_id, public_key=key)


@dataclass(frozen=True)
class IdpClient:
    """A client of the identity provider (``--idp-client``)."""

    client_id: str
    secret: str  # "" for a public client (client_id alone)
    as_client_id: str  # who its ID-JAGs are for at the authorization server

    @classmethod
    def parse(cls, text: str) -> IdpClient:
        """Parse ``CLIENT_ID:SECRET[:AS_CLIENT_ID]`` (an argparse type)."""
        parts = text.split(":")
        if len(parts) not in (2, 3) or not parts[0] or (len(parts) == 3 and not parts[2]):
            raise argparse.ArgumentTypeError(f"expected CLIENT_ID:SECRET[:AS_CLIENT_ID], got {text!r}")
        return cls(
            client_id=parts[0], secret=parts[1], as_client_id=parts[2] if len(parts) == 3 else parts[0]
        )


@dataclass(frozen=True)
class Options:
    """Everything the command line configures."""

    port: int
    token_lifetime: int = 3600
    registration: bool = True
    cimd: bool = True
    wrong_issuer: bool = False
    registration_status: int = 201
    scopes: tuple[str, ...] = ("read", "write", "admin")
    required_scope: str | None = None
    pre_registered: tuple[PreRegistered, ...] = ()
    jwt_clients: tuple[JwtClient, ...] = ()
    idp_clients: tuple[IdpClient, ...] = ()
    idp_users: tuple[str, ...] = ("alice", "bob")
    handshake_only: bool = False

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def issuer(self) -> str:
        return f"{self.base}/auth"

    @property
    def idp_issuer(self) -> str:
        return f"{self.base}/idp"

    @property
    def resource(self) -> str:
        return f"{self.base}/mcp"

    @property
    def scopes_supported(self) -> list[str]:
        return list(dict.fromkeys([*self.scopes, "offline_access"]))


class LoopbackClient(OAuthClientInformationFull):
    """A pre-registered client: any loopback http redirect URI is fine (RFC 8252 §7.3)."""

    def validate_redirect_uri(self, redirect_uri: AnyUrl | None) -> AnyUrl:
        if redirect_uri is not None and redirect_uri.scheme == "http" and redirect_uri.host in LOOPBACK_HOSTS:
            return redirect_uri
        return super().validate_redirect_uri(redirect_uri)


class IssuedCode(AuthorizationCode):
    grant_id: str


class IssuedAccessToken(AccessToken):
    grant_id: str
    expires: float  # precise; ``expires_at`` (whole seconds) is rounded up for the SDK's own check


class IssuedRefreshToken(RefreshToken):
    grant_id: str


@dataclass(frozen=True)
class TokenRequestContext:
    """What the token endpoint wrapper saw that the SDK's handler does not pass to the provider."""

    resource: str | None


# Set while the token endpoint runs: the provider checks `resource` there and treats a replayed
# refresh token or code as an attack only there (not when /revoke looks a token up).
_token_request: contextvars.ContextVar[TokenRequestContext | None] = contextvars.ContextVar(
    "token_request", default=None
)


def same_resource(a: str | None, b: str | None) -> bool:
    """RFC 8707 indicators naming the same resource (scheme/host case and a trailing slash aside)."""
    if a is None or b is None:
        return a is b

    def canonical(url: str) -> str:
        parts = urlsplit(url)
        lowered = parts._replace(scheme=parts.scheme.lower(), netloc=parts.netloc.lower())
        return urlunsplit(lowered).rstrip("/")

    return canonical(a) == canonical(b)


def same_issuer(a: str, b: str) -> bool:
    """Two spellings of one issuer (a trailing slash aside), e.g. a JWT's ``aud`` and ours."""
    return a.rstrip("/") == b.rstrip("/")


def basic_credentials(request: Request) -> tuple[str, str] | None:
    """The (client_id, secret) of an HTTP Basic ``Authorization`` header, if there is one."""
    header = request.headers.get("authorization", "")
    if not header.lower().startswith("basic "):
        return None
    try:
        decoded = base64.b64decode(header[6:]).decode()
    except (binascii.Error, UnicodeDecodeError):
        return None
    if ":" not in decoded:
        return None
    client_id, secret = decoded.split(":", 1)
    return unquote(client_id), unquote(secret)


def basic_client_id(request: Request) -> str | None:
    """The client_id of an HTTP Basic ``Authorization`` header, if there is one."""
    credentials = basic_credentials(request)
    return credentials[0] if credentials else None


def assertion_client_id(form: dict[str, str]) -> str | None:
    """The client a ``client_assertion`` names (unverified: only to fill in a missing ``client_id``)."""
    assertion = form.get("client_assertion")
    if not assertion:
        return None
    try:
        claims = jwt.decode(assertion, options={"verify_signature": False})
    except jwt.InvalidTokenError:
        return None
    subject = claims.get("sub")
    return subject if isinstance(subject, str) else None


def client_auth_method_used(request: Request, form: dict[str, str]) -> str:
    """How a token/revocation request authenticated the client, as the state API reports it."""
    if basic_client_id(request) is not None:
        return "client_secret_basic"
    if form.get("client_assertion"):
        return PRIVATE_KEY_JWT
    if form.get("client_secret"):
        return "client_secret_post"
    return "none"


async def form_of(request: Request) -> dict[str, str]:
    form = await request.form()
    return {key: value for key, value in form.multi_items() if isinstance(value, str)}


async def with_form_defaults(request: Request, defaults: dict[str, str]) -> Request:
    """The request, re-made with ``defaults`` added to its form where the keys are missing.

    The SDK's handlers want ``client_id`` in the form even with HTTP Basic (RFC 6749 lets a
    Basic client omit it), and its revocation model wants a ``client_secret`` key even from
    clients that authenticate otherwise; this fills both in without touching what was sent.
    """
    form = await form_of(request)
    missing = {key: value for key, value in defaults.items() if key not in form}
    if not missing:
        return request
    body = urlencode({**form, **missing}).encode()
    sent = False

    async def receive() -> Message:
        nonlocal sent
        if sent:
            return {"type": "http.disconnect"}
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    headers = [(k, v) for k, v in request.scope["headers"] if k not in (b"content-length", b"content-type")]
    headers += [
        (b"content-type", b"application/x-www-form-urlencoded"),
        (b"content-length", str(len(body)).encode()),
    ]
    return Request({**request.scope, "headers": headers}, receive)


class Journal:
    """What happened, for ``GET /_control/state`` (no token or code ever goes in here)."""

    def __init__(self) -> None:
        self.authorization_requests: list[dict[str, Any]] = []
        self.token_requests: list[dict[str, Any]] = []
        self.revocation_requests: list[dict[str, Any]] = []
        self.revocations: list[dict[str, Any]] = []
        self.cimd_fetches: list[dict[str, Any]] = []
        self.mcp_requests: list[dict[str, Any]] = []
        self.token_exchanges: list[dict[str, Any]] = []  # at the identity provider

    @staticmethod
    def add(entries: list[dict[str, Any]], **entry: Any) -> None:
        entries.append({"time": time.time(), **entry})


@dataclass
class RegisteredClient:
    info: OAuthClientInformationFull
    via: str  # "dcr", "cimd" or "pre"
    registered_at: float = field(default_factory=time.time)


class InMemoryProvider(OAuthAuthorizationServerProvider[IssuedCode, IssuedRefreshToken, IssuedAccessToken]):
    """The authorization server's state and decisions; the SDK's handlers do the HTTP side."""

    def __init__(self, options: Options, journal: Journal, idp_key: PublicKey) -> None:
        self.options = options
        self.journal = journal
        self.idp_key = idp_key  # the identity provider whose ID-JAGs this server trusts
        self.next_user = "alice"
        self.clients: dict[str, RegisteredClient] = {}
        self.codes: dict[str, IssuedCode] = {}
        self.access_tokens: dict[str, IssuedAccessToken] = {}
        self.refresh_tokens: dict[str, IssuedRefreshToken] = {}
        # A grant is one consent: the code and every token descended from it share its id.
        self.grant_clients: dict[str, str] = {}  # grant id -> client_id
        self.spent: dict[str, str] = {}  # used code or rotated refresh token -> its grant
        self.revoked_grants: set[str] = set()
        self.seen_jtis: dict[str, float] = {}  # "<iss> <jti>" of accepted JWTs -> when they expire
        self.jwt_keys: dict[str, JwtClient] = {client.client_id: client for client in options.jwt_clients}
        registrations = [(c.client_id, c.secret or None, c.method) for c in options.pre_registered]
        registrations += [(c.client_id, None, PRIVATE_KEY_JWT) for c in options.jwt_clients]
        for client_id, secret, method in registrations:
            info = LoopbackClient(
                client_id=client_id,
                client_secret=secret,
                token_endpoint_auth_method=method,
                scope=" ".join(options.scopes_supported),
                redirect_uris=None,
                grant_types=list(PRE_REGISTERED_GRANTS),
            )
            self.clients[client_id] = RegisteredClient(info, "pre")

    # -- clients

    async def get_client(self, client_id: str) -> OAuthClientInformationFull | None:
        known = self.clients.get(client_id)
        if known is not None:
            return known.info
        if self.options.cimd and self._is_metadata_url(client_id):
            return await self._fetch_client_metadata(client_id)
        return None

    async def register_client(self, client_info: OAuthClientInformationFull) -> None:
        # Auto-consent grants any supported scope, whatever the registration asked for.
        stored = client_info.model_copy(update={"scope": " ".join(self.options.scopes_supported)})
        self.clients[client_info.client_id] = RegisteredClient(stored, "dcr")

    @staticmethod
    def _is_metadata_url(client_id: str) -> bool:
        parts = urlsplit(client_id)
        if parts.path in ("", "/"):
            return False
        return parts.scheme == "https" or (parts.scheme == "http" and parts.hostname in LOOPBACK_HOSTS)

    async def _fetch_client_metadata(self, url: str) -> OAuthClientInformationFull | None:
        """Fetch and check a Client ID Metadata Document; remember the client when it is good."""
        problem = None
        info = None
        try:
            async with httpx2.AsyncClient(timeout=5.0) as http:
                response = await http.get(url, headers={"Accept": "application/json"})
            if response.status_code != 200:
                problem = f"HTTP {response.status_code}"
            else:
                document = response.json()
                if not isinstance(document, dict):
                    problem = "the document is not a JSON object"
                elif document.get("client_id") != url:
                    problem = f"client_id {document.get('client_id')!r} is not the document's URL"
                elif not document.get("redirect_uris"):
                    problem = "no redirect_uris"
                elif document.get("token_endpoint_auth_method", "none") != "none":
                    problem = "token_endpoint_auth_method must be 'none'"
                else:
                    info = OAuthClientInformationFull.model_validate(
                        {
                            **document,
                            "client_secret": None,
                            "token_endpoint_auth_method": "none",
                            "scope": " ".join(self.options.scopes_supported),
                        }
                    )
        except (httpx2.HTTPError, ValueError) as exc:  # ValueError covers bad JSON and ValidationError
            problem = f"{type(exc).__name__}: {exc}"
        self.journal.add(self.journal.cimd_fetches, url=url, ok=info is not None, problem=problem)
        if info is not None:
            self.clients[url] = RegisteredClient(info, "cimd")
        return info

    # -- authorization

    async def authorize(self, client: OAuthClientInformationFull, params: AuthorizationParams) -> str:
        if params.resource is not None and not same_resource(params.resource, self.options.resource):
            raise AuthorizeError("invalid_target", f"unknown resource {params.resource}")
        code = IssuedCode(
            code=secrets.token_urlsafe(32),
            scopes=params.scopes or list(self.options.scopes),
            expires_at=time.time() + CODE_LIFETIME,
            client_id=client.client_id,
            code_challenge=params.code_challenge,
            redirect_uri=params.redirect_uri,
            redirect_uri_provided_explicitly=params.redirect_uri_provided_explicitly,
            resource=params.resource,
            subject=self.next_user,
            grant_id=secrets.token_hex(8),
        )
        self.codes[code.code] = code
        self.grant_clients[code.grant_id] = client.client_id
        return construct_redirect_uri(str(params.redirect_uri), code=code.code, state=params.state)

    async def load_authorization_code(
        self, client: OAuthClientInformationFull, authorization_code: str
    ) -> IssuedCode | None:
        code = self.codes.get(authorization_code)
        if code is None:
            self._on_replay(authorization_code, "code replayed")
        return code

    async def exchange_authorization_code(
        self, client: OAuthClientInformationFull, authorization_code: IssuedCode
    ) -> OAuthToken:
        resource = self._token_resource(authorization_code.resource)
        del self.codes[authorization_code.code]
        self.spent[authorization_code.code] = authorization_code.grant_id
        return self._issue(
            client,
            authorization_code.grant_id,
            authorization_code.scopes,
            authorization_code.scopes,
            resource,
            authorization_code.subject,
        )

    # -- refresh

    async def load_refresh_token(
        self, client: OAuthClientInformationFull, refresh_token: str
    ) -> IssuedRefreshToken | None:
        token = self.refresh_tokens.get(refresh_token)
        if token is None:
            self._on_replay(refresh_token, "refresh token replayed")
        return token

    async def exchange_refresh_token(
        self, client: OAuthClientInformationFull, refresh_token: IssuedRefreshToken, scopes: list[str]
    ) -> OAuthToken:
        resource = self._token_resource(refresh_token.resource)
        # Rotation: the presented refresh token is retired; presenting it again revokes the grant.
        del self.refresh_tokens[refresh_token.token]
        self.spent[refresh_token.token] = refresh_token.grant_id
        return self._issue(
            client, refresh_token.grant_id, scopes, refresh_token.scopes, resource, refresh_token.subject
        )

    # -- machine grants

    def first_use(self, issuer: str, claims: dict[str, Any]) -> bool:
        """Remember a JWT's ``jti`` until it expires; False when it was seen before (a replay)."""
        now = time.time()
        self.seen_jtis = {key: exp for key, exp in self.seen_jtis.items() if exp > now}
        jti = claims.get("jti")
        if not isinstance(jti, str) or not jti:
            return True
        key = f"{issuer} {jti}"
        if key in self.seen_jtis:
            return False
        self.seen_jtis[key] = float(claims.get("exp", now + CODE_LIFETIME))
        return True

    def verify_client_assertion(self, client_id: str, assertion: str) -> None:
        """Check a ``private_key_jwt`` client assertion (RFC 7523 §3); raises ``AuthenticationError``."""
        known = self.jwt_keys.get(client_id)
        if known is None:
            raise AuthenticationError(f"client {client_id} does not authenticate with {PRIVATE_KEY_JWT}")
        issuer = self.options.issuer
        try:
            claims = jwt.decode(
                assertion,
                known.public_key,
                algorithms=known.algorithms,
                audience=[issuer, f"{issuer}/"],
                issuer=client_id,
                subject=client_id,
                options={"require": ["exp", "iss", "sub", "aud"]},
            )
        except jwt.InvalidTokenError as exc:
            raise AuthenticationError(f"client_assertion rejected: {type(exc).__name__}: {exc}") from None
        if not self.first_use(client_id, claims):
            raise AuthenticationError("client_assertion replayed (its jti was used before)")

    def _granted_scopes(self, requested: list[str] | None, allowed: list[str] | None = None) -> list[str]:
        """The scopes a machine grant gets: those asked for (default all of --scopes), within ``allowed``."""
        scopes = requested or list(allowed or self.options.scopes)
        for scope in scopes:
            if scope not in self.options.scopes_supported or (allowed is not None and scope not in allowed):
                raise TokenError("invalid_scope", f"scope {scope} cannot be granted")
        return scopes

    async def exchange_client_credentials(
        self, client: OAuthClientInformationFull, scopes: list[str] | None
    ) -> OAuthToken:
        """RFC 6749 §4.4: a token for the client itself (its user is the client), no refresh token."""
        granted = self._granted_scopes(scopes)
        resource = self._token_resource(None)
        grant_id = secrets.token_hex(8)
        self.grant_clients[grant_id] = client.client_id
        return self._issue(client, grant_id, granted, granted, resource, client.client_id, refresh=False)

    async def exchange_identity_assertion(
        self, client: OAuthClientInformationFull, params: IdentityAssertionParams
    ) -> OAuthToken:
        """SEP-990 leg 2: an ID-JAG of our identity provider for an access token (no refresh token)."""
        idp_issuer, issuer = self.options.idp_issuer, self.options.issuer
        try:
            header = jwt.get_unverified_header(params.assertion)
            claims = jwt.decode(
                params.assertion,
                self.idp_key,
                algorithms=algorithms_for(self.idp_key),
                audience=[issuer, f"{issuer}/"],
                issuer=idp_issuer,
                options={"require": ["exp", "iss", "sub", "aud", "client_id"]},
            )
        except jwt.InvalidTokenError as exc:
            raise TokenError(
                "invalid_grant",
                f"the assertion is not an ID-JAG of {idp_issuer}: {type(exc).__name__}: {exc}",
            ) from None
        if header.get("typ") != ID_JAG_TYP:
            raise TokenError(
                "invalid_grant", f"the assertion's typ is {header.get('typ')!r}, not {ID_JAG_TYP}"
            )
        if claims["client_id"] != client.client_id:
            raise TokenError(
                "invalid_grant", f"the ID-JAG is for client {claims['client_id']}, not {client.client_id}"
            )
        resource = claims.get("resource")
        if not isinstance(resource, str) or not same_resource(resource, self.options.resource):
            raise TokenError("invalid_target", f"the ID-JAG's resource {resource!r} is not this server")
        if params.resource is not None and not same_resource(params.resource, resource):
            raise TokenError("invalid_target", f"resource {params.resource} is not the ID-JAG's")
        jag_scope = claims.get("scope")
        allowed = jag_scope.split() if isinstance(jag_scope, str) and jag_scope else None
        granted = self._granted_scopes(params.scopes, allowed)
        if not self.first_use(idp_issuer, claims):
            raise TokenError("invalid_grant", "the ID-JAG was presented before (its jti was used)")
        grant_id = secrets.token_hex(8)
        self.grant_clients[grant_id] = client.client_id
        return self._issue(client, grant_id, granted, granted, resource, str(claims["sub"]), refresh=False)

    # -- tokens

    def _token_resource(self, granted: str | None) -> str | None:
        """The resource for new tokens: the token request's, which must match the grant's."""
        context = _token_request.get()
        requested = context.resource if context else None
        if requested is None:
            return granted
        if not same_resource(requested, self.options.resource) or (
            granted is not None and not same_resource(requested, granted)
        ):
            raise TokenError("invalid_target", f"resource {requested} was not granted")
        return requested

    def _issue(
        self,
        client: OAuthClientInformationFull,
        grant_id: str,
        scopes: list[str],
        grant_scopes: list[str],
        resource: str | None,
        subject: str | None,
        *,
        refresh: bool = True,
    ) -> OAuthToken:
        now = time.time()
        expires = now + self.options.token_lifetime
        access = IssuedAccessToken(
            token=secrets.token_urlsafe(32),
            client_id=client.client_id,
            scopes=scopes,
            expires_at=math.ceil(expires),
            resource=resource,
            subject=subject,
            claims={"iss": self.options.issuer},
            grant_id=grant_id,
            expires=expires,
        )
        self.access_tokens[access.token] = access
        refresh_token = None
        if refresh and "refresh_token" in client.grant_types:
            refresh_token = IssuedRefreshToken(
                token=secrets.token_urlsafe(32),
                client_id=client.client_id,
                scopes=grant_scopes,
                resource=resource,
                subject=subject,
                grant_id=grant_id,
            )
            self.refresh_tokens[refresh_token.token] = refresh_token
        return OAuthToken(
            access_token=access.token,
            expires_in=self.options.token_lifetime,
            scope=" ".join(scopes),
            refresh_token=refresh_token.token if refresh_token else None,
        )

    async def load_access_token(self, token: str) -> IssuedAccessToken | None:
        return self.access_tokens.get(token)

    async def revoke_token(self, token: IssuedAccessToken | IssuedRefreshToken) -> None:
        self.revoke_grant(token.grant_id, via="revocation endpoint")

    # -- grants

    def _on_replay(self, secret: str, reason: str) -> None:
        """A spent code or retired refresh token came back to the token endpoint: revoke its grant."""
        grant_id = self.spent.get(secret)
        if grant_id is not None and _token_request.get() is not None and grant_id not in self.revoked_grants:
            self.revoke_grant(grant_id, via=reason)

    def revoke_grant(self, grant_id: str, *, via: str) -> None:
        """Forget every access and refresh token of one consent."""
        access = [key for key, token in self.access_tokens.items() if token.grant_id == grant_id]
        refresh = [key for key, token in self.refresh_tokens.items() if token.grant_id == grant_id]
        for key in access:
            del self.access_tokens[key]
        for key in refresh:
            del self.refresh_tokens[key]
        self.revoked_grants.add(grant_id)
        self.journal.add(
            self.journal.revocations,
            via=via,
            client_id=self.grant_clients.get(grant_id),
            access_tokens=len(access),
            refresh_tokens=len(refresh),
        )

    def revoke_all(self) -> int:
        grants = {token.grant_id for token in self.access_tokens.values()}
        grants |= {token.grant_id for token in self.refresh_tokens.values()}
        for grant_id in grants:
            self.revoke_grant(grant_id, via="control: revoke-all")
        return len(grants)

    def expire_access(self) -> int:
        now = time.time()
        for key, token in self.access_tokens.items():
            self.access_tokens[key] = token.model_copy(
                update={"expires": now - 1, "expires_at": int(now) - 1}
            )
        return len(self.access_tokens)


class JwtClientAuthenticator(ClientAuthenticator):
    """The SDK's client authenticator plus ``private_key_jwt`` (RFC 7523 §2.2) for ``--jwt-client``."""

    def __init__(self, provider: InMemoryProvider) -> None:
        super().__init__(provider)
        self.in_memory = provider

    async def authenticate_request(self, request: Request) -> OAuthClientInformationFull:
        form = await form_of(request)
        assertion = form.get("client_assertion")
        client_id = form.get("client_id") or ""
        client = await self.in_memory.get_client(client_id) if client_id else None
        uses_jwt = client is not None and client.token_endpoint_auth_method == PRIVATE_KEY_JWT
        if assertion is None and not uses_jwt:
            return await super().authenticate_request(request)
        if client is None:
            raise AuthenticationError("Missing client_id" if not client_id else "Invalid client_id")
        if not uses_jwt:
            raise AuthenticationError(f"client {client_id} does not authenticate with {PRIVATE_KEY_JWT}")
        if form.get("client_assertion_type") != CLIENT_ASSERTION_TYPE or not assertion:
            raise AuthenticationError(
                f"{PRIVATE_KEY_JWT} needs a client_assertion of type {CLIENT_ASSERTION_TYPE}"
            )
        if basic_client_id(request) is not None or form.get("client_secret"):
            raise AuthenticationError("more than one client authentication method (RFC 6749 §2.3)")
        self.in_memory.verify_client_assertion(client_id, assertion)
        return client


class ProviderVerifier:
    """The MCP server's ``TokenVerifier``: a live, unexpired token of this authorization server."""

    def __init__(self, provider: InMemoryProvider) -> None:
        self.provider = provider

    async def verify_token(self, token: str) -> AccessToken | None:
        access = await self.provider.load_access_token(token)
        if access is None or access.expires <= time.time():
            return None
        return access


# -- the MCP server


class Identity(TypedDict):
    user: str | None
    client_id: str
    scopes: list[str]


WHOAMI_VIEW = "ui://secure/whoami.html"


def build_mcp_server(*, handshake_only: bool = False) -> MCPServer:
    """The MCP server behind ``/mcp`` (authentication happens in front of it)."""
    server = MCPServer("oauth-protected", version="1.0.0")
    if handshake_only:
        common.refuse_discover(server)

    def identity() -> Identity:
        token = get_access_token()
        if token is None:  # the guard in front lets no request through without one
            raise RuntimeError("no access token in this request")
        return Identity(user=token.subject, client_id=token.client_id, scopes=list(token.scopes))

    @server.tool(annotations=READ_ONLY)
    def whoami() -> Identity:
        """The user this request's access token was issued to, its client and its scopes."""
        return identity()

    common.add_echo(server)

    @server.tool(annotations=READ_ONLY)
    def admin_report() -> str:
        """A report only tokens with scope ``admin`` may read."""
        return f"admin report for {identity()['user']}: all systems nominal"

    # MCP Apps: a view that names the person whose session read it, and a tool only views call.
    @server.tool(annotations=READ_ONLY, meta={"ui": {"resourceUri": WHOAMI_VIEW, "visibility": ["app"]}})
    def whoami_for_views() -> str:
        """Who you are (for the view)."""
        return f"view of {identity()['user']}"

    @server.resource(WHOAMI_VIEW, name="whoami view", mime_type=APP_MIME_TYPE)
    def whoami_page() -> str:
        return f"<!DOCTYPE html><p id=user>{identity()['user']}</p>"

    return server


def bearer_challenge(
    error: str | None, description: str | None, resource_metadata: str, scopes: list[str]
) -> str:
    parts = []
    if error:
        parts.append(f'error="{error}"')
    if description:
        parts.append(f'error_description="{description}"')
    parts.append(f'resource_metadata="{resource_metadata}"')
    if scopes:
        parts.append(f'scope="{" ".join(scopes)}"')
    return "Bearer " + ", ".join(parts)


class ScopeGuard:
    """In front of ``/mcp``: 401 without a valid token, 403 ``insufficient_scope`` without a scope.

    The SDK's ``RequireAuthMiddleware`` checks one fixed scope list and names no ``scope`` in
    its challenges; this also checks per-tool scopes (``TOOL_SCOPES``) by reading the JSON-RPC
    body, and names the scopes wanted so a client can step up (MCP 2025-11-25 "Scope Challenge").
    """

    def __init__(self, app: ASGIApp, *, options: Options, journal: Journal) -> None:
        self.app = app
        self.required = [options.required_scope] if options.required_scope else []
        self.resource_metadata = str(build_resource_metadata_url(AnyHttpUrl(options.resource)))
        self.journal = journal

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        body = b""
        if scope["method"] == "POST":
            body = await self._read_body(receive)
            receive = self._replay(body, receive)
        rpc_method, tool = self._rpc_call(body)
        user = scope.get("user")
        entry: dict[str, Any] = {
            "http_method": scope["method"],
            "rpc_method": rpc_method,
            "tool": tool,
            "protocol_version": Request(scope).headers.get("mcp-protocol-version"),
            "user": user.access_token.subject if isinstance(user, AuthenticatedUser) else None,
        }
        status = await self._check(scope, user, tool, send)
        if status is None:
            status_box: list[int] = []

            async def send_noting_status(message: Message) -> None:
                if message["type"] == "http.response.start":
                    status_box.append(message["status"])
                await send(message)

            try:
                await self.app(scope, receive, send_noting_status)
            finally:
                status = status_box[0] if status_box else None
        Journal.add(self.journal.mcp_requests, status=status, **entry)

    async def _check(self, scope: Scope, user: Any, tool: str | None, send: Send) -> int | None:
        """Send the 401/403 a request deserves and return its status; None lets it through."""
        if not isinstance(user, AuthenticatedUser):
            presented = any(key == b"authorization" for key, _ in scope["headers"])
            # RFC 6750 §3.1: no error code when the request carried no credentials at all.
            error, description = (
                ("invalid_token", "The access token is invalid or expired") if presented else (None, None)
            )
            await self._deny(send, 401, error, description, self.required)
            return 401
        wanted = list(self.required)
        if tool in TOOL_SCOPES:
            wanted.append(TOOL_SCOPES[tool])
        missing = [name for name in wanted if name not in user.scopes]
        if missing:
            await self._deny(send, 403, "insufficient_scope", f"Requires scope {' '.join(missing)}", wanted)
            return 403
        return None

    async def _deny(
        self, send: Send, status: int, error: str | None, description: str | None, scopes: list[str]
    ) -> None:
        body = json.dumps(
            {"error": error or "unauthorized", "error_description": description or "Authentication required"}
        ).encode()
        challenge = bearer_challenge(error, description, self.resource_metadata, scopes)
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                    (b"www-authenticate", challenge.encode()),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})

    @staticmethod
    async def _read_body(receive: Receive) -> bytes:
        chunks = []
        while True:
            message = await receive()
            if message["type"] != "http.request":
                break
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                break
        return b"".join(chunks)

    @staticmethod
    def _replay(body: bytes, receive: Receive) -> Receive:
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if replayed:
                return await receive()
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}

        return replay

    @staticmethod
    def _rpc_call(body: bytes) -> tuple[str | None, str | None]:
        """The JSON-RPC method of a request body and, for tools/call, the tool's name."""
        try:
            message = json.loads(body) if body else None
        except ValueError:
            return None, None
        if not isinstance(message, dict):
            return None, None
        method = message.get("method") if isinstance(message.get("method"), str) else None
        params = message.get("params")
        tool = params.get("name") if method == "tools/call" and isinstance(params, dict) else None
        return method, tool if isinstance(tool, str) else None


# -- HTTP wiring


class RequestLog:
    """One stderr line per request: method, path, status (no query strings, so no codes)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        status: list[int] = []

        async def noting(message: Message) -> None:
            if message["type"] == "http.response.start":
                status.append(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, noting)
        finally:
            print(
                f"oauth_server: {scope['method']} {scope['path']} {status[0] if status else '-'}",
                file=sys.stderr,
                flush=True,
            )


NO_STORE = {"Cache-Control": "no-store", "Pragma": "no-cache"}


def token_error(error: Any, description: str | None, *, status: int = 400) -> Response:
    """An RFC 6749 §5.2 error answer, shaped like the SDK token handler's."""
    return PydanticJSONResponse(
        content=TokenErrorResponse(error=error, error_description=description),
        status_code=status,
        headers=NO_STORE,
    )


class AuthorizationServer:
    """The endpoints under ``/auth`` and its metadata: SDK handlers plus what they lack."""

    def __init__(self, options: Options, provider: InMemoryProvider, journal: Journal) -> None:
        self.options = options
        self.provider = provider
        self.journal = journal
        self.authenticator = JwtClientAuthenticator(provider)
        self.authorize_handler = AuthorizationHandler(provider)
        self.token_handler = TokenHandler(provider, self.authenticator, identity_assertion_enabled=True)
        self.revocation_handler = RevocationHandler(provider, self.authenticator)
        registration = ClientRegistrationOptions(
            enabled=options.registration,
            valid_scopes=options.scopes_supported,
            default_scopes=list(options.scopes),
        )
        self.registration_handler = RegistrationHandler(provider, registration)
        metadata = build_metadata(
            AnyHttpUrl(options.issuer),
            None,
            registration,
            RevocationOptions(enabled=True),
            supports_identity_assertion=True,
        )
        metadata.scopes_supported = options.scopes_supported
        metadata.grant_types_supported = [*(metadata.grant_types_supported or []), CLIENT_CREDENTIALS]
        methods = list(AUTH_METHODS)
        if options.jwt_clients:
            methods.append(PRIVATE_KEY_JWT)
            metadata.token_endpoint_auth_signing_alg_values_supported = list(
                dict.fromkeys(alg for client in options.jwt_clients for alg in client.algorithms)
            )
        metadata.token_endpoint_auth_methods_supported = methods
        metadata.revocation_endpoint_auth_methods_supported = methods
        metadata.client_id_metadata_document_supported = options.cimd
        metadata.authorization_response_iss_parameter_supported = True
        if options.wrong_issuer:
            metadata.issuer = AnyHttpUrl(f"{options.base}/not-this-issuer")
        self.metadata_handler = MetadataHandler(metadata)

    def routes(self) -> list[Route]:
        issuer_path = urlsplit(self.options.issuer).path
        routes = [
            # RFC 8414 §3.1: the well-known segment goes between host and the issuer's path.
            Route(
                f"/.well-known/oauth-authorization-server{issuer_path}",
                self.metadata_handler.handle,
                methods=["GET"],
            ),
            Route(f"{issuer_path}/authorize", self.authorize, methods=["GET", "POST"]),
            Route(f"{issuer_path}/token", self.token, methods=["POST"]),
            Route(f"{issuer_path}/revoke", self.revoke, methods=["POST"]),
        ]
        if self.options.registration:
            routes.append(Route(f"{issuer_path}/register", self.register, methods=["POST"]))
        return routes

    async def register(self, request: Request) -> Response:
        response = await self.registration_handler.handle(request)
        if response.status_code == 201:
            response.status_code = self.options.registration_status
        return response

    async def authorize(self, request: Request) -> Response:
        params = dict(request.query_params) if request.method == "GET" else await form_of(request)
        response = await self.authorize_handler.handle(request)
        outcome: str | None = None
        location = response.headers.get("location")
        if response.status_code == 302 and location:
            query = dict(parse_qsl(urlsplit(location).query))
            outcome = query.get("error", "code" if "code" in query else None)
            if "iss" not in query:  # RFC 9207 §2: success and error responses alike
                response.headers["location"] = construct_redirect_uri(location, iss=self.options.issuer)
        else:
            outcome = f"HTTP {response.status_code}"
        Journal.add(
            self.journal.authorization_requests,
            client_id=params.get("client_id"),
            scope=params.get("scope"),
            resource=params.get("resource"),
            code_challenge_method=params.get("code_challenge_method"),
            redirect_uri=params.get("redirect_uri"),
            prompt=params.get("prompt"),
            user=self.provider.next_user,
            outcome=outcome,
        )
        return response

    async def token(self, request: Request) -> Response:
        # The SDK's handlers want client_id in the form; Basic and client assertions name the client too.
        named = basic_client_id(request) or assertion_client_id(await form_of(request))
        request = await with_form_defaults(request, {"client_id": named} if named else {})
        form = await form_of(request)
        reset = _token_request.set(TokenRequestContext(resource=form.get("resource")))
        try:
            if form.get("grant_type") == CLIENT_CREDENTIALS:  # a grant the SDK's handler lacks
                response = await self._client_credentials(request, form)
            else:
                response = await self.token_handler.handle(request)
        finally:
            _token_request.reset(reset)
        Journal.add(
            self.journal.token_requests,
            grant_type=form.get("grant_type"),
            client_id=form.get("client_id"),
            client_auth_method=client_auth_method_used(request, form),
            resource=form.get("resource"),
            scope=form.get("scope"),
            status=response.status_code,
            error=self._error_of(response),
        )
        return response

    async def _client_credentials(self, request: Request, form: dict[str, str]) -> Response:
        """RFC 6749 §4.4, answered like the SDK's handler answers the other grants."""
        try:
            client = await self.authenticator.authenticate_request(request)
        except AuthenticationError as exc:
            return token_error("invalid_client", exc.message, status=401)
        if CLIENT_CREDENTIALS not in client.grant_types or client.token_endpoint_auth_method == "none":
            return token_error(
                "unauthorized_client", f"client {client.client_id} may not use {CLIENT_CREDENTIALS}"
            )
        scope = form.get("scope")
        try:
            tokens = await self.provider.exchange_client_credentials(client, scope.split() if scope else None)
        except TokenError as exc:
            return token_error(exc.error, exc.error_description)
        return self.token_handler.response(tokens)

    async def revoke(self, request: Request) -> Response:
        named = basic_client_id(request) or assertion_client_id(await form_of(request))
        defaults = {"client_secret": ""} | ({"client_id": named} if named else {})
        request = await with_form_defaults(request, defaults)
        form = await form_of(request)
        response = await self.revocation_handler.handle(request)
        Journal.add(
            self.journal.revocation_requests,
            client_id=form.get("client_id"),
            client_auth_method=client_auth_method_used(request, form),
            token_type_hint=form.get("token_type_hint"),
            status=response.status_code,
            error=self._error_of(response),
        )
        return response

    @staticmethod
    def _error_of(response: Response) -> str | None:
        if response.status_code < 400:
            return None
        try:
            return json.loads(bytes(response.body)).get("error")
        except (ValueError, AttributeError):
            return None


class ExchangeRefused(Exception):
    """A token exchange the identity provider refuses (RFC 6749 §5.2 / RFC 8693 §2.2.2)."""

    def __init__(self, error: str, description: str, status: int = 400) -> None:
        super().__init__(description)
        self.error = error
        self.description = description
        self.status = status


class IdentityProvider:
    """``/idp``: an enterprise IdP issuing ID tokens (via the control API) and ID-JAGs (RFC 8693)."""

    def __init__(self, options: Options, journal: Journal) -> None:
        self.options = options
        self.journal = journal
        self.issuer = options.idp_issuer
        self.key = ec.generate_private_key(ec.SECP256R1())
        self.public_key = self.key.public_key()
        self.clients = {client.client_id: client for client in options.idp_clients}

    def routes(self) -> list[Route]:
        return [
            Route("/idp/token", self.token, methods=["POST"]),
            Route("/idp/jwks", self.jwks, methods=["GET"]),
            Route("/idp/.well-known/openid-configuration", self.metadata, methods=["GET"]),
        ]

    def _sign(self, claims: dict[str, Any], typ: str = "JWT") -> str:
        return jwt.encode(claims, self.key, algorithm="ES256", headers={"kid": IDP_KEY_ID, "typ": typ})

    def id_token(self, user: str, client_id: str, expires_in: int) -> str:
        """An OpenID Connect ID token for ``user``, issued to the IdP client ``client_id``."""
        now = int(time.time())
        return self._sign(
            {
                "iss": self.issuer,
                "sub": user,
                "aud": client_id,
                "iat": now,
                "auth_time": now,
                "exp": now + expires_in,
                "jti": secrets.token_hex(8),
            }
        )

    async def metadata(self, request: Request) -> Response:
        return JSONResponse(
            {
                "issuer": self.issuer,
                "token_endpoint": f"{self.issuer}/token",
                "jwks_uri": f"{self.issuer}/jwks",
                "grant_types_supported": [TOKEN_EXCHANGE_GRANT_TYPE],
                "token_endpoint_auth_methods_supported": list(AUTH_METHODS),
                "id_token_signing_alg_values_supported": ["ES256"],
                "subject_types_supported": ["public"],
            }
        )

    async def jwks(self, request: Request) -> Response:
        jwk = json.loads(jwt.algorithms.ECAlgorithm.to_jwk(self.public_key))
        return JSONResponse({"keys": [{**jwk, "kid": IDP_KEY_ID, "use": "sig", "alg": "ES256"}]})

    async def token(self, request: Request) -> Response:
        form = await form_of(request)
        basic = basic_credentials(request)
        entry: dict[str, Any] = {
            "client_id": basic[0] if basic else form.get("client_id"),
            "client_auth_method": client_auth_method_used(request, form),
            "grant_type": form.get("grant_type"),
            "requested_token_type": form.get("requested_token_type"),
            "subject_token_type": form.get("subject_token_type"),
            "audience": form.get("audience"),
            "resource": form.get("resource"),
            "scope": form.get("scope"),
            "user": None,
            "error": None,
        }
        try:
            response: Response = JSONResponse(self._exchange(request, form, entry), headers=NO_STORE)
        except ExchangeRefused as refused:
            response = JSONResponse(
                {"error": refused.error, "error_description": refused.description},
                status_code=refused.status,
                headers=NO_STORE,
            )
            entry["error"] = refused.error
        Journal.add(self.journal.token_exchanges, status=response.status_code, **entry)
        return response

    def _client(self, request: Request, form: dict[str, str]) -> IdpClient:
        """Authenticate the client: Basic or client_secret_post with a secret, client_id alone without."""
        basic = basic_credentials(request)
        client_id, secret = basic if basic else (form.get("client_id", ""), form.get("client_secret"))
        if basic and form.get("client_secret"):
            raise ExchangeRefused("invalid_client", "more than one client authentication method", 401)
        client = self.clients.get(client_id)
        if client is None:
            raise ExchangeRefused("invalid_client", f"unknown client {client_id!r}", 401)
        if client.secret:
            if not secret or not hmac.compare_digest(client.secret.encode(), secret.encode()):
                raise ExchangeRefused("invalid_client", "client authentication failed", 401)
        elif secret:
            raise ExchangeRefused("invalid_client", f"client {client_id} is public: it has no secret", 401)
        return client

    def _exchange(self, request: Request, form: dict[str, str], entry: dict[str, Any]) -> dict[str, Any]:
        """RFC 8693 §2: the subject ID token for an ID-JAG; raises ``ExchangeRefused``."""
        client = self._client(request, form)
        if form.get("grant_type") != TOKEN_EXCHANGE_GRANT_TYPE:
            raise ExchangeRefused("unsupported_grant_type", f"only {TOKEN_EXCHANGE_GRANT_TYPE} is supported")
        if form.get("requested_token_type") != ID_JAG_TOKEN_TYPE:
            raise ExchangeRefused("invalid_request", f"requested_token_type must be {ID_JAG_TOKEN_TYPE}")
        if form.get("subject_token_type") != ID_TOKEN_TYPE or not form.get("subject_token"):
            raise ExchangeRefused("invalid_request", f"subject_token must be an ID token ({ID_TOKEN_TYPE})")
        try:
            subject = jwt.decode(
                form["subject_token"],
                self.public_key,
                algorithms=["ES256"],
                audience=client.client_id,
                issuer=self.issuer,
                options={"require": ["exp", "iss", "sub", "aud"]},
            )
        except jwt.InvalidTokenError as exc:
            raise ExchangeRefused(
                "invalid_grant", f"the subject token is not a valid ID token for this client: {exc}"
            ) from None
        user = str(subject["sub"])
        entry["user"] = user
        if user not in self.options.idp_users:
            raise ExchangeRefused(
                "invalid_grant", f"user {user!r} is not in this identity provider's directory"
            )
        audience = form.get("audience")
        if not audience:
            raise ExchangeRefused(
                "invalid_request", "audience (the authorization server's issuer) is required"
            )
        if not same_issuer(audience, self.options.issuer):
            raise ExchangeRefused(
                "invalid_target", f"no trust relationship with the authorization server {audience}"
            )
        resource = form.get("resource")
        if resource is not None and not same_resource(resource, self.options.resource):
            raise ExchangeRefused("invalid_target", f"unknown resource {resource}")
        scope = form.get("scope")
        if scope and any(name not in self.options.scopes_supported for name in scope.split()):
            raise ExchangeRefused(
                "invalid_scope", f"scope {scope!r} is not offered by {self.options.resource}"
            )
        now = int(time.time())
        claims: dict[str, Any] = {
            "iss": self.issuer,
            "sub": user,
            "aud": audience,
            "client_id": client.as_client_id,
            "jti": secrets.token_hex(16),
            "iat": now,
            "exp": now + ID_JAG_LIFETIME,
        }
        if resource is not None:
            claims["resource"] = resource
        if scope:
            claims["scope"] = scope
        answer: dict[str, Any] = {
            "access_token": self._sign(claims, typ=ID_JAG_TYP),
            "issued_token_type": ID_JAG_TOKEN_TYPE,
            "token_type": "N_A",
            "expires_in": ID_JAG_LIFETIME,
        }
        if scope:
            answer["scope"] = scope
        return answer


class ControlApi:
    """``/_control/``: what tests read and the levers they pull."""

    def __init__(
        self, options: Options, provider: InMemoryProvider, journal: Journal, idp: IdentityProvider
    ) -> None:
        self.options = options
        self.provider = provider
        self.journal = journal
        self.idp = idp

    def routes(self) -> list[Route]:
        return [
            Route("/_control/state", self.state, methods=["GET"]),
            Route("/_control/revoke-all", self.revoke_all, methods=["POST"]),
            Route("/_control/expire-access", self.expire_access, methods=["POST"]),
            Route("/_control/next-user", self.next_user, methods=["POST"]),
            Route("/_control/id-token", self.id_token, methods=["GET"]),
        ]

    async def state(self, request: Request) -> Response:
        provider, journal = self.provider, self.journal
        now = time.time()
        clients = [
            {
                "client_id": client_id,
                "registered_via": known.via,
                "token_endpoint_auth_method": known.info.token_endpoint_auth_method,
                "grant_types": known.info.grant_types,
                "redirect_uris": [str(uri) for uri in known.info.redirect_uris or []],
                "client_name": known.info.client_name,
                "registered_at": known.registered_at,
            }
            for client_id, known in provider.clients.items()
        ]
        live_access = [token for token in provider.access_tokens.values() if token.expires > now]
        grant_types = [entry["grant_type"] for entry in journal.token_requests if entry["status"] == 200]
        return JSONResponse(
            {
                "issuer": self.options.issuer,
                "resource": self.options.resource,
                "next_user": provider.next_user,
                "idp": {
                    "issuer": self.idp.issuer,
                    "token_endpoint": f"{self.idp.issuer}/token",
                    "users": list(self.options.idp_users),
                    "clients": [
                        {
                            "client_id": c.client_id,
                            "confidential": bool(c.secret),
                            "as_client_id": c.as_client_id,
                        }
                        for c in self.options.idp_clients
                    ],
                },
                "clients": clients,
                "authorization_requests": journal.authorization_requests,
                "token_requests": journal.token_requests,
                "revocation_requests": journal.revocation_requests,
                "revocations": journal.revocations,
                "cimd_fetches": journal.cimd_fetches,
                "mcp_requests": journal.mcp_requests,
                "token_exchanges": journal.token_exchanges,
                "active_tokens": [
                    {
                        "client_id": t.client_id,
                        "user": t.subject,
                        "scopes": t.scopes,
                        "resource": t.resource,
                        "expires_in": round(t.expires - now, 1),
                    }
                    for t in live_access
                ],
                "counts": {
                    "clients": len(clients),
                    "registrations": sum(1 for c in clients if c["registered_via"] == "dcr"),
                    "authorization_requests": len(journal.authorization_requests),
                    "token_requests": len(journal.token_requests),
                    "codes_exchanged": grant_types.count("authorization_code"),
                    "refreshes": grant_types.count("refresh_token"),
                    "client_credentials": grant_types.count(CLIENT_CREDENTIALS),
                    "jwt_bearer": grant_types.count(JWT_BEARER_GRANT_TYPE),
                    "token_exchanges": len(journal.token_exchanges),
                    "token_errors": sum(1 for entry in journal.token_requests if entry["status"] != 200),
                    "revocations": len(journal.revocations),
                    "active_access_tokens": len(live_access),
                    "active_refresh_tokens": len(provider.refresh_tokens),
                    "mcp_requests": len(journal.mcp_requests),
                    "mcp_401": sum(1 for entry in journal.mcp_requests if entry["status"] == 401),
                    "mcp_403": sum(1 for entry in journal.mcp_requests if entry["status"] == 403),
                },
            }
        )

    async def revoke_all(self, request: Request) -> Response:
        return JSONResponse({"revoked_grants": self.provider.revoke_all()})

    async def expire_access(self, request: Request) -> Response:
        return JSONResponse({"expired_access_tokens": self.provider.expire_access()})

    async def next_user(self, request: Request) -> Response:
        try:
            payload = await request.json()
        except ValueError:
            payload = None
        user = payload.get("user") if isinstance(payload, dict) else None
        if not isinstance(user, str) or not user:
            return JSONResponse({"error": 'expected a JSON body {"user": "<name>"}'}, status_code=400)
        self.provider.next_user = user
        return JSONResponse({"user": user})

    async def id_token(self, request: Request) -> Response:
        user = request.query_params.get("user", "")
        default_client = self.options.idp_clients[0].client_id if self.options.idp_clients else ""
        client_id = request.query_params.get("client_id", default_client)
        try:
            expires_in = int(request.query_params.get("expires_in", "3600"))
        except ValueError:
            expires_in = 0
        if not user or not client_id or expires_in == 0:
            usage = "expected ?user=NAME[&client_id=ID][&expires_in=SECONDS, not 0] (or an --idp-client)"
            return JSONResponse({"error": usage}, status_code=400)
        return JSONResponse(
            {
                "id_token": self.idp.id_token(user, client_id, expires_in),
                "user": user,
                "client_id": client_id,
                "expires_in": expires_in,
            },
            headers=NO_STORE,
        )


def build_app(options: Options) -> Starlette:
    """The whole ASGI application: authorization server, protected MCP server, control API."""
    journal = Journal()
    idp = IdentityProvider(options, journal)
    provider = InMemoryProvider(options, journal, idp_key=idp.public_key)
    server = build_mcp_server(handshake_only=options.handshake_only)
    mcp_app = server.streamable_http_app(streamable_http_path="/mcp", host="127.0.0.1")
    mcp_endpoint = next(r.endpoint for r in mcp_app.routes if isinstance(r, Route) and r.path == "/mcp")
    routes = [
        *AuthorizationServer(options, provider, journal).routes(),
        *create_protected_resource_routes(
            resource_url=AnyHttpUrl(options.resource),
            authorization_servers=[AnyHttpUrl(options.issuer)],
            scopes_supported=list(options.scopes),
            resource_name="BooCode OAuth test server",
        ),
        *idp.routes(),
        *ControlApi(options, provider, journal, idp).routes(),
        Route("/mcp", endpoint=ScopeGuard(mcp_endpoint, options=options, journal=journal)),
    ]
    middleware = [
        Middleware(RequestLog),
        Middleware(
            AuthenticationMiddleware,
            backend=BearerAuthBackend(
                ProviderVerifier(provider), resource_server_url=AnyHttpUrl(options.resource)
            ),
        ),
        Middleware(AuthContextMiddleware),
    ]

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with server.session_manager.run():
            yield

    return Starlette(routes=routes, middleware=middleware, lifespan=lifespan)


def parse_options(argv: list[str] | None = None) -> Options:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--port", type=int, required=True, help="serve on 127.0.0.1:PORT")
    parser.add_argument(
        "--token-lifetime",
        type=int,
        default=3600,
        metavar="SECONDS",
        help="access token lifetime (default 3600)",
    )
    parser.add_argument("--no-registration", action="store_true", help="no dynamic client registration")
    parser.add_argument(
        "--pre-registered",
        type=PreRegistered.parse,
        action="append",
        default=[],
        metavar="CLIENT_ID:SECRET[:METHOD]",
        help="a client configured out of band (repeatable)",
    )
    parser.add_argument(
        "--jwt-client",
        type=JwtClient.parse,
        action="append",
        default=[],
        metavar="CLIENT_ID:PUBLIC_KEY_PEM_FILE",
        help="a client configured out of band that authenticates with private_key_jwt (repeatable)",
    )
    parser.add_argument(
        "--idp-client",
        type=IdpClient.parse,
        action="append",
        default=[],
        metavar="CLIENT_ID:SECRET[:AS_CLIENT_ID]",
        help="a client of the identity provider at /idp (repeatable; empty SECRET: a public client)",
    )
    parser.add_argument("--idp-users", default="alice bob", help="the identity provider's users")
    parser.add_argument("--no-cimd", action="store_true", help="no Client ID Metadata Documents")
    parser.add_argument("--wrong-issuer", action="store_true", help="metadata names another issuer")
    parser.add_argument(
        "--registration-status", type=int, default=201, help="the status a successful registration answers"
    )
    parser.add_argument("--scopes", default="read write admin", help="scopes of the MCP server")
    parser.add_argument("--required-scope", default=None, help="scope needed for any MCP request")
    parser.add_argument(
        "--handshake-only", action="store_true", help="refuse server/discover (2025-11-25 only)"
    )
    args = parser.parse_args(argv)
    scopes = tuple(args.scopes.split())
    if not scopes:
        parser.error("--scopes needs at least one scope")
    if args.required_scope is not None and args.required_scope not in scopes:
        parser.error(f"--required-scope {args.required_scope!r} is not one of --scopes {args.scopes!r}")
    if args.token_lifetime < 0:
        parser.error("--token-lifetime must be 0 or more seconds")
    client_ids = [c.client_id for c in [*args.pre_registered, *args.jwt_client]]
    if len(set(client_ids)) != len(client_ids):
        parser.error("a client id is given twice in --pre-registered / --jwt-client")
    return Options(
        port=args.port,
        token_lifetime=args.token_lifetime,
        registration=not args.no_registration,
        cimd=not args.no_cimd,
        wrong_issuer=args.wrong_issuer,
        registration_status=args.registration_status,
        scopes=scopes,
        required_scope=args.required_scope,
        pre_registered=tuple(args.pre_registered),
        jwt_clients=tuple(args.jwt_client),
        idp_clients=tuple(args.idp_client),
        idp_users=tuple(args.idp_users.split()),
        handshake_only=args.handshake_only,
    )


def main() -> None:
    options = parse_options()
    config = uvicorn.Config(
        build_app(options),
        host="127.0.0.1",
        port=options.port,
        log_level="warning",
        access_log=False,
        # Open SSE streams must not hold up a SIGTERM for long.
        timeout_graceful_shutdown=1,
    )
    uvicorn.Server(config).run()


if __name__ == "__main__":
    main()

"""OAuth 2.1 sign-in for Streamable HTTP and SSE servers: the SDK's flow plus what a multi-user host needs.

Invariants. Credentials live only in the secret store (kind ``"oauth"``, one record per server, or
per (server, person) for ``"perUser"`` servers); nothing of them is logged or written to mcp.json,
and a pre-registered client always comes from the entry. The store is read at the server's first
401, never before. A refresh is single-flight (the provider's lock, one per credential), a rotated
refresh token is stored before anybody reads it again, and a refused refresh deletes the tokens
(never replayed). With a valid token a request takes no lock. A failed flow is kept in
:attr:`HubOAuth.failure` with its step and the request goes out once more without new credentials,
so the transport sees the server's 401; one connection never asks twice (a reconnect starts
afresh). One :class:`HubOAuth` per connection, built in its owner task, lives and dies with the
transport's httpx2 client; browser consents wait in :data:`PENDING` (this process only).

The tour: docs/architecture.md (*Sign-in*), docs/configuration.md (*Signing in to remote servers*),
docs/security.md (*OAuth sign-in*).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import logging
import random
import time
from collections.abc import AsyncGenerator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, cast
from urllib.parse import parse_qs, urlsplit

import httpx2
from channels.db import database_sync_to_async
from django.conf import settings
from mcp.client.auth import OAuthClientProvider, OAuthFlowError
from mcp.client.auth.extensions.client_credentials import SignedJWTParameters
from mcp.client.auth.utils import is_valid_client_metadata_url, issuers_match, union_scopes
from mcp.shared.auth import (
    JWT_BEARER_GRANT_TYPE,
    AuthorizationCodeResult,
    OAuthClientInformationFull,
    OAuthClientMetadata,
    OAuthMetadata,
    OAuthToken,
    ProtectedResourceMetadata,
    TokenEndpointAuthMethod,
)
from pydantic import ValidationError

from mcpclient.config.model import (
    AUTHORIZATION_CODE,
    CLIENT_CREDENTIALS,
    IDENTITY_ASSERTION,
    PRIVATE_KEY_JWT,
    OAuthConfig,
    OAuthSecrets,
)
from mcpclient.core import egress
from mcpclient.core.egress import Endpoint
from mcpclient.core.redaction import install_oauth_log_filter, redact_url
from mcpclient.engine.egress import EgressRefused
from mcpclient.engine.inbound import AnswerRefused, document_client
from mcpclient.secrets import store as secret_store

logger = logging.getLogger(__name__)
# The SDK logs a failed flow with its exception, whose text can quote a registration's secret or a
# token answer: its records are redacted wherever this flow runs, whatever the logging config.
install_oauth_log_filter()

SECRET_KIND = "oauth"
CALLBACK_PATH = "/oauth/callback/"
CLIENT_METADATA_PATH = "/oauth/client-metadata.json"
# Tokens are treated as expired this long before their real expiry (at most a tenth of their
# lifetime), minus up to REFRESH_JITTER seconds, so refreshes start early and spread out.
REFRESH_MARGIN = 60.0
REFRESH_JITTER = 15.0
_WELL_KNOWN = (
    "/.well-known/oauth-protected-resource",
    "/.well-known/oauth-authorization-server",
    "/.well-known/openid-configuration",
)

# Steps of the flow, as failures name them.
DISCOVERY, REGISTRATION, CONSENT, TOKEN, REFRESH = "discovery", "registration", "consent", "token", "refresh"
# OAuth error codes (RFC 6749, 6750, 7591, 8628, 8693, 8707, 9449): the only words of an error
# answer a person is shown; what else a server writes stays in the log.
OAUTH_ERRORS = frozenset(
    """
    invalid_request invalid_client invalid_grant unauthorized_client unsupported_grant_type invalid_scope
    access_denied unsupported_response_type server_error temporarily_unavailable invalid_token
    insufficient_scope invalid_redirect_uri invalid_client_metadata invalid_software_statement
    unapproved_software_statement invalid_target authorization_pending slow_down expired_token
    invalid_dpop_proof use_dpop_nonce interaction_required login_required consent_required
    """.split()
)


class SignInRequired(Exception):
    """Nobody can consent now: the server needs a sign-in (Connect) first."""


class ConsentFailed(Exception):
    """The person refused, the provider answered with an error, or the consent timed out."""


class SignInStopped(OAuthFlowError):
    """A sign-in BooCode stopped, said in its own words (nothing a server sent is quoted)."""


@dataclass(frozen=True)
class AuthFailure:
    """Why a sign-in stopped, and at which step."""

    step: str
    message: str
    sign_in_required: bool = False

    def describe(self, server: str) -> str:
        """The failure as users and administrators read it."""
        if self.sign_in_required:
            return f'MCP server "{server}" needs a sign-in: {self.message}'
        return f'sign-in to MCP server "{server}" failed at {self.step}: {self.message}'


# --- settings ------------------------------------------------------------------------------


def public_url() -> str:
    """Where people and authorization servers reach BooCode (``BOOCODE_PUBLIC_URL``)."""
    return settings.PUBLIC_URL.rstrip("/")


def redirect_uri() -> str:
    """The authorization callback every registration uses."""
    return public_url() + CALLBACK_PATH


def client_metadata_url() -> str | None:
    """The Client ID Metadata Document's URL (``BOOCODE_CLIENT_METADATA_URL``, by default the one
    BooCode serves under ``BOOCODE_PUBLIC_URL``), when it is an https URL; else None (no CIMD)."""
    url = settings.CLIENT_METADATA_URL or public_url() + CLIENT_METADATA_PATH
    return url if is_valid_client_metadata_url(url) else None


def client_metadata() -> OAuthClientMetadata:
    """What BooCode registers as (dynamic registration)."""
    return OAuthClientMetadata(
        client_name="BooCode",
        redirect_uris=[redirect_uri()],  # type: ignore[list-item]
        grant_types=["authorization_code", "refresh_token"],
        response_types=["code"],
        token_endpoint_auth_method="client_secret_basic",
        application_type="web",
        software_id="boocode",
        software_version=settings.VERSION,
    )


def client_metadata_document() -> dict[str, Any]:
    """The Client ID Metadata Document served at :func:`client_metadata_url` (a public client)."""
    return {
        "client_id": client_metadata_url() or public_url() + CLIENT_METADATA_PATH,
        "client_name": "BooCode",
        "client_uri": public_url() + "/",
        "redirect_uris": [redirect_uri()],
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": "none",
        "application_type": "web",
        "software_id": "boocode",
        "software_version": settings.VERSION,
    }


# --- storage -------------------------------------------------------------------------------


def credential_name(server: str, user_id: int | None, *, own: bool = False) -> str:
    """The secret store name of a credential: the server's, one person's for a shared "perUser"
    server (``name@user:<id>``), or one person's for a server of their own (``own``:
    ``name@own:<id>``). A server's name has no "@", so the three never meet: a person's own server
    never reads the tokens of a shared server of the same name hidden from them."""
    if user_id is None:
        return server
    return f"{server}@{'own' if own else 'user'}:{user_id}"


def signed_in_servers(user_id: int | None, *, own: bool = False) -> set[str]:
    """The servers with a stored credential of ``user_id`` (``None``: the shared ones; ``own``:
    of the person's own servers). Sync ORM."""
    names = secret_store.secret_names(SECRET_KIND)
    if user_id is None:
        return {name for name in names if "@" not in name}
    suffix = credential_name("", user_id, own=own)
    return {name.removesuffix(suffix) for name in names if name.endswith(suffix)}


class CredentialStore:
    """The SDK's ``TokenStorage`` over the secret store, for one (server, person).

    One encrypted JSON record: ``url`` (credentials are dropped when the entry's URL changes),
    ``tokens``, ``expires_at`` (epoch seconds), ``client`` (the registration), ``issuer``,
    ``prm`` and ``asm`` (discovered metadata, so a refresh after a restart goes to the right
    token endpoint). A pre-registered client from the entry always wins over a stored one.
    """

    def __init__(
        self,
        server: str,
        user_id: int | None,
        url: str,
        preregistered: OAuthClientInformationFull | None = None,
        *,
        own: bool = False,
    ) -> None:
        self.server = server
        self.user_id = user_id
        self.own = own  # a server of the person's own (its record: credential_name's own form)
        self.url = url
        self.preregistered = preregistered
        self._record: dict[str, Any] | None = None

    @property
    def name(self) -> str:
        """The record's name in the secret store."""
        return credential_name(self.server, self.user_id, own=self.own)

    async def _load(self) -> dict[str, Any]:
        if self._record is None:
            text = await database_sync_to_async(secret_store.get_secret)(SECRET_KIND, self.name)
            record = json.loads(text) if text else {}
            self._record = record if record.get("url") == self.url else {"url": self.url}
        return self._record

    async def _save(self) -> None:
        record = await self._load()
        await database_sync_to_async(secret_store.put_secret)(SECRET_KIND, self.name, json.dumps(record))

    async def get_tokens(self) -> OAuthToken | None:
        """The stored tokens, if any."""
        tokens = (await self._load()).get("tokens")
        return OAuthToken.model_validate(tokens) if tokens else None

    async def set_tokens(self, tokens: OAuthToken) -> None:
        """Keep new tokens (and when they expire)."""
        record = await self._load()
        record["tokens"] = tokens.model_dump(mode="json", exclude_none=True)
        record["expires_at"] = time.time() + int(tokens.expires_in) if tokens.expires_in is not None else None
        await self._save()

    async def expires_at(self) -> float | None:
        """When the stored access token expires (epoch seconds), if the server said."""
        return (await self._load()).get("expires_at")

    async def clear_tokens(self) -> None:
        """Forget the tokens (a refused refresh), keeping the registration."""
        record = await self._load()
        if record.pop("tokens", None) is not None:
            record.pop("expires_at", None)
            await self._save()

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        """The pre-registered client, else the stored registration."""
        if self.preregistered is not None:
            return self.preregistered
        client = (await self._load()).get("client")
        return OAuthClientInformationFull.model_validate(client) if client else None

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        """Keep a registration (dynamic or CIMD)."""
        record = await self._load()
        record["client"] = client_info.model_dump(mode="json", exclude_none=True)
        await self._save()

    async def metadata(self) -> tuple[ProtectedResourceMetadata | None, OAuthMetadata | None]:
        """The metadata discovered at the last sign-in."""
        record = await self._load()
        prm, asm = record.get("prm"), record.get("asm")
        try:
            return (
                ProtectedResourceMetadata.model_validate(prm) if prm else None,
                OAuthMetadata.model_validate(asm) if asm else None,
            )
        except ValidationError:
            return None, None

    async def set_metadata(self, prm: ProtectedResourceMetadata | None, asm: OAuthMetadata | None) -> None:
        """Keep the metadata a sign-in used."""
        record = await self._load()
        record["prm"] = prm.model_dump(mode="json", exclude_none=True) if prm else None
        record["asm"] = asm.model_dump(mode="json", exclude_none=True) if asm else None
        await self._save()

    async def delete(self) -> None:
        """Forget everything (disconnect)."""
        self._record = {"url": self.url}
        await database_sync_to_async(secret_store.delete_secret)(SECRET_KIND, self.name)


def _grant_types(oauth: OAuthConfig) -> list[str]:
    if oauth.grant == CLIENT_CREDENTIALS:
        return ["client_credentials"]
    if oauth.grant == IDENTITY_ASSERTION:
        return [JWT_BEARER_GRANT_TYPE]
    return ["authorization_code", "refresh_token"]


def preregistered_client(oauth: OAuthConfig, client_secret: str | None) -> OAuthClientInformationFull | None:
    """The entry's ``clientId`` / ``clientSecret`` as the SDK's client record (None without one)."""
    if oauth.client_id is None:
        return None
    method = oauth.token_endpoint_auth_method or ("client_secret_basic" if client_secret else "none")
    return OAuthClientInformationFull(
        client_id=oauth.client_id,
        client_secret=client_secret,
        token_endpoint_auth_method=method,
        redirect_uris=[redirect_uri()] if oauth.grant == AUTHORIZATION_CODE else None,  # type: ignore[list-item]
        grant_types=_grant_types(oauth),
    )


# --- consent -------------------------------------------------------------------------------


class Consent:
    """Who answers "send the person to this URL" and "wait for the code"."""

    # The endpoints the administrator declared for the server signing in (set by HubOAuth): a
    # consent that fetches the authorization URL itself reaches them as declared.
    declared: frozenset[Endpoint] = frozenset()

    async def redirect(self, url: str) -> None:
        """Send the person to the authorization URL."""
        raise NotImplementedError

    async def callback(self) -> AuthorizationCodeResult:
        """The authorization response (code, state, iss)."""
        raise NotImplementedError


class NoConsent(Consent):
    """A background session: nobody to ask, so the server waits for someone to connect it."""

    def __init__(self, message: str) -> None:
        self.message = message

    async def redirect(self, url: str) -> None:
        raise SignInRequired(self.message)

    async def callback(self) -> AuthorizationCodeResult:  # pragma: no cover - redirect raised
        raise SignInRequired(self.message)


def _code_from_redirect(location: str) -> AuthorizationCodeResult:
    """The authorization response carried by a redirect URL (an error response raises)."""
    query = parse_qs(urlsplit(location).query)

    def first(key: str) -> str | None:
        values = query.get(key)
        return values[0] if values else None

    if first("error"):
        error = first("error")
        said = error if error in OAUTH_ERRORS else "an error"
        raise ConsentFailed(f"the authorization server answered {said}")
    code = first("code")
    if not code:
        raise ConsentFailed("the authorization response has no code")
    return AuthorizationCodeResult(code=code, state=first("state"), iss=first("iss"))


class HeadlessConsent(Consent):
    """Consent without a browser: fetch the authorization URL and read the code from its redirect.

    For authorization servers that consent at once (the conformance suite's, test servers);
    a server that shows a login page ends the flow with a clear error.
    """

    def __init__(self) -> None:
        self._result: AuthorizationCodeResult | None = None

    async def redirect(self, url: str) -> None:
        async with document_client(self.declared) as client:
            response = await client.get(url, follow_redirects=False)
        location = response.headers.get("location")
        if not response.is_redirect or not location:
            raise ConsentFailed(
                f"the authorization server answered HTTP {response.status_code} instead of redirecting back; "
                "this server needs a person to sign in in a browser"
            )
        self._result = _code_from_redirect(location)

    async def callback(self) -> AuthorizationCodeResult:
        if self._result is None:
            raise ConsentFailed("no authorization response")
        return self._result


# state -> the consent waiting for its callback (this process).
PENDING: dict[str, BrowserConsent] = {}


class BrowserConsent(Consent):
    """A person's browser: the URL is handed to whoever waits for it (the Connect view), the
    code arrives through BooCode's callback view (:func:`complete`)."""

    def __init__(self, *, server: str, user_id: int, owner_id: int | None) -> None:
        # ``user_id``: who started it (only they may complete it); ``owner_id``: whose
        # credential it is (None for a shared server).
        self.server = server
        self.user_id = user_id
        self.owner_id = owner_id
        loop = asyncio.get_running_loop()
        self.url: asyncio.Future[str] = loop.create_future()
        self._response: asyncio.Future[AuthorizationCodeResult] = loop.create_future()
        self.state = ""
        self.return_to = "/"  # where the person started (the callback sends them back)

    async def redirect(self, url: str) -> None:
        self.state = (parse_qs(urlsplit(url).query).get("state") or [""])[0]
        if not self.state:
            raise ConsentFailed("the authorization URL has no state")
        PENDING[self.state] = self
        if not self.url.done():
            self.url.set_result(url)

    async def callback(self) -> AuthorizationCodeResult:
        try:
            async with asyncio.timeout(settings.OAUTH_CONSENT_TIMEOUT):
                return await self._response
        except TimeoutError:
            raise ConsentFailed(
                f"nobody signed in within {settings.OAUTH_CONSENT_TIMEOUT:g} s "
                "(BOOCODE_OAUTH_CONSENT_TIMEOUT); connect again"
            ) from None
        finally:
            PENDING.pop(self.state, None)

    def fail(self, message: str) -> None:
        """End the wait with an error (the connection attempt was abandoned).

        Whoever waits gets it; a wait nobody started (the flow failed before its callback) is
        not an error to log, so each exception is marked as seen here.
        """
        for future in (self.url, self._response):
            if not future.done():
                future.set_exception(ConsentFailed(message))
                future.exception()

    def resolve(self, result: AuthorizationCodeResult | Exception) -> None:
        """Deliver the authorization response (or the provider's error) to the waiting flow."""
        if self._response.done():
            return
        if isinstance(result, Exception):
            self._response.set_exception(result)
        else:
            self._response.set_result(result)


class UnknownConsent(Exception):
    """A callback whose ``state`` matches no consent this person started in this process."""


def complete(state: str, user_id: int, query: dict[str, str]) -> BrowserConsent:
    """Hand an authorization response (the callback's query) to the flow that waits for it.

    Runs on the hub's loop. Only the person who started the flow may complete it: a callback
    link sent to somebody else (login CSRF) matches nothing.
    """
    consent = PENDING.get(state)
    if consent is None or consent.user_id != user_id:
        raise UnknownConsent("this sign-in link is unknown or expired; start again with Connect")
    if query.get("error"):
        description = query.get("error_description", "")
        consent.resolve(ConsentFailed(query["error"] + (f": {description}" if description else "")))
    elif not query.get("code"):
        consent.resolve(ConsentFailed("the authorization response has no code"))
    else:
        consent.resolve(AuthorizationCodeResult(code=query["code"], state=state, iss=query.get("iss")))
    return consent


# --- the provider --------------------------------------------------------------------------


def _refresh_margin(lifetime: float) -> float:
    return min(REFRESH_MARGIN, lifetime / 10) + random.uniform(0, min(REFRESH_JITTER, lifetime / 20))


@dataclass
class _Steps:
    """Which step of the flow the last outgoing request belonged to."""

    current: str = DISCOVERY
    refresh_refused: str = ""
    answer: str = ""  # how the last request of the flow was answered ("HTTP 400 invalid_grant")
    answered_at: str = ""  # the step it belonged to
    requests: list[str] = field(default_factory=list)


class HubOAuth(OAuthClientProvider):
    """The SDK's provider with BooCode's storage, consent, early refresh and failure reports."""

    def __init__(
        self,
        *,
        server: str,
        url: str,
        store: CredentialStore,
        consent: Consent,
        oauth: OAuthConfig,
        secrets: OAuthSecrets | None = None,
        subject_token: Callable[[], Awaitable[str | None]] | None = None,
        declared: bool = True,
    ) -> None:
        machine = oauth.grant != AUTHORIZATION_CODE
        if machine:  # no person, no redirect, no registration: the entry's client only
            metadata = OAuthClientMetadata(
                redirect_uris=None,
                grant_types=_grant_types(oauth),
                token_endpoint_auth_method=cast(TokenEndpointAuthMethod, oauth.token_endpoint_auth_method),
            )
        else:
            metadata = client_metadata()
        if oauth.scopes:
            metadata.scope = " ".join(oauth.scopes)
        super().__init__(
            server_url=url,
            client_metadata=metadata,
            storage=store,
            redirect_handler=self._redirect,
            callback_handler=self._callback,
            client_metadata_url=None if machine else client_metadata_url(),
        )
        self.server = server
        self.store = store
        self.consent = consent
        self.oauth = oauth
        self.secrets = secrets or OAuthSecrets()
        # "perUser" identity_assertion: the person's own ID token, from their sign-in to BooCode.
        self._subject_token = subject_token
        self.failure: AuthFailure | None = None
        self.signed_in = False  # a sign-in completed during this connection
        # The server's own endpoints: the flow reaches them as declared (an administrator's server;
        # a person's own is checked like anything else), any other host is checked.
        self.declared = egress.declared(url) if declared else frozenset()
        consent.declared = self.declared
        self._got_through = False  # the server answered a request of this connection without 401
        self._steps = _Steps()

    # The SDK calls these two; they add the configured scopes and track the step.
    async def _redirect(self, url: str) -> None:
        self._steps.current = CONSENT
        await self.consent.redirect(url)

    async def _callback(self) -> AuthorizationCodeResult:
        return await self.consent.callback()

    async def _perform_authorization(self) -> httpx2.Request:
        if self.oauth.scopes:  # configured scopes are asked for on top of what the server wants
            configured = " ".join(self.oauth.scopes)
            self.context.client_metadata.scope = union_scopes(self.context.client_metadata.scope, configured)
        if self.oauth.grant == AUTHORIZATION_CODE:
            return await super()._perform_authorization()
        return await self._machine_token_request()

    # --- the machine grants (client_credentials, SEP-990 identity assertion) ---------------

    def _select_authorization_server(self, advertised: list[str]) -> str:
        """The configured ``issuer`` when the server lists it, else the first listed."""
        issuer = self.oauth.issuer
        return next((found for found in advertised if issuer and issuers_match(found, issuer)), advertised[0])

    def _authorization_server_issuer(self) -> str:
        """The discovered authorization server's issuer, refused when it is not the configured one:
        the client's secret, key or ID-JAG goes nowhere else."""
        metadata = self.context.oauth_metadata
        if metadata is None:
            raise SignInStopped("the authorization server publishes no metadata (needed for a token request)")
        issuer = str(metadata.issuer)
        if self.oauth.issuer and not issuers_match(issuer, self.oauth.issuer):
            self.context.oauth_metadata = None
            logger.info('MCP server "%s" leads to the authorization server %s', self.server, issuer)
            raise SignInStopped(
                f'the server sends BooCode to an authorization server that is not the configured "issuer" '
                f"{self.oauth.issuer}; nothing was sent"
            )
        return issuer

    async def _machine_token_request(self) -> httpx2.Request:
        """A ``client_credentials`` or JWT-bearer (ID-JAG) token request, with client authentication."""
        self._steps.current = TOKEN
        issuer = self._authorization_server_issuer()
        data: dict[str, str] = {}
        if self.oauth.grant == CLIENT_CREDENTIALS:
            data["grant_type"] = "client_credentials"
        else:
            data["grant_type"] = JWT_BEARER_GRANT_TYPE
            data["assertion"] = await self._identity_assertion(issuer)
        headers = {"Content-Type": "application/x-www-form-urlencoded"}
        if self.oauth.token_endpoint_auth_method == PRIVATE_KEY_JWT:
            data["client_id"] = self.oauth.client_id or ""
            data["client_assertion_type"] = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
            data["client_assertion"] = await self._client_assertion(issuer)
        else:
            data, headers = self.context.prepare_token_auth(data, headers)
        if self.context.should_include_resource_param(self.context.protocol_version):
            data["resource"] = self.context.get_resource_url()
        if self.context.client_metadata.scope:
            data["scope"] = self.context.client_metadata.scope
        return httpx2.Request("POST", self._get_token_endpoint(), data=data, headers=headers)

    async def _client_assertion(self, audience: str) -> str:
        """A ``private_key_jwt`` client assertion (RFC 7523 §2.2) for the authorization server."""
        client_id = self.oauth.client_id or ""
        try:
            return await SignedJWTParameters(
                issuer=client_id,
                subject=client_id,
                signing_key=self.secrets.private_key or "",
                signing_algorithm=self.oauth.signing_algorithm,
                lifetime_seconds=120,
            ).create_assertion_provider()(audience)
        except (ValueError, TypeError) as exc:  # PyJWT: a key that is not a PEM of the algorithm's kind
            raise SignInStopped(
                f'"privateKey" cannot sign {self.oauth.signing_algorithm}: {type(exc).__name__}: {exc}'
            ) from None

    async def _identity_assertion(self, audience: str) -> str:
        """SEP-990 leg 1: the identity provider exchanges the ID token for an ID-JAG (RFC 8693)."""
        idp = self.oauth.identity_provider
        id_token = self.secrets.id_token
        if id_token is None and self._subject_token is not None:
            id_token = await self._subject_token()
            if not id_token:
                raise SignInStopped(
                    "this person has no ID token to exchange: they sign in to BooCode with its single "
                    "sign-on (docs/teams.md), then the server signs them in by itself"
                )
        if idp is None or not id_token:
            raise SignInStopped('"identityProvider.idToken" is empty')
        data = {
            "grant_type": "urn:ietf:params:oauth:grant-type:token-exchange",
            "requested_token_type": "urn:ietf:params:oauth:token-type:id-jag",
            "subject_token": id_token,
            "subject_token_type": "urn:ietf:params:oauth:token-type:id_token",
            "audience": audience,
            "resource": self.context.get_resource_url(),
            "client_id": idp.client_id,
        }
        auth = None
        if self.secrets.idp_client_secret:
            auth = httpx2.BasicAuth(idp.client_id, self.secrets.idp_client_secret)
            data.pop("client_id")
        # The token endpoint is the administrator's (mcp.json): reached as declared, like the server.
        async with document_client(self.declared | egress.declared(idp.token_endpoint)) as http:
            response = await http.post(
                idp.token_endpoint, data=data, auth=auth if auth is not None else httpx2.USE_CLIENT_DEFAULT
            )
        where = f"the identity provider ({idp.token_endpoint})"
        if response.status_code != 200:
            _log_answer(self.server, response)
            raise SignInStopped(
                f"{where} refused the token exchange: HTTP {response.status_code}{_oauth_error(response)}"
            )
        try:
            answer = response.json()
            token = answer["access_token"]
        except (ValueError, KeyError, TypeError):
            raise SignInStopped(f"{where} answered without an access_token") from None
        issued = answer.get("issued_token_type")
        if not isinstance(token, str) or issued not in (None, "urn:ietf:params:oauth:token-type:id-jag"):
            raise SignInStopped(f"{where} issued another kind of token than an ID-JAG")
        return token

    async def _initialize(self) -> None:
        await super()._initialize()
        expires_at = await self.store.expires_at()
        if self.context.current_tokens is not None and expires_at is not None:
            lifetime = float(self.context.current_tokens.expires_in or REFRESH_MARGIN * 10)
            self.context.token_expiry_time = expires_at - _refresh_margin(lifetime)
        prm, asm = await self.store.metadata()
        if self.context.oauth_metadata is None and asm is not None:
            self.context.oauth_metadata = asm
            self.context.protected_resource_metadata = prm
            if prm is not None and prm.authorization_servers:
                self.context.auth_server_url = str(prm.authorization_servers[0])

    async def _handle_token_response(self, response: httpx2.Response) -> None:
        await super()._handle_token_response(response)
        self._early_expiry()
        self.signed_in = True
        await self.store.set_metadata(self.context.protected_resource_metadata, self.context.oauth_metadata)

    async def _handle_refresh_response(self, response: httpx2.Response) -> bool:
        refreshed = await super()._handle_refresh_response(response)
        if refreshed:
            self._early_expiry()
        else:
            # Never replay a refresh token the server refused (it may have rotated it away).
            self._steps.refresh_refused = f"HTTP {response.status_code}{_oauth_error(response)}"
            await self.store.clear_tokens()
        return refreshed

    def _early_expiry(self) -> None:
        tokens = self.context.current_tokens
        if (
            tokens is not None
            and tokens.expires_in is not None
            and self.context.token_expiry_time is not None
        ):
            self.context.token_expiry_time -= _refresh_margin(float(tokens.expires_in))

    def _step_of(self, request: httpx2.Request) -> str:
        path = request.url.path
        if any(marker in path for marker in _WELL_KNOWN):
            return DISCOVERY
        if request.method == "POST":
            body = request.content.decode("latin-1", errors="replace")
            if "grant_type=refresh_token" in body:
                return REFRESH
            if "grant_type=" in body:
                return TOKEN
            return REGISTRATION
        return self._steps.current

    async def async_auth_flow(
        self, request: httpx2.Request
    ) -> AsyncGenerator[httpx2.Request, httpx2.Response]:
        """Fast path with a valid token; else the SDK's flow, its failure recorded by step.

        Nothing is read from the store until the server first answers 401: most servers never
        ask, and their connections never touch the database.
        """
        if not self._initialized:
            response = yield request
            if response.status_code != 401:
                self._got_through = True
                return
            await response.aread()
        elif self.context.is_token_valid() and not self.context.lock.locked():
            self._add_auth_header(request)
            response = yield request
            if response.status_code != 401 and not _insufficient_scope(response):
                self._got_through = True
                return
            await response.aread()
        if self.failure is not None and not self._got_through:
            # The sign-in failed before any request of this connection got through (the SDK's
            # "auto" mode retries a refused ``server/discover`` with ``initialize``): never ask
            # twice, never resend a refused secret or ID token. The 401 goes to the transport;
            # a reconnect starts afresh.
            return
        self.failure = None
        flow = super().async_auth_flow(request)
        try:
            outgoing = await flow.__anext__()
            while True:
                if outgoing is request:
                    response = yield outgoing
                    if response.status_code not in (401, 403):
                        self._got_through = True
                else:
                    self._steps.current = self._step_of(outgoing)
                    response = await self._fetch(outgoing)
                outgoing = await flow.asend(response)
        except StopAsyncIteration:
            return
        except Exception as exc:  # the flow's failure, whatever raised it: recorded, then the 401
            self.failure = self._failure(exc)
            logger.info('MCP server "%s": %s', self.server, self.failure.describe(self.server))
        finally:
            await flow.aclose()
        request.headers.pop("Authorization", None)
        yield request  # the server's own answer (401) reaches the transport as a normal reply

    async def _fetch(self, request: httpx2.Request) -> httpx2.Response:
        """A request of the flow (metadata, registration, token; a redirect of one), sent here.

        Not through the connection's transport: only where the egress policy allows (the
        server's own endpoints as declared), its answer read whole within
        :data:`~mcpclient.engine.inbound.MAX_DOCUMENT_BYTES`, and with no cookie or header of
        the MCP session. A refusal raises here, inside the flow, so it is the step's failure.
        """
        async with document_client(self.declared) as http:
            response = await http.send(request)
        self._steps.answer = f"HTTP {response.status_code}{_oauth_error(response)}"
        self._steps.answered_at = self._steps.current
        if response.status_code >= 400:
            _log_answer(self.server, response)
        return response

    def _failure(self, exc: Exception) -> AuthFailure:
        step = self._steps.current
        if isinstance(exc, SignInRequired):
            message = str(exc)
            if self._steps.refresh_refused:
                message = f"the token could not be refreshed ({self._steps.refresh_refused}); {message}"
            return AuthFailure(CONSENT, message, sign_in_required=True)
        if isinstance(exc, SignInStopped | EgressRefused | AnswerRefused | httpx2.ConnectError):
            text = str(exc)
        elif isinstance(exc, OAuthFlowError | ValueError | httpx2.TransportError):
            # The SDK's messages (and pydantic's, and a broken exchange's) quote what servers sent:
            # bodies, fields of their documents. The person reads BooCode's words and the status;
            # the log keeps what raised.
            text = _in_own_words(exc, step, self._steps.answer if self._steps.answered_at == step else "")
            logger.info('MCP server "%s": sign-in stopped at %s (%s)', self.server, step, type(exc).__name__)
        else:
            text = str(exc) or type(exc).__name__
        return AuthFailure(step, text if len(text) < 400 else text[:400] + "...")


def _insufficient_scope(response: httpx2.Response) -> bool:
    return response.status_code == 403 and "insufficient_scope" in response.headers.get(
        "www-authenticate", ""
    )


def _error_fields(response: httpx2.Response) -> tuple[str, str]:
    """``error`` and ``error_description`` of an OAuth error answer (RFC 6749 §5.2); "" where absent."""
    with contextlib.suppress(Exception):
        body = json.loads(response.content or b"{}")
        error, description = body.get("error"), body.get("error_description")
        return (
            error if isinstance(error, str) else "",
            " ".join(description.split())[:200] if isinstance(description, str) else "",
        )
    return "", ""


def _oauth_error(response: httpx2.Response) -> str:
    """`` <error>`` of an OAuth error answer when it is a registered code (:data:`OAUTH_ERRORS`); else ""."""
    error, _ = _error_fields(response)
    return f" {error}" if error in OAUTH_ERRORS else ""


def _log_answer(server: str, response: httpx2.Response) -> None:
    """An error answer of the flow, for staff: where, the status, the error and its description."""
    error, description = _error_fields(response)
    logger.info(
        'MCP server "%s": %s %s answered HTTP %d %s %s',
        server,
        response.request.method,
        redact_url(str(response.request.url)),
        response.status_code,
        error[:100],
        description,
    )


# The SDK's flow errors whose text quotes what a server sent, in BooCode's words (by their start).
_SDK_FLOW_ERRORS = (
    (
        "Authorization server metadata issuer mismatch",
        "the authorization server's metadata names another issuer than the one it was fetched for",
    ),
    ("Protected resource metadata request failed", "the protected resource metadata could not be fetched"),
    ("Protected resource ", "the protected resource metadata names another resource than this server"),
    ("Authorization response iss mismatch", "the authorization response names another issuer"),
    ("Authorization response missing iss", "the authorization response has no issuer (its server sends one)"),
    ("State parameter mismatch", "the authorization response's state is not the request's"),
    ("No authorization code", "the authorization response has no code"),
)
_STEP_FAILED = {
    DISCOVERY: "the sign-in metadata could not be used",
    REGISTRATION: "the client registration failed",
    CONSENT: "the authorization failed",
    TOKEN: "the token request failed",
    REFRESH: "the token refresh failed",
}


def _in_own_words(exc: Exception, step: str, answer: str) -> str:
    """What stopped the flow at ``step``, without quoting a server (``answer``: its status, if any)."""
    said = str(exc)
    if isinstance(exc, OAuthFlowError):
        for start, words in _SDK_FLOW_ERRORS:
            if said.startswith(start):
                return words
    if isinstance(exc, httpx2.TransportError):
        return f"{_STEP_FAILED.get(step, 'the sign-in')}: {type(exc).__name__}"
    words = _STEP_FAILED.get(step, "the sign-in could not go on")
    return f"{words} ({answer})" if answer else words


# --- revocation ----------------------------------------------------------------------------


async def revoke(store: CredentialStore) -> str:
    """Revoke the stored tokens where the provider supports it (RFC 7009), then forget them.

    Returns what happened, for the person who disconnected. The credential is deleted even when
    revocation fails: disconnecting must never leave tokens behind in BooCode.
    """
    tokens = await store.get_tokens()
    client = await store.get_client_info()
    _, asm = await store.metadata()
    await store.delete()
    if tokens is None:
        return "nothing was stored"
    if asm is None or asm.revocation_endpoint is None or client is None:
        return "tokens deleted; the provider offers no revocation, revoke access in its settings if needed"
    data: dict[str, str] = {"client_id": client.client_id}
    headers = {"Content-Type": "application/x-www-form-urlencoded"}
    if client.client_secret and client.token_endpoint_auth_method == "client_secret_basic":
        pair = f"{client.client_id}:{client.client_secret}".encode()
        headers["Authorization"] = "Basic " + base64.b64encode(pair).decode()
        data.pop("client_id")
    elif client.client_secret:
        data["client_secret"] = client.client_secret
    failures = []
    async with document_client(egress.declared(store.url)) as http:
        for hint, token in (("refresh_token", tokens.refresh_token), ("access_token", tokens.access_token)):
            if not token:
                continue
            try:
                response = await http.post(
                    str(asm.revocation_endpoint),
                    data={**data, "token": token, "token_type_hint": hint},
                    headers=headers,
                )
            except httpx2.HTTPError as exc:
                failures.append(f"{hint}: {type(exc).__name__}")
                continue
            if response.status_code != 200:
                failures.append(f"{hint}: HTTP {response.status_code}")
    if failures:
        return "tokens deleted; revocation failed (" + ", ".join(failures) + ")"
    return "tokens revoked and deleted"

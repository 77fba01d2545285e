"""The httpx auth glue: :class:`HubOAuth`, the SDK's OAuth provider with BooCode's storage, consent,
early refresh, machine grants (``client_credentials``, SEP-990 identity assertion), egress-checked
flow requests and failures recorded by step. One per connection, built in its owner task."""

from __future__ import annotations

import logging
import random
from collections.abc import AsyncGenerator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import cast

import httpx2
from mcp.client.auth import OAuthClientProvider, OAuthFlowError
from mcp.client.auth.extensions.client_credentials import SignedJWTParameters
from mcp.client.auth.utils import issuers_match, union_scopes
from mcp.shared.auth import (
    JWT_BEARER_GRANT_TYPE,
    AuthorizationCodeResult,
    OAuthClientMetadata,
    TokenEndpointAuthMethod,
)

from mcpclient.config.model import (
    AUTHORIZATION_CODE,
    CLIENT_CREDENTIALS,
    PRIVATE_KEY_JWT,
    OAuthConfig,
    OAuthSecrets,
)
from mcpclient.core import egress
from mcpclient.core.redaction import install_oauth_log_filter
from mcpclient.engine.authorization.consent import Consent
from mcpclient.engine.authorization.failures import (
    CONSENT,
    DISCOVERY,
    REFRESH,
    REGISTRATION,
    TOKEN,
    AuthFailure,
    SignInRequired,
    SignInStopped,
    in_own_words,
    log_answer,
    oauth_error,
)
from mcpclient.engine.authorization.registration import client_metadata, client_metadata_url, grant_types
from mcpclient.engine.authorization.storage import CredentialStore
from mcpclient.engine.egress import EgressRefused
from mcpclient.engine.inbound import AnswerRefused, document_client

logger = logging.getLogger(__name__)
# The SDK logs a failed flow with its exception, whose text can quote a registration's secret or a
# token answer: its records are redacted wherever this flow runs, whatever the logging config.
install_oauth_log_filter()

# Tokens are treated as expired this long before their real expiry (at most a tenth of their
# lifetime), minus up to REFRESH_JITTER seconds, so refreshes start early and spread out.
REFRESH_MARGIN = 60.0
REFRESH_JITTER = 15.0
_WELL_KNOWN = (
    "/.well-known/oauth-protected-resource",
    "/.well-known/oauth-authorization-server",
    "/.well-known/openid-configuration",
)


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
                grant_types=grant_types(oauth),
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
            log_answer(self.server, response)
            raise SignInStopped(
                f"{where} refused the token exchange: HTTP {response.status_code}{oauth_error(response)}"
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
            self._steps.refresh_refused = f"HTTP {response.status_code}{oauth_error(response)}"
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
        self._steps.answer = f"HTTP {response.status_code}{oauth_error(response)}"
        self._steps.answered_at = self._steps.current
        if response.status_code >= 400:
            log_answer(self.server, response)
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
            text = in_own_words(exc, step, self._steps.answer if self._steps.answered_at == step else "")
            logger.info('MCP server "%s": sign-in stopped at %s (%s)', self.server, step, type(exc).__name__)
        else:
            text = str(exc) or type(exc).__name__
        return AuthFailure(step, text if len(text) < 400 else text[:400] + "...")


def _insufficient_scope(response: httpx2.Response) -> bool:
    return response.status_code == 403 and "insufficient_scope" in response.headers.get(
        "www-authenticate", ""
    )

"""OAuth 2.1 sign-in for Streamable HTTP and SSE servers: the SDK's flow plus what a multi-user host needs.

The package face: it re-exports what the rest of the project uses. The modules, one job each:
:mod:`.failures` (steps, exceptions, error answers in BooCode's words), :mod:`.registration` (who
BooCode is to an authorization server: redirect URI, client metadata, a pre-registered client),
:mod:`.storage` (credentials in the secret store), :mod:`.consent` (who answers the redirect and
the callback), :mod:`.provider` (the httpx auth glue, :class:`HubOAuth`), :mod:`.revocation`
(disconnecting).

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

from mcpclient.engine.authorization.consent import (
    PENDING,
    BrowserConsent,
    Consent,
    HeadlessConsent,
    NoConsent,
    UnknownConsent,
    complete,
)
from mcpclient.engine.authorization.failures import (
    CONSENT,
    DISCOVERY,
    OAUTH_ERRORS,
    REFRESH,
    REGISTRATION,
    TOKEN,
    AuthFailure,
    ConsentFailed,
    SignInRequired,
    SignInStopped,
)
from mcpclient.engine.authorization.provider import REFRESH_JITTER, REFRESH_MARGIN, HubOAuth
from mcpclient.engine.authorization.registration import (
    CALLBACK_PATH,
    CLIENT_METADATA_PATH,
    client_metadata,
    client_metadata_document,
    client_metadata_url,
    preregistered_client,
    public_url,
    redirect_uri,
)
from mcpclient.engine.authorization.revocation import revoke
from mcpclient.engine.authorization.storage import (
    SECRET_KIND,
    CredentialStore,
    credential_name,
    signed_in_servers,
)

__all__ = [
    "CALLBACK_PATH",
    "CLIENT_METADATA_PATH",
    "CONSENT",
    "DISCOVERY",
    "OAUTH_ERRORS",
    "PENDING",
    "REFRESH",
    "REFRESH_JITTER",
    "REFRESH_MARGIN",
    "REGISTRATION",
    "SECRET_KIND",
    "TOKEN",
    "AuthFailure",
    "BrowserConsent",
    "Consent",
    "ConsentFailed",
    "CredentialStore",
    "HeadlessConsent",
    "HubOAuth",
    "NoConsent",
    "SignInRequired",
    "SignInStopped",
    "UnknownConsent",
    "client_metadata",
    "client_metadata_document",
    "client_metadata_url",
    "complete",
    "credential_name",
    "preregistered_client",
    "public_url",
    "redirect_uri",
    "revoke",
    "signed_in_servers",
]

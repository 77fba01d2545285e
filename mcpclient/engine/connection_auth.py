"""The OAuth provider of one connection: who signs in, whose credential it is, and where the
person's ID token comes from for a "perUser" identity assertion (:mod:`mcpclient.engine.authorization`).

Built by the connection's owner task, one per transport (a reconnect builds a new one).
"""

from __future__ import annotations

from collections.abc import Callable

from channels.db import database_sync_to_async

from mcpclient.config.model import IDENTITY_ASSERTION, ResolvedServer, ServerConfig
from mcpclient.engine.authorization.consent import Consent, NoConsent
from mcpclient.engine.authorization.provider import HubOAuth
from mcpclient.engine.authorization.registration import preregistered_client
from mcpclient.engine.authorization.storage import CredentialStore


def connection_auth(
    config: ServerConfig,
    resolved: ResolvedServer,
    *,
    owner_id: int | None,
    consent: Consent | None,
    person_id_token: Callable[[int], str | None] | None,
) -> HubOAuth | None:
    """The OAuth provider of a connection to ``config`` (None when the entry signs in by itself).

    ``owner_id``: whose session it is; ``consent``: who can sign in now (None: nobody, the server
    waits for Connect); ``person_id_token``: a person's ID token by id (reads the database).
    """
    oauth = config.oauth
    if oauth is None:
        return None
    name = config.name
    credential_owner = owner_id if oauth.per_user else None
    store = CredentialStore(
        name,
        credential_owner,
        resolved.url or "",
        preregistered_client(oauth, resolved.oauth_secrets.client_secret),
        own=config.owner_id is not None,
    )
    consent = consent or NoConsent(
        "connect your account from the chat (Connect beside the server's name)"
        if oauth.per_user
        else "an administrator must connect it (Connect on the server's admin page)"
    )
    subject_token = None
    owner, lookup = owner_id, person_id_token
    if oauth.per_user and oauth.grant == IDENTITY_ASSERTION and owner is not None and lookup is not None:

        async def subject_token() -> str | None:
            assert owner is not None and lookup is not None
            return await database_sync_to_async(lookup)(owner)  # the person's ID token (SEP-990)

    return HubOAuth(
        server=name,
        url=resolved.url or "",
        store=store,
        consent=consent,
        oauth=oauth,
        secrets=resolved.oauth_secrets,
        subject_token=subject_token,
        declared=config.owner_id is None,  # a person's own server: its host is checked too
    )

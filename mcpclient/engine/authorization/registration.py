"""Who BooCode is to an authorization server: its redirect URI, the client metadata it registers
(dynamic registration) or serves (Client ID Metadata Document), and an entry's pre-registered client."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from mcp.client.auth.utils import is_valid_client_metadata_url
from mcp.shared.auth import (
    JWT_BEARER_GRANT_TYPE,
    OAuthClientInformationFull,
    OAuthClientMetadata,
)

from mcpclient.config.model import (
    AUTHORIZATION_CODE,
    CLIENT_CREDENTIALS,
    IDENTITY_ASSERTION,
    OAuthConfig,
)

CALLBACK_PATH = "/oauth/callback/"
CLIENT_METADATA_PATH = "/oauth/client-metadata.json"


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


def grant_types(oauth: OAuthConfig) -> list[str]:
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
        grant_types=grant_types(oauth),
    )

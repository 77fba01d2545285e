"""Why a sign-in stopped, in BooCode's words: the flow's steps, its exceptions, and the OAuth error
answers read without quoting a server (only registered error codes reach a person; the rest is logged)."""

from __future__ import annotations

import contextlib
import json
import logging
from dataclasses import dataclass

import httpx2
from mcp.client.auth import OAuthFlowError

from mcpclient.core.redaction import redact_url

logger = logging.getLogger(__name__)


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


def oauth_error(response: httpx2.Response) -> str:
    """`` <error>`` of an OAuth error answer when it is a registered code (:data:`OAUTH_ERRORS`); else ""."""
    error, _ = _error_fields(response)
    return f" {error}" if error in OAUTH_ERRORS else ""


def log_answer(server: str, response: httpx2.Response) -> None:
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


def in_own_words(exc: Exception, step: str, answer: str) -> str:
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

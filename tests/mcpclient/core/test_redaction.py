"""The SDK's OAuth log lines pass through :class:`mcpclient.core.redaction.OAuthLogFilter`: the
shapes a flow's messages quote secrets in (the flow itself, against a real server:
tests/oauth/test_hub_oauth.py)."""

from __future__ import annotations

import logging

import pytest

from mcpclient.core.redaction import MASK, SDK_OAUTH_LOGGERS, OAuthLogFilter, redact_oauth_text
from mcpclient.engine import authorization  # noqa: F401  (installs the filter)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            'Registration failed: 202 {"client_id":"c","client_secret":"s3","client_secret_expires_at":0}',
            'Registration failed: 202 {"client_id":"c","client_secret":"MASK","client_secret_expires_at":0}',
        ),
        (
            "input_value={'client_secret': 'abc', 'scope': 'read'}",
            f"input_value={{'client_secret': '{MASK}', 'scope': 'read'}}",
        ),
        (
            "grant_type=authorization_code&code=XYZ&code_verifier=VVV&client_id=app",
            "grant_type=authorization_code&code=MASK&code_verifier=MASK&client_id=app",
        ),
        (
            'Token exchange failed: {"access_token": "a\\"b", "refresh_token": "r", "token_type": "x"}',
            'Token exchange failed: {"access_token": "MASK", "refresh_token": "MASK", "token_type": "x"}',
        ),
        ("status_code=400, error_code: 5", "status_code=400, error_code: 5"),
    ],
)
def test_secret_fields_are_masked_and_the_rest_kept(text: str, expected: str) -> None:
    assert redact_oauth_text(text) == expected.replace("MASK", MASK)


def test_the_filter_masks_the_message_and_the_traceback(caplog: pytest.LogCaptureFixture) -> None:
    assert all(
        any(isinstance(item, OAuthLogFilter) for item in logging.getLogger(name).filters)
        for name in SDK_OAUTH_LOGGERS
    )
    sdk = logging.getLogger("mcp.client.auth.oauth2")
    caplog.set_level(logging.ERROR, logger=sdk.name)
    try:
        raise ValueError('Registration failed: 202 {"client_secret":"top-secret"}')
    except ValueError:
        sdk.exception("OAuth flow error for %s", "code=abc")
    assert "top-secret" not in caplog.text and "abc" not in caplog.text
    assert f'"client_secret":"{MASK}"' in caplog.text and f"OAuth flow error for code={MASK}" in caplog.text

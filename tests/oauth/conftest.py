"""Fixtures for OAuth tests: a real authorization server + protected MCP server on 127.0.0.1.

``oauth_server(*flags)`` starts ``tests/servers/oauth_server.py`` (flags as on its command
line, e.g. ``oauth_server("--required-scope", "read")``) and stops it after the test; the
server and the headless client's parts are in tests/support/oauth.py.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from cryptography.fernet import Fernet

from tests.support.oauth import OAuthServer


@pytest.fixture
def oauth_server() -> Iterator[Callable[..., OAuthServer]]:
    """Factory: ``oauth_server(*flags) -> OAuthServer``; every server started is stopped at teardown."""
    started: list[OAuthServer] = []

    def start(*flags: str) -> OAuthServer:
        started.append(OAuthServer.start(*flags))
        return started[-1]

    yield start
    for server in started:
        server.stop()


@pytest.fixture
def keys(settings: Any, tmp_path: Path) -> Any:
    """Settings for a sign-in: a secret key of the test's own (credentials are stored encrypted),
    this site's public URL, no client metadata URL."""
    settings.SECRETS_KEYS = [Fernet.generate_key().decode()]
    settings.SECRETS_KEY_FILE = tmp_path / "secrets.key"
    settings.PUBLIC_URL = "http://127.0.0.1:8000"
    settings.CLIENT_METADATA_URL = ""
    return settings

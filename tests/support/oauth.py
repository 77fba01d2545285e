"""A real OAuth authorization server with a protected MCP server, and a headless client's parts.

:class:`OAuthServer` runs ``tests/servers/oauth_server.py`` on 127.0.0.1 and reads or steers it
through its control API. The helpers play the parts a headless OAuth client needs:
:class:`AutoConsent` is the user's browser (it follows the authorization URL to the server's
immediate 302 and hands the code to the client), :class:`MemoryTokenStorage` keeps what the
SDK's ``OAuthClientProvider`` stores.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx2
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientInformationFull, OAuthToken

from tests.support.processes import PYTHON, ROOT, HttpServer, free_port

OAUTH_SERVER = ROOT / "tests" / "servers" / "oauth_server.py"


@dataclass
class OAuthServer:
    """A running ``oauth_server.py``: where things are, and its control API."""

    process: HttpServer
    base: str  # http://127.0.0.1:PORT
    url: str  # the MCP endpoint, base + "/mcp"
    issuer: str  # base + "/auth"

    @classmethod
    def start(cls, *flags: str) -> OAuthServer:
        """Start ``oauth_server.py`` on a free port (``flags`` as on its command line); stop() it."""
        port = free_port()
        process = HttpServer([PYTHON, str(OAUTH_SERVER), "--port", str(port), *flags], port, "/mcp")
        base = f"http://127.0.0.1:{port}"
        return cls(process=process, base=base, url=process.url, issuer=f"{base}/auth")

    def stop(self) -> None:
        self.process.stop()

    @property
    def token_endpoint(self) -> str:
        return f"{self.issuer}/token"

    def state(self) -> dict[str, Any]:
        """``GET /_control/state``: clients, authorization/token/revocation requests, counts."""
        response = httpx2.get(f"{self.base}/_control/state", timeout=5.0)
        response.raise_for_status()
        return response.json()

    def control(self, path: str, payload: dict[str, Any] | None = None) -> dict[str, Any]:
        """``POST /_control/<path>`` (``revoke-all``, ``expire-access``, ``next-user``)."""
        response = httpx2.post(f"{self.base}/_control/{path.lstrip('/')}", json=payload or {}, timeout=5.0)
        response.raise_for_status()
        return response.json()


class AuthorizationDenied(Exception):
    """The authorization endpoint answered with an error instead of a code."""


class AutoConsent:
    """The user's browser for a headless client: ``redirect_handler`` and ``callback_handler``.

    The test server consents at once, so opening the authorization URL gives a 302 to the
    redirect URI; the code, state and ``iss`` are read from its Location.
    """

    def __init__(self) -> None:
        self.authorization_urls: list[str] = []
        self._result: AuthorizationCodeResult | None = None

    async def redirect_handler(self, authorization_url: str) -> None:
        self.authorization_urls.append(authorization_url)
        async with httpx2.AsyncClient(timeout=10.0) as http:
            response = await http.get(authorization_url)
        if response.status_code != 302:
            raise AuthorizationDenied(
                f"authorization endpoint answered {response.status_code}: {response.text}"
            )
        query = {
            key: values[0] for key, values in parse_qs(urlsplit(response.headers["location"]).query).items()
        }
        if "error" in query:
            raise AuthorizationDenied(f"{query['error']}: {query.get('error_description')}")
        self._result = AuthorizationCodeResult(
            code=query["code"], state=query.get("state"), iss=query.get("iss")
        )

    async def callback_handler(self) -> AuthorizationCodeResult:
        result, self._result = self._result, None
        if result is None:
            raise AuthorizationDenied("no authorization response arrived")
        return result


class MemoryTokenStorage:
    """``TokenStorage`` in memory; tests read ``tokens`` and ``client_info`` directly."""

    def __init__(
        self, tokens: OAuthToken | None = None, client_info: OAuthClientInformationFull | None = None
    ) -> None:
        self.tokens = tokens
        self.client_info = client_info

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client_info

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client_info = client_info


def json_of(response: httpx2.Response) -> dict[str, Any]:
    """A response body as a dict (an empty one when it is not JSON)."""
    try:
        body = response.json()
    except json.JSONDecodeError:
        return {}
    return body if isinstance(body, dict) else {}

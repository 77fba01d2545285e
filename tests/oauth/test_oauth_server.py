"""Self-tests of tests/servers/oauth_server.py, driven by the SDK's own OAuth client.

The ``mcp`` SDK's ``OAuthClientProvider`` (httpx2) and ``Client`` run the whole standard flow
against the server: Protected Resource Metadata, RFC 8414 path-inserted metadata, DCR, PKCE,
RFC 8707 resource, RFC 9207 ``iss``, refresh, step-up. Where the SDK client has no API for a
step (replaying a refresh token, revoking, sending a wrong verifier) the test speaks HTTP to
the endpoints itself.
"""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import httpx2
import pytest
from mcp import Client
from mcp.client.auth import OAuthClientProvider, OAuthFlowError, OAuthRegistrationError
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.auth import OAuthClientInformationFull, OAuthClientMetadata
from pydantic import AnyUrl

from tests.support.oauth import AutoConsent, MemoryTokenStorage, OAuthServer, json_of
from tests.support.processes import free_port

pytestmark = pytest.mark.processes

REDIRECT_URI = "http://127.0.0.1:3030/callback"
Start = Callable[..., OAuthServer]


def client_metadata(method: str | None = None) -> OAuthClientMetadata:
    return OAuthClientMetadata(
        client_name="oauth self-test",
        redirect_uris=[AnyUrl(REDIRECT_URI)],
        token_endpoint_auth_method=method,  # type: ignore[arg-type]
    )


def oauth_provider(
    server: OAuthServer, storage: MemoryTokenStorage | None = None, method: str | None = None
) -> OAuthClientProvider:
    consent = AutoConsent()
    return OAuthClientProvider(
        server.url,
        client_metadata(method),
        storage or MemoryTokenStorage(),
        redirect_handler=consent.redirect_handler,
        callback_handler=consent.callback_handler,
    )


@asynccontextmanager
async def connected(server: OAuthServer, provider: OAuthClientProvider) -> AsyncIterator[Client]:
    """An SDK ``Client`` on the server's MCP endpoint, authenticating with ``provider``."""
    async with create_mcp_http_client(auth=provider) as http:
        async with Client(streamable_http_client(server.url, http_client=http), cache=None) as client:
            yield client


async def whoami(client: Client) -> dict[str, Any]:
    result = await client.call_tool("whoami", {})
    assert not result.is_error, result.content
    assert result.structured_content is not None
    return result.structured_content


def storage_of(provider: OAuthClientProvider) -> MemoryTokenStorage:
    storage = provider.context.storage
    assert isinstance(storage, MemoryTokenStorage)
    return storage


def token_auth(client: OAuthClientInformationFull) -> tuple[dict[str, str], dict[str, str]]:
    """Form fields and headers authenticating ``client`` the way it registered."""
    if client.token_endpoint_auth_method == "client_secret_basic":
        assert client.client_secret
        basic = base64.b64encode(f"{client.client_id}:{client.client_secret}".encode()).decode()
        return {}, {"Authorization": f"Basic {basic}"}
    if client.token_endpoint_auth_method == "client_secret_post":
        assert client.client_secret
        return {"client_id": client.client_id, "client_secret": client.client_secret}, {}
    return {"client_id": client.client_id}, {}


async def post_form(url: str, form: dict[str, str], headers: dict[str, str] | None = None) -> httpx2.Response:
    async with httpx2.AsyncClient(timeout=5.0) as http:
        return await http.post(url, data=form, headers=headers or {})


async def call_tool_raw(server: OAuthServer, access_token: str, tool: str) -> httpx2.Response:
    """A bare 2026-07-28 ``tools/call`` POST, to look at the HTTP status and challenge."""
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    params = {"name": tool, "arguments": {}, "_meta": meta}
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}
    headers = {
        "Authorization": f"Bearer {access_token}",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2026-07-28",
        "Mcp-Method": "tools/call",
        "Mcp-Name": tool,
    }
    async with httpx2.AsyncClient(timeout=5.0) as http:
        return await http.post(server.url, json=body, headers=headers)


def challenge_params(response: httpx2.Response) -> dict[str, str]:
    header = response.headers["www-authenticate"]
    assert header.startswith("Bearer ")
    params = {}
    for part in header[len("Bearer ") :].split(", "):
        key, _, value = part.partition("=")
        params[key] = value.strip('"')
    return params


# -- the standard flow


@pytest.mark.parametrize(
    ("flags", "version"), [((), "2026-07-28"), (("--handshake-only",), "2025-11-25")], ids=["2026", "2025"]
)
async def test_dcr_pkce_token_and_whoami(oauth_server: Start, flags: tuple[str, ...], version: str) -> None:
    server = oauth_server(*flags)
    provider = oauth_provider(server)

    async with connected(server, provider) as client:
        assert client.protocol_version == version
        identity = await whoami(client)
        echoed = await client.call_tool("echo", {"text": "héllo"})

    assert echoed.structured_content == {"result": "héllo"}
    storage = storage_of(provider)
    assert storage.client_info is not None and storage.tokens is not None
    assert identity == {
        "user": "alice",
        "client_id": storage.client_info.client_id,
        "scopes": ["read", "write", "admin", "offline_access"],
    }
    state = server.state()
    assert [(c["registered_via"], c["token_endpoint_auth_method"]) for c in state["clients"]] == [
        ("dcr", "client_secret_post")
    ]
    [authorization] = state["authorization_requests"]
    assert authorization["code_challenge_method"] == "S256"
    assert authorization["resource"] == server.url
    assert authorization["outcome"] == "code"
    [exchange] = state["token_requests"]
    assert (exchange["grant_type"], exchange["client_auth_method"], exchange["status"]) == (
        "authorization_code",
        "client_secret_post",
        200,
    )
    assert exchange["resource"] == server.url
    assert state["mcp_requests"][0]["status"] == 401  # the first request found out about OAuth
    assert [entry for entry in state["mcp_requests"][1:] if entry["status"] in (401, 403)] == []
    assert json.dumps(state).find(storage.tokens.access_token) == -1  # never exposed


async def test_the_consenting_user_is_chosen_through_the_control_api(oauth_server: Start) -> None:
    server = oauth_server()
    assert server.control("next-user", {"user": "bob"}) == {"user": "bob"}

    async with connected(server, oauth_provider(server)) as client:
        assert (await whoami(client))["user"] == "bob"
    assert server.state()["authorization_requests"][0]["user"] == "bob"


# -- refresh tokens


async def test_refresh_tokens_rotate_and_a_replay_revokes_the_grant(oauth_server: Start) -> None:
    server = oauth_server()
    provider = oauth_provider(server)
    async with connected(server, provider) as client:
        await whoami(client)
        first = storage_of(provider).tokens
        assert first is not None and first.refresh_token
        # The client's clock says the access token is stale: it refreshes before the next call.
        provider.context.token_expiry_time = 1.0
        assert (await whoami(client))["user"] == "alice"
        second = storage_of(provider).tokens
    assert second is not None and second.refresh_token
    assert second.refresh_token != first.refresh_token
    assert second.access_token != first.access_token
    assert server.state()["counts"]["refreshes"] == 1

    client_info = storage_of(provider).client_info
    assert client_info is not None
    fields, headers = token_auth(client_info)
    replay = await post_form(
        server.token_endpoint,
        {"grant_type": "refresh_token", "refresh_token": first.refresh_token, **fields},
        headers,
    )
    assert replay.status_code == 400 and json_of(replay)["error"] == "invalid_grant"

    # The replay revoked the whole grant: the newest refresh and access tokens are dead too.
    current = await post_form(
        server.token_endpoint,
        {"grant_type": "refresh_token", "refresh_token": second.refresh_token, **fields},
        headers,
    )
    assert current.status_code == 400 and json_of(current)["error"] == "invalid_grant"
    assert (await call_tool_raw(server, second.access_token, "whoami")).status_code == 401
    assert [r["via"] for r in server.state()["revocations"]] == ["refresh token replayed"]


# -- revocation and expiry


async def test_revocation_endpoint_kills_the_grant(oauth_server: Start) -> None:
    server = oauth_server()
    provider = oauth_provider(server, method="none")
    async with connected(server, provider) as client:
        await whoami(client)
    storage = storage_of(provider)
    assert storage.tokens is not None and storage.tokens.refresh_token and storage.client_info is not None
    assert (await call_tool_raw(server, storage.tokens.access_token, "whoami")).status_code == 200

    revoked = await post_form(
        f"{server.issuer}/revoke",
        {"token": storage.tokens.access_token, "client_id": storage.client_info.client_id},
    )

    assert revoked.status_code == 200
    assert (await call_tool_raw(server, storage.tokens.access_token, "whoami")).status_code == 401
    refresh = await post_form(
        server.token_endpoint,
        {
            "grant_type": "refresh_token",
            "refresh_token": storage.tokens.refresh_token,
            "client_id": storage.client_info.client_id,
        },
    )
    assert json_of(refresh)["error"] == "invalid_grant"
    state = server.state()
    assert [r["via"] for r in state["revocations"]] == ["revocation endpoint"]
    assert state["revocation_requests"][0]["client_auth_method"] == "none"


async def test_a_dead_token_mid_session_gets_401_and_the_client_reauthorizes(oauth_server: Start) -> None:
    server = oauth_server("--handshake-only")  # a 2025-11-25 session outlives its tokens
    provider = oauth_provider(server)
    async with connected(server, provider) as client:
        await whoami(client)
        assert server.control("revoke-all") == {"revoked_grants": 1}  # the user revokes at the provider
        assert (await whoami(client))["user"] == "alice"
        assert server.control("expire-access") == {"expired_access_tokens": 1}  # expiry mid-conversation
        assert (await whoami(client))["user"] == "alice"

    state = server.state()
    assert state["counts"]["mcp_401"] == 3  # the first contact and each dead token
    assert state["counts"]["codes_exchanged"] == 3
    assert len(state["clients"]) == 1  # re-authorized, not re-registered
    assert [r["via"] for r in state["revocations"]] == ["control: revoke-all"]


# -- scopes


async def test_challenges_name_metadata_and_scope_and_the_client_steps_up_on_403(oauth_server: Start) -> None:
    server = oauth_server("--required-scope", "read")
    async with httpx2.AsyncClient(timeout=5.0) as http:
        anonymous = await http.post(server.url, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
        bogus = await http.post(server.url, json={}, headers={"Authorization": "Bearer not-a-token"})
        prm = (await http.get(challenge_params(anonymous)["resource_metadata"])).json()
        asm = (await http.get(f"{server.base}/.well-known/oauth-authorization-server/auth")).json()
    assert anonymous.status_code == 401
    assert challenge_params(anonymous) == {  # no error code without credentials (RFC 6750 §3.1)
        "resource_metadata": f"{server.base}/.well-known/oauth-protected-resource/mcp",
        "scope": "read",
    }
    assert bogus.status_code == 401 and challenge_params(bogus)["error"] == "invalid_token"
    assert prm["resource"] == server.url and prm["authorization_servers"] == [server.issuer]
    assert asm["issuer"] == server.issuer
    assert "offline_access" in asm["scopes_supported"]
    assert asm["client_id_metadata_document_supported"] is True
    assert asm["authorization_response_iss_parameter_supported"] is True
    assert set(asm["token_endpoint_auth_methods_supported"]) == {
        "client_secret_basic",
        "client_secret_post",
        "none",
    }

    provider = oauth_provider(server)
    async with connected(server, provider) as client:
        assert (await whoami(client))["scopes"] == ["read", "offline_access"]
        token = storage_of(provider).tokens
        assert token is not None
        denied = await call_tool_raw(server, token.access_token, "admin_report")

        report = await client.call_tool("admin_report", {})

        assert not report.is_error
        assert report.structured_content == {"result": "admin report for alice: all systems nominal"}
        assert "admin" in (await whoami(client))["scopes"]

    assert denied.status_code == 403
    assert challenge_params(denied) == {
        "error": "insufficient_scope",
        "error_description": "Requires scope admin",
        "resource_metadata": f"{server.base}/.well-known/oauth-protected-resource/mcp",
        "scope": "read admin",
    }
    state = server.state()
    assert [a["scope"] for a in state["authorization_requests"]] == [
        "read offline_access",
        "read offline_access admin",
    ]
    assert state["counts"]["mcp_403"] == 2  # ours and the client's


# -- pre-registered clients

PRE_REGISTERED = {"basic-app": "client_secret_basic", "post-app": "client_secret_post", "public-app": "none"}


async def test_pre_registered_clients_with_each_token_auth_method(oauth_server: Start) -> None:
    flags = ["--no-registration"]
    for client_id, method in PRE_REGISTERED.items():
        flags += ["--pre-registered", f"{client_id}:{'' if method == 'none' else 's3cret'}:{method}"]
    server = oauth_server(*flags)

    for client_id, method in PRE_REGISTERED.items():
        registered = OAuthClientInformationFull(
            client_id=client_id,
            client_secret=None if method == "none" else "s3cret",
            token_endpoint_auth_method=method,
            redirect_uris=[AnyUrl(REDIRECT_URI)],
        )
        provider = oauth_provider(server, MemoryTokenStorage(client_info=registered), method=method)
        async with connected(server, provider) as client:
            assert (await whoami(client))["client_id"] == client_id

    state = server.state()
    assert {c["client_id"]: c["registered_via"] for c in state["clients"]} == dict.fromkeys(
        PRE_REGISTERED, "pre"
    )
    assert [(t["client_id"], t["client_auth_method"]) for t in state["token_requests"]] == list(
        PRE_REGISTERED.items()
    )


async def test_a_pre_registration_only_server_refuses_strangers(oauth_server: Start) -> None:
    server = oauth_server("--no-registration", "--pre-registered", "app:s3cret")
    asm = httpx2.get(f"{server.base}/.well-known/oauth-authorization-server/auth").json()
    assert "registration_endpoint" not in asm

    with pytest.raises(ExceptionGroup) as failure:
        async with connected(server, oauth_provider(server)):
            pass
    assert failure.group_contains(OAuthRegistrationError, match="Registration failed: 404")

    wrong_secret = base64.b64encode(b"app:nope").decode()
    answer = await post_form(
        server.token_endpoint,
        {"grant_type": "refresh_token", "refresh_token": "x"},  # Basic alone names the client
        {"Authorization": f"Basic {wrong_secret}"},
    )
    assert answer.status_code == 401 and json_of(answer)["error"] == "invalid_client"
    state = server.state()
    assert [c["client_id"] for c in state["clients"]] == ["app"]
    assert [(t["client_auth_method"], t["status"]) for t in state["token_requests"]] == [
        ("client_secret_basic", 401)
    ]


# -- Client ID Metadata Documents


class _DocumentHandler(BaseHTTPRequestHandler):
    documents: dict[str, dict[str, Any]] = {}

    def do_GET(self) -> None:
        document = self.documents.get(self.path)
        body = json.dumps(document).encode()
        self.send_response(200 if document is not None else 404)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def metadata_documents() -> Iterator[str]:
    """A real HTTP server on 127.0.0.1 publishing client metadata documents; yields its base URL.

    ``/client.json`` is a good document; ``/liar.json`` names another client_id.
    """
    base = f"http://127.0.0.1:{free_port()}"
    handler = type("Handler", (_DocumentHandler,), {})
    handler.documents = {
        "/client.json": {
            "client_id": f"{base}/client.json",
            "client_name": "BooCode (CIMD)",
            "redirect_uris": [REDIRECT_URI],
            "grant_types": ["authorization_code", "refresh_token"],
            "token_endpoint_auth_method": "none",
        },
        "/liar.json": {"client_id": "https://elsewhere.example/client.json", "redirect_uris": [REDIRECT_URI]},
    }
    httpd = ThreadingHTTPServer(("127.0.0.1", int(base.rsplit(":", 1)[1])), handler)
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield base
    httpd.shutdown()
    httpd.server_close()
    thread.join()


def cimd_provider(server: OAuthServer, document_url: str) -> OAuthClientProvider:
    # The SDK client refuses a non-https client_metadata_url in its constructor; our product's URL
    # is http://127.0.0.1:PORT/..., so the test sets it after construction (the flow accepts it).
    with pytest.raises(ValueError, match="HTTPS"):
        OAuthClientProvider(
            server.url, client_metadata(), MemoryTokenStorage(), client_metadata_url=document_url
        )
    provider = oauth_provider(server)
    provider.context.client_metadata_url = document_url
    return provider


async def test_a_client_id_metadata_document_replaces_registration(
    oauth_server: Start, metadata_documents: str
) -> None:
    server = oauth_server()
    document_url = f"{metadata_documents}/client.json"
    provider = cimd_provider(server, document_url)

    async with connected(server, provider) as client:
        assert (await whoami(client))["client_id"] == document_url

    state = server.state()
    assert [(c["client_id"], c["registered_via"], c["client_name"]) for c in state["clients"]] == [
        (document_url, "cimd", "BooCode (CIMD)")
    ]
    assert state["counts"]["registrations"] == 0
    assert [f["ok"] for f in state["cimd_fetches"]] == [True]
    assert state["token_requests"][0]["client_auth_method"] == "none"


async def test_cimd_refuses_a_lying_document_and_no_cimd_falls_back_to_registration(
    oauth_server: Start, metadata_documents: str
) -> None:
    server = oauth_server()
    liar = f"{metadata_documents}/liar.json"
    query = urlencode(
        {"response_type": "code", "client_id": liar, "redirect_uri": REDIRECT_URI, "code_challenge": "x" * 43}
    )
    async with httpx2.AsyncClient(timeout=5.0) as http:
        refused = await http.get(f"{server.issuer}/authorize?{query}")
    assert refused.status_code == 400
    assert "is not the document's URL" in server.state()["cimd_fetches"][0]["problem"]

    plain = oauth_server("--no-cimd")
    provider = cimd_provider(plain, f"{metadata_documents}/client.json")
    async with connected(plain, provider) as client:
        await whoami(client)
    assert [c["registered_via"] for c in plain.state()["clients"]] == ["dcr"]


# -- the authorization server's own checks, by hand


def pkce_pair() -> tuple[str, str]:
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).decode().rstrip("=")
    return verifier, challenge


async def test_pkce_resource_scope_iss_and_code_replay_by_hand(oauth_server: Start) -> None:
    server = oauth_server("--token-lifetime", "120", "--scopes", "read admin")
    async with httpx2.AsyncClient(timeout=5.0) as http:
        registration = await http.post(
            f"{server.issuer}/register",
            json={"redirect_uris": [REDIRECT_URI], "token_endpoint_auth_method": "client_secret_basic"},
        )
        assert registration.status_code == 201
        client = OAuthClientInformationFull.model_validate(registration.json())
        fields, headers = token_auth(client)  # Basic, and no client_id in the form (RFC 6749 §2.3.1)
        verifier, challenge = pkce_pair()

        async def authorize(**extra: str) -> dict[str, str]:
            params = {
                "response_type": "code",
                "client_id": client.client_id,
                "redirect_uri": REDIRECT_URI,
                "code_challenge": challenge,
                "code_challenge_method": "S256",
                "state": "st4te",
                "scope": "read",
                **extra,
            }
            answer = await http.get(f"{server.issuer}/authorize", params=params)
            assert answer.status_code == 302
            location = urlsplit(answer.headers["location"])
            assert f"{location.scheme}://{location.netloc}{location.path}" == REDIRECT_URI
            return {key: values[0] for key, values in parse_qs(location.query).items()}

        async def exchange(code: str, code_verifier: str, resource: str | None) -> httpx2.Response:
            form = {"grant_type": "authorization_code", "code": code, "redirect_uri": REDIRECT_URI}
            form |= {"code_verifier": code_verifier, **fields} | ({"resource": resource} if resource else {})
            return await http.post(server.token_endpoint, data=form, headers=headers)

        wrong_place = await authorize(resource=f"{server.base}/elsewhere")
        assert (wrong_place["error"], wrong_place["iss"], wrong_place["state"]) == (
            "invalid_target",
            server.issuer,
            "st4te",
        )

        unknown_scope = await authorize(resource=server.url, scope="read write")
        assert (unknown_scope["error"], unknown_scope["iss"]) == ("invalid_scope", server.issuer)

        granted = await authorize(resource=server.url)
        assert (granted["iss"], granted["state"]) == (server.issuer, "st4te")
        bad_verifier = await exchange(granted["code"], pkce_pair()[0], server.url)
        assert json_of(bad_verifier)["error"] == "invalid_grant"

        granted = await authorize(resource=server.url)
        other_resource = await exchange(granted["code"], verifier, f"{server.base}/elsewhere")
        assert json_of(other_resource)["error"] == "invalid_target"

        granted = await authorize(resource=server.url)
        tokens = await exchange(granted["code"], verifier, server.url)
        assert tokens.status_code == 200, tokens.text
        access_token = tokens.json()["access_token"]
        assert (tokens.json()["scope"], tokens.json()["expires_in"]) == ("read", 120)
        assert (await call_tool_raw(server, access_token, "whoami")).status_code == 200

        replayed = await exchange(granted["code"], verifier, server.url)
        assert json_of(replayed)["error"] == "invalid_grant"
        assert (await call_tool_raw(server, access_token, "whoami")).status_code == 401

        # A token issued without a resource indicator is not one for this MCP server.
        unbound = await exchange((await authorize())["code"], verifier, None)
        assert (await call_tool_raw(server, unbound.json()["access_token"], "whoami")).status_code == 401

    state = server.state()
    assert [r["via"] for r in state["revocations"]] == ["code replayed"]
    assert {t["client_auth_method"] for t in state["token_requests"]} == {"client_secret_basic"}


async def test_a_wrong_issuer_in_metadata_stops_the_sdk_client(oauth_server: Start) -> None:
    server = oauth_server("--wrong-issuer")
    with pytest.raises(ExceptionGroup) as failure:
        async with connected(server, oauth_provider(server)):
            pass
    assert failure.group_contains(OAuthFlowError, match="issuer mismatch")
    state = server.state()
    assert state["clients"] == [] and state["authorization_requests"] == []

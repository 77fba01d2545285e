"""The hub signing in with the machine grants against a real server (tests/servers/oauth_server.py).

``client_credentials`` (client_secret_basic, client_secret_post, private_key_jwt), a new token
when the old one expires, a wrong secret, an ``issuer`` that the server does not lead to, and
SEP-990 ``identity_assertion`` (the test identity provider's ID token exchanged for an ID-JAG,
then the JWT-bearer grant), including a refusing identity provider. Nobody consents anywhere:
the hub has no consent factory, so a flow that wanted a person would stop at "needs a sign-in".
Also the server's own checks of client assertions and ID-JAGs (the hub tests rely on them),
and the configuration errors of the new ``oauth`` keys.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx2
import jwt
import pytest
from cryptography.fernet import Fernet
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from mcpclient.config.entries import parse_server
from mcpclient.config.model import ConfigError
from mcpclient.core.state import Status
from mcpclient.engine.authorization import CredentialStore
from mcpclient.engine.hub import Hub
from tests.support.oauth import OAuthServer, json_of
from tests.support.processes import ROOT

pytestmark = pytest.mark.processes

Start = Callable[..., OAuthServer]
SECRET = "s3cret-for-the-svc-client"
CLIENT_CREDENTIALS = "client_credentials"
JWT_BEARER = "urn:ietf:params:oauth:grant-type:jwt-bearer"
CLIENT_ASSERTION_TYPE = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
TOKEN_EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange"
ID_JAG = "urn:ietf:params:oauth:token-type:id-jag"
ID_TOKEN = "urn:ietf:params:oauth:token-type:id_token"


@pytest.fixture
def keys(settings: Any, tmp_path: Path) -> Any:
    settings.SECRETS_KEYS = [Fernet.generate_key().decode()]
    settings.SECRETS_KEY_FILE = tmp_path / "secrets.key"
    settings.PUBLIC_URL = "http://127.0.0.1:8000"
    settings.CLIENT_METADATA_URL = ""
    return settings


def hub_test(test: Any) -> Any:
    """Marks a test that runs a hub: it keeps credentials in the database, encrypted with ``keys``.
    (The server self-tests and the configuration checks below need neither.)"""
    for mark in (
        pytest.mark.django_db(transaction=True),
        pytest.mark.postgres,
        pytest.mark.usefixtures("keys"),
    ):
        test = mark(test)
    return test


def _hub() -> Hub:
    """A hub with nobody to consent (background sessions only)."""
    return Hub(base_dir=ROOT)


def _config(server: OAuthServer, name: str = "secure", **oauth: Any) -> Any:
    return parse_server(name, {"type": "http", "url": server.url, "oauth": oauth})


def _snapshot(hub: Hub, name: str = "secure") -> Any:
    return next(snapshot for snapshot in hub.snapshots() if snapshot.name == name)


async def _whoami(hub: Hub, name: str = "secure") -> dict[str, Any]:
    result = await hub.call_tool(f"{name}_whoami", {})
    assert not result.is_error, result.output
    identity = json.loads(result.output)
    assert isinstance(identity, dict)
    return identity


def _token_requests(server: OAuthServer, grant: str | None = None) -> list[dict[str, Any]]:
    return [r for r in server.state()["token_requests"] if grant is None or r["grant_type"] == grant]


def _key_pair() -> tuple[str, str]:
    """A fresh EC P-256 key pair: (private PKCS#8 PEM, public SubjectPublicKeyInfo PEM)."""
    key = ec.generate_private_key(ec.SECP256R1())
    private = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()
    public = (
        key.public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        .decode()
    )
    return private, public


def _id_token(server: OAuthServer, user: str, **params: Any) -> str:
    """An ID token of the server's identity provider (``GET /_control/id-token``)."""
    response = httpx2.get(f"{server.base}/_control/id-token", params={"user": user, **params}, timeout=5.0)
    response.raise_for_status()
    return response.json()["id_token"]


def _identity_assertion(server: OAuthServer, id_token: str, idp_secret: str | None = None) -> dict[str, Any]:
    idp: dict[str, Any] = {
        "tokenEndpoint": f"{server.base}/idp/token",
        "clientId": "idp-client",
        "idToken": id_token,
    }
    if idp_secret is not None:
        idp["clientSecret"] = idp_secret
    return {"grant": "identity_assertion", "clientId": "app", "clientSecret": SECRET, "identityProvider": idp}


# -- client_credentials


@hub_test
@pytest.mark.parametrize("method", ["client_secret_basic", "client_secret_post"])
async def test_client_credentials_with_a_secret(oauth_server: Start, method: str) -> None:
    server = oauth_server("--no-registration", "--pre-registered", f"svc:{SECRET}:{method}")
    hub = _hub()
    oauth: dict[str, Any] = {"grant": CLIENT_CREDENTIALS, "clientId": "svc", "clientSecret": SECRET}
    if method == "client_secret_post":
        oauth["tokenEndpointAuthMethod"] = method
    try:
        await hub.start([_config(server, **oauth)])
        assert _snapshot(hub).status is Status.READY, _snapshot(hub).last_error
        identity = await _whoami(hub)
        assert identity["user"] == "svc" and identity["client_id"] == "svc"
    finally:
        await hub.stop()
    state = server.state()
    assert [
        (r["grant_type"], r["client_auth_method"], r["resource"], r["status"])
        for r in _token_requests(server)
    ] == [(CLIENT_CREDENTIALS, method, server.url, 200)]
    assert state["authorization_requests"] == [] and state["clients"][0]["registered_via"] == "pre"
    assert state["counts"]["active_refresh_tokens"] == 0
    stored = await CredentialStore("secure", None, server.url).get_tokens()
    assert stored is not None and stored.refresh_token is None


@hub_test
async def test_client_credentials_with_private_key_jwt(
    oauth_server: Start, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    private_pem, public_pem = _key_pair()
    (tmp_path / "svc.pem").write_text(public_pem)
    server = oauth_server("--no-registration", "--jwt-client", f"svc:{tmp_path / 'svc.pem'}")
    monkeypatch.setenv("TEST_KEY", private_pem)
    monkeypatch.setenv("OTHER_KEY", _key_pair()[0])  # a key the server does not know for svc

    def entry(name: str, placeholder: str) -> Any:
        return _config(
            server,
            name,
            grant=CLIENT_CREDENTIALS,
            clientId="svc",
            privateKey=placeholder,
            signingAlgorithm="ES256",
        )

    hub = _hub()
    try:
        await hub.start([entry("secure", "${env:TEST_KEY}"), entry("impostor", "${env:OTHER_KEY}")])
        assert _snapshot(hub).status is Status.READY, _snapshot(hub).last_error
        assert (await _whoami(hub))["user"] == "svc"
        impostor = _snapshot(hub, "impostor")
    finally:
        await hub.stop()
    assert impostor.status is Status.FAILED
    assert 'sign-in to MCP server "impostor" failed at token' in impostor.last_error
    assert "invalid_client" in impostor.last_error
    assert "PRIVATE KEY" not in impostor.last_error
    requests = _token_requests(server, CLIENT_CREDENTIALS)
    assert {(r["client_id"], r["client_auth_method"], r["resource"]) for r in requests} == {
        ("svc", "private_key_jwt", server.url)
    }
    # One good assertion; the impostor's (the hub may try once per protocol probe) all refused.
    assert sorted(r["status"] for r in requests)[:2] == [200, 401]
    assert [r["status"] for r in requests].count(200) == 1


@hub_test
async def test_an_expired_token_is_replaced_without_anybody(oauth_server: Start) -> None:
    server = oauth_server("--no-registration", "--pre-registered", f"svc:{SECRET}")
    hub = _hub()
    config = _config(server, grant=CLIENT_CREDENTIALS, clientId="svc", clientSecret=SECRET)
    try:
        await hub.start([config])
        assert (await _whoami(hub))["user"] == "svc"
        assert server.control("expire-access")["expired_access_tokens"] == 1
        assert (await _whoami(hub))["user"] == "svc"
        assert _snapshot(hub).status is Status.READY
    finally:
        await hub.stop()
    state = server.state()
    assert [(r["grant_type"], r["status"]) for r in state["token_requests"]] == [
        (CLIENT_CREDENTIALS, 200)
    ] * 2
    assert state["counts"]["refreshes"] == 0 and state["authorization_requests"] == []
    assert state["counts"]["mcp_401"] >= 2  # the first contact and the expired token
    assert state["counts"]["active_access_tokens"] == 1


@hub_test
async def test_a_wrong_secret_fails_at_token_and_only_there(
    oauth_server: Start, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    server = oauth_server("--no-registration", "--pre-registered", f"svc:{SECRET}")
    wrong = "wrong-secret-that-must-not-leak"
    hub = _hub()
    try:
        await hub.start(
            [
                _config(server, grant=CLIENT_CREDENTIALS, clientId="svc", clientSecret=wrong),
                _config(server, "good", grant=CLIENT_CREDENTIALS, clientId="svc", clientSecret=SECRET),
            ]
        )
        failed, good = _snapshot(hub), _snapshot(hub, "good")
        assert good.status is Status.READY, good.last_error
        assert (await _whoami(hub, "good"))["user"] == "svc"
        refused = await hub.call_tool("secure_whoami", {})
    finally:
        await hub.stop()
    assert failed.status is Status.FAILED
    assert 'sign-in to MCP server "secure" failed at token' in failed.last_error
    assert "invalid_client" in failed.last_error
    assert refused.is_error
    assert 'sign-in to MCP server "secure" failed at token' in caplog.text  # the logs were captured
    for text in (failed.last_error, refused.output, caplog.text):
        assert wrong not in text and SECRET not in text
    statuses = sorted(r["status"] for r in _token_requests(server, CLIENT_CREDENTIALS))
    assert statuses[0] == 200 and set(statuses[1:]) == {401}


@hub_test
async def test_an_issuer_elsewhere_gets_nothing(oauth_server: Start) -> None:
    server = oauth_server("--no-registration", "--pre-registered", f"svc:{SECRET}")
    elsewhere = "http://127.0.0.1:9/auth"
    hub = _hub()
    oauth = {"grant": CLIENT_CREDENTIALS, "clientId": "svc", "clientSecret": SECRET}
    try:
        await hub.start([_config(server, issuer=elsewhere, **oauth)])
        snapshot = _snapshot(hub)
    finally:
        await hub.stop()
    assert snapshot.status is Status.FAILED
    assert 'sign-in to MCP server "secure" failed at token' in snapshot.last_error
    assert f'not the configured "issuer" {elsewhere}; nothing was sent' in snapshot.last_error
    assert server.state()["token_requests"] == []

    # The same entry naming the server's real issuer, as its metadata writes it, signs in.
    hub = _hub()
    try:
        await hub.start([_config(server, issuer=server.issuer, **oauth)])
        assert _snapshot(hub).status is Status.READY, _snapshot(hub).last_error
    finally:
        await hub.stop()
    assert [r["status"] for r in _token_requests(server)] == [200]


# -- identity_assertion (SEP-990)


@hub_test
@pytest.mark.parametrize(
    ("idp_secret", "method"),
    [(None, "client_secret_basic"), ("idp-s3cret", "client_secret_post")],
    ids=["public-idp-client,basic", "confidential-idp-client,post"],
)
async def test_identity_assertion_signs_in_as_the_user(
    oauth_server: Start, monkeypatch: pytest.MonkeyPatch, idp_secret: str | None, method: str
) -> None:
    server = oauth_server(
        "--no-registration",
        "--pre-registered",
        f"app:{SECRET}:{method}",
        "--idp-client",
        f"idp-client:{idp_secret or ''}:app",
    )
    monkeypatch.setenv("TEST_ID_TOKEN", _id_token(server, "bob"))
    oauth = _identity_assertion(server, "${env:TEST_ID_TOKEN}", idp_secret)
    if method == "client_secret_post":
        oauth["tokenEndpointAuthMethod"] = method
    hub = _hub()
    try:
        await hub.start([_config(server, **oauth)])
        assert _snapshot(hub).status is Status.READY, _snapshot(hub).last_error
        identity = await _whoami(hub)
        assert identity["user"] == "bob" and identity["client_id"] == "app"
        # An expired access token: a fresh ID-JAG (the server refuses a replayed one), nobody asked.
        server.control("expire-access")
        assert (await _whoami(hub))["user"] == "bob"
    finally:
        await hub.stop()
    state = server.state()
    exchanges = [{k: v for k, v in e.items() if k != "time"} for e in state["token_exchanges"]]
    assert exchanges == 2 * [
        {
            "status": 200,
            "client_id": "idp-client",
            "client_auth_method": "client_secret_basic" if idp_secret else "none",
            "grant_type": TOKEN_EXCHANGE,
            "requested_token_type": ID_JAG,
            "subject_token_type": ID_TOKEN,
            "audience": server.issuer,
            "resource": server.url,
            "scope": None,
            "user": "bob",
            "error": None,
        }
    ]
    requests = [
        (r["grant_type"], r["client_id"], r["client_auth_method"], r["resource"], r["status"])
        for r in state["token_requests"]
    ]
    assert requests == 2 * [(JWT_BEARER, "app", method, server.url, 200)]
    assert state["counts"]["active_refresh_tokens"] == 0 and state["authorization_requests"] == []


@hub_test
async def test_per_person_identity_assertion_exchanges_each_persons_own_id_token(oauth_server: Start) -> None:
    """ "mode": "perUser": no ID token in mcp.json; each person's own (from their single sign-on to
    BooCode) is exchanged, so each person's session is theirs at the server; nobody clicks Connect."""
    server = oauth_server(
        "--no-registration", "--pre-registered", f"app:{SECRET}", "--idp-client", "idp-client::app"
    )
    tokens = {1: _id_token(server, "bob"), 2: _id_token(server, "alice")}
    oauth = _identity_assertion(server, "unused")
    del oauth["identityProvider"]["idToken"]
    hub = Hub(base_dir=ROOT, person_id_token=tokens.get)
    try:
        await hub.start([_config(server, mode="perUser", **oauth)])
        assert _snapshot(hub).status is Status.PER_USER  # no shared session, no token of its own
        for user_id, user in ((1, "bob"), (2, "alice")):
            assert await hub.open_user_sessions(user_id, ["secure"]) == []
            session = hub.user_connection("secure", user_id)
            assert session is not None and session.status is Status.READY, session and session.reason
            result = await hub.call_tool("secure_whoami", {}, user_id=user_id)
            assert json.loads(result.output)["user"] == user
        # Somebody without a sign-in to BooCode gets no session, and the reason says what to do.
        await hub.open_user_sessions(3, ["secure"])
        nobody = hub.user_connection("secure", 3)
        assert nobody is not None and nobody.status is not Status.READY
        assert "this person has no ID token to exchange: they sign in to BooCode with its single sign-on" in (
            nobody.reason
        )
    finally:
        await hub.stop()
    users = [exchange["user"] for exchange in server.state()["token_exchanges"] if exchange["status"] == 200]
    assert sorted(users) == ["alice", "bob"]


@hub_test
@pytest.mark.parametrize("presented", ["unknown user", "expired", "garbage"])
async def test_a_refusing_identity_provider_is_named(oauth_server: Start, presented: str) -> None:
    server = oauth_server(
        "--no-registration", "--pre-registered", f"app:{SECRET}", "--idp-client", "idp-client::app"
    )
    id_token = {
        "unknown user": lambda: _id_token(server, "mallory"),
        "expired": lambda: _id_token(server, "alice", expires_in=-60),
        "garbage": lambda: "not-an-id-token",
    }[presented]()
    hub = _hub()
    try:
        await hub.start([_config(server, **_identity_assertion(server, id_token))])
        snapshot = _snapshot(hub)
    finally:
        await hub.stop()
    assert snapshot.status is Status.FAILED
    assert 'sign-in to MCP server "secure" failed at token' in snapshot.last_error
    assert (
        f"the identity provider ({server.base}/idp/token) refused the token exchange: HTTP 400 invalid_grant"
        in snapshot.last_error
    )
    assert id_token not in snapshot.last_error
    state = server.state()
    refusals = {(e["status"], e["error"], e["audience"], e["resource"]) for e in state["token_exchanges"]}
    assert refusals == {(400, "invalid_grant", server.issuer, server.url)}
    assert state["token_requests"] == []  # no ID-JAG, so nothing went to the authorization server


# -- the server's own checks, which the tests above rely on


def _post(url: str, data: dict[str, str], auth: tuple[str, str] | None = None) -> httpx2.Response:
    return httpx2.post(url, data=data, auth=auth, timeout=5.0)


def test_the_server_checks_client_assertions(oauth_server: Start, tmp_path: Path) -> None:
    private_pem, public_pem = _key_pair()
    (tmp_path / "svc.pem").write_text(public_pem)
    server = oauth_server("--no-registration", "--jwt-client", f"svc:{tmp_path / 'svc.pem'}")

    def assertion(key: str = private_pem, **claims: Any) -> str:
        now = int(time.time())
        base = {"iss": "svc", "sub": "svc", "aud": server.issuer, "exp": now + 60, "iat": now}
        return jwt.encode({**base, "jti": str(uuid.uuid4()), **claims}, key, algorithm="ES256")

    def token(client_assertion: str) -> httpx2.Response:
        form = {"grant_type": CLIENT_CREDENTIALS, "resource": server.url, "client_id": "svc"}
        form |= {"client_assertion_type": CLIENT_ASSERTION_TYPE, "client_assertion": client_assertion}
        return _post(server.token_endpoint, form)

    good = assertion(aud=server.issuer + "/")
    assert token(good).status_code == 200
    refused = {
        "replayed": token(good),
        "other key": token(assertion(_key_pair()[0])),
        "other audience": token(assertion(aud=f"{server.base}/elsewhere")),
        "expired": token(assertion(exp=int(time.time()) - 10)),
        "other subject": token(assertion(sub="someone-else")),
    }
    assert {name: (r.status_code, json_of(r).get("error")) for name, r in refused.items()} == dict.fromkeys(
        refused, (401, "invalid_client")
    )


def test_the_server_checks_id_jags(oauth_server: Start) -> None:
    server = oauth_server(
        "--no-registration",
        "--pre-registered",
        f"app:{SECRET}",
        "--pre-registered",
        f"other:{SECRET}",
        "--idp-client",
        "idp-client::app",
    )

    def exchange(**overrides: str) -> httpx2.Response:
        form = {
            "grant_type": TOKEN_EXCHANGE,
            "requested_token_type": ID_JAG,
            "subject_token": _id_token(server, "alice"),
            "subject_token_type": ID_TOKEN,
            "audience": server.issuer,
            "resource": server.url,
            "client_id": "idp-client",
        }
        return _post(f"{server.base}/idp/token", form | overrides)

    def jwt_bearer(assertion: str, client: str = "app") -> httpx2.Response:
        form = {"grant_type": JWT_BEARER, "assertion": assertion, "resource": server.url}
        return _post(server.token_endpoint, form, auth=(client, SECRET))

    issued = exchange()
    assert issued.status_code == 200 and issued.json()["issued_token_type"] == ID_JAG
    id_jag = issued.json()["access_token"]
    assert jwt.get_unverified_header(id_jag)["typ"] == "oauth-id-jag+jwt"
    assert exchange(audience=f"{server.base}/elsewhere").json()["error"] == "invalid_target"
    assert exchange(client_id="stranger").status_code == 401
    refused = {
        "for another client": jwt_bearer(id_jag, client="other"),
        "an ID token, not an ID-JAG": jwt_bearer(_id_token(server, "alice")),
    }
    assert {name: json_of(r).get("error") for name, r in refused.items()} == dict.fromkeys(
        refused, "invalid_grant"
    )
    assert jwt_bearer(id_jag).status_code == 200
    assert jwt_bearer(id_jag).json()["error"] == "invalid_grant"  # replayed


# -- configuration errors


@pytest.mark.parametrize(
    ("oauth", "expected"),
    [
        (
            {"grant": CLIENT_CREDENTIALS, "mode": "perUser", "clientId": "svc", "clientSecret": "x"},
            '"grant": "client_credentials" signs BooCode itself in, so it cannot be "perUser"',
        ),
        ({"grant": CLIENT_CREDENTIALS, "clientId": "svc"}, 'needs either "clientSecret" or "privateKey"'),
        (
            {"grant": CLIENT_CREDENTIALS, "clientId": "svc", "clientSecret": "x", "privateKey": "k"},
            'needs either "clientSecret" or "privateKey"',
        ),
        ({"grant": CLIENT_CREDENTIALS, "clientSecret": "x"}, '"clientSecret" needs "clientId"'),
        (
            {
                "grant": CLIENT_CREDENTIALS,
                "clientId": "svc",
                "clientSecret": "x",
                "tokenEndpointAuthMethod": "none",
            },
            '"tokenEndpointAuthMethod" must be one of',
        ),
        (
            {"clientId": "app", "privateKey": "k"},
            '"privateKey" is for the machine grants',
        ),
        (
            {"grant": "identity_assertion", "clientId": "app", "clientSecret": "x"},
            'needs "identityProvider"',
        ),
        (
            {
                "grant": "identity_assertion",
                "clientId": "app",
                "clientSecret": "x",
                "identityProvider": {"tokenEndpoint": "https://idp.example/token", "clientId": "c"},
            },
            '"oauth".identityProvider: "idToken" is required',
        ),
        (
            {
                "grant": "identity_assertion",
                "clientId": "app",
                "identityProvider": {
                    "tokenEndpoint": "https://idp.example/token",
                    "clientId": "c",
                    "idToken": "t",
                },
            },
            'needs "clientSecret"',
        ),
        (
            {
                "grant": "identity_assertion",
                "mode": "perUser",
                "clientId": "app",
                "clientSecret": "x",
                "identityProvider": {
                    "tokenEndpoint": "https://idp.example/token",
                    "clientId": "c",
                    "idToken": "t",
                },
            },
            '"idToken" is each person\'s own with "mode": "perUser" (from their sign-in to BooCode): '
            "leave it out",
        ),
        ({"grant": "password", "clientId": "app"}, '"grant" must be one of'),
        (
            {"grant": CLIENT_CREDENTIALS, "clientId": "svc", "clientSecret": "x", "issuer": "not a url"},
            '"issuer" must be an http:// or https:// URL',
        ),
    ],
    ids=[
        "perUser",
        "no-secret-no-key",
        "secret-and-key",
        "secret-without-client",
        "auth-method-none",
        "privateKey-with-authorization_code",
        "no-identityProvider",
        "no-idToken",
        "identity_assertion-without-secret",
        "perUser-with-idToken",
        "unknown-grant",
        "bad-issuer",
    ],
)
def test_config_errors_name_the_key(oauth: dict[str, Any], expected: str) -> None:
    with pytest.raises(ConfigError) as error:
        parse_server("secure", {"type": "http", "url": "https://mcp.example/mcp", "oauth": oauth})
    message = str(error.value)
    assert message.startswith('mcp.json: server "secure": "oauth"'), message
    assert expected in message, message


def test_the_hub_reads_each_persons_id_token_where_their_sign_in_keeps_it() -> None:
    """The application tells the hub at start where a person's ID token is (boocode.security)."""
    from unittest import mock

    from boocode.security import oidc
    from mcpclient.runtime import composition as runtime

    assert runtime._id_tokens is not None
    with mock.patch.object(oidc, "id_token_for", return_value="the-token") as read:
        assert runtime._id_tokens(7, min_validity=30.0) == "the-token"  # oidc's, imported at first use
    read.assert_called_once_with(7, min_validity=30.0)
    assert runtime.new_hub(persist=False).person_id_token is not None

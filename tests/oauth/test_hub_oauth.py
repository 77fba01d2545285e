"""The hub signing in to a real OAuth-protected MCP server (tests/servers/oauth_server.py).

Shared and per-person sessions, stored tokens reused, refresh (rotation, two concurrent calls,
one request), revoked and expired tokens mid-conversation, wrong issuer, scope step-up,
pre-registered clients, disconnect with revocation, tokens unreadable without the key.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from collections.abc import Callable
from functools import partial
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx2
import pytest
from asgiref.sync import sync_to_async
from cryptography.fernet import Fernet
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group

from boocode.tools import registry
from boocode.tools.deferred import DeferredTools
from mcpclient import runtime
from mcpclient.config.entries import parse_server
from mcpclient.core.egress import EgressAllow
from mcpclient.core.redaction import MASK
from mcpclient.core.state import Status
from mcpclient.engine import authorization
from mcpclient.engine.authorization import HeadlessConsent
from mcpclient.engine.hub import Hub
from mcpclient.models import McpServer, StoredSecret
from mcpclient.runtime import people, personal, signin
from tests.support.oauth import OAuthServer
from tests.support.processes import ROOT

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.postgres,
    pytest.mark.processes,
    pytest.mark.usefixtures("keys"),  # tests/oauth/conftest.py: every test here signs in
]


def _hub(*, headless: bool) -> Hub:
    return Hub(base_dir=ROOT, consent_factory=HeadlessConsent if headless else None)


def _config(server: OAuthServer, **oauth: Any) -> Any:
    entry: dict[str, Any] = {"type": "http", "url": server.url}
    if oauth:
        entry["oauth"] = oauth
    return parse_server("secure", entry)


async def _call(hub: Hub, tool: str, user_id: int | None = None, **arguments: Any) -> Any:
    return await hub.call_tool(f"secure_{tool}", arguments, user_id=user_id)


def _token_requests(server: OAuthServer, grant: str) -> list[dict[str, Any]]:
    return [r for r in server.state()["token_requests"] if r["grant_type"] == grant]


async def test_shared_sign_in_registers_stores_encrypted_and_is_reused(
    oauth_server: Callable[..., OAuthServer],
) -> None:
    server = oauth_server()
    hub = _hub(headless=True)
    try:
        await hub.start([_config(server)])
        assert hub.snapshots()[0].status is Status.READY, hub.snapshots()[0].last_error
        result = await _call(hub, "whoami")
        assert not result.is_error and "alice" in result.output
    finally:
        await hub.stop()
    state = server.state()
    assert [c["registered_via"] for c in state["clients"]] == ["dcr"]
    authorize = state["authorization_requests"][0]
    assert authorize["code_challenge_method"] == "S256" and authorize["resource"] == server.url

    row = await asyncio.to_thread(lambda: StoredSecret.objects.get(kind="oauth", name="secure"))
    assert "access_token" not in row.ciphertext and "refresh_token" not in row.ciphertext
    # A new hub with nobody to consent signs in from the store: no second authorization.
    again = _hub(headless=False)
    try:
        await again.start([_config(server)])
        assert again.snapshots()[0].status is Status.READY, again.snapshots()[0].last_error
        assert not (await _call(again, "echo", text="hi")).is_error
    finally:
        await again.stop()
    assert len(server.state()["authorization_requests"]) == 1


async def test_tokens_unreadable_without_the_key(
    oauth_server: Callable[..., OAuthServer], settings: Any
) -> None:
    server = oauth_server()
    hub = _hub(headless=True)
    try:
        await hub.start([_config(server)])
    finally:
        await hub.stop()
    settings.SECRETS_KEYS = [Fernet.generate_key().decode()]
    hub = _hub(headless=False)
    try:
        await hub.start([_config(server)])
        snapshot = hub.snapshots()[0]
    finally:
        await hub.stop()
    assert snapshot.status is Status.FAILED
    assert "cannot decrypt" in snapshot.last_error


async def test_nobody_signed_in_waits_for_connect(oauth_server: Callable[..., OAuthServer]) -> None:
    server = oauth_server()
    hub = _hub(headless=False)
    try:
        await hub.start([_config(server)])
        snapshot = hub.snapshots()[0]
        assert snapshot.status is Status.AUTH_REQUIRED
        assert 'MCP server "secure" needs a sign-in' in snapshot.last_error
        assert "administrator must connect it" in snapshot.last_error
        result = await _call(hub, "whoami")
        assert result.is_error and "Unknown tool" in result.output  # never listed
    finally:
        await hub.stop()
    assert server.state()["token_requests"] == []


async def test_refresh_is_single_flight_and_rotated(oauth_server: Callable[..., OAuthServer]) -> None:
    server = oauth_server()
    hub = _hub(headless=True)
    try:
        await hub.start([_config(server)])
        server.control("expire-access")
        connection = hub.connection("secure")
        assert connection is not None and connection.auth is not None
        connection.auth.context.token_expiry_time = 1.0  # the stored expiry says: refresh now
        first, second = await asyncio.gather(_call(hub, "whoami"), _call(hub, "echo", text="x"))
        assert not first.is_error and not second.is_error, (first.output, second.output)
        assert len(_token_requests(server, "refresh_token")) == 1
        # The rotated refresh token is used next time, never the retired one.
        server.control("expire-access")
        connection.auth.context.token_expiry_time = 1.0
        assert not (await _call(hub, "whoami")).is_error
        refreshes = _token_requests(server, "refresh_token")
        assert len(refreshes) == 2 and all(r["status"] == 200 for r in refreshes)
    finally:
        await hub.stop()


async def test_revoked_tokens_mid_conversation_ask_for_a_sign_in_once(
    oauth_server: Callable[..., OAuthServer],
) -> None:
    server = oauth_server()
    hub = _hub(headless=True)
    try:
        await hub.start([_config(server)])
        connection = hub.connection("secure")
        assert connection is not None
        connection.consent = None
        assert connection.auth is not None
        connection.auth.consent = authorization.NoConsent("an administrator must connect it")
        server.control("revoke-all")
        result = await _call(hub, "whoami")
        assert result.is_error
        assert 'MCP server "secure" unreachable: MCP server "secure" needs a sign-in' in result.output
        assert hub.snapshots()[0].status is Status.AUTH_REQUIRED
        before = server.state()["counts"]
        again = await _call(hub, "whoami")
        assert again.is_error and "needs a sign-in" in again.output
        assert server.state()["counts"] == before  # no reconnect loop: nothing was sent
    finally:
        await hub.stop()


async def test_wrong_issuer_fails_at_discovery(oauth_server: Callable[..., OAuthServer]) -> None:
    server = oauth_server("--wrong-issuer")
    hub = _hub(headless=True)
    try:
        await hub.start([_config(server)])
        snapshot = hub.snapshots()[0]
    finally:
        await hub.stop()
    assert snapshot.status is Status.FAILED
    assert 'sign-in to MCP server "secure" failed at discovery' in snapshot.last_error
    assert "issuer" in snapshot.last_error
    assert server.state()["token_requests"] == []


async def test_the_sdks_log_of_a_failed_registration_keeps_its_client_secret_out(
    oauth_server: Callable[..., OAuthServer], caplog: pytest.LogCaptureFixture
) -> None:
    """The SDK logs a failed flow with its exception ("OAuth flow error"), whose text quotes the
    registration answer it did not take (a 202 instead of a 201), client_secret included; turned
    on (an operator lowering its level), the line reaches the log with every secret masked."""
    caplog.set_level(logging.ERROR, logger="mcp.client.auth.oauth2")
    server = oauth_server("--registration-status", "202")
    hub = _hub(headless=True)
    try:
        await hub.start([_config(server)])
        snapshot = hub.snapshots()[0]
    finally:
        await hub.stop()
    assert snapshot.status is Status.FAILED
    assert 'sign-in to MCP server "secure" failed at registration' in snapshot.last_error
    [client] = server.state()["clients"]  # the server did register a client, with a secret
    flow_errors = [record for record in caplog.records if record.getMessage() == "OAuth flow error"]
    assert flow_errors, caplog.text
    assert "Registration failed: 202" in caplog.text
    assert client["client_id"] in caplog.text  # what is not a secret stays readable
    said = re.findall(r"client_secret['\"]?\s*[:=]\s*['\"]?([^'\",}\s]+)", caplog.text)
    assert said and set(said) == {MASK}, caplog.text


async def test_step_up_on_insufficient_scope(oauth_server: Callable[..., OAuthServer]) -> None:
    server = oauth_server("--scopes", "read write admin", "--required-scope", "read")
    hub = _hub(headless=True)
    try:
        await hub.start([_config(server)])
        assert hub.snapshots()[0].status is Status.READY, hub.snapshots()[0].last_error
        result = await _call(hub, "admin_report")
        assert not result.is_error, result.output
    finally:
        await hub.stop()
    scopes = [set((r.get("scope") or "").split()) for r in server.state()["authorization_requests"]]
    assert len(scopes) == 2 and "admin" not in scopes[0] and {"read", "admin"} <= scopes[1]


@pytest.mark.parametrize("method", ["client_secret_basic", "client_secret_post"])
async def test_pre_registered_client(oauth_server: Callable[..., OAuthServer], method: str) -> None:
    server = oauth_server("--no-registration", "--pre-registered", f"boocode-app:s3cret:{method}")
    hub = _hub(headless=True)
    config = _config(server, clientId="boocode-app", clientSecret="s3cret", tokenEndpointAuthMethod=method)
    try:
        await hub.start([config])
        assert hub.snapshots()[0].status is Status.READY, hub.snapshots()[0].last_error
    finally:
        await hub.stop()
    requests = _token_requests(server, "authorization_code")
    assert [r["client_auth_method"] for r in requests] == [method]


async def test_per_user_sessions_are_private(oauth_server: Callable[..., OAuthServer]) -> None:
    server = oauth_server()
    hub = _hub(headless=False)
    config = _config(server, mode="perUser")
    try:
        await hub.start([config])
        assert hub.snapshots()[0].status is Status.PER_USER
        assert hub.tools(user_id=1) == []
        connection, consent = await hub.authorize("secure", user_id=1)
        url = await asyncio.wait_for(consent.url, 10)
        async with httpx2.AsyncClient() as http:
            response = await http.get(url, follow_redirects=False)
        query = {k: v[0] for k, v in parse_qs(urlsplit(response.headers["location"]).query).items()}
        with pytest.raises(authorization.UnknownConsent):
            authorization.complete(query["state"], 2, query)  # somebody else's callback
        authorization.complete(query["state"], 1, query)
        await asyncio.wait_for(connection.wait_settled(), 10)
        assert connection.status is Status.READY, connection.last_error
        assert "secure_whoami" in {tool.prefixed_name for tool in hub.tools(user_id=1)}
        assert hub.tools(user_id=2) == [] and hub.tools() == []
        assert not (await _call(hub, "whoami", user_id=1)).is_error
        refused = await _call(hub, "whoami", user_id=2)
        assert refused.is_error and "Unknown tool" in refused.output
        # MCP Apps: the person's views call and read through the person's own session.
        for_views = {tool.prefixed_name for tool in hub.tools(user_id=1, views=True)}
        assert "secure_whoami_for_views" in for_views and hub.tools(user_id=2, views=True) == []
        assert "secure_whoami_for_views" not in {tool.prefixed_name for tool in hub.tools(user_id=1)}
        user = json.loads((await _call(hub, "whoami", user_id=1)).output)["user"]
        called = await hub.call_tool("secure_whoami_for_views", {}, user_id=1, views=True)
        assert called.output == f"view of {user}"
        assert (await hub.call_tool("secure_whoami_for_views", {}, user_id=2, views=True)).is_error
        view = await hub.read_resource("secure", "ui://secure/whoami.html", 1, view=True)
        assert view.contents[0].text == f"<!DOCTYPE html><p id=user>{user}</p>"
        assert await hub.read_resource("secure", "ui://secure/whoami.html", 1, view=True) is view  # kept
        # Tool search: a person's own session is searched for them only.
        signin_hub = runtime.get_hub()
        runtime.set_hub(hub)
        try:
            for user_id, expected in ((1, ["secure_whoami"]), (2, [])):
                tools = registry.available_tools(user_id)
                now = partial(registry.available_tools, user_id)
                deferred = DeferredTools(tools, pinned=(), history=[], current=now)
                asked = {"query": "which user is this access token for"}
                answer = json.loads((await deferred.tool.execute(asked)).output)
                found = [tool["name"] for tool in answer["tools"] if tool["server"] == "secure"]
                assert found[:1] == expected, user_id
        finally:
            runtime.set_hub(signin_hub)
        stored = await asyncio.to_thread(lambda: sorted(StoredSecret.objects.values_list("name", flat=True)))
        assert stored == ["secure@user:1"]

        # Closed (idle, restart): it opens again from the store at the person's next turn.
        await hub.close_user_session("secure", 1)
        assert hub.tools(user_id=1) == []
        await signin.open_sessions(hub, 1)
        await signin.open_sessions(hub, 2)  # nothing stored for them: nothing opens
        assert "secure_whoami" in {tool.prefixed_name for tool in hub.tools(user_id=1)}
        assert hub.user_connection("secure", 2) is None
    finally:
        await hub.stop()


async def test_disconnect_revokes_and_forgets(oauth_server: Callable[..., OAuthServer]) -> None:
    server = oauth_server()
    hub = _hub(headless=True)
    try:
        await hub.start([_config(server)])
        store = authorization.CredentialStore("secure", None, server.url)
        done = await authorization.revoke(store)
    finally:
        await hub.stop()
    assert done == "tokens revoked and deleted"
    assert server.state()["counts"]["revocations"] >= 1
    assert not await asyncio.to_thread(lambda: StoredSecret.objects.filter(kind="oauth").exists())


def test_client_metadata_document(client: Any, settings: Any) -> None:
    settings.PUBLIC_URL = "https://chat.example.com"
    response = client.get("/oauth/client-metadata.json")
    document = json.loads(response.content)
    assert document["client_id"] == "https://chat.example.com/oauth/client-metadata.json"
    assert document["redirect_uris"] == ["https://chat.example.com/oauth/callback/"]
    assert authorization.client_metadata_url() == document["client_id"]
    settings.PUBLIC_URL = "http://127.0.0.1:8000"
    assert authorization.client_metadata_url() is None  # CIMD needs https


async def _sign_in(hub: Hub, name: str, user_id: int) -> Any:
    """``user_id`` connects ``name`` as they mean it, in a browser (its redirect followed here)."""
    connection, consent = await hub.authorize(name, user_id=user_id)
    url = await asyncio.wait_for(consent.url, 10)
    async with httpx2.AsyncClient() as http:
        response = await http.get(url, follow_redirects=False)
    query = {k: v[0] for k, v in parse_qs(urlsplit(response.headers["location"]).query).items()}
    authorization.complete(query["state"], user_id, query)
    await asyncio.wait_for(connection.wait_settled(), 10)
    assert connection.status is Status.READY, connection.last_error
    return connection


async def test_ones_own_server_under_a_hidden_per_person_servers_name_never_meets_its_sessions_or_tokens(
    oauth_server: Callable[..., OAuthServer], settings: Any
) -> None:
    """``team`` signs each person in to their own account and is for ``eng`` (Alice); Bob, outside
    it, adds a server of his own named ``team`` that signs in with OAuth too. Each signs in to the
    ``team`` they mean: Bob's tokens and session are his own server's (``team@own:<id>``), never
    the shared server's (``team@user:<id>``), and his calls reach his server; when Bob joins eng,
    ``team`` is the shared server again for him, and nothing of his own server's sign-in opens it."""
    settings.EGRESS_ALLOW = EgressAllow.parse("127.0.0.1")  # (a person's server's host is checked)
    shared, own = oauth_server(), oauth_server()
    shared.control("next-user", {"user": "alice-at-team"})
    own.control("next-user", {"user": "bob-at-his-own"})
    entry = {"type": "http", "url": shared.url, "oauth": {"mode": "perUser"}, "groups": ["eng"]}
    await McpServer.objects.acreate(name="team", config=entry)  # (as mcp.json's sync would)
    alice, bob = [(await get_user_model().objects.acreate(username=name)).pk for name in ("alice", "bob")]
    await _join(alice, "eng")
    people.forget()
    personal._read.clear()
    hub = Hub(base_dir=ROOT, person_groups=people.groups_of)
    try:
        for who in (alice, bob):
            await people.refresh(who)
        await hub.start([parse_server("team", entry)])
        draft = personal.Draft("team", own.url, "http", "oauth", "", "", False)
        await sync_to_async(personal.add)(bob, draft)  # the name is free for him: team is hidden
        await hub.set_personal(bob, await sync_to_async(personal.configs_for)(bob))

        alices = await _sign_in(hub, "team", alice)
        bobs = await _sign_in(hub, "team", bob)
        assert (alices.config.url, alices.config.owner_id) == (shared.url, None)
        assert (bobs.config.url, bobs.config.owner_id) == (own.url, bob)
        assert hub.user_connection("team", bob) is bobs and hub.user_connection("team", alice) is alices
        whoami = {who: await hub.call_tool("team_whoami", {}, user_id=who) for who in (alice, bob)}
        assert json.loads(whoami[alice].output)["user"] == "alice-at-team"
        assert json.loads(whoami[bob].output)["user"] == "bob-at-his-own"
        assert len(_token_requests(shared, "authorization_code")) == 1
        assert len(_token_requests(own, "authorization_code")) == 1
        stored = await sync_to_async(lambda: sorted(StoredSecret.objects.values_list("name", flat=True)))()
        assert stored == [f"team@own:{bob}", f"team@user:{alice}"]  # none of the shared server's for Bob
        assert await sync_to_async(authorization.signed_in_servers)(bob) == set()
        assert await sync_to_async(authorization.signed_in_servers)(bob, own=True) == {"team"}
        # The administrator closing the shared server's sessions leaves his own server's alone.
        await hub.reconnect("team")
        assert hub.user_connection("team", alice) is None and hub.user_connection("team", bob) is bobs

        # Bob joins eng: "team" is the shared server for him now. His own server's session goes at
        # the hub's next look at his servers, and the shared one opens for him only with a sign-in
        # of his own to it: his own server's tokens are not the shared server's.
        await _join(bob, "eng")
        await signin.open_sessions(hub, bob)  # (his groups and servers read again, as before a turn)
        assert hub.personal_servers(bob) == [] and not bobs.running
        assert hub.user_connection("team", bob) is None  # (not signed in to the shared one)
        await hub.open_user_sessions(bob, ["team"])
        theirs = hub.user_connection("team", bob)
        assert theirs is not None and theirs.config.url == shared.url
        assert theirs.status is Status.AUTH_REQUIRED, theirs.status
        refused = await hub.call_tool("team_whoami", {}, user_id=bob)
        assert refused.is_error and "bob-at-his-own" not in refused.output
        assert len(_token_requests(shared, "authorization_code")) == 1
    finally:
        people.forget()
        await hub.stop()


@sync_to_async
def _join(user_id: int, group: str) -> None:
    get_user_model().objects.get(pk=user_id).groups.add(Group.objects.get_or_create(name=group)[0])

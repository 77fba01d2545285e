"""Web-layer hardening against a real Daphne: origins, sockets and sessions, logins, headers.

Daphne runs in a subprocess with its own data directory; HTTP goes over ``http.client`` (from
a chosen loopback address: Linux routes all of 127.0.0.0/8 locally, so each address is a
different client to the server) and websockets over aiohttp's client. A second Daphne runs
as it would behind a TLS-terminating proxy (``--proxy-headers``, BOOCODE_TRUSTED_PROXY_COUNT=1):
the tests play the proxy by sending its headers.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests.support.live import PASSWORD, Live, live_server
from tests.support.processes import redis_url
from tests.support.web import Browserless, Response

pytestmark = pytest.mark.processes

LOCKED = "Too many failed logins"
CSP_PARTS = ("default-src 'self'", "script-src 'self'", "frame-ancestors 'none'", "object-src 'none'")


@asynccontextmanager
async def chat_socket(
    live: Live, conversation: int, cookie: str | None, origin: str | None = "same", **headers: str
) -> AsyncIterator[aiohttp.ClientWebSocketResponse]:
    """A websocket to a conversation (``origin="same"``: the server's own origin)."""
    if origin == "same":
        origin = f"http://127.0.0.1:{live.port}"
    if cookie:
        headers["Cookie"] = f"sessionid={cookie}"
    async with aiohttp.ClientSession() as session:
        ws = await session.ws_connect(live.ws_url(conversation), origin=origin, headers=headers)
        try:
            yield ws
        finally:
            await ws.close()


async def next_frame(ws: aiohttp.ClientWebSocketResponse, kind: str, within: float = 5.0) -> dict[str, Any]:
    """The next frame of type ``kind`` (others skipped); fails if the socket closes first."""
    async with asyncio.timeout(within):
        while True:
            message = await ws.receive()
            assert message.type == aiohttp.WSMsgType.TEXT, (message.type, message.data)
            frame = json.loads(message.data)
            if frame["type"] == kind:
                return frame


async def close_code(ws: aiohttp.ClientWebSocketResponse, within: float = 5.0) -> int:
    """Wait for the server to close the socket (frames before are skipped); its close code."""
    async with asyncio.timeout(within):
        while True:
            try:
                message = await ws.receive()
            except aiohttp.ClientConnectionResetError:
                # A ping read just before the close: the client's automatic pong found the
                # connection closing. The close frame is still to be read.
                continue
            if message.type == aiohttp.WSMsgType.CLOSE:
                return message.data  # the server's code (ws.close_code turns 1006 if TCP closes first)
            if message.type in (aiohttp.WSMsgType.CLOSING, aiohttp.WSMsgType.CLOSED):
                return ws.close_code or 0


async def refused_status(
    live: Live, conversation: int, cookie: str, origin: str | None, **headers: str
) -> int:
    """The HTTP status of a websocket handshake that must be refused."""
    with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
        async with chat_socket(live, conversation, cookie, origin, **headers):
            pass
    return refused.value.status


ACCOUNTS: dict[str, dict[str, Any]] = {
    "origin": {"sessions": 1},
    "leaver": {"sessions": 2},
    "changer": {"sessions": 2},
    "bystander": {"sessions": 1},
    "admin": {"sessions": 1, "admin": True},
    "alice": {},
    "bob": {},
    "page": {"sessions": 1},
}


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    with live_server(tmp_path_factory.mktemp("web"), ACCOUNTS) as server:
        yield server


PROXIED_ACCOUNTS: dict[str, dict[str, Any]] = {"proxied": {"sessions": 1}, "dana": {}}


@pytest.fixture(scope="module")
def proxied(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    """Daphne as deployed behind one TLS-terminating proxy that serves chat.example.com."""
    env = {
        "BOOCODE_ALLOWED_HOSTS": "chat.example.com,127.0.0.1",
        "BOOCODE_TRUSTED_PROXY_COUNT": "1",
        "BOOCODE_HSTS_SECONDS": "3600",
    }
    with live_server(tmp_path_factory.mktemp("proxied"), PROXIED_ACCOUNTS, env, "--proxy-headers") as server:
        yield server


# --- 1. websocket origins ---------------------------------------------------------------------


async def test_sockets_open_only_from_the_servers_own_origin(live: Live) -> None:
    account = live.accounts["origin"]
    cookie, conversation = account["sessions"][0], account["conversation"]
    async with chat_socket(live, conversation, cookie) as ws:
        assert (await next_frame(ws, "history"))["conversation"] == conversation

    # Same host, another port or scheme: another origin. No Origin or "null": refused too.
    for origin in (
        "http://localhost:9999",
        "http://127.0.0.1:9999",
        "https://127.0.0.1:{port}",
        f"http://localhost:{live.port}",  # allowed host, but not the one this socket was opened at
        "null",
        None,
    ):
        shown = origin.format(port=live.port) if origin else origin
        assert await refused_status(live, conversation, cookie, shown) == 403, origin


async def test_behind_a_tls_proxy_the_page_origin_is_https(proxied: Live) -> None:
    account = proxied.accounts["proxied"]
    cookie, conversation = account["sessions"][0], account["conversation"]
    proxy = {"Host": "chat.example.com", "X-Forwarded-Proto": "https", "X-Forwarded-For": "203.0.113.7"}
    async with chat_socket(proxied, conversation, cookie, "https://chat.example.com", **proxy) as ws:
        assert (await next_frame(ws, "history"))["conversation"] == conversation
    for origin in ("http://chat.example.com", "https://chat.example.com:8443", "https://evil.example.com"):
        assert await refused_status(proxied, conversation, cookie, origin, **proxy) == 403, origin


# --- 2. sockets die with the session ----------------------------------------------------------


async def test_logout_closes_the_sockets_of_that_session_only(live: Live) -> None:
    account = live.accounts["leaver"]
    first, second = account["sessions"]
    conversation = account["conversation"]
    async with (
        chat_socket(live, conversation, first) as leaving,
        chat_socket(live, conversation, second) as staying,
    ):
        await next_frame(leaving, "history")
        await next_frame(staying, "history")
        client = Browserless(live.port, cookies={"sessionid": first})
        assert client.request("POST", "/logout/", {}).status == 302
        assert await close_code(leaving) == 4401
        # The other session is still logged in: its socket still answers.
        await staying.send_json({"type": "cancel"})
        assert (await next_frame(staying, "error"))["code"] == "not_running"
    assert await refused_or_closed(live, conversation, first) == 4401


async def refused_or_closed(live: Live, conversation: int, cookie: str) -> int:
    """The close code a new socket with ``cookie`` gets right after the handshake."""
    async with chat_socket(live, conversation, cookie) as ws:
        return await close_code(ws)


async def test_a_password_change_closes_every_socket_of_the_user(live: Live) -> None:
    changer, bystander = live.accounts["changer"], live.accounts["bystander"]
    admin = Browserless(live.port, cookies={"sessionid": live.accounts["admin"]["sessions"][0]})
    async with (
        chat_socket(live, changer["conversation"], changer["sessions"][0]) as one,
        chat_socket(live, changer["conversation"], changer["sessions"][1]) as two,
        chat_socket(live, bystander["conversation"], bystander["sessions"][0]) as other,
    ):
        for ws in (one, two, other):
            await next_frame(ws, "history")
        new = "a new password 4 changer"
        changed = admin.request(
            "POST",
            f"/admin/auth/user/{changer['id']}/password/",
            {"password1": new, "password2": new, "usable_password": "true"},
        )
        assert changed.status == 302, changed.body[:2000]
        assert await close_code(one) == 4401
        assert await close_code(two) == 4401
        await other.send_json({"type": "cancel"})
        assert (await next_frame(other, "error"))["code"] == "not_running"


@pytest.mark.redis
async def test_a_password_changed_in_another_process_closes_the_socket_through_redis(
    tmp_path: Path,
) -> None:
    env = {"BOOCODE_REDIS_URL": redis_url()}  # this worker's own: another run's events never arrive
    with live_server(tmp_path, {"far": {"sessions": 1}}, env) as server:
        account = server.accounts["far"]
        async with chat_socket(server, account["conversation"], account["sessions"][0]) as ws:
            await next_frame(ws, "history")
            # A second process (as `manage.py changepassword` would be): only Redis connects the two.
            change = (
                "from django.contrib.auth import get_user_model\n"
                "user = get_user_model().objects.get(username='far')\n"
                "user.set_password('another password 9')\n"
                "user.save()\n"
            )
            await asyncio.to_thread(server.django, change)
            # Well before the periodic check (30 s): the event came through Redis.
            assert await close_code(ws) == 4401


# --- 3. login throttling ----------------------------------------------------------------------


def test_failed_logins_lock_the_account_and_the_address_separately(live: Live) -> None:
    attacker = Browserless(live.port, source="127.0.0.2")
    statuses = [attacker.log_in("alice", f"guess {n}").status for n in range(5)]
    assert statuses == [200, 200, 200, 200, 429]

    # The account is locked from everywhere, even with the right password.
    elsewhere = Browserless(live.port, source="127.0.0.3")
    locked = elsewhere.log_in("alice")
    assert locked.status == 429 and LOCKED in locked.body and "15 minutes" in locked.body
    assert "sessionid" not in elsewhere.cookies
    # The address is locked for every account.
    assert attacker.log_in("bob").status == 429
    # Another account from another address is not.
    bob = Browserless(live.port, source="127.0.0.4")
    assert bob.log_in("bob").status == 302 and "sessionid" in bob.cookies


def test_x_forwarded_for_counts_only_behind_a_trusted_proxy(live: Live, proxied: Live) -> None:
    # No proxy configured: X-Forwarded-For is whatever the client wrote, and is ignored.
    spoofer = Browserless(live.port, source="127.0.0.5")
    for n in range(5):
        form = {"username": f"nobody{n}", "password": "x"}
        spoofer.request("POST", "/login/", form, {"X-Forwarded-For": f"198.51.100.{n}"})
    assert spoofer.log_in("page").status == 429

    # One trusted proxy: the client is the address it appended (the right-most one).
    proxy = Browserless(proxied.port, source="127.0.0.6", headers={"Host": "chat.example.com"})
    for n in range(5):
        proxy.request(
            "POST", "/login/", {"username": f"nobody{n}", "password": "x"}, {"X-Forwarded-For": "203.0.113.9"}
        )
    # What the client itself wrote in front does not get it out of the lockout...
    dana = {"username": "dana", "password": PASSWORD}
    spoofed = proxy.request("POST", "/login/", dana, {"X-Forwarded-For": "10.9.9.9, 203.0.113.9"})
    assert spoofed.status == 429
    # ...while another client behind the same proxy logs in.
    other = Browserless(proxied.port, source="127.0.0.6", headers={"Host": "chat.example.com"})
    fine = other.request("POST", "/login/", dana, {"X-Forwarded-For": "203.0.113.10"})
    assert fine.status == 302


# --- 4. security headers ----------------------------------------------------------------------


def assert_hardened(response: Response, what: str) -> None:
    policy = response.headers.get("Content-Security-Policy", "")
    for part in CSP_PARTS:
        assert part in policy, (what, policy)
    assert "unsafe" not in policy, (what, policy)
    assert response.headers.get("X-Content-Type-Options") == "nosniff", what
    assert response.headers.get("X-Frame-Options") == "DENY", what
    assert response.headers.get("Referrer-Policy") == "same-origin", what


def test_every_response_carries_the_security_headers(live: Live) -> None:
    client = Browserless(live.port, source="127.0.0.7")
    no_csrf_cookie = Browserless(live.port, source="127.0.0.7")
    no_csrf_cookie.cookies.clear()
    cases = [
        (client, "GET", "/login/", None, {}, 200),
        (client, "GET", "/admin/login/", None, {}, 200),
        (client, "GET", "/no/such/page/", None, {}, 404),
        (client, "GET", "/static/chat/chat.js", None, {}, 200),
        (client, "GET", "/static/chat/chat.css", None, {}, 200),
        (client, "GET", "/static/no-such-file.js", None, {}, 404),
        (no_csrf_cookie, "POST", "/login/", {"username": "x", "password": "y"}, {}, 403),
        (client, "GET", "/login/", None, {"Host": "evil.example"}, 400),  # not in ALLOWED_HOSTS
    ]
    for sender, method, path, form, headers, status in cases:
        response = sender.request(method, path, form, headers)
        assert response.status == status, (method, path, response.status)
        assert_hardened(response, f"{method} {path} -> {status}")

    # The chat page keeps its own policy, with its websocket.
    account = live.accounts["page"]
    page = Browserless(live.port, cookies={"sessionid": account["sessions"][0]})
    response = page.request("GET", f"/c/{account['conversation']}/")
    assert response.status == 200
    assert_hardened(response, "chat page")
    assert f"connect-src 'self' ws://127.0.0.1:{live.port}" in response.headers["Content-Security-Policy"]


def test_hsts_is_sent_on_https_when_configured(live: Live, proxied: Live) -> None:
    behind_tls = Browserless(proxied.port, headers={"Host": "chat.example.com", "X-Forwarded-Proto": "https"})
    response = behind_tls.request("GET", "/login/")
    assert response.status == 200
    assert response.headers.get("Strict-Transport-Security") == "max-age=3600"
    # Never on plain HTTP, and not at all unless BOOCODE_HSTS_SECONDS is set.
    plain = Browserless(proxied.port, headers={"Host": "chat.example.com", "X-Forwarded-Proto": "http"})
    assert "Strict-Transport-Security" not in plain.request("GET", "/login/").headers
    # Without a trusted proxy, X-Forwarded-Proto is the client's word: not HTTPS, no HSTS.
    unset = Browserless(live.port, headers={"X-Forwarded-Proto": "https"})
    assert "Strict-Transport-Security" not in unset.request("GET", "/login/").headers

"""Web-layer hardening in one process: the chat socket through the real ASGI stack
(WebsocketCommunicator), the views through Django's client, the services on the database.

Covers what needs the server's own settings or database changed under a running socket:
trusted origins, deactivation, expiry and deleted sessions, characters the database refuses,
the lockout in the admin and its cool-off.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
from datetime import timedelta
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.contrib.auth import get_user_model
from django.contrib.sessions.models import Session
from django.db.models import F
from django.test import Client
from django.utils import timezone

from boocode.asgi import application
from boocode.chat.models import Conversation, Message, ToolCall
from boocode.chat.turn.registry import registry
from tests.support.accounts import conversation_of, login, stored
from tests.support.llm import Call, ScriptedLLM, Stall, Text, ToolCalls
from tests.support.processes import PYTHON, ROOT
from tests.support.tabs import Tab, logged_in_tab

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("fresh_state", "close_model_session"),  # the chat tests' state
    pytest.mark.processes,
]

PASSWORD = "correct horse battery staple"


async def close_code(ws: WebsocketCommunicator, within: float = 5.0) -> int:
    """Frames are skipped until the consumer closes the socket; its close code."""
    async with asyncio.timeout(within):
        while True:
            message = await ws.receive_output(timeout=within)
            if message["type"] == "websocket.close":
                return message.get("code", 1000)


async def still_open(tab: Tab) -> None:
    """The socket answers a frame."""
    await tab.send({"type": "cancel"})
    assert (await tab.next("error"))["code"] == "not_running"


# --- 1. origins: what the operator trusts -----------------------------------------------------


async def handshake(origin: str | None, host: str = "127.0.0.1", **extra: str) -> bool:
    cookie = await login("alice")
    conversation = await conversation_of("alice")
    headers = [(b"host", host.encode()), (b"cookie", f"sessionid={cookie}".encode())]
    if origin is not None:
        headers.append((b"origin", origin.encode()))
    headers += [(name.replace("_", "-").encode(), value.encode()) for name, value in extra.items()]
    ws = WebsocketCommunicator(application, f"/ws/conversations/{conversation}/", headers=headers)
    connected, _ = await ws.connect(timeout=5)
    await ws.disconnect()
    return connected


async def test_origins_the_operator_lists_are_allowed_and_nothing_else(settings: Any) -> None:
    settings.ALLOWED_ORIGINS = ["https://chat.example.com"]
    settings.CSRF_TRUSTED_ORIGINS = ["https://*.example.org"]
    settings.TRUSTED_PROXY_COUNT = 0
    assert await handshake("https://chat.example.com")
    assert await handshake("https://team.example.org")
    assert await handshake("http://127.0.0.1:8000", host="127.0.0.1:8000")
    assert await handshake("https://127.0.0.1:443", host="127.0.0.1", x_forwarded_proto="https") is False
    for origin, host in [
        ("http://chat.example.com", "127.0.0.1"),  # listed with https only
        ("https://chat.example.com:8443", "127.0.0.1"),
        ("http://team.example.org", "127.0.0.1"),
        ("http://127.0.0.1", "127.0.0.1:8000"),
        ("http://evil.example", "evil.example"),  # its own origin, but not one of our hosts
        ("https://chat.example.com", "evil.example"),
        ("null", "127.0.0.1"),
        (None, "127.0.0.1"),
    ]:
        assert await handshake(origin, host=host) is False, (origin, host)

    # Behind a trusted proxy, X-Forwarded-Proto says the page was https.
    settings.TRUSTED_PROXY_COUNT = 1
    assert await handshake("https://127.0.0.1", x_forwarded_proto="https")
    assert await handshake("http://127.0.0.1", x_forwarded_proto="https") is False


def test_a_malformed_allowed_origin_stops_start_up(tmp_path: Any) -> None:
    env = {**os.environ, "BOOCODE_DATA_DIR": str(tmp_path), "BOOCODE_ALLOWED_ORIGINS": "chat.example.com"}
    result = subprocess.run([PYTHON, "manage.py", "check"], cwd=ROOT, env=env, capture_output=True, text=True)
    assert result.returncode != 0
    assert "BOOCODE_ALLOWED_ORIGINS: 'chat.example.com' is not an origin" in result.stderr


# --- 2. sockets die with the session ----------------------------------------------------------


@sync_to_async
def deactivate(username: str) -> None:
    user = get_user_model().objects.get(username=username)
    user.is_active = False
    user.save()


async def test_deactivating_a_user_closes_their_sockets_at_once() -> None:
    alice, bob = await login("alice"), await login("bob")
    mine = Tab(await conversation_of("alice"), alice)
    theirs = Tab(await conversation_of("bob"), bob)
    await mine.open()
    await theirs.open()
    await deactivate("alice")
    assert await close_code(mine.ws) == 4401
    await still_open(theirs)
    await theirs.close()


async def test_an_expired_session_closes_a_silent_socket(monkeypatch: pytest.MonkeyPatch) -> None:
    from boocode.chat.web import consumers

    monkeypatch.setattr(consumers, "SESSION_CHECK_INTERVAL", 0.1)
    tab = await logged_in_tab()
    cookie = tab.cookie
    past = timezone.now() - timedelta(seconds=1)
    await sync_to_async(Session.objects.filter(pk=cookie).update)(expire_date=past)
    assert await close_code(tab.ws) == 4401


def test_a_session_verdict_is_reused_only_while_what_it_rests_on_is_unchanged(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from django.contrib.auth.hashers import make_password

    from boocode.security import sessions

    users = get_user_model().objects
    carol, dave = users.create_user("carol", password="pw-1-carol"), users.create_user("dave")
    client = Client()
    client.force_login(carol)
    key = client.session.session_key
    asked = []
    django_says = sessions._django_says
    monkeypatch.setattr(sessions, "_django_says", lambda *args: asked.append(args) or django_says(*args))

    assert sessions.session_is_current(key, carol.pk) and len(asked) == 1
    assert sessions.session_is_current(key, carol.pk) and len(asked) == 1  # nothing changed: reused
    assert not sessions.session_is_current(key, dave.pk)  # another person: Django's own check
    # Each change made behind Django's back (no signal) is seen by the next check.
    users.filter(pk=carol.pk).update(password=make_password("pw-2-carol"))
    assert not sessions.session_is_current(key, carol.pk)
    carol.refresh_from_db()
    client.force_login(carol)  # a new session, with the new password's hash
    key = client.session.session_key
    assert sessions.session_is_current(key, carol.pk)
    users.filter(pk=carol.pk).update(is_active=False)
    assert not sessions.session_is_current(key, carol.pk)
    users.filter(pk=carol.pk).update(is_active=True)
    assert sessions.session_is_current(key, carol.pk)
    Session.objects.filter(pk=key).update(expire_date=timezone.now() - timedelta(seconds=1))
    asked.clear()
    assert not sessions.session_is_current(key, carol.pk) and asked == []  # expired: refused by the read


async def test_no_turn_starts_once_the_session_is_gone(llm: ScriptedLLM) -> None:
    tab = await logged_in_tab()
    conversation, cookie = tab.conversation_id, tab.cookie
    # Deleted behind Django's back (no signal): the frame itself finds out.
    await sync_to_async(Session.objects.filter(pk=cookie).delete)()
    llm.script(Text("should never be asked"))
    await tab.send({"type": "user_message", "text": "hello?"})
    assert await close_code(tab.ws) == 4401
    assert not registry.running(conversation)
    assert await stored(conversation) == []
    assert llm.requests == []


@pytest.mark.parametrize(
    "frame",
    [
        {"type": "user_message", "text": "x" * 40_000},  # refused: too long
        {"type": "user_message", "text": "hello", "attachments": "not a list"},  # refused: attachments
        {"type": "cancel", "note": "user_message"},  # another frame that mentions a message
        {"type": "user_message"},  # no text
    ],
    ids=["too-long", "bad-attachments", "mentions-a-message", "no-text"],
)
async def test_a_message_frame_from_a_gone_session_is_answered_by_the_close(frame: dict[str, Any]) -> None:
    # A message's session check runs in its turn's first read; a frame refused before any turn
    # starts is still checked first: the socket closes, no error frame tells it anything.
    tab = await logged_in_tab()
    cookie = tab.cookie
    await sync_to_async(Session.objects.filter(pk=cookie).delete)()
    await tab.ws.send_to(text_data=json.dumps(frame))
    async with asyncio.timeout(5):
        while True:
            message = await tab.ws.receive_output(timeout=5)
            if message["type"] == "websocket.close":
                break
            assert json.loads(message["text"])["type"] != "error", message
    assert message.get("code") == 4401


async def test_a_message_while_a_turn_runs_from_a_gone_session_closes_the_socket(llm: ScriptedLLM) -> None:
    cookie = await login("alice")
    conversation = await conversation_of("alice")
    other = Tab(conversation, await login("alice"))  # the same person in another browser
    await other.open()
    llm.script(Stall(seconds=30))
    await other.send({"type": "user_message", "text": "a long one"})
    await other.next("turn_start")
    tab = Tab(conversation, cookie)
    await tab.open()
    await sync_to_async(Session.objects.filter(pk=cookie).delete)()
    await tab.send({"type": "user_message", "text": "and another"})
    assert await close_code(tab.ws) == 4401
    assert [content for role, _, content in await stored(conversation) if role == "user"] == ["a long one"]
    await other.send({"type": "cancel"})
    await other.next("turn_end")


# --- 3. lockouts in the admin, and the cool-off -----------------------------------------------


def test_lockouts_show_in_the_admin_and_end_after_the_cool_off() -> None:
    from axes.models import AccessAttempt

    user_model = get_user_model()
    user_model.objects.create_user("alice", password=PASSWORD)
    admin = Client()
    admin.force_login(user_model.objects.create_superuser("root", password="root-password-1"))
    client = Client(REMOTE_ADDR="192.0.2.10")
    wrong = {"username": "alice", "password": "wrong"}
    statuses = [client.post("/login/", wrong).status_code for _ in range(5)]
    assert statuses == [200, 200, 200, 200, 429]

    attempts = admin.get("/admin/axes/accessattempt/")
    assert attempts.status_code == 200
    assert b"alice" in attempts.content and b"192.0.2.10" in attempts.content

    def after(minutes: int) -> int:
        AccessAttempt.objects.update(attempt_time=F("attempt_time") - timedelta(minutes=minutes))
        return client.post("/login/", {"username": "alice", "password": PASSWORD}).status_code

    assert after(14) == 429  # BOOCODE_LOGIN_COOLOFF_MINUTES is 15 (this failure restarts it)
    assert after(16) == 302


# --- 5. characters the database refuses -------------------------------------------------------


async def test_bad_characters_in_a_message_are_refused_and_nothing_is_lost(llm: ScriptedLLM) -> None:
    tab = await logged_in_tab()
    conversation = tab.conversation_id
    cases = [
        ('{"type": "user_message", "text": "bad \\ud800 x"}', "unpaired surrogate (U+D800) at character 5"),
        ('{"type": "user_message", "text": "nul\\u0000"}', "NUL character (U+0000) at character 4"),
        ('{"type": "user_message", "text": "\\udfff and \\u0000"}', "(U+DFFF) at character 1"),
    ]
    for frame, problem in cases:
        await tab.ws.send_to(text_data=frame)
        error = await tab.next()
        assert (error["type"], error["code"]) == ("error", "bad_text"), frame
        assert problem in error["message"], error
    assert not registry.running(conversation) and llm.requests == []
    assert await stored(conversation) == []

    llm.script(Text("fine"))
    await tab.send({"type": "user_message", "text": "a good one 🎉"})
    assert (await tab.until_turn_end())["status"] == "complete"
    assert await stored(conversation) == [
        ("user", "complete", "a good one 🎉"),
        ("assistant", "complete", "fine"),
    ]
    await tab.close()


def test_bad_characters_in_a_title_are_refused() -> None:
    user = get_user_model().objects.create_user("alice")
    conversation = Conversation.objects.create(owner=user, title="Plans")
    client = Client()
    client.force_login(user)
    url = f"/c/{conversation.pk}/rename/"
    response = client.post(url, {"title": "new\x00title"}, HTTP_ACCEPT="application/json")
    assert response.status_code == 400
    assert "NUL character (U+0000) at character 4" in response.json()["error"]
    response = client.post(url, {"title": "new\x00title"})  # a plain form post
    assert response.status_code == 400 and b"NUL character" in response.content
    conversation.refresh_from_db()
    assert conversation.title == "Plans"
    assert client.post(url, {"title": "Trip"}, HTTP_ACCEPT="application/json").json()["title"] == "Trip"


async def test_tool_call_arguments_the_database_refuses_are_stored_safely(llm: ScriptedLLM) -> None:
    tab = await logged_in_tab()
    llm.script(ToolCalls([Call("no_such_tool", '{"q": "a\ud800b\x00c"}')]), Text("done"))
    await tab.send({"type": "user_message", "text": "call something odd"})
    end = await tab.until_turn_end()
    assert end["status"] == "complete", end
    arguments = await sync_to_async(lambda: ToolCall.objects.get().arguments)()
    assert arguments == '{"q": "a\ufffdb\ufffdc"}'
    await tab.close()


def test_tool_output_the_database_refuses_is_stored_safely() -> None:
    from boocode.chat.turn import conversations as services
    from mcpclient.core.results import ToolResult

    user = get_user_model().objects.create_user("alice")
    conversation = Conversation.objects.create(owner=user)
    message = Message.objects.create(conversation=conversation, role="console")
    call = services.add_tool_call(message.pk, call_id="c1", name="toolbox_echo", arguments="{}")
    result = ToolResult(output="a\ud800b\x00c", parts=[{"type": "text", "text": "x\x00\udfff"}])
    payload = services.finish_tool_call(call, result, 5)
    row = ToolCall.objects.get()
    assert (row.output, row.parts) == ("a\ufffdb\ufffdc", [{"type": "text", "text": "x\ufffd\ufffd"}])
    assert payload["output"] == row.output
    assert json.loads(json.dumps(payload))["output"] == "a\ufffdb\ufffdc"

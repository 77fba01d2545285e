"""MCP Apps in the chat: a tool call keeps its view, and the view is served for a sandboxed frame.

A real turn (the scripted model calls the toolbox's ``show_clock``, whose ``_meta.ui`` points at
``ui://toolbox/clock.html``) over the toolbox with its apps group; the view is fetched as the
page's frame fetches it, by the conversation's owner and by others.
"""

from __future__ import annotations

import asyncio
from typing import Any
from urllib.parse import urlsplit

import pytest
from channels.testing import HttpCommunicator
from django.contrib.auth import get_user_model
from django.core.exceptions import ImproperlyConfigured
from django.test import AsyncClient

from boocode.asgi import application
from boocode.chat.models import Conversation, ToolCall
from boocode.chat.turn.loop import TurnRequest, run_turn
from boocode.chat.web import app_views
from mcpclient.core import mcp_apps
from mcpclient.engine.hub import Hub
from tests.support.accounts import web_client
from tests.support.hubs import make_config
from tests.support.llm import Call, ScriptedLLM, Text, ToolCalls
from tests.support.processes import toolbox_entry

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.processes]

CLOCK = "ui://toolbox/clock.html"
CLOCK_HTML = "<!DOCTYPE html><html><body><p id=clock>clock</p></body></html>"
# The view's first script (no frame origins declared): it takes WebRTC out and keeps no frames.
GUARD = f"<script>{app_views.GUARD.replace('__ALLOW_FRAMES__', 'false')}</script>"
SERVED_CLOCK = CLOCK_HTML.replace("<!DOCTYPE html>", "<!DOCTYPE html>" + GUARD)
# The spec's restrictive default, opened only for what the clock declares that is an origin.
CLOCK_POLICY = (
    "default-src 'none'; "
    "script-src 'unsafe-inline' https://cdn.clock.example; "
    "style-src 'unsafe-inline' https://cdn.clock.example; "
    "img-src data: blob: https://cdn.clock.example; "
    "font-src data: https://cdn.clock.example; "
    "media-src data: blob: https://cdn.clock.example; "
    "connect-src https://api.clock.example; "
    "frame-src 'none'; base-uri 'none'; worker-src 'none'; webrtc 'block'; object-src 'none'; "
    "form-action 'none'; frame-ancestors 'self'; sandbox allow-scripts"
)


async def person(name: str) -> tuple[Any, AsyncClient]:
    """A new person, and a web client logged in as them."""
    user = await get_user_model().objects.acreate(username=name)
    return user, await web_client(name)


async def call(llm: ScriptedLLM, user: Any, *calls: Call) -> tuple[int, list[dict[str, Any]]]:
    """A conversation of ``user`` where the model made ``calls``; its id and the finished calls."""
    conversation = await Conversation.objects.acreate(owner=user)
    llm.script(ToolCalls(list(calls)), Text("Done."))
    events: list[dict[str, Any]] = []

    async def emit(event: dict[str, Any]) -> None:
        events.append(event)

    assert await run_turn(TurnRequest(conversation.pk, "go", user_id=user.pk), emit) == "complete"
    return conversation.pk, [event["call"] for event in events if event["type"] == "tool_result"]


async def test_a_call_keeps_its_view_and_its_owner_gets_the_view_under_its_declared_policy(
    llm: ScriptedLLM, apps_hub: Hub
) -> None:
    alice, client = await person("alice")
    conversation, [result] = await call(llm, alice, Call("tb_show_clock", {"city": "Rome"}))
    url = f"/c/{conversation}/calls/{result['id']}/view/"
    assert (result["view"], result["view_url"]) == (CLOCK, url)
    assert result["call_url"] == f"/c/{conversation}/calls/{result['id']}/"  # (was /c/0/ once finished)
    assert (await ToolCall.objects.aget(pk=result["id"])).view == CLOCK
    whole = (await client.get(result["call_url"])).json()
    assert (whole["view"], whole["view_url"]) == (CLOCK, url)  # a reloaded page finds it too

    response = await client.get(url)
    assert response.status_code == 200 and response.content.decode() == SERVED_CLOCK
    assert response["Content-Type"] == "text/html; charset=utf-8"
    assert response["Content-Security-Policy"] == CLOCK_POLICY
    assert response["X-Frame-Options"] == "SAMEORIGIN"
    assert response["Cache-Control"] == "private, no-store"
    assert response["Permissions-Policy"] == (
        "camera=(self), microphone=(), geolocation=(), clipboard-write=()"
    )

    _, mallory = await person("mallory")
    refused = await mallory.get(url)
    assert refused.status_code == 404 and CLOCK_HTML not in refused.content.decode()
    assert (await AsyncClient().get(url)).status_code == 302  # to the login page


async def test_views_that_cannot_be_shown_say_why_under_the_strict_policy(
    llm: ScriptedLLM, apps_hub: Hub, settings: Any
) -> None:
    alice, client = await person("alice")
    _, results = await call(
        llm, alice, Call("tb_huge_view", {}), Call("tb_plain_view", {}), Call("tb_echo", {"text": "x"})
    )
    by_tool = {result["tool"]: result for result in results}
    assert by_tool["echo"]["view"] == "" and by_tool["echo"]["view_url"] is None
    huge = await client.get(by_tool["huge_view"]["view_url"])
    assert huge.status_code == 502 and "larger than 4 MB" in huge.content.decode()
    assert len(huge.content) < 1024
    plain = await client.get(by_tool["plain_view"]["view_url"])
    assert plain.status_code == 502 and "not an MCP Apps document" in plain.content.decode()
    for response in (huge, plain):
        policy = response["Content-Security-Policy"]
        assert policy.startswith("default-src 'none'; script-src 'unsafe-inline'; ")
        assert policy.endswith(
            "connect-src 'none'; frame-src 'none'; base-uri 'none'; worker-src 'none'; webrtc 'block'; "
            "object-src 'none'; form-action 'none'; frame-ancestors 'self'; sandbox allow-scripts"
        )

    settings.MCP_APPS = False  # BOOCODE_APPS turned off since the call
    off = await client.get(by_tool["huge_view"]["view_url"])
    assert off.status_code == 404 and "turned off" in off.content.decode()


async def test_a_server_with_apps_off_gives_no_view_and_a_removed_one_says_so(
    llm: ScriptedLLM, apps_hub: Hub
) -> None:
    alice, client = await person("alice")
    _, [quiet] = await call(llm, alice, Call("quiet_show_clock", {"city": "Oslo"}))
    assert (quiet["view"], quiet["view_url"]) == ("", None)
    assert quiet["output"] == "12:00 in Oslo"  # the text result, as without Apps

    _, [clock] = await call(llm, alice, Call("tb_show_clock", {"city": "Rome"}))
    await apps_hub.apply([make_config("quiet", {**toolbox_entry("--feature", "apps"), "apps": False})])
    gone = await client.get(clock["view_url"])
    assert gone.status_code == 404
    assert "The MCP server &quot;tb&quot; is no longer configured" in gone.content.decode()


async def test_a_sessions_view_is_read_once_until_its_server_lists_its_resources_again(
    llm: ScriptedLLM, apps_hub: Hub
) -> None:
    alice, client = await person("alice")
    _, [first, second] = await call(llm, alice, Call("tb_counted_view", {}), Call("tb_counted_view", {}))
    for result in (first, second, first):  # two calls of the view, one shown twice: one read
        served = (await client.get(result["view_url"])).content.decode()
        assert served == f"<!DOCTYPE html>{GUARD}<p id=reads>1</p>"
    listed = apps_hub.connection("tb").resources.updated  # pulsed when the next listing ends
    assert (await apps_hub.call_tool("tb_relist_resources", {})).output == "relisted"
    await asyncio.wait_for(listed.wait(), 10)
    served = (await client.get(first["view_url"])).content.decode()
    assert served == f"<!DOCTYPE html>{GUARD}<p id=reads>2</p>"


async def test_views_can_be_served_from_an_origin_of_their_own(
    llm: ScriptedLLM, apps_hub: Hub, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings.PUBLIC_URL = "http://testserver"
    settings.MCP_APPS_ORIGIN = "http://views.testserver"
    settings.ALLOWED_HOSTS = [*settings.ALLOWED_HOSTS, "testserver", "views.testserver"]
    alice, client = await person("alice")
    conversation, [result] = await call(llm, alice, Call("tb_show_clock", {"city": "Rome"}))
    url = urlsplit(result["view_url"])
    assert (url.scheme, url.netloc) == ("http", "views.testserver") and url.path.startswith("/apps/views/")

    async def there(path: str) -> tuple[int, dict[str, str], str]:
        """GET ``path`` on the views' origin, as the frame does (no session cookie goes there)."""
        headers = [(b"host", b"views.testserver")]
        answer = await HttpCommunicator(application, "GET", path, headers=headers).get_response(timeout=10)
        named = {name.decode().lower(): value.decode() for name, value in answer["headers"]}
        return answer["status"], named, answer["body"].decode()

    status, headers, body = await there(url.path)
    assert (status, body) == (200, SERVED_CLOCK)
    assert headers["content-security-policy"] == CLOCK_POLICY.replace(
        "frame-ancestors 'self'", "frame-ancestors http://testserver"
    )
    # (Its X-Frame-Options, if any, is ignored: browsers follow a policy's frame-ancestors.)

    assert (await client.get(url.path)).status_code == 404  # not on BooCode's own origin
    same_origin = f"/c/{conversation}/calls/{result['id']}/view/"
    assert (await client.get(same_origin)).status_code == 404  # nor the same-origin address
    status, _, body = await there(url.path.replace("/apps/views/", "/apps/views/x"))
    assert status == 403 and "not valid" in body
    monkeypatch.setattr(app_views, "TOKEN_MAX_AGE", -1)
    status, _, body = await there(url.path)
    assert status == 403 and "has expired" in body

    page = await client.get(f"/c/{conversation}/")
    assert "frame-src 'self' http://views.testserver" in page["Content-Security-Policy"]


def test_the_guard_is_a_views_first_script_and_declarative_shadow_roots_are_disabled() -> None:
    """After the doctype (standards mode kept), else first; frames kept only with declared origins."""
    nothing = mcp_apps.ViewPolicy()
    framing = mcp_apps.view_policy({"ui": {"csp": {"frameDomains": ["https://maps.example"]}}})
    framed = f"<script>{app_views.GUARD.replace('__ALLOW_FRAMES__', 'true')}</script>"
    assert app_views.guarded("<p>no doctype", nothing) == f"{GUARD}<p>no doctype"
    bom = "\ufeff <!doctype HTML>"
    assert app_views.guarded(f"{bom}\n<p>x", framing) == f"{bom}{framed}\n<p>x"
    # A comment first: the doctype after it would not count anyway; the guard still runs first.
    assert app_views.guarded("<!-- x --><!DOCTYPE html>", nothing) == f"{GUARD}<!-- x --><!DOCTYPE html>"
    declarative = '<template ShadowRootMode="closed" shadowrootclonable><iframe srcdoc="x">'
    assert app_views.guarded(declarative, nothing) == (
        f'{GUARD}<template inertShadowRootMode="closed" inertshadowrootclonable><iframe srcdoc="x">'
    )
    assert "</script" not in app_views.GUARD.lower() and "<!--" not in app_views.GUARD


def test_the_views_origin_is_checked(settings: Any) -> None:
    from boocode import settings as project_settings

    assert project_settings._apps_origin("") == ""
    assert project_settings._apps_origin("https://Views.Example.com/") == "https://views.example.com"
    bad_ones = ("views.example.com", "https://views.example.com/apps", "ftp://views.example.com")
    for bad in (*bad_ones, "http://127.0.0.1:8000"):  # (the last is BooCode's own, PUBLIC_URL's default)
        with pytest.raises(ImproperlyConfigured, match="BOOCODE_APPS_ORIGIN"):
            project_settings._apps_origin(bad)

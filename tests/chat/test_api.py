"""The page's JSON endpoints, exports, preferences and page context: owners only, text stays text."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import AsyncClient, Client
from django.utils import timezone

from boocode.chat.models import Conversation, Message, Preference, ToolCall
from boocode.chat.turn.loop import TurnRequest, run_turn
from mcpclient.engine.hub import Hub
from mcpclient.runtime import set_hub
from tests.support.hubs import stop_process_hub
from tests.support.llm import Call, ScriptedLLM, Text, ToolCalls
from tests.support.processes import TEST_COMMANDS, toolbox_entry

pytestmark = [pytest.mark.django_db, pytest.mark.processes]

XSS = ['<script>alert("x")</script>', "<img src=x onerror=alert(1)>", '"><svg onload=alert(1)>']


@pytest.fixture
def mallory(client_for: Callable[..., Client]) -> Client:
    return client_for(get_user_model().objects.create_user("mallory"))


def conversation_with(owner: Any, *entries: tuple[str, str], title: str = "New conversation") -> Conversation:
    conversation = Conversation.objects.create(owner=owner, title=title)
    for role, content in entries:
        Message.objects.create(conversation=conversation, role=role, content=content)
    return conversation


# --- ownership and login --------------------------------------------------------------------
def test_every_new_endpoint_needs_a_login_and_the_owner(alice: Any, mallory: Client) -> None:
    conversation = conversation_with(alice, ("user", "secret plans"), title="secret plans")
    anonymous = Client()
    for url in (
        "/api/agents/",
        "/api/models/",
        "/api/search/?q=secret",
        f"/c/{conversation.pk}/export.md",
        f"/c/{conversation.pk}/export.json",
    ):
        response = anonymous.get(url)
        assert response.status_code == 302 and response["Location"].startswith("/login/"), url
    for url in (f"/c/{conversation.pk}/model/", "/prefs/theme/", "/c/new/"):
        assert anonymous.post(url, {"model": "x", "theme": "dark"}).status_code == 302, url

    assert mallory.get(f"/c/{conversation.pk}/export.md").status_code == 404
    assert mallory.get(f"/c/{conversation.pk}/export.json").status_code == 404
    assert mallory.post(f"/c/{conversation.pk}/model/", {"model": ""}).status_code == 404
    assert mallory.get(f"/api/models/?conversation={conversation.pk}").status_code == 404
    assert mallory.get("/api/search/?q=secret").json() == {"results": []}


def test_posts_need_the_csrf_token(alice: Any) -> None:
    client = Client(enforce_csrf_checks=True)
    client.force_login(alice)
    assert client.post("/prefs/theme/", {"theme": "dark"}).status_code == 403
    assert client.post("/c/new/", HTTP_ACCEPT="application/json").status_code == 403
    assert not Preference.objects.exists() and not Conversation.objects.exists()


# --- new conversation, landing, theme -------------------------------------------------------
def test_new_conversation_answers_json_and_the_landing_page_creates_nothing(
    client_for: Callable[..., Client], alice: Any
) -> None:
    client = client_for()
    landing = client.get("/c/new/")
    assert landing.status_code == 200 and b"Start a conversation" in landing.content
    assert "script-src 'self'" in landing["Content-Security-Policy"]
    assert not Conversation.objects.exists()

    response = client.post("/c/new/", {"agent": "Assistant"}, HTTP_ACCEPT="application/json")
    created = Conversation.objects.get()
    assert response.json() == {"id": created.pk, "url": f"/c/{created.pk}/"}
    assert created.agent_name == "Assistant" and created.owner == alice
    assert client.post("/c/new/")["Location"] == f"/c/{created.pk + 1}/"  # forms still redirect


def test_theme_is_remembered_per_user(client_for: Callable[..., Client], alice: Any) -> None:
    client = client_for()
    assert client.get("/c/new/").context["theme"] == "system"
    assert client.post("/prefs/theme/", {"theme": "dark"}, HTTP_ACCEPT="application/json").json() == {
        "theme": "dark"
    }
    assert client.get("/c/new/").context["theme"] == "dark"
    response = client.post("/prefs/theme/", {"theme": "neon"}, HTTP_ACCEPT="application/json")
    assert response.status_code == 400 and "system, light, dark" in response.json()["error"]
    other = client_for(get_user_model().objects.create_user("bob"))
    assert other.get("/c/new/").context["theme"] == "system"
    response = client.post("/prefs/theme/", {"theme": "light"}, HTTP_REFERER="https://evil.example/")
    assert response["Location"] == "/"  # never back to another site
    assert Preference.objects.get(user=alice).theme == "light"


# --- page context ----------------------------------------------------------------------------
def test_page_context_groups_conversations_by_day(client_for: Callable[..., Client], alice: Any) -> None:
    now = timezone.now()
    ages = {"today": 0, "yesterday": 1, "last week": 5, "long ago": 40}
    for title, days in ages.items():
        conversation = Conversation.objects.create(owner=alice, title=title)
        Conversation.objects.filter(pk=conversation.pk).update(updated_at=now - timedelta(days=days))
    conversation = Conversation.objects.get(title="today")
    context = client_for().get(f"/c/{conversation.pk}/").context
    grouped = context["conversation_groups"]
    groups = [(group["label"], [c.title for c in group["conversations"]]) for group in grouped]
    assert groups == [
        ("Today", ["today"]),
        ("Yesterday", ["yesterday"]),
        ("Last 7 days", ["last week"]),
        ("Older", ["long ago"]),
    ]
    assert context["is_staff"] is False and context["conversation_model"] == ""
    assert [agent["name"] for agent in context["agents_info"]] == context["agents"]
    defaults = [agent["default"] for agent in context["agents_info"]]
    assert defaults == [True] + [False] * (len(defaults) - 1)
    assert context["llm_default_model"] == ""  # no model configured in this test


def test_titles_are_shown_as_text(client_for: Callable[..., Client], alice: Any) -> None:
    for payload in XSS:
        Conversation.objects.create(owner=alice, title=payload)
    conversation = Conversation.objects.first()
    page = client_for().get(f"/c/{conversation.pk}/").content.decode()
    for payload in XSS:
        assert payload not in page
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in page


# --- agents ----------------------------------------------------------------------------------
@pytest.mark.django_db(transaction=True)
async def test_agents_api_lists_each_agents_tools(toolbox_hub: Hub, agents_file: Any) -> None:
    agents_file(
        "## Echoer\n---\ndescription: Only echoes\ntools: [toolbox_echo]\nmodel: small\n---\nEcho.\n\n"
        "## Reader\n---\ndescription: Files only\ntools: [view_file, grep]\n---\nRead.\n"
    )
    client = AsyncClient()
    user = await get_user_model().objects.acreate(username="alice")
    await client.aforce_login(user)
    agents = (await client.get("/api/agents/")).json()["agents"]
    assert [(a["name"], a["description"], a["model"], a["default"]) for a in agents] == [
        ("Echoer", "Only echoes", "small", True),
        ("Reader", "Files only", "", False),
    ]
    echo = agents[0]["tools"]
    assert [(t["name"], t["server"], t["tool"]) for t in echo] == [("toolbox_echo", "toolbox", "echo")]
    assert echo[0]["description"] == "Return the text unchanged."
    assert [(t["name"], t["server"], t["tool"]) for t in agents[1]["tools"]] == [
        ("grep", "", "grep"),
        ("view_file", "", "view_file"),
    ]

    # AGENTS.md edited: the next answer follows it.
    agents_file("## Everything\n---\ndescription: All of it\n---\nAnything.\n")
    agents = (await client.get("/api/agents/")).json()["agents"]
    assert [a["name"] for a in agents] == ["Everything"]
    names = {t["name"] for t in agents[0]["tools"]}
    assert {"toolbox_echo", "toolbox_add", "view_file"} <= names and "toolbox_delete_everything" not in names


@pytest.mark.django_db(transaction=True)
async def test_agents_api_follows_mcp_json_edits_at_once(settings: Any, tmp_path: Path) -> None:
    settings.MCP_AUTOSTART = True
    settings.MCP_CONFIG = tmp_path / "mcp.json"
    settings.MCP_STDIO_COMMANDS = TEST_COMMANDS
    settings.MCP_CONFIG.write_text(json.dumps({"mcpServers": {"tb": toolbox_entry()}}))
    set_hub(None)
    client = AsyncClient()
    user = await get_user_model().objects.acreate(username="alice")
    await client.aforce_login(user)
    try:
        tools = (await client.get("/api/agents/")).json()["agents"][0]["tools"]
        assert "tb_echo" in {t["name"] for t in tools}
        settings.MCP_CONFIG.write_text(
            json.dumps({"mcpServers": {"tb": toolbox_entry(enabled=False), "tb2": toolbox_entry()}})
        )
        tools = (await client.get("/api/agents/")).json()["agents"][0]["tools"]
        names = {t["name"] for t in tools}
        assert "tb2_echo" in names and "tb_echo" not in names
        # A stdio server run once for everybody is marked shared; a native tool is not.
        shared = {t["name"]: t["shared"] for t in tools}
        assert shared["tb2_echo"] is True and shared["view_file"] is False
    finally:
        await stop_process_hub()


# --- tool call objects ----------------------------------------------------------------------
@pytest.mark.django_db(transaction=True)
async def test_tool_calls_carry_title_server_tool_structured_and_output_url(
    llm: ScriptedLLM, hub: Hub, toolbox_config: Any
) -> None:
    await hub.start([toolbox_config("tb", "--titled-tools")])
    set_hub(hub)
    user = await get_user_model().objects.acreate(username="alice")
    conversation = await Conversation.objects.acreate(owner=user)
    calls = [Call("tb_forecast", {"city": "Rome"}), Call("view_file", {"path": "x"})]
    llm.script(ToolCalls(calls), Text("Warm."))
    events: list[dict[str, Any]] = []

    async def emit(event: dict[str, Any]) -> None:
        events.append(event)

    assert await run_turn(TurnRequest(conversation.pk, "weather?", user_id=user.pk), emit) == "complete"
    forecast, view = (e["call"] for e in events if e["type"] == "tool_result")
    if forecast["name"] != "tb_forecast":
        forecast, view = view, forecast
    assert (forecast["title"], forecast["server"], forecast["tool"]) == ("Weather forecast", "tb", "forecast")
    assert forecast["structured"] == {"temperature": 21.5, "unit": "C"}
    assert forecast["output_url"] == f"/c/{conversation.pk}/calls/{forecast['id']}/output/"
    assert (view["title"], view["server"], view["tool"], view["structured"]) == ("", "", "view_file", None)
    row = await ToolCall.objects.aget(pk=forecast["id"])
    assert (row.server, row.tool, row.title, row.structured) == (
        "tb",
        "forecast",
        "Weather forecast",
        {"temperature": 21.5, "unit": "C"},
    )
    set_hub(None)


# --- search ----------------------------------------------------------------------------------
@pytest.mark.postgres
def test_search_finds_titles_and_message_text_of_own_conversations(
    client_for: Callable[..., Client], alice: Any, mallory: Client
) -> None:
    trip = conversation_with(
        alice,
        ("user", "Where should we go?"),
        ("assistant", "The **mountains** are lovely in autumn; " + "filler words " * 30 + "pack boots."),
        title="Holiday",
    )
    recipe = conversation_with(alice, ("user", "A soup recipe"), title="Mountain soup")
    conversation_with(alice, ("user", "nothing here"), title="Other")
    gone = conversation_with(alice, title="Edited")
    old = Message.objects.create(conversation=gone, role="user", content="mountains of old text")
    Message.objects.filter(pk=old.pk).update(superseded_at=timezone.now())
    Message.objects.create(conversation=gone, role="notice", content="mountains in a notice")
    conversation_with(get_user_model().objects.get(username="mallory"), ("user", "mountains"), title="mine")

    client = client_for()
    results = client.get("/api/search/?q=mountain").json()["results"]
    assert {r["id"] for r in results} == {trip.pk, recipe.pk}  # prefixes match; superseded/notice don't
    by_id = {r["id"]: r for r in results}
    assert by_id[trip.pk]["title"] == "Holiday"
    snippet = by_id[trip.pk]["snippet"]
    assert snippet.startswith("The mountains are lovely") and len(snippet) <= 160 and "**" not in snippet
    assert by_id[recipe.pk]["snippet"] == ""
    assert client.get("/api/search/?q=MOUNTAINS+boots").json()["results"][0]["id"] == trip.pk
    assert client.get("/api/search/?q=mountains+volcano").json()["results"] == []
    assert client.get("/api/search/?q=%20%21%21").json()["results"] == []
    assert client.get("/api/search/").json()["results"] == []
    assert mallory.get("/api/search/?q=holiday").json()["results"] == []


@pytest.mark.postgres
def test_search_answers_text_never_html(client_for: Callable[..., Client], alice: Any) -> None:
    for payload in XSS:
        conversation_with(alice, ("user", f"payload {payload} inside"), title=f"t {payload}")
    response = client_for().get("/api/search/?q=payload")
    assert response["Content-Type"] == "application/json"
    assert response["X-Content-Type-Options"] == "nosniff"
    results = response.json()["results"]
    assert len(results) == 3
    for result in results:
        assert result["title"].startswith("t <") or result["title"].startswith('t "')
        assert result["snippet"].startswith("payload ") and result["snippet"].endswith(" inside")


@pytest.mark.postgres
def test_search_returns_at_most_50(client_for: Callable[..., Client], alice: Any) -> None:
    for index in range(55):
        conversation_with(alice, ("user", f"common word {index}"))
    assert len(client_for().get("/api/search/?q=common").json()["results"]) == 50


# --- exports ---------------------------------------------------------------------------------
def export_fixture(alice: Any) -> Conversation:
    conversation = conversation_with(alice, title='Trip <script>alert("t")</script>')
    Message.objects.create(conversation=conversation, role="user", content="Old question")
    Message.objects.filter(conversation=conversation).update(superseded_at=timezone.now())
    Message.objects.create(
        conversation=conversation, role="user", content="Plan **Rome** <img src=x onerror=alert(1)>"
    )
    answer = Message.objects.create(
        conversation=conversation,
        role="assistant",
        content="Use this:\n\n```\ncode ``` inside\n```\n",
        model="test-model",
        prompt_tokens=12,
        completion_tokens=30,
    )
    ToolCall.objects.create(
        message=answer,
        call_id="c1",
        name="tb_forecast",
        server="tb",
        tool="forecast",
        title="Weather",
        arguments='{"city": "Rome"}',
        output="21.5 C",
        status="done",
        structured={"temperature": 21.5},
    )
    return conversation


def test_export_markdown(client_for: Callable[..., Client], alice: Any) -> None:
    conversation = export_fixture(alice)
    response = client_for().get(f"/c/{conversation.pk}/export.md")
    assert response["Content-Type"] == "text/markdown; charset=utf-8"
    name = f"trip-scriptalerttscript-{conversation.pk}.md"
    assert response["Content-Disposition"] == f'attachment; filename="{name}"'
    assert response["Content-Security-Policy"] == "default-src 'none'; sandbox"
    assert response["X-Content-Type-Options"] == "nosniff"
    text = response.content.decode()
    assert text.startswith('# Trip &lt;script&gt;alert("t")&lt;/script&gt;\n')
    assert "Old question" not in text
    assert "Plan **Rome** <img src=x onerror=alert(1)>" in text  # the message as written
    assert "test-model · 12 + 30 tokens" in text
    assert "````\ncode ``` inside" not in text  # the answer's own fence is kept as written
    assert "**Tool call** tb\\_forecast on tb — done" in text
    assert '```json\n{\n  "city": "Rome"\n}\n```' in text and "```\n21.5 C\n```" in text


def test_export_json(client_for: Callable[..., Client], alice: Any) -> None:
    conversation = export_fixture(alice)
    response = client_for().get(f"/c/{conversation.pk}/export.json")
    assert response["Content-Type"] == "application/json"
    assert response["Content-Disposition"].startswith("attachment; filename=")
    assert response["Content-Security-Policy"] == "default-src 'none'; sandbox"
    data = json.loads(response.content)
    assert data["format"] == "boocode.conversation/1"
    assert data["conversation"]["title"] == 'Trip <script>alert("t")</script>'
    assert data["conversation"]["usage"] == {
        "prompt_tokens": 12,
        "completion_tokens": 30,
        "answers": 1,
        "answers_without_usage": 0,
    }
    assert [m["role"] for m in data["messages"]] == ["user", "assistant"]  # superseded left out
    call = data["messages"][1]["tool_calls"][0]
    assert (call["server"], call["tool"], call["title"], call["output"], call["structured"]) == (
        "tb",
        "forecast",
        "Weather",
        "21.5 C",
        {"temperature": 21.5},
    )
    assert data["messages"][1]["usage"] == {"prompt_tokens": 12, "completion_tokens": 30}


def test_export_of_a_huge_tool_output_is_whole(client_for: Callable[..., Client], alice: Any) -> None:
    conversation = conversation_with(alice, ("user", "big"))
    message = Message.objects.create(conversation=conversation, role="assistant")
    ToolCall.objects.create(message=message, call_id="c", name="t", output="y" * 50_000)
    data = client_for().get(f"/c/{conversation.pk}/export.json").json()
    assert len(data["messages"][1]["tool_calls"][0]["output"]) == 50_000

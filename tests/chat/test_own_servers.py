"""Servers of one's own: a person adds remote MCP servers for themselves on the chat page.

Real things: the toolbox over Streamable HTTP (its meta group says which header a request came
with), the ASGI application and its forms, the scripted model over HTTP, the secret store in the
database. Alice adds a server; it is hers alone on every path, under the rules of a shared server
(the read-only guard, approval of writes, the egress policy), and it goes when she removes it.
"""

from __future__ import annotations

import html
import re
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import reverse

from boocode.chat.llm.status import status_payload
from mcpclient.core.egress import OWN_SERVER_REFUSED, EgressAllow
from mcpclient.engine.hub import Hub
from mcpclient.models import McpServer, PersonalServer, StoredSecret
from mcpclient.runtime import people, personal, set_hub
from mcpclient.secrets import store as secret_store
from tests.support.accounts import join, login, new_conversation, web_client
from tests.support.hubs import make_config
from tests.support.llm import Call, ScriptedLLM, Text, ToolCalls
from tests.support.processes import ROOT, TEST_COMMANDS, HttpServer, toolbox_entry
from tests.support.tabs import logged_in

TOKEN = "Bearer sk-own-server-0123456789abcdef"


def form(**fields: Any) -> dict[str, Any]:
    return {
        "name": "mine",
        "url": "https://mcp.example.com/mcp",
        "transport": "http",
        "sign_in": "none",
        "next": "/",
        **fields,
    }


# --- adding: every field checked, nothing stored on error ------------------------------------------
@pytest.mark.django_db
def test_adding_checks_each_field_names_it_and_stores_nothing_when_refused(settings: Any) -> None:
    alice = get_user_model().objects.create_user("alice")
    McpServer.objects.create(name="shared", config={"command": "npx"})
    cases = [
        (form(name="my server"), "name", "letters, digits"),
        (form(name="x" * 41), "name", "1 to 40"),
        (form(name="shared"), "name", 'The name "shared" is taken on this BooCode: pick another.'),
        (form(transport="stdio"), "transport", '"http" (Streamable HTTP) or "sse"'),
        (form(url="file:///etc/passwd"), "url", "https:// (or http://) address"),
        (form(url="npx -y @evil/server"), "url", "https:// (or http://) address"),
        (form(url="https://user:secret@mcp.example.com/mcp"), "url", "must not hold a user name or password"),
        (form(sign_in="header", header_name="Host", header_value="x"), "header_name", "plain HTTP header"),
        (form(sign_in="header", header_name="X-Api-Key", header_value=""), "header_value", "1 to 4096"),
        (form(sign_in="header", header_name="X-Api-Key", header_value="a\nb"), "header_value", "one line"),
        (form(sign_in="password"), "sign_in", '"none", "header" or "oauth"'),
    ]
    for fields, field, message in cases:
        with pytest.raises(personal.PersonalServerError) as caught:
            personal.add(alice.pk, personal_draft(fields))
        assert caught.value.field == field and message in str(caught.value), fields
    assert not PersonalServer.objects.exists() and not StoredSecret.objects.exists()

    signed = form(sign_in="header", header_name="Authorization", header_value=TOKEN)
    row = personal.add(alice.pk, personal_draft(signed))
    # The header's value is encrypted in the secret store, never in the row.
    assert row.header_name == "Authorization" and TOKEN not in str(PersonalServer.objects.values().get())
    assert secret_store.get_secret(personal.HEADERS_KIND, str(row.pk)) == TOKEN
    assert TOKEN not in StoredSecret.objects.get().ciphertext
    with pytest.raises(personal.PersonalServerError, match='You already have a server called "mine"'):
        personal.add(alice.pk, personal_draft(form()))

    settings.PERSONAL_SERVERS_MAX = 2
    personal.add(alice.pk, personal_draft(form(name="second")))
    with pytest.raises(personal.PersonalServerError, match="You have 2 servers, the most this BooCode"):
        personal.add(alice.pk, personal_draft(form(name="third")))

    settings.PERSONAL_SERVER_DOMAINS = EgressAllow.parse("*.corp.example")
    with pytest.raises(personal.PersonalServerError, match=r'"mcp\.example\.com" is not among the hosts'):
        personal.add(alice.pk, personal_draft(form(name="fourth", url="https://mcp.example.com/x")))
    # A server added before the operator narrowed the hosts stays listed, with why it is not used.
    listed = personal.listing(alice.pk, lambda name: None)
    assert [server["status"] for server in listed] == ["refused", "refused"]
    assert "is not among the hosts" in listed[0]["reason"]
    assert personal.configs_for(alice.pk) == []

    settings.PERSONAL_SERVERS = False
    with pytest.raises(personal.PersonalServerError, match="switched off"):
        personal.add(alice.pk, personal_draft(form(name="fifth")))

    # Removing takes the header's value with it; another person cannot remove it.
    bob = get_user_model().objects.create_user("bob")
    assert personal.remove(bob.pk, row.pk) is None
    assert personal.remove(alice.pk, row.pk) == "mine"
    assert secret_store.get_secret(personal.HEADERS_KIND, str(row.pk)) is None


def personal_draft(fields: dict[str, Any]) -> personal.Draft:
    return personal.Draft(
        name=fields["name"],
        url=fields["url"],
        transport=fields["transport"],
        sign_in=fields["sign_in"],
        header_name=fields.get("header_name", ""),
        header_value=fields.get("header_value", ""),
        writes=fields.get("writes") == "on",
    )


@pytest.mark.django_db
def test_a_refused_form_comes_back_filled_in_but_for_the_headers_value(settings: Any) -> None:
    client = Client()
    client.force_login(get_user_model().objects.create_user("alice"))
    refused = form(url="ftp://mcp.example.com", sign_in="header", header_name="X-Api-Key")
    refused["header_value"] = "sk-123456"
    response = client.post("/servers/add/", refused, follow=True)
    page = response.content.decode()
    assert "The server was not added: The URL must be an https:// (or http://) address" in page
    assert 'value="ftp://mcp.example.com"' in page and 'value="X-Api-Key"' in page
    assert "sk-123456" not in page and "Enter it again." in page
    settings.PERSONAL_SERVERS = False
    assert "Your servers" not in client.get("/").content.decode()


# --- through the chat ------------------------------------------------------------------------------
@pytest.fixture
async def own_hub(settings: Any) -> AsyncIterator[Hub]:
    """The process hub as the runtime wires it, and the egress policy letting the tests' loopback
    server through (a person's server is checked like any address; see the egress test below)."""
    settings.EGRESS_ALLOW = EgressAllow.parse("127.0.0.1")
    hub = Hub(base_dir=ROOT, allowed_commands=TEST_COMMANDS, person_groups=people.groups_of)
    await hub.start([make_config("shared", toolbox_entry())])
    set_hub(hub)
    personal._read.clear()
    try:
        yield hub
    finally:
        set_hub(None)
        personal._read.clear()
        await hub.stop()


async def offered(
    llm: ScriptedLLM, username: str, calls: list[Call], conversation: int | None = None
) -> tuple[set[str], list[Any]]:
    """One turn of ``username`` (on ``conversation``, by default a new one) in which the model makes
    ``calls``: the tools it was offered and the calls' results."""
    asked = len(llm.requests)
    async with logged_in(username, conversation) as tab:
        llm.script(*([ToolCalls(calls)] if calls else []), Text("Done."))
        await tab.send({"type": "user_message", "text": "go"})
        end = await tab.until_turn_end()
        assert end["status"] == "complete", end
        results = [frame["call"] for frame in tab.frames if frame["type"] == "tool_result"]
    return {tool["function"]["name"] for tool in llm.requests[asked].get("tools") or []}, results


@pytest.mark.django_db(transaction=True)
@pytest.mark.processes
async def test_a_persons_server_is_theirs_alone_under_the_rules_of_a_shared_one(
    llm: ScriptedLLM, own_hub: Hub, http_toolbox: Callable[..., HttpServer]
) -> None:
    server = http_toolbox("--feature", "meta", "--feature", "writes", "--feature", "prompts")
    alice, bob = await web_client("alice"), await web_client("bob")
    added = await alice.post(
        "/servers/add/",
        form(url=server.url, sign_in="header", header_name="Authorization", header_value=TOKEN),
    )
    assert added.status_code == 302
    listed = (await alice.get("/api/servers/")).json()
    assert listed["enabled"] and [(s["name"], s["url"], s["sign_in"]) for s in listed["servers"]] == [
        ("mine", server.url, "header")
    ]
    assert TOKEN not in str(listed) and (await bob.get("/api/servers/")).json()["servers"] == []

    conversation = await new_conversation("alice")
    tools, results = await offered(
        llm, "alice", [Call("mine_request_header", {"name": "Authorization"})], conversation
    )
    # Her tools, signed in with her header; the write tools behind the read-only guard.
    assert {"mine_echo", "mine_request_header", "shared_echo"} <= tools
    assert not any(name.startswith("mine_") and "write" in name for name in tools)
    assert "mine_delete_everything" not in tools
    assert results[0]["output"] == TOKEN
    [mine] = [s for s in status_payload(await _id("alice"))["servers"] if s.get("own")]
    assert (mine["name"], mine["status"], mine["tool_count"] > 0) == ("mine", "ready", True)
    page = (await alice.get("/")).content.decode()
    assert "connected · " in page and server.url in page and "header Authorization" in page
    assert TOKEN not in page
    prompts = (await alice.get("/api/prompts/")).json()["prompts"]
    assert {p["server"] for p in prompts} == {"mine"}

    # Bob: nothing of it on any path.
    tools, results = await offered(llm, "bob", [Call("mine_echo", {"text": "psst"})])
    assert "shared_echo" in tools and not any(name.startswith("mine_") for name in tools)
    assert [s["name"] for s in status_payload(await _id("bob"))["servers"]] == ["shared"]
    assert results[0]["is_error"] and "psst" not in results[0]["output"]
    assert (await bob.get("/api/prompts/")).json()["prompts"] == []
    read = await bob.get("/api/resources/read/?server=mine&uri=toolbox://notes/readme.txt")
    assert read.status_code == 404
    hub_call = await own_hub.call_tool("mine_echo", {"text": "x"}, user_id=await _id("bob"))
    assert hub_call.is_error and hub_call.output.startswith('Unknown tool "mine_echo"')
    theirs = f"/servers/{listed['servers'][0]['id']}/remove/"
    assert (await bob.post(theirs, {"next": "/"})).status_code == 404

    # Removed: its tools go at once, its header's value with it.
    removed = await alice.post(theirs, {"next": "/"})
    assert removed.status_code == 302
    tools, _ = await offered(llm, "alice", [], conversation)
    assert not any(name.startswith("mine_") for name in tools)
    assert not await sync_to_async(StoredSecret.objects.filter(kind=personal.HEADERS_KIND).exists)()


@pytest.mark.django_db(transaction=True)
@pytest.mark.processes
async def test_writes_wait_for_the_person_and_a_private_address_is_refused_by_the_egress_policy(
    llm: ScriptedLLM,
    own_hub: Hub,
    http_toolbox: Callable[..., HttpServer],
    settings: Any,
    caplog: pytest.LogCaptureFixture,
) -> None:
    server = http_toolbox("--feature", "writes")
    alice = await web_client("alice")
    assert (await alice.post("/servers/add/", form(url=server.url, writes="on"))).status_code == 302
    async with logged_in() as tab:
        llm.script(ToolCalls([Call("mine_delete_everything", {"path": "/tmp/x"})]), Text("Done."))
        await tab.send({"type": "user_message", "text": "clean up"})
        card = (await tab.next("approval"))["approval"]
        assert card["name"] == "mine_delete_everything" and "writeTools" in card["reason"]
        await tab.send({"type": "approval_answer", "id": card["id"], "decision": "deny", "remember": False})
        assert (await tab.next("tool_result"))["call"]["is_error"]
        assert (await tab.until_turn_end())["status"] == "complete"

    # The same server without the egress policy's leave: a loopback address is never reached on a
    # person's word (an administrator's server in mcp.json would be).
    settings.EGRESS_ALLOW = EgressAllow()
    bob = await web_client("bob")
    assert (await bob.post("/servers/add/", form(url=server.url))).status_code == 302
    tools, _ = await offered(llm, "bob", [])
    assert not any(name.startswith("mine_") for name in tools)
    # Bob reads a sentence for him, not a setting he cannot change nor "connection refused"; the
    # operator's side (the session's last error, the log) names the rule and the setting.
    [state] = (await bob.get("/api/servers/")).json()["servers"]
    assert (state["status"], state["reason"]) == ("failed", OWN_SERVER_REFUSED), state
    connection = own_hub.user_connection("mine", await _id("bob"))
    assert connection is not None and connection.reason == OWN_SERVER_REFUSED
    assert "egress policy refused" in connection.last_error
    assert "BOOCODE_EGRESS_ALLOW" in connection.last_error
    assert "127.0.0.1 is a loopback address" in connection.last_error
    logged = [record.getMessage() for record in caplog.records if "mine" in record.getMessage()]
    assert any("BOOCODE_EGRESS_ALLOW" in line for line in logged), logged
    assert not any(OWN_SERVER_REFUSED in line for line in logged)


def _added(page: str) -> str:
    """What the page said of the server just added (the name left out)."""
    said = re.search(r'Your server "[^"]+" was added\.[^<]*', html.unescape(page))
    assert said is not None, page
    return re.sub(r'"[^"]+"', '"X"', said.group(0))


@pytest.mark.django_db(transaction=True)
@pytest.mark.processes
async def test_a_hidden_servers_name_is_free_for_ones_own_server_and_the_two_never_meet(
    llm: ScriptedLLM, own_hub: Hub, http_toolbox: Callable[..., HttpServer]
) -> None:
    """``team`` is shared with ``eng`` (Alice); Bob, outside it, adds a server of his own named
    ``team``: the name is his as any free name is, his ``team_*`` calls reach his server with his
    header, Alice's reach the shared one, and once Bob joins ``eng`` the name is the shared
    server's again for him too."""
    shared, own = http_toolbox("--feature", "meta"), http_toolbox("--feature", "meta")
    entry = {"type": "http", "url": shared.url, "groups": ["eng"]}
    await McpServer.objects.acreate(name="team", config=entry)  # (as mcp.json's sync would)
    await own_hub.apply([*[c for c in (own_hub.config("shared"),) if c], make_config("team", entry)])
    bob = await web_client("bob")
    await login("alice")
    await join("alice", "eng")
    ids = {"alice": await _id("alice"), "bob": await _id("bob")}

    # Accepted in the words of any free name.
    signed = {"sign_in": "header", "header_name": "Authorization", "header_value": TOKEN}
    said = {}
    for name in ("team", "spare"):
        added = await bob.post("/servers/add/", form(name=name, url=own.url, **signed), follow=True)
        said[name] = _added(added.content.decode())
    assert said["team"] == said["spare"]
    listed = {s["name"]: s for s in (await bob.get("/api/servers/")).json()["servers"]}
    assert listed["team"]["status"] == listed["spare"]["status"] == "ready", listed
    removed = await bob.post(f"/servers/{listed['spare']['id']}/remove/", {"next": "/"})
    assert removed.status_code == 302  # (fewer tools: the model is offered them all, not a search)

    # His calls of team_* reach his server (signed in with his header); Alice's the shared one.
    ask = [Call("team_request_header", {"name": "Authorization"})]
    tools, results = await offered(llm, "bob", ask)
    assert "team_request_header" in tools and results[0]["output"] == TOKEN, results
    tools, results = await offered(llm, "alice", ask)
    assert "team_request_header" in tools and results[0]["output"] == "", results
    header = {"name": "Authorization"}
    assert (await own_hub.call_tool("team_request_header", header, user_id=ids["bob"])).output == TOKEN
    assert (await own_hub.call_tool("team_request_header", header, user_id=ids["alice"])).output == ""
    # One "team" each in the status line: his own, and her shared one.
    for who, own_flag in (("bob", True), ("alice", False)):
        teams = [s for s in status_payload(ids[who])["servers"] if s["name"] == "team"]
        assert [(s["status"], s.get("own", False)) for s in teams] == [("ready", own_flag)], (who, teams)
    # His session is his own server's, kept apart from the shared server's name.
    session = own_hub.user_connection("team", ids["bob"])
    assert session is not None and session.config.owner_id == ids["bob"] and session.config.url == own.url
    assert own_hub.user_connection("team", ids["alice"]) is None
    assert own_hub.session_for("team", ids["alice"]) is own_hub.connection("team")

    # Bob joins eng: "team" is the shared server's for him now, his own is refused in its words.
    await join("bob", "eng")
    tools, results = await offered(llm, "bob", ask)
    assert results[0]["output"] == "", results
    [state] = [s for s in (await bob.get("/api/servers/")).json()["servers"] if s["name"] == "team"]
    assert (state["status"], state["reason"]) == (
        "refused",
        'The name "team" is taken on this BooCode now: rename your server to use it.',
    )
    teams = [s for s in status_payload(ids["bob"])["servers"] if s["name"] == "team"]
    assert [s.get("own", False) for s in teams] == [False]


@sync_to_async
def _id(username: str) -> int:
    return int(get_user_model().objects.get(username=username).pk)


@pytest.mark.django_db
def test_the_admin_lists_everyones_servers_without_secrets_and_deleting_one_takes_its_secrets(
    admin_client: Client,
) -> None:
    alice = get_user_model().objects.create_user("alice")
    signed = form(sign_in="header", header_name="X-Api-Key", header_value=TOKEN)
    row = personal.add(alice.pk, personal_draft(signed))
    listed = admin_client.get(reverse("admin:mcpclient_personalserver_changelist")).content.decode()
    assert "mine" in listed and "alice" in listed and "X-Api-Key" in listed and TOKEN not in listed
    page = admin_client.get(reverse("admin:mcpclient_personalserver_change", args=[row.pk])).content.decode()
    assert TOKEN not in page
    delete = reverse("admin:mcpclient_personalserver_delete", args=[row.pk])
    deleted = admin_client.post(delete, {"post": "yes"})
    assert deleted.status_code == 302
    assert not PersonalServer.objects.exists() and not StoredSecret.objects.exists()


@pytest.mark.django_db
def test_a_deleted_account_takes_its_servers_secrets_with_it() -> None:
    alice = get_user_model().objects.create_user("alice")
    signed = form(sign_in="header", header_name="X-Api-Key", header_value=TOKEN)
    personal.add(alice.pk, personal_draft(signed))
    secret_store.put_secret("oauth", f"mine@own:{alice.pk}", "{}")  # (as a sign-in would store it)
    alice.delete()
    assert not PersonalServer.objects.exists() and not StoredSecret.objects.exists()

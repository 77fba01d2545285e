"""Groups decide access: AGENTS.md ``groups:`` (who may pick an agent) and a server's ``groups``
(whose people get its tools, prompts, resources, completions, skills and views).

The real stack: the ASGI application, the scripted model over HTTP, the database, and the toolbox
over stdio twice: ``team`` (prompts, resources, skills and apps; ``"groups": ["eng"]``) and ``open``
(no groups). Alice is in ``eng``, Bob is not: every path is asked as each of them, and what Bob
asks of ``team`` gets nothing; Alice loses it all the moment she leaves the group.
"""

from __future__ import annotations

import asyncio
import dataclasses
import re
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db import connection
from django.test import AsyncClient
from django.urls import reverse

from agents.models import Agent
from agents.parser import parse_agents_text
from agents.roster import sync_agents
from mcpclient.config.entries import parse_server
from mcpclient.config.model import ConfigError, same_session
from mcpclient.config.shapes import SHAPES, entry_for
from mcpclient.core.access import may_use
from mcpclient.core.state import Status
from mcpclient.engine.hub import Hub
from mcpclient.models import McpServer
from mcpclient.runtime import hub_call, people, personal, set_hub, signin
from tests.support.accounts import join, login, new_conversation, stored, web_client
from tests.support.hubs import make_config
from tests.support.llm import Call, ScriptedLLM, Text, ToolCalls
from tests.support.processes import ROOT, TEST_COMMANDS, toolbox_entry
from tests.support.tabs import Tab, logged_in

AGENTS = """## General
Everybody's agent.

## Eng
---
groups: [eng]
---
The engineers' agent.
"""
TEAM_FEATURES = ("prompts", "resources", "skills", "apps")
README = "toolbox://notes/readme.txt"


# --- the rules ------------------------------------------------------------------------------------
def test_a_servers_groups_are_validated_and_kept_in_every_file_shape() -> None:
    config = parse_server("team", {"command": "npx", "groups": ["eng", "ops", "eng"]})
    assert config.groups == ("eng", "ops")
    for shape in SHAPES:
        assert parse_server("team", entry_for(shape, config)).groups == ("eng", "ops"), shape.label
    assert parse_server("open", {"command": "npx"}).groups == ()
    for groups, message in (
        ("eng", '"groups" must be an array of strings, got string'),
        ([], '"groups" is empty, so nobody could use the server'),
        ([" "], '"groups[0]" must be a group\'s name'),
        (["x" * 151], '"groups[0]" must be a group\'s name (1 to 150 characters)'),
    ):
        with pytest.raises(ConfigError, match=re.escape(message)):
            parse_server("team", {"command": "npx", "groups": groups})
    # Who may use a server is asked at every use: changing it keeps the running session.
    assert same_session(config, parse_server("team", {"command": "npx", "groups": ["ops"]}))
    other = parse_server("team", {"command": "npx", "args": ["-y"], "groups": ["eng"]})
    assert not same_session(config, other)


def test_who_may_use_fails_closed() -> None:
    assert may_use((), 7, None)  # no groups: everybody
    assert may_use(("eng",), None, None)  # no person: the process itself (a management command)
    assert not may_use(("eng",), 7, None)  # groups not known: none of them
    assert not may_use(("eng",), 7, frozenset({"ops"}))
    assert may_use(("eng", "ops"), 7, frozenset({"ops"}))


def test_an_agents_groups_are_parsed_and_bad_ones_named() -> None:
    parsed = parse_agents_text(AGENTS)
    assert [(agent.name, agent.groups) for agent in parsed.agents] == [("General", ()), ("Eng", ("eng",))]
    for front, message in (
        ("groups: eng", 'key "groups": must be a list of non-empty strings'),
        ("groups: []", 'key "groups": is empty, so nobody could pick the agent'),
        (f"groups: [{'x' * 151}]", "has a name longer than 150 characters"),
    ):
        errors = parse_agents_text(f"## A\n---\n{front}\n---\nx\n").errors
        assert errors and message in str(errors[0]), (front, errors)


@pytest.mark.processes
async def test_a_hub_that_cannot_know_a_persons_groups_serves_them_none_of_a_grouped_server(hub: Hub) -> None:
    await hub.start(
        [make_config("team", toolbox_entry(groups=["eng"])), make_config("open", toolbox_entry())]
    )
    assert all(snapshot.status is Status.READY for snapshot in hub.snapshots())
    assert hub.person_groups is None  # (the bare hub of the tests: nobody tells it)
    assert {tool.server for tool in hub.tools(7)} == {"open"}
    assert hub.session_for("team", 7) is None and hub.session_for("open", 7) is not None
    refused = await hub.call_tool("team_echo", {"text": "x"}, user_id=7)
    assert refused.is_error
    assert refused.output == 'Unknown tool "team_echo": it is not offered by any ready MCP server'
    assert {tool.server for tool in hub.tools(None)} == {"open", "team"}  # the process itself
    hub.person_groups = lambda user_id: {"eng"} if user_id == 7 else set()
    assert {tool.server for tool in hub.tools(7)} == {"open", "team"}
    assert {tool.server for tool in hub.tools(8)} == {"open"}
    assert not (await hub.call_tool("team_echo", {"text": "x"}, user_id=7)).is_error


# --- through the chat -----------------------------------------------------------------------------


@pytest.fixture
async def team_hub() -> AsyncIterator[Hub]:
    """The process hub as the runtime wires it for groups: ``team`` for ``eng``, ``open`` for all."""
    hub = Hub(base_dir=ROOT, allowed_commands=TEST_COMMANDS, person_groups=people.groups_of)
    features = [arg for feature in TEAM_FEATURES for arg in ("--feature", feature)]
    await hub.start(
        [make_config("team", toolbox_entry(*features, groups=["eng"])), make_config("open", toolbox_entry())]
    )
    assert all(snapshot.status is Status.READY for snapshot in hub.snapshots())
    await hub.load_skills(None, wait=10)
    set_hub(hub)
    people.forget()
    try:
        yield hub
    finally:
        set_hub(None)
        people.forget()
        await hub.stop()


@pytest.fixture
async def team(team_hub: Hub, agents_file: Callable[[str], Path]) -> dict[str, AsyncClient]:
    """AGENTS.md with an agent for ``eng``; Alice in ``eng``, Bob not; a web client for each."""
    agents_file(AGENTS)
    clients = {}
    for name in ("alice", "bob"):
        clients[name] = await web_client(name)
    await join("alice", "eng")
    return clients


@sync_to_async
def _leave(username: str, group: str) -> None:
    get_user_model().objects.get(username=username).groups.remove(Group.objects.get(name=group))


async def _notice(tab: Tab) -> str:
    """The text of the next notice stored in the conversation (a console answer)."""
    while (message := (await tab.next("message"))["message"])["role"] != "notice":
        pass
    return str(message["content"])


async def _seen(client: AsyncClient, conversation: int) -> dict[str, Any]:
    """What one person reaches of ``team`` through each endpoint (status codes and names)."""
    agents = (await client.get("/api/agents/")).json()["agents"]
    general = next(agent for agent in agents if agent["name"] == "General")
    prompts = (await client.get("/api/prompts/")).json()["prompts"]
    listed = (await client.get("/api/resources/")).json()
    skills = (await client.get("/api/skills/")).json()["skills"]
    read = await client.get(f"/api/resources/read/?server=team&uri={README}")
    city = "toolbox://cities/{city}"
    completed = await client.get(
        f"/api/complete/?server=team&ref=resource&name={city}&argument=city&value=Be"
    )
    prompt = await client.post("/api/prompts/get/", {"server": "team", "name": "greeting", "arguments": "{}"})
    skill = next((s for s in skills if s["server"] == "team"), None)
    picked = await client.post(
        f"/c/{conversation}/agent/", {"agent": "Eng"}, headers={"accept": "application/json"}
    )
    return {
        "agents": [agent["name"] for agent in agents],
        "tools": sorted({tool["server"] for tool in general["tools"] if tool["server"]}),
        "prompts": sorted({p["server"] for p in prompts}),
        "resources": sorted({s["name"] for s in listed["servers"]}),
        "skills": sorted({s["server"] for s in skills}),
        "read": read.status_code,
        "complete": completed.status_code,
        "prompt": prompt.status_code,
        "pick": picked.status_code,
        "skill": skill is not None,
    }


@pytest.mark.django_db(transaction=True)
@pytest.mark.processes
async def test_every_endpoint_gives_a_person_outside_the_groups_nothing_of_the_server_or_the_agent(
    team: dict[str, AsyncClient],
) -> None:
    alice, bob = await new_conversation("alice"), await new_conversation("bob")
    inside = {
        "agents": ["General", "Eng"],
        "tools": ["open", "team"],
        "prompts": ["team"],
        "resources": ["open", "team"],
        "skills": ["team"],
        "read": 200,
        "complete": 200,
        "prompt": 200,
        "pick": 200,
        "skill": True,
    }
    assert await _seen(team["alice"], alice) == inside
    outside = await _seen(team["bob"], bob)
    assert outside == {
        "agents": ["General"],
        "tools": ["open"],
        "prompts": [],
        "resources": ["open"],
        "skills": [],
        "read": 404,
        "complete": 404,
        "prompt": 400,
        "pick": 400,
        "skill": False,
    }
    # A skill's file by its name, asked directly: not found, like one that does not exist.
    assert (await team["bob"].get("/api/skills/read/?server=team&skill=pdf-forms")).status_code == 404

    # Alice leaves the group: the admin's change reaches her next request at once.
    await _leave("alice", "eng")
    assert await _seen(team["alice"], alice) == {**outside, "pick": 400}


@pytest.mark.django_db(transaction=True)
@pytest.mark.processes
async def test_a_turn_and_the_console_of_a_person_outside_the_groups_reach_nothing_of_the_server(
    llm: ScriptedLLM, team: dict[str, AsyncClient]
) -> None:
    async with logged_in("bob") as tab:
        llm.script(ToolCalls([Call("team_echo", {"text": "psst"})]), Text("Done."))
        await tab.send({"type": "user_message", "text": "use the team's echo"})
        result = (await tab.next("tool_result"))["call"]
        assert result["is_error"] and "psst" not in result["output"]
        assert (await tab.until_turn_end())["status"] == "complete"
        offered = {tool["function"]["name"] for tool in llm.requests[0]["tools"]}
        assert "open_echo" in offered and not any(name.startswith("team_") for name in offered)

        await tab.send({"type": "user_message", "text": "/tools"})
        listing = await _notice(tab)
        assert "open_echo" in listing and "team_" not in listing
        await tab.until_turn_end()
        await tab.send({"type": "user_message", "text": '/call team_echo {"text": "psst"}'})
        refused = (await tab.next("tool_result"))["call"]
        assert refused["is_error"] and refused["output"].startswith('Unknown tool "team_echo"')
        await tab.until_turn_end()
        # The status line names only the servers Bob may use.
        status = [frame for frame in tab.frames if frame["type"] == "status"]
        assert status and all([s["name"] for s in frame["servers"]] == ["open"] for frame in status)

    # Bob's conversation with the engineers' agent (picked before he left, or by hand in the
    # database): the turn is refused before the model is asked, and his message is kept.
    picked = await new_conversation("bob", "Eng")
    asked = len(llm.requests)
    async with logged_in("bob", picked) as tab:
        await tab.send({"type": "user_message", "text": "hello engineers"})
        end = await tab.until_turn_end()
        assert end["status"] == "failed"
        assert 'The agent "Eng" of this conversation is not available to you' in end["error"]
    assert len(llm.requests) == asked
    assert ("user", "complete", "hello engineers") in await stored(picked)


def _as_ghost(text: str) -> str:
    """An answer about ``team`` as it would read about ``ghost`` (the name is the only difference)."""
    return text.replace("team", "ghost")


async def _answers(client: AsyncClient, server: str) -> dict[str, tuple[int, str]]:
    """The status and body of every endpoint a person may ask about ``server``'s things."""
    city = "toolbox://cities/{city}"
    asked = {
        "read": await client.get(f"/api/resources/read/?server={server}&uri={README}"),
        "complete": await client.get(
            f"/api/complete/?server={server}&ref=resource&name={city}&argument=city&value=Be"
        ),
        "complete_prompt": await client.get(
            f"/api/complete/?server={server}&ref=prompt&name=greeting&argument=name&value=A"
        ),
        "prompt": await client.post(
            "/api/prompts/get/", {"server": server, "name": "greeting", "arguments": "{}"}
        ),
        "skill": await client.get(f"/api/skills/read/?server={server}&skill=pdf-forms"),
        "skill_file": await client.get(f"/api/skills/read/?server={server}&skill=pdf-forms&path=SKILL.md"),
    }
    return {key: (response.status_code, response.content.decode()) for key, response in asked.items()}


@pytest.mark.django_db(transaction=True)
@pytest.mark.processes
async def test_a_hidden_server_answers_as_one_that_does_not_exist_on_every_path(
    llm: ScriptedLLM, team: dict[str, AsyncClient]
) -> None:
    """Bob is not in ``eng``: what he asks of ``team`` (hidden) reads, byte for byte but for the
    name, as what he asks of ``ghost`` (no such server), on every path."""
    hidden, unknown = await _answers(team["bob"], "team"), await _answers(team["bob"], "ghost")
    assert {key: (status, _as_ghost(body)) for key, (status, body) in hidden.items()} == unknown
    assert all(status >= 400 for status, _ in unknown.values())

    async with logged_in("bob") as tab:
        outputs = {}
        for server in ("team", "ghost"):
            await tab.send({"type": "user_message", "text": f'/call {server}_echo {{"text": "psst"}}'})
            outputs[f"console {server}"] = (await tab.next("tool_result"))["call"]["output"]
            await tab.until_turn_end()
            llm.script(ToolCalls([Call(f"{server}_echo", {"text": "psst"})]), Text("Done."))
            await tab.send({"type": "user_message", "text": f"use {server}"})
            outputs[f"model {server}"] = (await tab.next("tool_result"))["call"]["output"]
            assert (await tab.until_turn_end())["status"] == "complete"
            llm.script(Text("Read."))
            attached = [{"server": server, "uri": README}]
            await tab.send({"type": "user_message", "text": "read this", "attachments": attached})
            while (echo := (await tab.next("message"))["message"])["role"] != "user":
                pass
            outputs[f"attached {server}"] = str(echo["attachments"])
            assert (await tab.until_turn_end())["status"] == "complete"  # (the model was asked)
            outputs[f"model read {server}"] = str(llm.requests[-1]["messages"][-1]["content"])
    assert outputs["console ghost"].startswith('Unknown tool "ghost_echo"')
    assert _as_ghost(outputs["console team"]) == outputs["console ghost"]
    assert _as_ghost(outputs["model team"]) == outputs["model ghost"]
    assert "not read" in outputs["attached ghost"]
    assert _as_ghost(outputs["attached team"]) == outputs["attached ghost"]
    assert _as_ghost(outputs["model read team"]) == outputs["model read ghost"]
    # What the model read back of the refused calls is the same too.
    last = [request["messages"][-1] for request in llm.requests]
    sent = [message["content"] for message in last if message["role"] == "tool"]
    assert len(sent) == 2 and _as_ghost(sent[0]) == sent[1]

    # A server of his own: a hidden server's name is his to take, as a name nothing has (refusing it
    # would tell him the server exists); the name of a server he may use is refused.
    for name, entry in (("team", toolbox_entry(groups=["eng"])), ("open", toolbox_entry())):
        await McpServer.objects.aget_or_create(name=name, defaults={"config": entry})  # as mcp.json's sync
    bob = await sync_to_async(lambda: get_user_model().objects.get(username="bob").pk)()
    draft = personal.Draft("team", "https://mcp.example.com/mcp", "http", "none", "", "", False)
    added = {}
    for name in ("team", "ghost"):
        row = await sync_to_async(personal.add)(bob, dataclasses.replace(draft, name=name))
        added[name] = (row.name, row.owner_id)
    assert added == {"team": ("team", bob), "ghost": ("ghost", bob)}
    with pytest.raises(personal.PersonalServerError) as refused:
        await sync_to_async(personal.add)(bob, dataclasses.replace(draft, name="open"))
    assert (str(refused.value), refused.value.field) == (
        'The name "open" is taken on this BooCode: pick another.',
        "name",
    )
    # Once he may use "team" (he joined eng), his own server of that name is refused, now.
    listed = await sync_to_async(personal.listing)(bob, lambda name: None)
    assert [(server["name"], server["status"]) for server in listed] == [
        ("ghost", "not_connected"),
        ("team", "not_connected"),
    ]
    await join("bob", "eng")
    listed = await sync_to_async(personal.listing)(bob, lambda name: None)
    assert [(server["name"], server["status"], server["reason"]) for server in listed] == [
        ("ghost", "not_connected", ""),
        ("team", "refused", 'The name "team" is taken on this BooCode now: rename your server to use it.'),
    ]
    assert [config.name for config in await sync_to_async(personal.configs_for)(bob)] == ["ghost"]


@pytest.mark.django_db(transaction=True)
async def test_signing_in_to_a_hidden_server_answers_as_for_one_that_does_not_exist() -> None:
    """Connect and disconnect, as a person and as staff outside the groups: a hidden server that
    signs in with OAuth (a shared one and a per-person one) reads as a name nothing has."""
    nowhere = "http://127.0.0.1:9/mcp"  # never asked: nobody here may connect them
    hub = Hub(base_dir=ROOT, allowed_commands=TEST_COMMANDS, person_groups=people.groups_of)
    remote = {"type": "http", "url": nowhere, "groups": ["eng"]}
    await hub.start(
        [
            make_config("vault", {**remote, "oauth": {"mode": "perUser"}}),
            make_config("safe", {**remote, "oauth": {}}),
        ]
    )
    set_hub(hub)
    people.forget()
    try:
        await login("bob")
        bob = await sync_to_async(lambda: get_user_model().objects.get(username="bob").pk)()
        for staff in (False, True):
            for hidden in ("vault", "safe"):
                if staff and hidden == "safe":
                    continue  # an administrator connects a shared server for everybody, groups or not
                for action in (signin.connect, signin.disconnect):
                    told = (await action(hidden, bob, staff=staff)).message
                    unknown = (await action("ghost", bob, staff=staff)).message
                    assert told.replace(hidden, "ghost") == unknown, (hidden, action.__name__, staff)
    finally:
        set_hub(None)
        people.forget()
        await hub.stop()


@pytest.mark.django_db(transaction=True)
@pytest.mark.processes
async def test_a_view_of_the_servers_stops_answering_when_its_person_leaves_the_group(
    llm: ScriptedLLM, team: dict[str, AsyncClient]
) -> None:
    conversation = await new_conversation("alice")
    async with logged_in("alice", conversation) as tab:
        llm.script(ToolCalls([Call("team_show_clock", {"city": "Rome"})]), Text("Done."))
        await tab.send({"type": "user_message", "text": "what time is it?"})
        call = (await tab.next("tool_result"))["call"]
        assert not call["is_error"]
        assert (await tab.until_turn_end())["status"] == "complete"
        frame = {"type": "view_request", "id": 1, "call": call["id"], "method": "tools/call"}
        await tab.send({**frame, "params": {"name": "tick", "arguments": {}}})
        assert (await tab.next("view_reply"))["result"]["content"][0]["text"] == "tick"
        view = await team["alice"].get(f"/c/{conversation}/calls/{call['id']}/view/")
        assert view.status_code == 200

        await _leave("alice", "eng")
        for number, (method, params) in enumerate(
            (("tools/call", {"name": "tick", "arguments": {}}), ("resources/read", {"uri": README})), start=2
        ):
            await tab.send({**frame, "id": number, "method": method, "params": params})
            reply = await tab.next("view_reply")
            # As for a server no longer configured: nothing says it is there for others.
            assert reply["error"] == 'The MCP server "team" is no longer configured.', method
        page = await team["alice"].get(f"/c/{conversation}/calls/{call['id']}/view/")
        assert page.status_code == 404
        assert "The MCP server &quot;team&quot; is no longer configured" in page.content.decode()
        # And the model no longer gets the server's tools.
        llm.script(Text("Nothing."))
        asked = len(llm.requests)
        await tab.send({"type": "user_message", "text": "again"})
        assert (await tab.until_turn_end())["status"] == "complete"
        offered = {tool["function"]["name"] for tool in llm.requests[asked]["tools"]}
        assert "open_echo" in offered and not any(name.startswith("team_") for name in offered)


@pytest.mark.django_db
def test_the_admin_shows_who_can_pick_each_agent_and_what_a_group_opens(
    admin_client: Any, agents_file: Callable[[str], Path]
) -> None:
    agents_file(AGENTS)
    sync_agents()
    engineers = Group.objects.create(name="eng")
    get_user_model().objects.create_user("ada").groups.add(engineers)
    listed = admin_client.get(reverse("admin:agents_agent_changelist")).content.decode()
    assert "everybody" in listed and ">eng<" in listed
    eng = Agent.objects.get(name="Eng").pk
    page = admin_client.get(reverse("admin:agents_agent_change", args=[eng])).content.decode()
    assert "<strong>eng</strong>: 1 person (ada)" in page
    group_page = admin_client.get(reverse("admin:auth_group_change", args=[engineers.pk])).content.decode()
    assert "Agents for this group: Eng" in group_page and "MCP servers for this group: none" in group_page


@pytest.mark.django_db(transaction=True)
@pytest.mark.processes
async def test_a_call_reads_the_persons_groups_again_once_the_last_read_is_old(
    team: dict[str, AsyncClient],
) -> None:
    alice = await sync_to_async(lambda: get_user_model().objects.get(username="alice").pk)()
    assert not (await hub_call("team_echo", {"text": "x"}, user_id=alice)).is_error
    # Left the group in another process (no signal here): this process reads it again within MAX_AGE.
    await sync_to_async(_leave_in_sql)(alice)
    await asyncio.sleep(people.MAX_AGE + 0.2)
    refused = await hub_call("team_echo", {"text": "x"}, user_id=alice)
    assert refused.is_error and refused.output.startswith('Unknown tool "team_echo"')


def _leave_in_sql(user_id: int) -> None:
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM auth_user_groups WHERE user_id = %s", [user_id])


@pytest.mark.django_db(transaction=True)
@pytest.mark.postgres
def test_the_turns_read_brings_the_owners_groups_fresh_even_a_change_no_signal_told() -> None:
    # Another process (or a hand-made row) changed the membership: no signal reached this one,
    # and its own read of the person's groups is recent. The turn's one read finds it all the same.
    from boocode.chat.models import Conversation
    from boocode.chat.turn import context
    from mcpclient.models import PersonalServer

    bob = get_user_model().objects.create_user("bob")
    conversation = Conversation.objects.create(owner=bob)
    eng = Group.objects.create(name="eng")
    people.load(bob.pk)
    assert people.groups_of(bob.pk) == frozenset()
    memberships = get_user_model().groups.through
    with connection.cursor() as cursor:  # behind the ORM's back: no m2m_changed
        cursor.execute(
            f"INSERT INTO {memberships._meta.db_table} (user_id, group_id) VALUES (%s, %s)", [bob.pk, eng.pk]
        )
    assert people.load(bob.pk) == frozenset()  # the cache of the last read: still "no group"
    context.read_for_model(conversation.pk, "hello")
    assert people.groups_of(bob.pk) == frozenset({"eng"})
    # No server of his own: nothing to read before his turn; one added: read in the same read.
    assert personal._read[bob.pk][1] == []
    personal._read.pop(bob.pk)
    PersonalServer.objects.create(owner=bob, name="mine", url="https://mcp.example.com/mcp")
    context.read_for_model(conversation.pk, "hello again")
    assert [config.name for config in personal._read[bob.pk][1]] == ["mine"]

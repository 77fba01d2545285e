"""stdio servers run once per person (``"scope": "perUser"``): each person's own process, kept apart.

The process tests run the published memory server (tests/node/), whose knowledge graph lives in
the file ``MEMORY_FILE_PATH`` names: with ``${user.name}`` and ``${user.id}`` in it, each person's
process keeps a graph of their own, and each reads only theirs.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from pathlib import Path
from typing import Any

import pytest

from mcpclient.config.entries import parse_server
from mcpclient.config.model import ConfigError, Person, per_user, person_slug
from mcpclient.config.resolve import resolve_server
from mcpclient.config.shapes import SHAPES, entry_for
from mcpclient.core.state import Status
from mcpclient.engine.hub import Hub
from tests.support.processes import NODE_DIR, ROOT, TEST_COMMANDS

NAMES = {1: "alice", 2: "bob", 3: "../carol"}


def memory_entry(folder: Path, **keys: Any) -> dict[str, Any]:
    return {
        "command": "npx",
        "args": ["-y", "@modelcontextprotocol/server-memory"],
        "cwd": str(NODE_DIR),
        "env": {"MEMORY_FILE_PATH": str(folder / "memory-${user.name}-${user.id}.jsonl")},
        "scope": "perUser",
        "writeTools": "approve",  # the hub is called directly: nobody to approve here
        **keys,
    }


# --- configuration ------------------------------------------------------------------------------
def test_scope_is_validated_and_kept_in_every_shape(tmp_path: Path) -> None:
    config = parse_server("memory", memory_entry(tmp_path))
    assert config.scope == "perUser" and per_user(config)
    assert parse_server("plain", {"command": "npx"}).scope == "shared"
    with pytest.raises(ConfigError, match='"scope" must be "shared" or "perUser", got "team"'):
        parse_server("memory", memory_entry(tmp_path, scope="team"))
    with pytest.raises(ConfigError, match='is for stdio servers; a remote server is per person with "oauth"'):
        parse_server("web", {"url": "https://mcp.example.com/mcp", "scope": "perUser"})
    # A shared process has no person: ${user.id} there is an error, named where it is.
    with pytest.raises(
        ConfigError, match=r'"env" uses \$\{user.id\} or \$\{user.name\}, which only a server'
    ):
        parse_server("memory", memory_entry(tmp_path, scope="shared"))
    for shape in SHAPES:
        again = parse_server("memory", entry_for(shape, config))
        assert again.scope == "perUser", shape.label


def test_placeholders_are_the_persons_and_the_name_is_safe_in_a_path(tmp_path: Path) -> None:
    # A safe name stays as it is (folders named after it stay valid); any other name gets a
    # readable part and a digest of the exact username, so no two usernames share a value.
    assert person_slug("alice", 1) == "alice"
    assert person_slug("al_ice", 1) == "al_ice"
    assert person_slug("../carol", 3).startswith("_carol-")
    assert person_slug("a b/c\\d:e", 5).startswith("a_b_c_d_e-")
    names = [".alice", "..alice", "alice", "al+ice", "al@ice", "al_ice", "", ".", "..", "-rf", "x" * 150]
    slugs = [person_slug(name, 4) for name in names]
    assert len(set(slugs)) == len(names), slugs
    # A kept name never ends like a changed one: such a name is changed too.
    changed = person_slug(".alice", 4)
    assert person_slug(changed, 4) not in slugs
    for slug in slugs:
        assert slug and slug not in (".", "..") and len(slug) <= 64, slug
        assert re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9._-]*", slug), slug
    config = parse_server("memory", memory_entry(tmp_path, args=["--user", "${user.id}"]))
    resolved = resolve_server(
        config, base_dir=ROOT, allowed_commands=TEST_COMMANDS, person=Person(3, person_slug("../carol", 3))
    )
    assert resolved.env["MEMORY_FILE_PATH"] == str(tmp_path / f"memory-{person_slug('../carol', 3)}-3.jsonl")
    assert resolved.args == ["--user", "3"]
    with pytest.raises(ConfigError, match=r'"\$\{user.id\}" has no person here \(used in "args\[1\]"\)'):
        resolve_server(config, base_dir=ROOT, allowed_commands=TEST_COMMANDS)


# --- the processes ------------------------------------------------------------------------------
async def graph(hub: Hub, user_id: int) -> dict[str, Any]:
    result = await hub.call_tool("memory_read_graph", {}, user_id=user_id)
    assert not result.is_error, result.output
    return json.loads(result.output)


@pytest.mark.processes
async def test_each_person_has_a_process_and_a_graph_of_their_own(tmp_path: Path) -> None:
    hub = Hub(
        base_dir=ROOT,
        allowed_commands=TEST_COMMANDS,
        person_name=NAMES.__getitem__,
        per_user_processes=2,
        idle_seconds=600,
    )
    try:
        async with asyncio.timeout(120):
            await hub.start([parse_server("memory", memory_entry(tmp_path))])
            assert [s.status for s in hub.snapshots()] == [Status.PER_USER]  # no shared process
            assert await hub.open_user_sessions(1, ["memory"]) == []
            assert await hub.open_user_sessions(2, ["memory"]) == []
            alice, bob = hub.user_connection("memory", 1), hub.user_connection("memory", 2)
            assert alice is not None and bob is not None and alice.status is Status.READY
            assert {tool.prefixed_name for tool in hub.tools(1)} >= {
                "memory_create_entities",
                "memory_read_graph",
            }
            assert "memory_read_graph" not in {tool.prefixed_name for tool in hub.tools(None)}

            entity = {"name": "Secret plan", "entityType": "note", "observations": ["alice's only"]}
            created = await hub.call_tool("memory_create_entities", {"entities": [entity]}, user_id=1)
            assert not created.is_error, created.output
            # Alice reads her graph; Bob's process, asked the same, knows nothing of it.
            assert [e["name"] for e in (await graph(hub, 1))["entities"]] == ["Secret plan"]
            assert (await graph(hub, 2))["entities"] == []
            assert "Secret plan" in (tmp_path / "memory-alice-1.jsonl").read_text()
            assert (
                not (tmp_path / "memory-bob-2.jsonl").exists()
                or "Secret plan" not in (tmp_path / "memory-bob-2.jsonl").read_text()
            )

            # Past the bound a third person is told why, and the others' processes go on.
            [refused] = await hub.open_user_sessions(3, ["memory"])
            assert (
                'The MCP server "memory" runs one process per person and already runs 2, its limit' in refused
            )
            assert hub.user_connection("memory", 3) is None
            assert (await graph(hub, 1))["entities"]
    finally:
        await hub.stop()


@pytest.mark.processes
async def test_names_that_differ_only_in_unsafe_characters_never_share_a_file(tmp_path: Path) -> None:
    """``.alice`` and ``..alice`` (as sign-on once made them) and ``alice``, with a memory file named
    by ``${user.name}`` alone: each process has a file of its own, and none reads another's."""
    names = {1: "alice", 2: ".alice", 3: "..alice"}
    entry = memory_entry(tmp_path)
    entry["env"] = {"MEMORY_FILE_PATH": str(tmp_path / "${user.name}.jsonl")}
    hub = Hub(
        base_dir=ROOT,
        allowed_commands=TEST_COMMANDS,
        person_name=names.__getitem__,
        per_user_processes=3,
        idle_seconds=600,
    )
    try:
        async with asyncio.timeout(120):
            await hub.start([parse_server("memory", entry)])
            for user_id in names:
                assert await hub.open_user_sessions(user_id, ["memory"]) == []
            entity = {"name": "Alice's plan", "entityType": "note", "observations": ["alice's only"]}
            created = await hub.call_tool("memory_create_entities", {"entities": [entity]}, user_id=1)
            assert not created.is_error, created.output
            for user_id in (2, 3):
                assert (await graph(hub, user_id))["entities"] == [], names[user_id]
                mine = {"name": f"plan of {user_id}", "entityType": "note", "observations": ["mine"]}
                written = await hub.call_tool("memory_create_entities", {"entities": [mine]}, user_id=user_id)
                assert not written.is_error, written.output
            assert [e["name"] for e in (await graph(hub, 1))["entities"]] == ["Alice's plan"]
            files = await asyncio.to_thread(lambda: sorted(path.name for path in tmp_path.glob("*.jsonl")))
            assert len(files) == 3 and "alice.jsonl" in files, files
    finally:
        await hub.stop()


@pytest.mark.processes
async def test_idle_processes_close_and_make_room(tmp_path: Path) -> None:
    hub = Hub(
        base_dir=ROOT,
        allowed_commands=TEST_COMMANDS,
        person_name=NAMES.__getitem__,
        per_user_processes=1,
        idle_seconds=3.0,
    )
    try:
        async with asyncio.timeout(120):
            await hub.start([parse_server("memory", memory_entry(tmp_path))])
            assert await hub.open_user_sessions(1, ["memory"]) == []
            connection = hub.user_connection("memory", 1)
            assert connection is not None
            connection.last_used = time.monotonic() + 3600  # not idle yet
            assert len(await hub.open_user_sessions(2, ["memory"])) == 1  # at the bound
            connection.last_used = 0.0  # now idle: the reaper closes it
            while hub.user_connection("memory", 1) is not None:  # noqa: ASYNC110 (the idle reaper)
                await asyncio.sleep(0.1)
            assert await hub.open_user_sessions(2, ["memory"]) == []
            connection = hub.user_connection("memory", 2)
            assert connection is not None and connection.status is Status.READY
    finally:
        await hub.stop()


# --- the chat: a person over the bound reads why ------------------------------------------------
@pytest.mark.processes
@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("fresh_state", "close_model_session")
async def test_a_person_over_the_bound_is_told_in_the_conversation(tmp_path: Path, llm: Any) -> None:
    from mcpclient.runtime import set_hub, username_of
    from tests.support.accounts import conversation_of, login
    from tests.support.llm import Text
    from tests.support.tabs import Tab

    hub = Hub(base_dir=ROOT, allowed_commands=TEST_COMMANDS, person_name=username_of, per_user_processes=1)
    try:
        async with asyncio.timeout(120):
            await hub.start([parse_server("memory", memory_entry(tmp_path))])
            set_hub(hub)
            cookie = await login("alice")
            assert await hub.open_user_sessions(10_000, ["memory"]) == []  # somebody's process: the bound
            llm.script(Text("Hello."))
            tab = Tab(await conversation_of("alice"), cookie)
            await tab.open()
            await tab.send({"type": "user_message", "text": "hi"})
            frame = await tab.next("message")
            while frame["message"]["role"] != "notice":
                frame = await tab.next("message")
            assert frame["message"]["content"].startswith(
                'The MCP server "memory" runs one process per person and already runs 1, its limit'
            )
            assert (await tab.until_turn_end())["status"] == "complete"
            tools = {tool["function"]["name"] for tool in llm.requests[0].get("tools", [])}
            assert not any(name.startswith("memory_") for name in tools)
            await tab.close()
    finally:
        set_hub(None)
        await hub.stop()

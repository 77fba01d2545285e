"""Tool lists read tool by tool: a repairable definition is repaired, an unusable one is left out
with its reason, and the server's other tools are offered (mcpclient.engine.listing).

Real servers: a raw JSON-RPC server listing definitions as published servers get them wrong, and
the published GitLab server as ``npx -y`` installs it (tests/node/gitlab/), whose every input
schema comes out as ``{"$schema": ...}`` alone.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from mcpclient.core.state import Status
from mcpclient.engine.hub import Hub
from mcpclient.engine.listing import PARAMETERS_UNKNOWN, PageNotes, describe, read_page
from tests.support.hubs import make_config
from tests.support.processes import PYTHON, ROOT

HOSTILE = ROOT / "tests" / "servers" / "hostile_stdio.py"
GITLAB_DIR = ROOT / "tests" / "node" / "gitlab"
GOOD = {"name": "fine", "inputSchema": {"type": "object", "properties": {}}}


# What a 2026-07-28 page must carry besides its tools.
PAGE = {"2025-11-25": {}, "2026-07-28": {"resultType": "complete", "ttlMs": 0, "cacheScope": "private"}}


@pytest.mark.parametrize("version", ["2025-11-25", "2026-07-28"])
def test_a_page_is_read_tool_by_tool_only_when_it_must_be(version: str) -> None:
    good = {"tools": [GOOD], "nextCursor": "2", **PAGE[version]}
    notes = PageNotes()
    assert read_page(good, version, notes) is good and notes == PageNotes()  # as it was
    # A page whose own fields are wrong is the SDK's to refuse: its tools are not blamed.
    broken = {"tools": [GOOD], "ttlMs": "soon"}
    assert read_page(broken, version, notes) is broken and notes == PageNotes()

    page = {
        "tools": [GOOD, {"name": "loose", "inputSchema": {"properties": {}}}, {"name": 5}, "x"],
        "nextCursor": "2",
        **PAGE[version],
    }
    read = read_page(page, version, notes)
    assert read["nextCursor"] == "2"
    assert [tool["name"] for tool in read["tools"]] == ["fine", "loose"]
    assert read["tools"][1]["inputSchema"] == {"type": "object", "properties": {}}
    assert notes.repaired == [("loose", 'its inputSchema had no "type": read as an object')]
    assert [name for name, _ in notes.left_out] == ["tool #3", "tool #4"]
    assert notes.left_out[0][1].startswith("name: ") and "validation error" not in notes.left_out[0][1]
    assert notes.left_out[1][1] == "it is not an object"
    assert describe({None: notes}).startswith(
        '1 tool definition repaired: loose (its inputSchema had no "type": read as an object). '
        "2 tools left out, unusable as the server defines them: tool #3 (name: "
    )
    assert describe({None: PageNotes()}) == ""


@pytest.mark.processes
async def test_a_sloppy_server_is_ready_with_what_can_be_read(hub: Hub) -> None:
    config = make_config("h", {"command": PYTHON, "args": [str(HOSTILE), "--sloppy"]})
    unreadable = make_config("u", {"command": PYTHON, "args": [str(HOSTILE), "--tools-not-a-list"]})
    async with asyncio.timeout(60):
        await hub.start([config, unreadable])
    snapshot, failed = hub.snapshots()
    # A listing that is not a list at all costs its server, with a sentence rather than a dump.
    assert failed.status is Status.FAILED
    sentence = "the server's answer does not follow the protocol: tools: "
    assert failed.last_error.startswith(sentence), failed.last_error
    assert "\n" not in failed.last_error and "errors.pydantic.dev" not in failed.last_error
    assert snapshot.status is Status.READY, snapshot.last_error
    names = {tool.name for tool in snapshot.tools}
    assert {"echo", "untyped", "schemaless"} <= names and not {"stringly", "listy"} & names
    note = snapshot.tools_note
    assert note.startswith("2 tool definitions repaired: untyped (its inputSchema had no ")
    assert "schemaless (no inputSchema: takes any arguments)" in note
    assert "3 tools left out, unusable as the server defines them: tool #" in note
    assert "stringly (inputSchema: " in note and "listy (inputSchema.type: " in note
    result = await hub.call_tool("h_untyped", {"text": "read leniently"})
    assert not result.is_error and result.output == "read leniently"
    # What the model reads: a repaired schema keeps the parameters it names; one that names none
    # is not said to take none, since its server did not say so.
    offered = {tool.name: tool for tool in hub.tools()}
    assert offered["untyped"].description == "No type."
    assert offered["schemaless"].description == f"No inputSchema at all. {PARAMETERS_UNKNOWN}"
    assert offered["deep"].description == "The deep tool."  # declares it takes none: as it is


@pytest.mark.processes
async def test_the_published_gitlab_server_offers_its_tools(hub: Hub) -> None:
    entry: dict[str, Any] = {
        "command": "npx",
        "args": ["-y", "@modelcontextprotocol/server-gitlab"],
        "cwd": str(GITLAB_DIR),
        "env": {"GITLAB_PERSONAL_ACCESS_TOKEN": "not-a-token"},  # listing tools never uses it
    }
    async with asyncio.timeout(120):
        await hub.start([make_config("gitlab", entry)])
    [snapshot] = hub.snapshots()
    assert snapshot.status is Status.READY, snapshot.last_error  # before: "9 validation errors for ..."
    offered = sorted(tool.name for tool in snapshot.tools)
    assert len(offered) == 9 and "create_issue" in offered and "search_repositories" in offered
    assert snapshot.tools_note.startswith(
        "9 tool definitions repaired: create_or_update_file"
        ' (its inputSchema had no "type": read as an object)'
    )
    # What the model gets: an object schema without parameters (the server published none), and a
    # description that says so rather than that the tool takes none: create_issue needs a project
    # and a title, and a call without them fails.
    tool = next(tool for tool in hub.tools() if tool.name == "search_repositories")
    assert tool.input_schema == {"type": "object", "$schema": "http://json-schema.org/draft-07/schema#"}
    assert tool.description == (
        "Search for GitLab projects (Its server lists no parameters for this tool: its input schema came "
        "without any, so the arguments it needs, if any, are unknown.)"
    )
    assert all(tool.description.endswith(PARAMETERS_UNKNOWN) for tool in hub.tools())
    failed = await hub.call_tool("gitlab_create_issue", {})
    assert failed.is_error

"""Tool definitions are bounded before work is done on them, and a relist that changes nothing costs nothing.

A raw JSON-RPC server (``tests/servers/hostile_stdio.py --wordy``) lists tools whose descriptions
are 48 KB each, over several pages, under a hub in this process. Each held tool keeps its name and
the reason; what the hub digests, keeps and stores is counted (bytes, rows, reviews, index
builds), never timed. (The loop's longest stretch of work and another person's turns while such a
server lists are measured by ``bench/definition_flood.py``: the loop thread's CPU time in one go
includes the interpreter's full garbage collections, which the whole process's objects decide.)
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from typing import Any

import pytest
from django.db import connection
from django.db.models import Max

from mcpclient import runtime
from mcpclient.core import pinning
from mcpclient.core.state import DiscoveredTool, ServerSnapshot, Status
from mcpclient.engine import listing
from mcpclient.engine.hub import Hub
from mcpclient.models import McpServer, McpTool, ToolPin
from mcpclient.runtime.pins import DatabasePins
from mcpclient.runtime.sync import STORE_BATCH, persist_snapshot
from tests.support.hubs import make_config
from tests.support.processes import PYTHON, ROOT, TEST_COMMANDS

pytestmark = pytest.mark.processes

HOSTILE = ROOT / "tests" / "servers" / "hostile_stdio.py"
HELD = "description is 48 KB, over the 16 KB limit"


def wordy(count: int, page_size: int) -> Any:
    args = [str(HOSTILE), "--wordy", str(count), "--page-size", str(page_size)]
    return make_config("bad", {"command": PYTHON, "args": args, "timeout": 60_000})


class Digested:
    """Counts the bytes of every definition the hub digests (the work a listing costs per tool)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.bytes = 0
        real = pinning.digest

        def digest(value: Any) -> str:
            self.bytes += len(json.dumps(value, ensure_ascii=False, default=str).encode())
            return real(value)

        monkeypatch.setattr(pinning, "digest", digest)


async def test_a_thousand_definitions_of_48_kb_are_held_with_their_reason_at_a_bounded_cost(
    hub: Hub, monkeypatch: pytest.MonkeyPatch
) -> None:
    digested = Digested(monkeypatch)
    async with asyncio.timeout(120):
        await hub.start([wordy(990, 100)])  # the server's 10 tools and 990 of 48 KB: 47 MB in 10 pages
    [snapshot] = hub.snapshots()
    assert snapshot.status is Status.READY, snapshot.last_error
    held = [tool for tool in snapshot.tools if tool.name.startswith("wordy_")]
    assert len(held) == 990 and len(snapshot.tools) == 1000
    assert all(tool.rejected and not tool.offered and tool.reject_reason == f"held: {HELD}" for tool in held)
    assert snapshot.tools_note.startswith(f"990 tools held, over a size limit: wordy_0 ({HELD}); "), (
        snapshot.tools_note[:300]
    )
    offered = {tool.prefixed_name for tool in hub.tools()}
    assert "bad_echo" in offered and not any(name.startswith("bad_wordy_") for name in offered)
    # Kept in memory and digested: what the caps allow, not the 47 MB the server sent.
    kept = sum(len(tool.description) + len(json.dumps(tool.input_schema)) for tool in snapshot.tools)
    assert kept < 64 * 1024, kept
    assert digested.bytes < 256 * 1024, digested.bytes
    assert (await hub.call_tool("bad_echo", {"text": "still here"})).output == "still here"


def test_each_cap_holds_its_tool_and_a_listing_keeps_what_fits() -> None:
    fine = {"name": "fine", "inputSchema": {"type": "object"}}
    big = {"type": "object", "properties": {f"p{i}": {"type": "string"} for i in range(10_000)}}
    page = {
        "tools": [
            fine,
            {**fine, "name": "titled", "title": "t" * (listing.MAX_TITLE_BYTES + 1)},
            {**fine, "name": "schema", "inputSchema": big},
            {**fine, "name": "output", "outputSchema": big},
            {**fine, "name": "meta", "_meta": {"x": "m" * listing.MAX_TOOL_BYTES}},
            {**fine, "name": "n" * (listing.MAX_NAME_BYTES + 1)},
            {**fine, "name": "wide", "description": "é" * (listing.MAX_DESCRIPTION_BYTES // 2 + 1024)},
        ],
        "nextCursor": "2",
    }
    notes = listing.PageNotes()
    read = listing.read_page(page, "2025-11-25", notes)
    assert [tool["name"] for tool in read["tools"]] == ["fine", "titled", "schema", "output", "meta", "wide"]
    assert read["tools"][2] == {"name": "schema", "inputSchema": {"type": "object"}}  # a stub
    assert read["nextCursor"] == "2"
    assert notes.oversized == {
        "titled": "title is 513 bytes, over the 512 bytes limit",
        "schema": "input schema is over the 64 KB limit",
        "output": "output schema is over the 64 KB limit",
        "meta": "the definition is over the 192 KB limit",
        "wide": "description is 18 KB, over the 16 KB limit",
    }
    assert notes.left_out == [
        ("n" * listing.NAME_CHARS + "…", "its name is 129 bytes, over the 128 bytes limit")
    ]

    # Past the whole listing's bytes the page keeps what fits, and the listing stops there.
    description = "d" * (listing.MAX_DESCRIPTION_BYTES - 100)
    many = {
        "tools": [{**fine, "name": f"t{i}", "description": description} for i in range(300)],
        "nextCursor": "2",
    }
    notes = listing.PageNotes()
    read = listing.read_page(many, "2025-11-25", notes)
    assert "nextCursor" not in read and notes.kept_bytes <= listing.MAX_LISTING_BYTES
    kept = len(read["tools"])
    assert 0 < kept < 300 and notes.past_total[0] == f"t{kept}" and len(notes.past_total) == 300 - kept
    said = listing.describe({None: notes})
    assert f"The listing is over 4 MB: the tools that fit are kept and {300 - kept:,} or more" in said


@pytest.mark.django_db(transaction=True)
async def test_a_relist_of_unchanged_definitions_reviews_writes_and_indexes_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    reviews: list[str] = []
    review = DatabasePins.review

    async def counted(self: DatabasePins, server: str, *args: Any, **kwargs: Any) -> Any:
        reviews.append(server)
        return await review(self, server, *args, **kwargs)

    monkeypatch.setattr(DatabasePins, "review", counted)
    hub = Hub(base_dir=ROOT, allowed_commands=TEST_COMMANDS, pins=DatabasePins())
    snapshots: list[Any] = []
    hub.add_listener(snapshots.append)  # what persists, broadcasts and indexes for search is a listener
    hub.add_listener(runtime.persist_listener)
    await McpServer.objects.acreate(name="bad", transport="stdio")
    try:
        async with asyncio.timeout(120):
            await hub.start([wordy(200, 50)])
            await hub.drain_listeners()
            connection = hub.connection("bad")
            assert connection is not None and connection.status is Status.READY
            stored = await ToolPin.objects.aaggregate(last=Max("listed_at"))
            saved = (await McpServer.objects.aget(name="bad")).updated_at
            before = (len(snapshots), hub.generation, len(reviews))

            listings = connection.tool_list.listings
            said = await hub.call_tool("bad_touch", {})  # "my tools changed", when none did
            assert said.output == "listed again"
            while connection.tool_list.listings == listings:
                await connection.tool_list.updated.wait()
            await hub.drain_listeners()
            assert (len(snapshots), hub.generation, len(reviews)) == before
            assert await ToolPin.objects.aaggregate(last=Max("listed_at")) == stored
            assert (await McpServer.objects.aget(name="bad")).updated_at == saved  # not written
            # What was stored of a held tool: its name and why, not its definition.
            row = await McpTool.objects.aget(server__name="bad", name="wordy_0")
            assert row.rejected and row.reject_reason == f"held: {HELD}" and row.description == ""
            assert not await ToolPin.objects.filter(tool__startswith="wordy_").aexists()  # never reviewed

            # An administrator's rediscovery reviews it again (an accepted pin changes a verdict).
            await hub.rediscover("bad")
            assert len(reviews) == before[2] + 1
    finally:
        await hub.stop()
        await hub.drain_listeners()


@pytest.mark.django_db(transaction=True)
def test_a_listing_is_stored_in_short_transactions(monkeypatch: pytest.MonkeyPatch) -> None:
    """SQLite has one writer: a turn's write waits for the transaction in progress, so the tools of
    a listing are written a batch per transaction, never all of them in one."""
    server = McpServer.objects.create(name="many", transport="stdio")
    tools = tuple(
        DiscoveredTool(name=f"t{i}", description="d", input_schema={"type": "object"}, annotations=None)
        for i in range(1000)
    )
    snapshot = dataclasses.replace(
        ServerSnapshot.disabled("many"), status=Status.READY, tools=tools, connected_at=None
    )
    statements: list[int] = [0]  # writes of tool rows in the transaction in progress, per transaction
    commit = connection.commit

    def counted_commit() -> None:
        statements.append(0)
        commit()

    def count(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        if sql.startswith(("INSERT", "UPDATE", "DELETE")) and "mcpclient_mcptool" in sql:
            statements[-1] += 1
        return execute(sql, params, many, context)

    monkeypatch.setattr(connection, "commit", counted_commit)
    with connection.execute_wrapper(count):
        persist_snapshot(snapshot)
    assert McpTool.objects.filter(server=server).count() == 1000
    assert max(statements) == 1 and sum(statements) == 1000 // STORE_BATCH, statements

    # Changed and removed: each batch its own transaction again.
    fewer = tuple(dataclasses.replace(tool, description="changed") for tool in tools[:500])
    statements[:] = [0]
    with connection.execute_wrapper(count):
        persist_snapshot(dataclasses.replace(snapshot, tools=fewer))
    assert McpTool.objects.filter(server=server, description="changed").count() == 500
    assert McpTool.objects.filter(server=server).count() == 500
    assert max(statements) <= 1, statements

"""A server cannot stall the event loop, or hide its death, with what it sends.

Each case runs a raw JSON-RPC server (``tests/servers/hostile_stdio.py``, or
``hostile_http.py`` over Streamable HTTP) under a hub in this process: every call ends with an
error its reader understands (the calls' own time limit is 60 s), and the error names the count
that bounded the work (a message refused unread by its length, a parse stopped at a number of
values, a question refused before it is built). How long the loop then works in one go is a
figure of the machine: ``bench/loop_lag.py`` runs these cases under the loop-lag probe.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from mcpclient.core.state import Status
from mcpclient.engine.hub import Hub
from tests.support.hubs import make_config
from tests.support.processes import PYTHON, REAL_PYTHON, ROOT, HttpServer, alive, free_port

pytestmark = pytest.mark.processes

HOSTILE = ROOT / "tests" / "servers" / "hostile_stdio.py"
HOSTILE_HTTP = ROOT / "tests" / "servers" / "hostile_http.py"


def hostile(*extra: str, python: str = PYTHON) -> Any:
    return make_config("bad", {"command": python, "args": [str(HOSTILE), *extra], "timeout": 60_000})


async def started(hub: Hub, *extra: str, python: str = PYTHON) -> Hub:
    await hub.start([hostile(*extra, python=python)])
    assert [s.status for s in hub.snapshots() if s.name == "bad"] == [Status.READY]
    return hub


@pytest.mark.parametrize("order", ["id-first", "id-last"])
async def test_a_20_mb_answer_is_refused_unread_at_once(hub: Hub, order: str) -> None:
    await started(hub)
    async with asyncio.timeout(30):
        result = await hub.call_tool("bad_huge", {"megabytes": 20, "order": order})
    assert result.is_error
    assert result.output.endswith(
        "the server's answer was refused unread: a message of 20.0 MB, over the 16.0 MB limit"
    ), result.output[-300:]
    assert (await hub.call_tool("bad_echo", {"text": "still here"})).output == "still here"


async def test_an_answer_too_heavy_to_parse_is_refused_unread(hub: Hub) -> None:
    await started(hub)
    async with asyncio.timeout(30):
        result = await hub.call_tool("bad_dense", {"values": 300_000})
    assert result.is_error and "over the limit of 100,000" in result.output, result.output[:300]


@pytest.mark.parametrize(("tool", "why"), [("deep", "recursion limit exceeded"), ("surrogate", "hex escape")])
async def test_an_answer_the_parser_refuses_fails_the_call_at_once(hub: Hub, tool: str, why: str) -> None:
    await started(hub)
    async with asyncio.timeout(30):
        result = await hub.call_tool(f"bad_{tool}", {})
    assert result.is_error and "not valid JSON-RPC" in result.output, result.output[:300]
    assert why in result.output, result.output[:300]
    assert (await hub.call_tool("bad_echo", {"text": "still here"})).output == "still here"


async def test_a_server_killed_while_its_child_holds_the_pipe_is_seen_dead(hub: Hub, tmp_path: Path) -> None:
    await started(hub, python=REAL_PYTHON)  # its process group is the subject: no launcher between
    pidfile = tmp_path / "child.pid"
    assert hub.healing.ping_interval == 0  # no ping can be what tells: the pipe's end must
    async with asyncio.timeout(30):
        result = await hub.call_tool("bad_orphan", {"pidfile": str(pidfile)})
    assert result.is_error and "unreachable" in result.output, result.output[:300]
    child = int(pidfile.read_text())
    async with asyncio.timeout(10):
        while alive(child):  # noqa: ASYNC110 (another process: nothing to wait on)
            await asyncio.sleep(0.05)


@pytest.mark.parametrize(
    ("options", "why"),
    [
        (200_000, "refused by the client: a message of 3.1 MB holding about 200,0"),
        (40_000, 'Elicitation refused: field \\"choice\\": more than 500 options'),
    ],
)
async def test_a_question_with_too_many_options_is_refused_before_it_is_built(
    hub: Hub, options: int, why: str
) -> None:
    await started(hub)
    async with asyncio.timeout(30):
        result = await hub.call_tool("bad_ask", {"options": options})
    assert why in result.output, result.output[:300]


async def test_a_question_no_call_asked_is_declined_before_it_is_built(hub: Hub, tmp_path: Path) -> None:
    log = tmp_path / "answers.jsonl"
    async with asyncio.timeout(30):
        await started(hub, "--unsolicited", "40000", "--log", str(log))
        while not log.exists():  # noqa: ASYNC110 (written by the server process)
            await asyncio.sleep(0.05)
    answer = json.loads(log.read_text().splitlines()[0])
    assert answer["id"] == "unsolicited" and answer["result"] == {"action": "decline"}


@pytest.fixture
def hostile_http() -> Any:
    started: list[HttpServer] = []

    def start(*extra: str) -> HttpServer:
        port = free_port()
        started.append(HttpServer([PYTHON, str(HOSTILE_HTTP), str(port), *extra], port, "/mcp"))
        return started[-1]

    yield start
    for server in started:
        server.stop()


@pytest.mark.parametrize(
    ("tool", "why"),
    [
        ("huge", "a message of 20.0 MB, over the 16.0 MB limit"),  # refused by its length
        ("endless", "refused unread: a message over the 16.0 MB limit"),  # read up to the limit
        ("bomb", "refused unread: a message over the 16.0 MB limit"),  # decoded up to the limit
        ("big_event", "an event over the 16.0 MB limit"),
    ],
)
async def test_an_http_answer_over_the_limit_is_refused_at_once(
    hub: Hub, hostile_http: Any, tool: str, why: str
) -> None:
    server = hostile_http()
    await hub.start([make_config("web", {"url": server.url, "timeout": 60_000})])
    async with asyncio.timeout(30):
        result = await hub.call_tool(f"web_{tool}", {})
    assert result.is_error and why in result.output, result.output[:300]
    assert (await hub.call_tool("web_echo", {"text": "still here"})).output == "still here"


async def test_a_server_is_ready_only_once_its_message_stream_has_answered(
    hub: Hub, hostile_http: Any
) -> None:
    # Its GET stream answers 1 s late: a tool called as soon as the hub says "ready" must come
    # after it, or what the server sends on it first (a list change, a redirected reply) is lost.
    server = hostile_http("--late-stream", "1")
    await hub.start([make_config("late", {"type": "http", "url": server.url})])
    async with asyncio.timeout(30):
        result = await hub.call_tool("late_stream_seen", {})
    assert result.output == "stream answered: yes", result.output


@pytest.mark.django_db(transaction=True)  # the sign-in's credential store
async def test_oauth_metadata_of_200_mb_is_refused_within_the_limit(hub: Hub, hostile_http: Any) -> None:
    server = hostile_http("--oauth-bomb")
    entry = make_config("web", {"url": server.url})
    first = Hub(base_dir=ROOT, allowed_commands=[])  # pays for the sign-in's first imports
    try:
        await first.start([entry])
    finally:
        await first.stop()
    async with asyncio.timeout(60):
        await hub.start([entry])
    [snapshot] = hub.snapshots()
    assert snapshot.status is not Status.READY
    assert "a document over the 1.0 MB limit" in snapshot.last_error, snapshot.last_error


# --- many tools ------------------------------------------------------------------------------
async def test_a_server_listing_1500_tools_keeps_1000_and_says_what_it_left_out(hub: Hub) -> None:
    # (No loop probe: a page of 1,500 tools is within the limits, and the SDK's validation of
    # it takes tens of milliseconds in one go, near the probe's bound on a loaded machine.)
    async with asyncio.timeout(60):
        await started(hub, "--tools", "1500")
    [snapshot] = hub.snapshots()
    own = sum(not tool.name.startswith("extra_") for tool in snapshot.tools)  # the server's own tools
    kept = 1000 - own  # extra_0 .. extra_{kept - 1}
    assert len(snapshot.tools) == 1000 and snapshot.tools[-1].name == f"extra_{kept - 1}"
    first_out = ", ".join(f"extra_{kept + i}" for i in range(5))
    assert snapshot.tools_note == (
        f"The server lists more than 1,000 tools: the first 1,000 are kept and {1500 + own - 1000} "
        f"or more were left out ({first_out}, …)."
    ), snapshot.tools_note


@pytest.mark.django_db(transaction=True)
async def test_storing_a_thousand_tools_never_waits_on_the_turns_database_thread(hub: Hub) -> None:
    from channels.db import database_sync_to_async

    from mcpclient import runtime
    from mcpclient.models import McpServer, McpTool

    await started(hub, "--tools", "1200")
    [snapshot] = hub.snapshots()
    await McpServer.objects.acreate(name="bad", transport="stdio")
    storing = asyncio.create_task(runtime.persist_listener(snapshot))
    await asyncio.sleep(0.01)  # the write has begun
    # What a turn does meanwhile on the database thread it shares with the other turns.
    turn_read = await database_sync_to_async(lambda: McpServer.objects.filter(name="bad").exists())()
    assert turn_read and not storing.done(), "a turn's read waited for the tools to be stored"
    await storing
    assert await McpTool.objects.filter(server__name="bad").acount() == 1000
    row = await McpServer.objects.aget(name="bad")
    assert (row.tool_count, row.tools_note) == (1000, snapshot.tools_note)


async def test_a_page_of_10000_tools_is_refused_and_the_server_says_why(hub: Hub) -> None:
    async with asyncio.timeout(60):
        await hub.start([hostile("--tools", "10000")])
    [snapshot] = hub.snapshots()
    assert snapshot.status is not Status.READY and "refused unread" in snapshot.last_error, (
        snapshot.last_error
    )
    assert "over the limit of 100,000" in snapshot.last_error


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("fresh_state")
async def test_one_model_request_carries_at_most_512_tools_and_the_person_is_told(
    hub: Hub, llm: Any, agents_file: Any
) -> None:
    from boocode.chat.models import Message
    from boocode.chat.turn.loop import TurnRequest, run_turn
    from mcpclient.runtime import set_hub
    from tests.support.accounts import new_conversation
    from tests.support.llm import Text

    await started(hub, "--tools", "1000")
    set_hub(hub)
    # A window that holds 512 definitions (BooCode's default of 8,192 tokens would refuse to send them).
    agents_file("## Everything\n---\ntoolSearch: never\ncontext: 2000000\n---\nEvery tool, every request.\n")
    llm.script(Text("ok"))
    conversation = await new_conversation()

    async def emit(event: dict[str, Any]) -> None:
        return None

    async with asyncio.timeout(60):
        assert await run_turn(TurnRequest(conversation, "hi"), emit) == "complete"
    assert len(llm.requests[0]["tools"]) == 512
    notice = await Message.objects.filter(conversation_id=conversation, role=Message.Role.NOTICE).alast()
    assert notice is not None and notice.content.startswith("4"), notice
    assert "tools were left out of this request: one request carries at most 512 tools" in notice.content

    # With tool search (toolSearch: auto, the default) the request carries the search tool alone.
    agents_file("## Everything\n---\ndescription: the default toolSearch\n---\nSearch.\n")
    llm.script(Text("ok"))
    async with asyncio.timeout(60):
        assert await run_turn(TurnRequest(conversation, "hi again"), emit) == "complete"
    assert [tool["function"]["name"] for tool in llm.requests[-1]["tools"]] == ["tool_search"]


# --- the site a person is asked to open ------------------------------------------------------
@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("https://evil.example\\@accounts.example/", "characters RFC 3986 does not allow"),
        ("https://accounts.example@evil.example/", "a user name before its host"),
        ("https://exämple.example/", "characters RFC 3986 does not allow"),
        ("https://example.example/%zz", 'a "%" not followed by two hexadecimal digits'),
    ],
)
def test_a_url_whose_site_could_be_misread_is_refused(url: str, why: str) -> None:
    from mcpclient.engine.elicitation import url_problem

    assert why in (url_problem(url) or ""), url_problem(url)
    assert url_problem("https://accounts.example/login?next=%2F#top") is None


# --- the line reader -------------------------------------------------------------------------
def test_the_line_reader_splits_any_chunking_and_keeps_no_more_than_its_limit() -> None:
    from mcpclient.engine.inbound import LineReader, Oversized

    stream = b'{"a":1}\r\n{"b":2}\n' + b"x" * 50 + b"\n" + b"y" * 5 + b"\n"
    for size in (1, 2, 3, 7, len(stream)):
        reader = LineReader(limit=20)
        lines: list[bytes | Oversized] = []
        for start in range(0, len(stream), size):
            lines.extend(reader.feed(stream[start : start + size]))
        assert lines[:2] == [b'{"a":1}', b'{"b":2}'] and lines[3] == b"yyyyy", (size, lines)
        over = lines[2]
        assert isinstance(over, Oversized) and over.size == 50 and over.head.startswith(b"x" * 21)
        assert len(reader._buffer) == 0

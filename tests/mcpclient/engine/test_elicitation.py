"""Elicitation (form mode) through the hub, on both protocol revisions and every routing path.

Real servers: tests/servers/modern.py with ``--elicit-tools`` over Streamable HTTP and stdio,
at 2026-07-28 (``InputRequiredResult``, answered by the SDK's ``Client.call_tool``) and at
2025-11-25 (``--handshake-only``: ``elicitation/create`` requests mid-call, on the call's POST
stream, on the standalone GET stream, or on stdio). The person is a plain async function put
in the call's context with :func:`mcpclient.engine.elicitation.asking`, as the chat does.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator

import pytest

from mcpclient.core.elicitation import Answer
from mcpclient.core.elicitation_form import Form
from mcpclient.core.state import Status
from mcpclient.engine.elicitation import asking
from mcpclient.engine.hub import Hub
from tests.support.hubs import make_config
from tests.support.wires import WIRES, modern_wires

# django_db: the hub looks up stored sign-ins of HTTP servers
pytestmark = [pytest.mark.django_db, pytest.mark.processes]

DEFAULTS = {"age": 30, "name": "John Doe", "score": 95.5, "status": "active", "verified": True}


@pytest.fixture(scope="module")
def elicit_servers() -> Iterator[Callable[..., dict]]:
    """Factory: the mcp.json entry of modern.py with the eliciting tools on one wire (tests/support/wires.py).

    The HTTP servers are shared by the module's tests (their tools keep no state).
    """
    with modern_wires("--elicit-tools") as entry:
        yield entry


@pytest.fixture
async def all_wires(elicit_servers: Callable[..., dict], hub: Hub) -> AsyncIterator[Hub]:
    """A hub with the eliciting server on every wire, named after it."""
    await hub.start([make_config(wire, elicit_servers(wire)) for wire in WIRES])
    for snapshot in hub.snapshots():
        assert snapshot.status is Status.READY, snapshot.last_error
        assert snapshot.protocol_version == WIRES[snapshot.name][1]
    yield hub


def outcome(text: str) -> tuple[str, dict | None]:
    """``("accept", {...})`` from the tools' ``accept {json}`` / ``decline`` answers."""
    action, _, content = text.partition(" ")
    return action, json.loads(content) if content else None


async def test_without_a_person_the_defaults_answer_on_every_wire(all_wires: Hub) -> None:
    for wire in WIRES:
        # Every field has a default (SEP-1034): accepted with all five, of each type.
        result = await all_wires.call_tool(f"{wire}_ask_defaults", {})
        assert not result.is_error, (wire, result.output)
        assert outcome(result.output) == ("accept", DEFAULTS), wire
        # A required field without a default: nobody can fill it, so declined.
        assert (await all_wires.call_tool(f"{wire}_ask_profile", {})).output == "decline", wire
        # The 2026-07-28 tool that used to fail with "Elicitation not supported".
        if wire.endswith("2026"):
            assert (await all_wires.call_tool(f"{wire}_ask_name", {})).output == "hello nobody"


async def test_form_and_url_mode_are_advertised(all_wires: Hub) -> None:
    for wire in WIRES:
        declared = json.loads((await all_wires.call_tool(f"{wire}_capabilities", {})).output)
        assert declared["elicitation"] == {"form": {}, "url": {}}, wire


async def test_nested_schemas_are_refused_with_the_reason_and_links_declined_without_a_person(
    all_wires: Hub,
) -> None:
    for wire in WIRES:
        nested = await all_wires.call_tool(f"{wire}_ask_nested", {})
        # 2025-11-25 tools catch the error and report it; on 2026-07-28 the call fails with it.
        assert "field \"address\": type 'object' is not allowed" in nested.output, (wire, nested.output)
        assert nested.is_error == wire.endswith("2026")
        # URL mode (tests/mcpclient/engine/test_elicitation_url.py): nobody here could open the page.
        assert (await all_wires.call_tool(f"{wire}_ask_url", {})).output == "decline", wire


async def test_the_person_who_made_the_call_answers_it(all_wires: Hub) -> None:
    asked: list[Form] = []

    async def person(form: Form) -> Answer:
        asked.append(form)
        return Answer("accept", {"name": "Ada", "age": 41})

    for wire in WIRES:
        asked.clear()
        with asking(person):
            result = await all_wires.call_tool(f"{wire}_ask_profile", {})
        # What was left empty got its default; what the person typed went through.
        expected = {"name": "Ada", "age": 41, "color": "green", "subscribe": False}
        assert outcome(result.output) == ("accept", expected)
        (form,) = asked
        assert (form.tool, form.message) == ("ask_profile", "Tell me about <b>you</b>")
        assert [(f.name, f.kind, f.required, f.default) for f in form.fields] == [
            ("name", "string", True, None),
            ("age", "integer", False, 30),
            ("color", "enum", False, "green"),
            ("subscribe", "boolean", False, False),
        ]

    async def declines(form: Form) -> Answer:
        return Answer("decline")

    with asking(declines):
        assert (await all_wires.call_tool("stdio2025_ask_profile", {})).output == "decline"
        assert (await all_wires.call_tool("http2026_ask_profile", {})).output == "decline"


async def two_people_at_once(hub: Hub, tool: str) -> tuple[str, str]:
    """Alice and Bob call ``tool`` concurrently; each answers with their name once both are asked."""
    both_asked = asyncio.Event()
    asked = 0

    def person(name: str) -> Callable[[Form], Awaitable[Answer]]:
        async def ask(form: Form) -> Answer:
            nonlocal asked
            asked += 1
            if asked == 2:
                both_asked.set()
            await both_asked.wait()  # both forms are open at once
            return Answer("accept", {"name": name})

        return ask

    async def call_as(name: str) -> str:
        with asking(person(name)):
            return (await hub.call_tool(tool, {})).output

    async with asyncio.timeout(10):
        alice, bob = await asyncio.gather(call_as("alice"), call_as("bob"))
    return alice, bob


async def test_concurrent_calls_each_reach_their_own_person(all_wires: Hub) -> None:
    """Where the request names its call (2026-07-28; the POST stream of 2025-11-25 HTTP)."""
    for wire in ("http2026", "http2025", "stdio2026"):
        alice, bob = await two_people_at_once(all_wires, f"{wire}_ask_profile")
        assert outcome(alice)[1]["name"] == "alice", wire
        assert outcome(bob)[1]["name"] == "bob", wire


@pytest.mark.parametrize(("wire", "tool"), [("stdio2025", "ask_profile"), ("http2025", "ask_unrelated")])
async def test_a_request_that_names_no_call_is_declined_when_two_calls_are_in_flight(
    elicit_servers: Callable[..., dict], hub: Hub, wire: str, tool: str
) -> None:
    """stdio carries no context, and ask_unrelated uses the standalone GET stream: with one call in
    flight the request is that call's; with two nothing tells which, so nobody is asked."""
    await hub.start([make_config(wire, elicit_servers(wire))])
    asked: list[str] = []
    second: dict[str, str] = {}

    async def second_person(form: Form) -> Answer:
        asked.append("second")
        return Answer("accept", {"name": "Mallory"})

    async def first_person(form: Form) -> Answer:
        asked.append("first")
        # While this form is open, a second call asks too: two calls in flight, no way to tell.
        with asking(second_person):
            second["output"] = (await hub.call_tool(f"{wire}_{tool}", {})).output
        return Answer("accept", {"name": "Alice"})

    with asking(first_person):
        first = (await hub.call_tool(f"{wire}_{tool}", {})).output
    assert outcome(first)[1]["name"] == "Alice"
    assert second["output"] == "decline"
    assert asked == ["first"]


@pytest.mark.parametrize("wire", ["stdio2025", "http2025", "http2026"])
async def test_the_call_timeout_does_not_run_while_the_person_answers(
    elicit_servers: Callable[..., dict], hub: Hub, wire: str
) -> None:
    # 2 s per call: the server's own part of the call must fit in it on a loaded machine too
    # (0.3 s once did not, under two test runs and Chromium).
    await hub.start([make_config(wire, elicit_servers(wire, timeout=2000))])

    async def slow_person(form: Form) -> Answer:
        await asyncio.sleep(2.5)  # the time under test: longer than the call's timeout
        return Answer("accept", {"name": "Slow"})

    with asking(slow_person):
        result = await hub.call_tool(f"{wire}_ask_profile", {})
    assert not result.is_error, result.output
    assert outcome(result.output)[1]["name"] == "Slow"
    # The limit still holds for the server's own time.
    assert (await hub.call_tool(f"{wire}_echo", {"text": "quick"})).output == "quick"


async def test_a_form_is_withdrawn_when_its_call_ends(elicit_servers: Callable[..., dict], hub: Hub) -> None:
    await hub.start([make_config("stdio2025", elicit_servers("stdio2025"))])
    opened = asyncio.Event()
    ended: list[str] = []

    async def person(form: Form) -> Answer:
        opened.set()
        try:
            await asyncio.Event().wait()  # never answers
        except asyncio.CancelledError:
            ended.append("withdrawn")
            raise
        raise AssertionError("unreachable")

    with asking(person):
        call = asyncio.create_task(hub.call_tool("stdio2025_ask_profile", {}))
    async with asyncio.timeout(10):
        await opened.wait()
        call.cancel()  # the caller gives up (a stopped turn)
        with pytest.raises(asyncio.CancelledError):
            await call
    assert ended == ["withdrawn"]
    # The session is still good for the next call.
    assert (await hub.call_tool("stdio2025_echo", {"text": "after"})).output == "after"

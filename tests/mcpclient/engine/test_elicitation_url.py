"""URL-mode elicitation, the -32042 error and the sampling refusal, through the hub on every wire.

Real servers: the toolbox's "questions" group (tests/servers/toolbox_questions.py) at 2026-07-28
(``toolbox.py --feature questions``, over stdio and Streamable HTTP) and at 2025-11-25
(``handshake_toolbox.py --feature questions``). Its links point at a small web page the server
process serves; the test "person" consents and then submits that page over HTTP, as a browser
would, which is what makes the server finish (and, on 2025-11-25, send
``notifications/elicitation/complete``).
"""

from __future__ import annotations

import asyncio
import json
import urllib.request
from collections.abc import AsyncIterator, Callable, Iterator

import pytest

from mcpclient.core.elicitation import Answer, Link
from mcpclient.core.elicitation_form import Form
from mcpclient.core.state import Status
from mcpclient.engine.elicitation import asking
from mcpclient.engine.hub import Hub
from tests.support.hubs import make_config
from tests.support.processes import PYTHON, ROOT, TOOLBOX, HttpServer, free_port

# django_db: the hub looks up stored sign-ins of HTTP servers
pytestmark = [pytest.mark.django_db, pytest.mark.processes]

HANDSHAKE_TOOLBOX = ROOT / "tests" / "servers" / "handshake_toolbox.py"
WIRES = {
    "http2026": "2026-07-28",
    "http2025": "2025-11-25",
    "stdio2026": "2026-07-28",
    "stdio2025": "2025-11-25",
}
REFUSED_SCHEME = "URL-mode elicitation refused: BooCode opens only http and https URLs, not javascript:"


def command(wire: str) -> list[str]:
    if wire.endswith("2026"):
        return [PYTHON, str(TOOLBOX), "--feature", "questions"]
    return [PYTHON, str(HANDSHAKE_TOOLBOX), "--feature", "questions"]


@pytest.fixture(scope="module")
def servers() -> Iterator[Callable[..., dict]]:
    """Factory: the mcp.json entry of the questions server on one wire (HTTP ones shared)."""
    started: dict[str, HttpServer] = {}

    def entry(wire: str, **keys: object) -> dict:
        if wire.startswith("stdio"):
            args = command(wire)
            return {"command": args[0], "args": args[1:], **keys}
        if wire not in started:
            port = free_port()
            started[wire] = HttpServer([*command(wire), "--http", str(port)], port, "/mcp")
        return {"type": "http", "url": started[wire].url, **keys}

    yield entry
    for server in started.values():
        server.stop()


@pytest.fixture
async def all_wires(servers: Callable[..., dict], hub: Hub) -> AsyncIterator[Hub]:
    await hub.start([make_config(wire, servers(wire)) for wire in WIRES])
    for snapshot in hub.snapshots():
        assert snapshot.status is Status.READY, snapshot.last_error
        assert snapshot.protocol_version == WIRES[snapshot.name]
    yield hub


def submit(url: str, value: str) -> str:
    """What the person's browser does on the server's page: submit its form."""
    request = urllib.request.Request(url, data=f"value={value}".encode(), method="POST")
    with urllib.request.urlopen(request, timeout=10) as response:
        return response.read().decode()


class Person:
    """Answers links: consents (then submits the page with ``value``), declines or cancels."""

    def __init__(self, action: str = "accept", value: str | None = "Ada") -> None:
        self.action = action
        self.value = value
        self.links: list[Link] = []
        self.asked = asyncio.Event()
        self._submitting: set[asyncio.Task[str]] = set()

    async def __call__(self, request: Form | Link) -> Answer:
        assert isinstance(request, Link), request
        self.links.append(request)
        self.asked.set()
        if self.action == "accept" and self.value is not None:
            task = asyncio.create_task(asyncio.to_thread(submit, request.url, self.value))
            self._submitting.add(task)
        return Answer(self.action)  # type: ignore[arg-type]


async def test_form_and_url_mode_are_advertised_and_sampling_is_not(all_wires: Hub) -> None:
    for wire in WIRES:
        declared = json.loads((await all_wires.call_tool(f"{wire}_client_capabilities", {})).output)
        assert declared["elicitation"] == {"form": {}, "url": {}}, wire
        assert "sampling" not in declared, wire


async def test_the_person_opens_the_page_and_the_call_resumes_when_it_is_completed(all_wires: Hub) -> None:
    for wire in WIRES:
        person = Person(value=f"Ada-{wire}")
        with asking(person):
            result = await all_wires.call_tool(f"{wire}_ask_link", {})
        assert not result.is_error, (wire, result.output)
        assert result.output == f"connected: Ada-{wire}", wire
        (link,) = person.links
        assert (link.message, link.tool, link.host) == (
            "Connect your Example account",
            "ask_link",
            "127.0.0.1",
        )
        assert link.url.startswith("http://127.0.0.1:") and "/connect/" in link.url
        # 2025-11-25 links carry the server's elicitationId; 2026-07-28 ones have none.
        assert (link.elicitation_id is not None) == wire.endswith("2025"), wire
        assert link.finished.done() and link.finished.result() == "completed", wire


async def test_declined_or_without_a_person_the_server_hears_decline(all_wires: Hub) -> None:
    for wire in WIRES:
        with asking(Person("decline")):
            assert (await all_wires.call_tool(f"{wire}_ask_link", {})).output == "decline", wire
        with asking(Person("cancel")):
            assert (await all_wires.call_tool(f"{wire}_ask_link", {})).output == "cancel", wire
        # Nobody to open a page (manage.py mcp_call, the conformance client): declined.
        assert (await all_wires.call_tool(f"{wire}_ask_link", {})).output == "decline", wire


async def test_urls_that_are_not_http_are_refused_with_the_reason(all_wires: Hub) -> None:
    for wire in WIRES:
        person = Person()
        with asking(person):
            result = await all_wires.call_tool(f"{wire}_ask_link", {"url": "javascript:alert(1)"})
        # 2025-11-25: the server gets the error (the tool reports it); 2026-07-28: the call fails with it.
        assert REFUSED_SCHEME in result.output, (wire, result.output)
        assert result.is_error == wire.endswith("2026")
        assert person.links == []  # never shown


@pytest.mark.parametrize("wire", ["stdio2025", "http2025"])
async def test_a_url_elicitation_required_error_is_completed_then_the_call_is_retried(
    servers: Callable[..., dict], hub: Hub, wire: str
) -> None:
    await hub.start([make_config(wire, servers(wire))])
    account = f"acct-{wire}"
    person = Person()
    with asking(person):
        result = await hub.call_tool(f"{wire}_needs_link", {"account": account})
    assert not result.is_error, result.output
    assert result.output == f"account {account} is connected"  # the retry succeeded
    (link,) = person.links
    assert link.required and link.elicitation_id and link.message == f"Connect {account}"
    # Finished by notifications/elicitation/complete: nothing else could end it.
    assert link.finished.result() == "completed"


async def test_a_url_elicitation_required_error_the_person_refuses_is_a_readable_error(
    servers: Callable[..., dict], hub: Hub
) -> None:
    await hub.start([make_config("stdio2025", servers("stdio2025"))])
    with asking(Person("decline")):
        declined = await hub.call_tool("stdio2025_needs_link", {"account": "declined"})
    assert declined.is_error
    assert "the server requires the person to open 'Connect declined' at http://127.0.0.1:" in declined.output
    assert declined.output.endswith("they declined")
    alone = await hub.call_tool("stdio2025_needs_link", {"account": "alone"})
    assert alone.is_error and "this call has no person to ask" in alone.output, alone.output


@pytest.mark.parametrize("wire", ["stdio2025", "http2025"])
async def test_the_call_timeout_does_not_run_while_the_person_is_on_the_page(
    servers: Callable[..., dict], hub: Hub, wire: str
) -> None:
    """2025-11-25: the server's tools/call waits for the page; its 2 s timeout waits with it.

    (2 s: the call must reach the server and the question come back within it on a loaded
    machine; 0.3 s was missed under load.)
    """
    await hub.start([make_config(wire, servers(wire, timeout=2000))])
    person = Person(value=None)  # consents, submits later

    async def submit_late() -> None:
        await person.asked.wait()
        await asyncio.sleep(2.5)  # the time under test: longer than the call's timeout
        await asyncio.to_thread(submit, person.links[0].url, "Slow")

    with asking(person):
        late = asyncio.create_task(submit_late())
        result = await hub.call_tool(f"{wire}_ask_link", {})
    await late
    assert result.output == "connected: Slow", result.output


async def test_sampling_is_refused_with_the_reason_on_both_revisions(all_wires: Hub) -> None:
    for wire in WIRES:
        result = await all_wires.call_tool(f"{wire}_ask_sampling", {})
        assert (
            "Sampling refused: this client (BooCode) does not support sampling/createMessage" in result.output
        )
        assert "deprecated in MCP 2026-07-28" in result.output
        # 2025-11-25: the server got the error and reported it; 2026-07-28: the call fails with it.
        assert result.output.startswith("refused: ") == wire.endswith("2025"), (wire, result.output)
        assert result.is_error == wire.endswith("2026")


@pytest.mark.npx
async def test_server_everything_elicits_a_form_and_a_link_with_both_of_its_paths(hub: Hub) -> None:
    """The reference server's elicitation tools (registered only for clients that advertise
    elicitation; its sampling tool only for those that advertise sampling)."""
    node_dir = ROOT / "tests" / "node"
    entry = {
        "command": "npx",
        "args": ["-y", "@modelcontextprotocol/server-everything"],
        "cwd": str(node_dir),
    }
    await hub.start([make_config("every", entry)])
    connection = hub.connection("every")
    assert connection is not None

    def names() -> set[str]:
        return {tool.name for tool in connection.tools}

    await hub.wait_until(lambda: "trigger-url-elicitation" in names(), 30)
    assert "trigger-elicitation-request" in names()
    assert "trigger-sampling-request" not in names()  # sampling is never advertised
    # Its tools are annotated readOnlyHint: false, so the hub does not offer them to a model:
    # they are called on the connection directly.
    asked: list[Form | Link] = []

    async def person(request: Form | Link) -> Answer:
        asked.append(request)
        if isinstance(request, Form):
            return Answer("accept", {"name": "Ada Lovelace", "email": "ada@example.com", "check": True})
        if request.required:  # the -32042 prerequisite: the person says they are done
            asyncio.get_running_loop().call_soon(request.finish, "done")
        return Answer("accept")

    with asking(person):
        form = await connection.call_tool("trigger-elicitation-request", {})
        assert "- Name: Ada Lovelace" in form.output and "- Email: ada@example.com" in form.output
        (asked_form,) = asked
        kinds = {field.kind for field in asked_form.fields}
        assert kinds == {"string", "boolean", "integer", "number", "enum", "multi"}

        asked.clear()
        url = "https://example.com/connect?step=1"
        link = await connection.call_tool("trigger-url-elicitation", {"url": url, "message": "Connect"})
        assert "User completed the URL elicitation flow" in link.output, link.output
        (shown,) = asked
        assert isinstance(shown, Link) and (shown.url, shown.host, shown.required) == (
            url,
            "example.com",
            False,
        )

        asked.clear()
        error_path = await connection.call_tool("trigger-url-elicitation", {"url": url, "errorPath": True})
        assert "User completed the URL elicitation flow" in error_path.output, error_path.output
        prerequisite, retried = asked
        assert isinstance(prerequisite, Link) and prerequisite.required
        assert prerequisite.url == "https://modelcontextprotocol.io"
        assert prerequisite.finished.result() == "done"
        assert isinstance(retried, Link) and retried.url == url

"""Prompts through the hub (mcpclient/engine/prompts.py): listing, paging, list changes, get, errors.

Real servers: the toolbox with its prompts group over stdio (2026-07-28), as a 2025-11-25
server (``--handshake-only``), over Streamable HTTP, and without the prompts capability.
"""

from __future__ import annotations

import anyio
import pytest

from mcpclient.core.prompts import PromptError, PromptMessage
from mcpclient.engine import prompts
from mcpclient.engine.hub import Hub
from tests.support.hubs import make_config
from tests.support.processes import PYTHON, ROOT, HttpServer, free_port

pytestmark = pytest.mark.processes

SCRIPT = ROOT / "tests" / "servers" / "toolbox_prompts.py"
LISTED = ["greeting", "code_review", "briefing", "broken"]


def entry(*extra: str, **keys: object) -> dict[str, object]:
    return {"command": PYTHON, "args": [str(SCRIPT), *extra], **keys}


async def listed(hub: Hub, name: str = "box") -> prompts.Catalog:
    connection = hub.connection(name)
    assert connection is not None
    found = prompts.catalog(connection)  # made before the server became ready
    assert found is not None
    with anyio.fail_after(10):
        while not found.listed:
            await found.updated.wait()
    assert not found.error, found.error
    return found


async def wait_for(found: prompts.Catalog, predicate) -> None:
    with anyio.fail_after(10):
        while not predicate():
            await found.updated.wait()


@pytest.mark.parametrize("era", ["2026-07-28", "2025-11-25"])
async def test_every_page_is_listed_and_a_change_is_seen(hub: Hub, era: str) -> None:
    extra = ("--handshake-only",) if era == "2025-11-25" else ()
    await hub.start([make_config("box", entry(*extra))])
    assert hub.snapshots()[0].protocol_version == era
    found = await listed(hub)

    # Four prompts in pages of two: both pages were read, in the server's order.
    assert [p.name for p in found.prompts] == LISTED
    review = next(p for p in found.prompts if p.name == "code_review")
    assert (review.server, review.title, review.description) == (
        "box",
        "Code review",
        "Review a piece of code.",
    )
    assert [(a.name, a.required) for a in review.arguments] == [
        ("language", True),
        ("code", True),
        ("focus", False),
    ]
    assert review.arguments[0].description == "The programming language"
    assert [p.name for p in prompts.prompts_for(hub, None)] == LISTED

    assert (await hub.call_tool("box_add_prompt", {"name": "fresh"})).output == "added fresh"
    await wait_for(found, lambda: "fresh" in {p.name for p in found.prompts})
    assert (await hub.call_tool("box_remove_prompt", {"name": "greeting"})).output == "removed greeting"
    await wait_for(found, lambda: "greeting" not in {p.name for p in found.prompts})
    assert [p.name for p in prompts.prompts_for(hub, None)] == ["code_review", "briefing", "broken", "fresh"]
    _, messages = await prompts.get(hub, "box", "fresh", {}, None)
    assert messages == [PromptMessage("user", "I am the prompt fresh")]


async def test_get_with_arguments_and_several_messages(hub: Hub) -> None:
    await hub.start([make_config("box", entry())])
    await listed(hub)

    prompt, messages = await prompts.get(
        hub, "box", "code_review", {"language": "python", "code": "print(1)", "focus": "names"}, None
    )
    assert prompt.name == "code_review"
    assert messages == [PromptMessage("user", "Please review this python code:\nprint(1) Focus on names.")]

    _, messages = await prompts.get(hub, "box", "briefing", {}, None)
    assert [m.role for m in messages] == ["user", "assistant", "user", "user"]
    assert messages[0].text == "I need a briefing on the launch."
    assert messages[2].text == (
        "[resource: toolbox://notes/brief.txt (text/plain)]\n"
        "The launch moved to Thursday. Ada owns the checklist."
    )
    assert messages[3].text == "[image from the prompt: image/png, 70 bytes, not included]"


async def test_errors_are_readable(hub: Hub) -> None:
    await hub.start([make_config("box", entry())])
    await listed(hub)

    cases = [
        ("box", "nope", {}, 'MCP server "box" offers no prompt "nope" (any more).'),
        ("box", "code_review", {"language": "go"}, "The prompt \"code_review\" needs 'code'."),
        ("box", "greeting", {"who": "x"}, "The prompt \"greeting\" takes no argument 'who'."),
        ("elsewhere", "greeting", {}, 'There is no MCP server "elsewhere".'),
    ]
    for server, name, arguments, message in cases:
        with pytest.raises(PromptError) as caught:
            await prompts.get(hub, server, name, arguments, None)
        assert str(caught.value) == message

    with pytest.raises(PromptError) as caught:
        await prompts.get(hub, "box", "broken", {}, None)
    assert str(caught.value).startswith('MCP server "box": prompt "broken" failed:')
    assert "the briefing database is down" in str(caught.value)

    await hub.call_tool("box_crash", {})
    with pytest.raises(PromptError) as caught:
        await prompts.get(hub, "box", "greeting", {}, None)
    assert str(caught.value).startswith('MCP server "box" unreachable')
    assert prompts.prompts_for(hub, None) == []


@pytest.mark.parametrize("era", ["2026-07-28", "2025-11-25"])
async def test_a_server_without_the_capability_offers_none(hub: Hub, era: str) -> None:
    extra = ("--handshake-only",) if era == "2025-11-25" else ()
    await hub.start([make_config("box", entry("--without-prompts", *extra))])
    found = await listed(hub)
    assert not found.supported and found.prompts == () and found.listings == 0
    assert prompts.prompts_for(hub, None) == []
    with pytest.raises(PromptError, match='offers no prompt "greeting"'):
        await prompts.get(hub, "box", "greeting", {}, None)


async def test_over_streamable_http(hub: Hub) -> None:
    port = free_port()
    server = HttpServer([PYTHON, str(SCRIPT), "--http", str(port)], port, "/mcp")
    try:
        await hub.start([make_config("web", {"url": server.url, "type": "http"})])
        found = await listed(hub, "web")
        assert [p.name for p in found.prompts] == LISTED
        _, messages = await prompts.get(hub, "web", "greeting", {}, None)
        assert messages == [PromptMessage("user", "Say hello to the team in one short sentence.")]
    finally:
        server.stop()


async def test_server_everything_prompts_arguments_and_completion(hub: Hub) -> None:
    from mcpclient.core.resources import make_ref
    from mcpclient.core.state import Status
    from mcpclient.engine import resources

    config = make_config(
        "every",
        {
            "command": "npx",
            "args": ["-y", "@modelcontextprotocol/server-everything"],
            "cwd": str(ROOT / "tests" / "node"),
        },
    )
    with anyio.fail_after(60):
        await hub.start([config])
    assert hub.snapshots()[0].status is Status.READY, hub.snapshots()[0].last_error
    found = await listed(hub, "every")
    by_name = {p.name: p for p in found.prompts}
    assert {"simple-prompt", "args-prompt", "completable-prompt", "resource-prompt"} <= set(by_name)
    args = by_name["args-prompt"]
    assert [(a.name, a.required) for a in args.arguments] == [("city", True), ("state", False)]
    assert by_name["completable-prompt"].completions

    _, messages = await prompts.get(hub, "every", "simple-prompt", {}, None)
    assert messages == [PromptMessage("user", "This is a simple prompt without arguments.")]
    _, messages = await prompts.get(hub, "every", "args-prompt", {"city": "Lyon", "state": "Rhône"}, None)
    assert messages == [PromptMessage("user", "What's weather in Lyon, Rhône?")]
    with pytest.raises(PromptError, match="needs 'city'"):
        await prompts.get(hub, "every", "args-prompt", {"state": "Rhône"}, None)

    # Completion of a prompt argument (the resources module's completion/complete), with context.
    ref = make_ref("prompt", "completable-prompt")
    department = await resources.complete(
        hub, "every", ref, {"name": "department", "value": "Eng"}, None, None
    )
    assert department.values == ("Engineering",)
    lead = await resources.complete(
        hub, "every", ref, {"name": "name", "value": ""}, {"department": "Engineering"}, None
    )
    assert lead.values == ("Alice", "Bob", "Charlie")

    # A prompt with an embedded text resource: its text comes in with its URI.
    _, messages = await prompts.get(
        hub, "every", "resource-prompt", {"resourceType": "Text", "resourceId": "1"}, None
    )
    assert [m.role for m in messages] == ["user", "user"]
    assert messages[1].text.startswith("[resource: demo://resource/dynamic/text/1")

"""Requests from a tool call's view (MCP Apps) to its server, over the conversation's socket.

The real stack (ASGI application, consumer, scripted model over HTTP, the toolbox with its apps
group over stdio as server ``tb`` with ``writeTools: "approve"``, and a second toolbox ``other``)
and the frames the page's host bridge sends for a view (``view_request``, docs/protocol.md).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from boocode.chat.ledger import audit
from boocode.chat.models import ToolApproval, ToolCall, ToolCallAudit
from boocode.chat.web import view_requests
from mcpclient.engine.hub import Hub
from tests.support.accounts import web_client
from tests.support.llm import Call, ScriptedLLM, Text, ToolCalls
from tests.support.tabs import Tab, logged_in_tab

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.processes]

CLOCK_HTML = "<!DOCTYPE html><html><body><p id=clock>clock</p></body></html>"


@pytest.fixture
async def tab(llm: ScriptedLLM, apps_hub: Hub) -> AsyncIterator[Tab]:
    """Alice's tab on her conversation, where the model called ``tb_show_clock`` (it has a view)."""
    opened = await logged_in_tab()
    calls = [Call("tb_show_clock", {"city": "Rome"}), Call("tb_echo", {"text": "x"})]
    llm.script(ToolCalls(calls), Text("Done."))
    await opened.send({"type": "user_message", "text": "what time is it?"})
    assert (await opened.until_turn_end())["status"] == "complete"
    yield opened
    await opened.close()


def calls_of(tab: Tab) -> dict[str, dict[str, Any]]:
    """The conversation's tool calls (as the page got them), by tool."""
    return {frame["call"]["tool"]: frame["call"] for frame in tab.frames if frame["type"] == "tool_result"}


class Asker:
    """The page's bridge for one view: a request out, its ``view_reply`` back."""

    def __init__(self, tab: Tab, call_id: int) -> None:
        self.tab, self.call_id, self.next_id = tab, call_id, 0

    async def send(self, method: str, params: dict[str, Any], call: int | None = None) -> int:
        self.next_id += 1
        frame = {"type": "view_request", "id": self.next_id, "call": call or self.call_id, "method": method}
        await self.tab.send({**frame, "params": params})
        return self.next_id

    async def ask(self, method: str, params: dict[str, Any], call: int | None = None) -> dict[str, Any]:
        sent = await self.send(method, params, call)
        reply = await self.tab.next("view_reply")
        assert reply["id"] == sent
        return reply

    async def call(self, name: str, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
        return await self.ask("tools/call", {"name": name, "arguments": arguments or {}})


async def test_a_view_calls_only_its_own_servers_tools_for_views_and_reads_its_resources(tab: Tab) -> None:
    calls = calls_of(tab)
    view = Asker(tab, calls["show_clock"]["id"])

    ticked = await view.call("tick")  # visibility ["app"]: for views only
    assert ticked["call"] == view.call_id and "error" not in ticked
    assert ticked["result"] == {
        "content": [{"type": "text", "text": "tick"}],
        "isError": False,
        "structuredContent": {"result": "tick"},  # (the SDK's own wrapping of a str result)
    }
    echoed = await view.call("echo", {"text": "hi"})  # no visibility declared: the model's and the views'
    assert echoed["result"]["content"][0]["text"] == "hi"
    invalid = await view.call("echo", {"txt": "hi"})  # the registry validates, as for the model
    assert invalid["result"]["isError"] and "Invalid arguments" in invalid["result"]["content"][0]["text"]

    refused = {
        "model_only": "is for the model only, not for views",
        "sealed": 'has no tool "sealed" that a view may call',
        "other_echo": 'has no tool "other_echo"',  # another server's tool, by its prefixed name
        "tb_tick": 'has no tool "tb_tick"',  # a view names its server's tools by their own names
    }
    for name, why in refused.items():
        reply = await view.call(name)
        assert "result" not in reply and why in reply["error"], name

    read = await view.ask("resources/read", {"uri": "ui://toolbox/clock.html"})
    [content] = read["result"]["contents"]
    assert (content["uri"], content["mimeType"], content["text"]) == (
        "ui://toolbox/clock.html",
        "text/html;profile=mcp-app",
        CLOCK_HTML,
    )
    huge = await view.ask("resources/read", {"uri": "toolbox://apps/huge.txt"})  # 50 MB
    assert "result" not in huge and huge["error"].startswith("The resource could not be read")
    assert huge["error"].endswith("a message of 50.0 MB, over the 16.0 MB limit")
    assert (await view.call("tick"))["result"]["content"][0]["text"] == "tick"  # the session lives on

    no_view = await view.ask("tools/call", {"name": "tick"}, call=calls["echo"]["id"])
    assert no_view["error"] == "No tool call with a view has this id in this conversation."
    for frame, why in (
        ({"method": "tools/list"}, "Views may ask for tools/call, resources/read, ui/update-model-context"),
        ({"method": "tools/call", "params": []}, '"params" must be an object'),
        ({"method": "tools/call", "call": "1"}, '"call" must be the id'),
        ({"method": "tools/call", "params": {"name": ""}}, '"name" must be the name of a tool'),
        ({"method": "tools/call", "params": {"name": "tick", "arguments": [1]}}, '"arguments" must be'),
        ({"method": "resources/read", "params": {"uri": "x" * 3000}}, '"uri" must be a resource URI'),
    ):
        await tab.send({"type": "view_request", "id": "r", "call": view.call_id, **frame})
        reply = await tab.next("view_reply")
        assert reply["id"] == "r" and why in reply["error"], frame
    await tab.send({"type": "view_request", "call": view.call_id, "method": "tools/call"})
    assert (await tab.next("error"))["code"] == "bad_frame"


async def test_replies_go_to_the_asking_tab_and_another_persons_view_is_unknown(tab: Tab) -> None:
    view_id = calls_of(tab)["show_clock"]["id"]
    other_tab = Tab(tab.conversation_id, tab.cookie)
    await other_tab.open()
    mallory = await logged_in_tab("mallory")
    try:
        assert "result" in await Asker(tab, view_id).call("tick")
        stolen = await Asker(mallory, view_id).call("tick")  # alice's call id, from mallory's conversation
        assert stolen["error"] == "No tool call with a view has this id in this conversation."
        await other_tab.send({"type": "cancel"})  # (any frame: the replies above were sent before it)
        assert (await other_tab.next_of(("error", "view_reply")))["type"] == "error"
    finally:
        await other_tab.close()
        await mallory.close()


async def test_a_views_write_call_waits_for_the_person_and_says_a_view_asks(tab: Tab) -> None:
    view = Asker(tab, calls_of(tab)["show_clock"]["id"])
    sent = await view.send("tools/call", {"name": "set_alarm", "arguments": {"at": "7:00"}})
    approval = (await tab.next("approval"))["approval"]
    assert approval["from_view"] is True and approval["call_id"] == view.call_id
    assert (approval["server"], approval["tool"], approval["name"]) == ("tb", "set_alarm", "tb_set_alarm")
    assert approval["reason"].startswith("asked by a view: ")
    await tab.send({"type": "approval_answer", "id": approval["id"], "decision": "deny"})
    denied = await tab.next("view_reply")
    assert denied["id"] == sent and denied["result"]["isError"]
    assert "the person denied this call" in denied["result"]["content"][0]["text"]

    sent = await view.send("tools/call", {"name": "set_alarm", "arguments": {"at": "7:30"}})
    approval = (await tab.next("approval"))["approval"]
    await tab.send({"type": "approval_answer", "id": approval["id"], "decision": "approve"})
    done = await tab.next("view_reply")
    assert done["id"] == sent and done["result"]["content"][0]["text"] == "alarm set for 7:30"

    @sync_to_async
    def rows() -> list[tuple[str, str, int | None, str]]:
        found = ToolApproval.objects.filter(conversation_id=tab.conversation_id).order_by("id")
        return [(row.name, row.decision, row.tool_call_id, row.reason[:17]) for row in found]

    assert await rows() == [
        ("tb_set_alarm", "denied", view.call_id, "asked by a view: "),
        ("tb_set_alarm", "approved", view.call_id, "asked by a view: "),
    ]

    # The audit log says the view asked, and who decided each time.
    await audit.drain()

    @sync_to_async
    def audited() -> list[tuple[str, str, str, str, str]]:
        found = ToolCallAudit.objects.filter(
            conversation_id=tab.conversation_id, name="tb_set_alarm"
        ).order_by("id")
        return [
            (row.origin, row.outcome, row.approval, str(row.decided_by), row.arguments)
            for row in found.select_related("decided_by")
        ]

    assert await audited() == [
        ("view", "refused", "denied", "alice", '{"at": "7:00"}'),
        ("view", "ok", "approved", "alice", '{"at": "7:30"}'),
    ]


async def test_the_agent_and_the_switches_decide_too(
    tab: Tab, agents_file: Callable[[str], Path], settings: Any, apps_hub: Hub
) -> None:
    view = Asker(tab, calls_of(tab)["show_clock"]["id"])
    agents_file("## Clock\n---\ntools: [tb_show_clock]\n---\nOnly the clock.\n")
    refused = await view.call("tick")
    assert refused["error"] == 'The agent of this conversation may not use "tb_tick".'
    agents_file("## Clock\n---\ntools: [tb_*]\n---\nThe clock and its view.\n")
    assert "result" in await view.call("tick")

    settings.MCP_APPS = False
    assert (await view.call("tick"))["error"] == "Views are turned off on this BooCode (BOOCODE_APPS)."


async def test_requests_are_bounded_and_each_gets_one_answer(
    tab: Tab, monkeypatch: pytest.MonkeyPatch
) -> None:
    view = Asker(tab, calls_of(tab)["show_clock"]["id"])
    monkeypatch.setattr(view_requests, "RATE", 0.5)  # (so the refill does not blur the count)
    sent = [await view.send("tools/call", {"name": "tick"}) for _ in range(view_requests.BURST + 10)]
    replies = [await tab.next("view_reply") for _ in sent]
    assert sorted(reply["id"] for reply in replies) == sent
    answered = [reply for reply in replies if "result" in reply]
    refused = [reply for reply in replies if "error" in reply]
    assert len(answered) <= view_requests.BURST + 1 and len(refused) >= 9
    assert all(reply["error"].startswith("Too many requests from") for reply in refused)


async def test_a_views_context_reaches_the_model_on_its_next_request_and_the_exports(
    tab: Tab, llm: ScriptedLLM
) -> None:
    view = Asker(tab, calls_of(tab)["show_clock"]["id"])
    update = {
        "content": [{"type": "text", "text": "The alarm is set for 7:00."}, {"type": "image", "data": "A="}],
        "structuredContent": {"alarm": "7:00"},
    }
    assert (await view.ask("ui/update-model-context", update))["result"] == {}
    too_big = {"content": [{"type": "text", "text": "x" * (view_requests.MAX_CONTEXT_BYTES + 1)}]}
    assert "a view's context is limited to" in (await view.ask("ui/update-model-context", too_big))["error"]
    stored = await sync_to_async(lambda: ToolCall.objects.get(pk=view.call_id).view_context)()
    assert stored["text"].startswith("The alarm is set for 7:00.")  # the refused update changed nothing

    llm.script(Text("It rings at seven."))
    since = len(llm.requests)
    await tab.send({"type": "user_message", "text": "when does it ring?"})
    assert (await tab.until_turn_end())["status"] == "complete"
    last = llm.requests[since]["messages"][-1]
    assert last["role"] == "user" and last["content"].startswith("when does it ring?\n\n")
    section = "[What the view of the tb_show_clock call (tb) shows now]\nThe alarm is set for 7:00.\n"
    assert section in last["content"]
    assert "[image content, not shown to the model]" in last["content"]
    assert '{"alarm": "7:00"}' in last["content"]

    # The exports keep the view and its context with the call (the page shows it from them).
    client = await web_client("alice")
    exported = (await client.get(f"/c/{tab.conversation_id}/export.json")).json()
    [clock] = [c for m in exported["messages"] for c in m["tool_calls"] if c["tool"] == "show_clock"]
    assert (clock["view"], clock["arguments"]) == ("ui://toolbox/clock.html", '{"city": "Rome"}')
    assert clock["view_context"].startswith("The alarm is set for 7:00.")
    markdown = (await client.get(f"/c/{tab.conversation_id}/export.md")).content.decode()
    assert "Shown in the view ui://toolbox/clock.html (MCP Apps)." in markdown
    assert "What the view gave the model:\n\n```\nThe alarm is set for 7:00." in markdown

    assert (await view.ask("ui/update-model-context", {"content": []}))["result"] == {}  # cleared
    llm.script(Text("No alarm."))
    since = len(llm.requests)
    await tab.send({"type": "user_message", "text": "and now?"})
    assert (await tab.until_turn_end())["status"] == "complete"
    assert llm.requests[since]["messages"][-1]["content"] == "and now?"


async def test_a_closed_tab_cancels_its_views_requests(tab: Tab) -> None:
    closing = Tab(tab.conversation_id, tab.cookie)
    await closing.open()
    view = Asker(closing, calls_of(tab)["show_clock"]["id"])
    await view.send("tools/call", {"name": "set_alarm", "arguments": {"at": "8:00"}})
    approval = (await closing.next("approval"))["approval"]
    await closing.close()

    @sync_to_async
    def decision() -> str:
        return ToolApproval.objects.get(pk=approval["id"]).decision

    for _ in range(50):
        if await decision() != "pending":
            break
        await asyncio.sleep(0.1)
    assert await decision() == "stopped"
    end = await tab.next("approval_end")  # every tab of the conversation took the card away
    assert (end["id"], end["decision"]) == (approval["id"], "stopped")

"""Links (URL-mode elicitation), the -32042 error and the sampling refusal, in a conversation.

The real stack: the ASGI application, the scripted LLM over HTTP asking for the tool, and the
toolbox's "questions" group over stdio at 2026-07-28 (server "q26") and at 2025-11-25 (server
"q25", ``handshake_toolbox.py --feature questions``). The person's browser is played by the test:
it answers over the websocket and submits the server's page over HTTP.
"""

from __future__ import annotations

import asyncio
import json
import urllib.request
from collections.abc import AsyncIterator
from typing import Any

import pytest

from boocode.chat.calls.questions import forms
from mcpclient.core.state import Status
from mcpclient.engine.hub import Hub
from mcpclient.runtime import set_hub
from tests.support.hubs import make_config
from tests.support.llm import Call, ScriptedLLM, Text, ToolCalls
from tests.support.processes import PYTHON, ROOT, TOOLBOX
from tests.support.tabs import Tab, logged_in_tab

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.processes]

HANDSHAKE_TOOLBOX = ROOT / "tests" / "servers" / "handshake_toolbox.py"


@pytest.fixture
async def links_hub(hub: Hub) -> AsyncIterator[Hub]:
    """The process hub with the questions server at both revisions."""
    await hub.start(
        [
            make_config("q26", {"command": PYTHON, "args": [str(TOOLBOX), "--feature", "questions"]}),
            make_config(
                "q25", {"command": PYTHON, "args": [str(HANDSHAKE_TOOLBOX), "--feature", "questions"]}
            ),
        ]
    )
    assert [s.status for s in hub.snapshots()] == [Status.READY, Status.READY]
    set_hub(hub)
    yield hub
    set_hub(None)


def submit(url: str, value: str) -> None:
    """The person's browser submits the server's page."""
    request = urllib.request.Request(url, data=f"value={value}".encode(), method="POST")
    with urllib.request.urlopen(request, timeout=10) as response:
        assert response.status == 200


async def start_turn(llm: ScriptedLLM, tab: Tab, tool: str, arguments: dict[str, Any] | None = None) -> dict:
    """Have the model call ``tool``; the ``elicitation`` frame the server's link becomes."""
    llm.script(ToolCalls([Call(tool, arguments or {})]), Text("Thanks."))
    await tab.send({"type": "user_message", "text": "connect me"})
    call = (await tab.next("tool_call"))["call"]
    elicitation = (await tab.next("elicitation"))["elicitation"]
    assert elicitation["call_id"] == call["id"] and elicitation["tool"] == tool
    return elicitation


@pytest.mark.parametrize("server", ["q26", "q25"])
async def test_the_link_is_shown_opened_and_the_turn_resumes_when_the_page_is_completed(
    llm: ScriptedLLM, links_hub: Hub, server: str
) -> None:
    tab = await logged_in_tab()
    second = await logged_in_tab("alice", tab.conversation_id)  # the same person, another tab
    link = await start_turn(llm, tab, f"{server}_ask_link")
    assert (await second.next("elicitation"))["elicitation"]["id"] == link["id"]
    assert (link["mode"], link["state"], link["server"]) == ("url", "asking", server)
    assert link["message"] == "Connect your Example account"
    assert link["url"].startswith("http://127.0.0.1:") and "/connect/" in link["url"]  # in full
    assert link["host"] == "127.0.0.1" and link["required"] is False

    await tab.send({"type": "elicitation_answer", "id": link["id"], "action": "accept"})  # "Open"
    for each in (tab, second):
        assert (await each.next("elicitation_waiting"))["id"] == link["id"]
    # One answer: the other tab's click comes too late.
    await second.send({"type": "elicitation_answer", "id": link["id"], "action": "decline"})
    assert (await second.next("error"))["code"] == "unknown_elicitation"
    # A reconnecting tab sees the link waiting.
    assert forms.pending(tab.conversation_id)[0]["state"] == "waiting"

    await asyncio.to_thread(submit, link["url"], "Ada")
    for each in (tab, second):
        assert (await each.next("elicitation_end"))["outcome"] == "completed"
    result = (await tab.next("tool_result"))["call"]
    assert result["output"] == "connected: Ada"
    assert (await tab.until_turn_end())["status"] == "complete"
    assert "connected: Ada" in json.dumps(llm.requests[-1]["messages"])
    await tab.close()
    await second.close()


async def test_a_link_nobody_opens_expires_and_is_declined(
    llm: ScriptedLLM, links_hub: Hub, settings: Any
) -> None:
    settings.ELICITATION_TIMEOUT = 0.3
    tab = await logged_in_tab()
    await start_turn(llm, tab, "q25_ask_link")
    assert (await tab.next("elicitation_end"))["outcome"] == "expired"
    assert (await tab.next("tool_result"))["call"]["output"] == "decline"
    assert (await tab.until_turn_end())["status"] == "complete"
    await tab.close()


async def test_stop_ends_an_opened_link_and_the_call(llm: ScriptedLLM, links_hub: Hub) -> None:
    tab = await logged_in_tab()
    link = await start_turn(llm, tab, "q26_ask_link")
    await tab.send({"type": "elicitation_answer", "id": link["id"], "action": "accept"})
    await tab.next("elicitation_waiting")
    await tab.send({"type": "cancel"})
    assert (await tab.next("elicitation_end"))["outcome"] == "stopped"
    assert (await tab.until_turn_end())["status"] == "stopped"
    assert forms.pending(tab.conversation_id) == []
    await tab.close()


async def test_a_link_with_a_scheme_other_than_http_never_reaches_the_page(
    llm: ScriptedLLM, links_hub: Hub
) -> None:
    tab = await logged_in_tab()
    llm.script(ToolCalls([Call("q25_ask_link", {"url": "javascript:alert(1)"})]), Text("Ok."))
    await tab.send({"type": "user_message", "text": "connect me"})
    result = (await tab.next("tool_result"))["call"]
    assert "BooCode opens only http and https URLs, not javascript:" in result["output"]
    await tab.until_turn_end()
    assert not [f for f in tab.frames if f["type"] == "elicitation"]
    await tab.close()


async def test_a_url_elicitation_required_error_is_shown_then_the_call_is_retried(
    llm: ScriptedLLM, links_hub: Hub
) -> None:
    tab = await logged_in_tab()
    link = await start_turn(llm, tab, "q25_needs_link", {"account": "chat-1"})
    assert (link["mode"], link["required"], link["message"]) == ("url", True, "Connect chat-1")
    await tab.send({"type": "elicitation_answer", "id": link["id"], "action": "accept"})
    await tab.next("elicitation_waiting")
    await asyncio.to_thread(submit, link["url"], "x")  # the server sends notifications/elicitation/complete
    assert (await tab.next("elicitation_end"))["outcome"] == "completed"
    assert (await tab.next("tool_result"))["call"]["output"] == "account chat-1 is connected"
    await tab.until_turn_end()
    await tab.close()


async def test_the_person_says_done_when_the_server_never_reports(llm: ScriptedLLM, links_hub: Hub) -> None:
    """The spec's manual control: the -32042 page was used elsewhere, the server stays silent."""
    tab = await logged_in_tab()
    link = await start_turn(llm, tab, "q25_needs_link", {"account": "chat-2"})
    await tab.send({"type": "elicitation_answer", "id": link["id"], "action": "accept"})
    await tab.next("elicitation_waiting")
    await tab.send({"type": "elicitation_answer", "id": link["id"], "action": "maybe"})
    assert (await tab.next("error"))["code"] == "bad_answer"
    await tab.send({"type": "elicitation_answer", "id": link["id"], "action": "done"})
    assert (await tab.next("elicitation_end"))["outcome"] == "done"
    # Retried once; the page was never submitted, so the server asks again: a readable error.
    output = (await tab.next("tool_result"))["call"]["output"]
    assert "the server still requires a web page to be opened after a retry" in output
    await tab.until_turn_end()
    await tab.close()


async def test_sampling_is_refused_and_the_model_reads_why(llm: ScriptedLLM, links_hub: Hub) -> None:
    tab = await logged_in_tab()
    llm.script(ToolCalls([Call("q26_ask_sampling", {}), Call("q25_ask_sampling", {})]), Text("Ok."))
    await tab.send({"type": "user_message", "text": "sample"})
    await tab.until_turn_end()
    told = json.dumps(llm.requests[-1]["messages"])
    assert told.count("Sampling refused: this client (BooCode) does not support sampling/createMessage") == 2

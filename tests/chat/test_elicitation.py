"""Forms an MCP server asks for during a turn's tool call, answered over the websocket.

The real stack: the ASGI application (origin check, session auth, consumer), the scripted LLM
over HTTP asking for the tool, and tests/servers/modern.py over stdio, at 2026-07-28 (server
"forms": an ``InputRequiredResult`` the SDK answers through the hub's callback) and at
2025-11-25 (server "legacy": an ``elicitation/create`` request mid-call).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from boocode.chat.calls.questions import forms
from boocode.tools import runners as tool_runners
from mcpclient.core.state import Status
from mcpclient.engine.hub import Hub
from mcpclient.runtime import set_hub
from tests.support.accounts import conversation_of
from tests.support.hubs import make_config
from tests.support.llm import Call, ScriptedLLM, Text, ToolCalls
from tests.support.processes import PYTHON, ROOT
from tests.support.tabs import Tab, logged_in_tab

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.processes]

MODERN = ROOT / "tests" / "servers" / "modern.py"


def forms_entry(*extra: str, **keys: Any) -> dict[str, Any]:
    return {"command": PYTHON, "args": [str(MODERN), "--stdio", "--elicit-tools", *extra], **keys}


@pytest.fixture
async def forms_hub(hub: Hub) -> AsyncIterator[Hub]:
    """The process hub with the eliciting server at both revisions (tools ``forms_*``, ``legacy_*``)."""
    await hub.start(
        [
            make_config("forms", forms_entry()),
            make_config("legacy", forms_entry("--handshake-only")),
        ]
    )
    assert [s.status for s in hub.snapshots()] == [Status.READY, Status.READY]
    set_hub(hub)
    yield hub
    set_hub(None)


@pytest.fixture
async def tight_hub(hub: Hub) -> AsyncIterator[Hub]:
    """The process hub with the 2025-11-25 eliciting server allowing 0.3 s per call (``legacy_*``).

    Only for the test of that limit: elsewhere, a loaded machine can take longer than that to
    answer once the person has.
    """
    await hub.start([make_config("legacy", forms_entry("--handshake-only", timeout=300))])
    assert [s.status for s in hub.snapshots()] == [Status.READY]
    set_hub(hub)
    yield hub
    set_hub(None)


def answer(form: dict[str, Any], action: str, **content: Any) -> dict[str, Any]:
    """An ``elicitation_answer`` frame for ``form`` (content only when given)."""
    frame = {"type": "elicitation_answer", "id": form["id"], "action": action}
    return {**frame, "content": content} if content else frame


async def start_turn(llm: ScriptedLLM, tab: Tab, tool: str) -> dict[str, Any]:
    """Have the model call ``tool``; the ``elicitation`` frame the server's form becomes."""
    llm.script(ToolCalls([Call(tool, {})]), Text("Thanks."))
    await tab.send({"type": "user_message", "text": "ask me"})
    call = (await tab.next("tool_call"))["call"]
    elicitation = (await tab.next("elicitation"))["elicitation"]
    assert elicitation["call_id"] == call["id"] and elicitation["tool"] == tool
    return elicitation


async def finish(tab: Tab) -> tuple[str, str]:
    """The form's outcome and the tool's output, once the turn has ended."""
    end = await tab.next("elicitation_end")
    result = (await tab.next("tool_result"))["call"]
    assert (await tab.until_turn_end())["status"] == "complete"
    return end["outcome"], result["output"]


@pytest.mark.parametrize("tool", ["forms_ask_profile", "legacy_ask_profile"])
async def test_the_person_fills_the_form_and_the_tool_gets_the_answer(
    llm: ScriptedLLM, forms_hub: Hub, tool: str
) -> None:
    tab = await logged_in_tab()

    form = await start_turn(llm, tab, tool)
    assert form["message"] == "Tell me about <b>you</b>"  # text: the page shows it with textContent
    fields = {f["name"]: f for f in form["fields"]}
    name = fields["name"]
    assert (name["required"], name["title"], name["default"]) == (True, "Your name", None)
    assert (fields["age"]["type"], fields["age"]["default"], fields["age"]["maximum"]) == ("integer", 30, 150)
    assert [o["value"] for o in fields["color"]["options"]] == ["red", "green", "blue"]
    assert fields["subscribe"]["type"] == "boolean"

    # Nothing typed in the required field: refused, the form stays open.
    await tab.send({**answer(form, "accept"), "content": {}})
    error = await tab.next("error")
    assert (error["code"], error["id"]) == ("bad_answer", form["id"])
    assert '"Your name" is required' in error["message"]
    assert error["fields"] == {"name": '"Your name" is required'}  # the page shows it at the field

    await tab.send(answer(form, "accept", name="Ada", color="blue"))
    outcome, output = await finish(tab)
    assert outcome == "accepted"
    # What was left empty got its default (SEP-1034).
    assert output == 'accept {"age": 30, "color": "blue", "name": "Ada", "subscribe": false}'
    assert "Ada" in json.dumps(llm.requests[-1]["messages"])  # the model reads the tool result
    await tab.close()


async def test_declined(llm: ScriptedLLM, forms_hub: Hub) -> None:
    tab = await logged_in_tab()
    form = await start_turn(llm, tab, "legacy_ask_profile")
    await tab.send(answer(form, "decline"))
    assert await finish(tab) == ("declined", "decline")
    await tab.close()


async def test_an_unanswered_form_expires_and_is_declined(
    llm: ScriptedLLM, forms_hub: Hub, settings: Any
) -> None:
    settings.ELICITATION_TIMEOUT = 0.3
    tab = await logged_in_tab()
    await start_turn(llm, tab, "forms_ask_profile")
    assert await finish(tab) == ("expired", "decline")
    await tab.close()


async def test_only_the_owner_answers_and_bad_answers_change_nothing(
    llm: ScriptedLLM, forms_hub: Hub
) -> None:
    tab = await logged_in_tab()
    alice = tab.cookie
    form = await start_turn(llm, tab, "forms_ask_profile")

    # Mallory, on her own conversation, with the form's id: as if it did not exist.
    mallory = await logged_in_tab("mallory")
    await mallory.send(answer(form, "accept", name="M"))
    assert (await mallory.next("error"))["code"] == "unknown_elicitation"
    # Alice herself, from another of her conversations: the form belongs to this one only.
    elsewhere = Tab(await conversation_of("alice"), alice)
    await elsewhere.open()
    await elsewhere.send(answer(form, "decline"))
    assert (await elsewhere.next("error"))["code"] == "unknown_elicitation"

    bad = [
        ({"id": "no-such-form", "action": "decline"}, "unknown_elicitation"),
        ({"id": 42, "action": "decline"}, "unknown_elicitation"),
        ({"action": "decline"}, "unknown_elicitation"),
        ({"id": form["id"], "action": "maybe"}, "bad_answer"),
        ({"id": form["id"], "action": "accept", "content": ["Ada"]}, "bad_answer"),
        ({"id": form["id"], "action": "accept", "content": {"name": "Ada", "age": "old"}}, "bad_answer"),
        ({"id": form["id"], "action": "accept", "content": {"name": "Ada", "admin": True}}, "bad_answer"),
    ]
    for frame, code in bad:
        await tab.send({"type": "elicitation_answer", **frame})
        assert (await tab.next("error"))["code"] == code, frame
    assert [f["id"] for f in forms.pending(tab.conversation_id)] == [form["id"]]  # still open

    await tab.send(answer(form, "cancel"))
    assert await finish(tab) == ("cancelled", "cancel")
    # Settled: answering again is answering nothing.
    await tab.send(answer(form, "accept", name="A"))
    assert (await tab.next("error"))["code"] == "unknown_elicitation"
    for other in (tab, mallory, elsewhere):
        await other.close()


async def test_a_reconnecting_tab_gets_the_open_form_and_a_stop_cancels_it(
    llm: ScriptedLLM, forms_hub: Hub
) -> None:
    tab = await logged_in_tab()
    conversation, cookie = tab.conversation_id, tab.cookie
    form = await start_turn(llm, tab, "legacy_ask_profile")
    await tab.close()  # the browser went away; the turn and its form wait

    back = Tab(conversation, cookie)
    history = await back.open()
    assert history["running"] is True
    assert [f["id"] for f in history["elicitations"]] == [form["id"]]

    await back.send({"type": "cancel"})
    assert (await back.next("elicitation_end"))["outcome"] == "stopped"
    assert (await back.until_turn_end())["status"] == "stopped"
    assert forms.pending(conversation) == []
    await back.close()


async def test_the_time_limits_of_the_call_wait_for_the_person(
    llm: ScriptedLLM, tight_hub: Hub, monkeypatch: pytest.MonkeyPatch
) -> None:
    # "legacy" allows 0.3 s per call, and the registry gives up 0.1 s after that.
    monkeypatch.setattr(tool_runners, "MCP_GRACE", 0.1)
    tab = await logged_in_tab()
    form = await start_turn(llm, tab, "legacy_ask_profile")
    await asyncio.sleep(0.8)  # the time under test: the person takes longer than both limits
    await tab.send(answer(form, "accept", name="Slow"))
    outcome, output = await finish(tab)
    assert outcome == "accepted"
    assert output.startswith('accept {"age": 30, "color": "green", "name": "Slow"')
    await tab.close()

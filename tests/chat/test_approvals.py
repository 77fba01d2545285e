"""Tool calls behind the owner's approval, through the real stack.

The ASGI application (origin check, session auth, consumer), the scripted LLM over HTTP asking
for the tools, and the toolbox with its write group over stdio with ``writeTools: "approve"``.
Every write is appended to a log file by the server itself, so the tests see whether the call
reached the server without asking the hub.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import reverse

from boocode.chat.calls.approvals import approvals
from boocode.chat.models import Conversation, ToolApproval
from boocode.chat.turn.registry import registry
from boocode.tools import runners as tool_runners
from mcpclient.core.state import Status
from mcpclient.engine.hub import Hub
from mcpclient.runtime import set_hub
from tests.support.accounts import conversation_of
from tests.support.hubs import make_config
from tests.support.llm import Call, ScriptedLLM, Text, ToolCalls
from tests.support.processes import ROOT, toolbox_entry
from tests.support.tabs import Tab, logged_in_tab

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.processes]


def writes(log: Path) -> list[dict[str, Any]]:
    """What the server did (one entry per write that reached it)."""
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def answer(approval: dict[str, Any], decision: str, remember: bool = False) -> dict[str, Any]:
    return {"type": "approval_answer", "id": approval["id"], "decision": decision, "remember": remember}


async def ask(llm: ScriptedLLM, tab: Tab, *calls: Call) -> list[dict[str, Any]]:
    """Have the model make ``calls`` in one step; the ``approval`` frames they become."""
    llm.script(ToolCalls(list(calls)), Text("Done."))
    await tab.send({"type": "user_message", "text": "please write"})
    cards = [(await tab.next("tool_call"))["call"] for _ in calls]
    found = [(await tab.next("approval"))["approval"] for _ in calls]
    assert sorted(a["call_id"] for a in found) == sorted(c["id"] for c in cards)
    return sorted(found, key=lambda a: a["id"])


@sync_to_async
def rows(conversation_id: int) -> list[tuple[str, str, bool, str | None]]:
    return [
        (row.name, row.decision, row.remember, row.decided_by.username if row.decided_by else None)
        for row in ToolApproval.objects.filter(conversation_id=conversation_id).order_by("id")
    ]


@sync_to_async
def allowed_tools(conversation_id: int) -> list[str]:
    """The names of the tools allowed for the conversation (each allowance is "name#digest")."""
    return [key.split("#")[0] for key in Conversation.objects.get(pk=conversation_id).allowed_tools]


async def test_approved_call_runs_with_the_card_showing_what_it_does(
    llm: ScriptedLLM, writes_hub: Hub, writes_log: Path
) -> None:
    tab = await logged_in_tab()
    conversation = tab.conversation_id
    [card] = await ask(llm, tab, Call("notes_write_note", {"key": "a", "text": "<b>hi</b>"}))
    assert (card["server"], card["tool"], card["name"], card["title"]) == (
        "notes",
        "write_note",
        "notes_write_note",
        "Write a note",
    )
    assert card["arguments"] == {"key": "a", "text": "<b>hi</b>"}
    assert card["hints"] == {"readOnly": False, "destructive": False, "idempotent": True, "openWorld": False}
    assert "writeTools" in card["reason"] and card["expires_at"]
    assert writes(writes_log) == []  # nothing ran before the person said so
    assert await rows(conversation) == [("notes_write_note", "pending", False, None)]

    await tab.send(answer(card, "approve"))
    end = await tab.next("approval_end")
    assert (end["id"], end["decision"], end["remember"]) == (card["id"], "approved", False)
    result = (await tab.next("tool_result"))["call"]
    assert result["output"] == "stored note 'a'" and not result["is_error"]
    assert (await tab.until_turn_end())["status"] == "complete"
    assert writes(writes_log) == [{"tool": "write_note", "key": "a", "text": "<b>hi</b>"}]
    assert await rows(conversation) == [("notes_write_note", "approved", False, "alice")]
    await tab.close()


async def test_denied_call_never_reaches_the_server_and_the_model_is_told(
    llm: ScriptedLLM, writes_hub: Hub, writes_log: Path
) -> None:
    tab = await logged_in_tab()
    conversation = tab.conversation_id
    [card] = await ask(llm, tab, Call("notes_delete_notes", {}))
    assert card["hints"]["destructive"] is True
    await tab.send(answer(card, "deny"))
    assert (await tab.next("approval_end"))["decision"] == "denied"
    result = (await tab.next("tool_result"))["call"]
    assert result["is_error"] and "the person denied this call" in result["output"]
    assert (await tab.until_turn_end())["status"] == "complete"
    assert writes(writes_log) == []
    sent = json.dumps(llm.requests[-1]["messages"])
    assert 'Not run: the person denied this call of \\"notes_delete_notes\\"' in sent
    assert await rows(conversation) == [("notes_delete_notes", "denied", False, "alice")]
    await tab.close()


async def test_remembered_tool_runs_without_asking_again_in_that_conversation_only(
    llm: ScriptedLLM, writes_hub: Hub, writes_log: Path
) -> None:
    tab = await logged_in_tab()
    conversation, cookie = tab.conversation_id, tab.cookie
    # Two calls of the same tool in one step: each gets its card; remembering one settles both.
    first, second = await ask(
        llm,
        tab,
        Call("notes_write_note", {"key": "a", "text": "1"}, id="c1"),
        Call("notes_write_note", {"key": "b", "text": "2"}, id="c2"),
    )
    assert first["id"] != second["id"]
    await tab.send(answer(first, "approve", remember=True))
    ends = {(await tab.next("approval_end"))["id"]: tab.frames[-1] for _ in range(2)}
    assert ends[first["id"]]["decision"] == "approved" and ends[first["id"]]["remember"] is True
    assert ends[second["id"]]["decision"] == "allowed"
    assert (await tab.until_turn_end())["status"] == "complete"
    assert sorted(w["key"] for w in writes(writes_log)) == ["a", "b"]
    assert await allowed_tools(conversation) == ["notes_write_note"]
    await registry.wait(conversation)

    # The next turn's call runs at once: no card, an "allowed" row for the record.
    llm.script(ToolCalls([Call("notes_write_note", {"key": "c", "text": "3"})]), Text("Done."))
    await tab.send({"type": "user_message", "text": "again"})
    assert (await tab.next("tool_result"))["call"]["output"] == "stored note 'c'"
    assert (await tab.until_turn_end())["status"] == "complete"
    assert not any(frame["type"] == "approval" for frame in tab.frames[-20:])
    assert [r[1] for r in await rows(conversation)] == ["approved", "allowed", "allowed"]

    # Another conversation of the same person asks again.
    other = Tab(await conversation_of("alice"), cookie)
    await other.open()
    await ask(llm, other, Call("notes_write_note", {"key": "d", "text": "4"}))
    await other.send({"type": "cancel"})
    assert (await other.next("approval_end"))["decision"] == "stopped"
    assert (await other.until_turn_end())["status"] == "stopped"
    assert "d" not in [w["key"] for w in writes(writes_log)]
    await tab.close()
    await other.close()


async def test_the_console_asks_too(llm: ScriptedLLM, writes_hub: Hub, writes_log: Path) -> None:
    tab = await logged_in_tab()
    await tab.send({"type": "user_message", "text": '/call notes_write_note {"key": "k", "text": "v"}'})
    card = (await tab.next("approval"))["approval"]
    assert card["arguments"] == {"key": "k", "text": "v"}
    await tab.send(answer(card, "approve"))
    assert (await tab.next("tool_result"))["call"]["output"] == "stored note 'k'"
    assert writes(writes_log) == [{"tool": "write_note", "key": "k", "text": "v"}]
    await tab.close()


async def test_an_unanswered_call_expires_denied_and_the_call_limit_waits(
    llm: ScriptedLLM, writes_hub: Hub, writes_log: Path, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings.APPROVAL_TIMEOUT = 0.5
    monkeypatch.setattr(tool_runners, "MCP_GRACE", 0.0)
    tab = await logged_in_tab()
    conversation = tab.conversation_id
    await ask(llm, tab, Call("notes_write_note", {"key": "a", "text": "1"}))
    assert (await tab.next("approval_end"))["decision"] == "expired"
    result = (await tab.next("tool_result"))["call"]
    assert result["is_error"] and "nobody answered within 0.5 s" in result["output"]
    await tab.until_turn_end()
    assert "nobody answered within 0.5 s" in json.dumps(llm.requests[-1]["messages"])
    assert writes(writes_log) == []
    assert await rows(conversation) == [("notes_write_note", "expired", False, None)]
    await tab.close()


async def test_a_closed_tab_leaves_the_call_waiting_and_a_new_tab_answers_it(
    llm: ScriptedLLM, writes_hub: Hub, writes_log: Path
) -> None:
    tab = await logged_in_tab()
    conversation, cookie = tab.conversation_id, tab.cookie
    [card] = await ask(llm, tab, Call("notes_write_note", {"key": "a", "text": "1"}))
    await tab.close()

    back = Tab(conversation, cookie)
    history = await back.open()
    assert history["running"] is True and history["approvals"] == [card]
    second = Tab(conversation, cookie)
    await second.open()
    await back.send(answer(card, "approve"))
    # Both tabs hear the end; the second tab's late answer is an answer to nothing.
    assert (await second.next("approval_end"))["decision"] == "approved"
    await second.send(answer(card, "deny"))
    assert (await second.next("error"))["code"] == "unknown_approval"
    assert (await back.until_turn_end())["status"] == "complete"
    assert [w["key"] for w in writes(writes_log)] == ["a"]
    await back.close()
    await second.close()


async def test_answers_are_validated_and_only_the_owner_decides(
    llm: ScriptedLLM, writes_hub: Hub, writes_log: Path
) -> None:
    tab = await logged_in_tab()
    conversation, alice = tab.conversation_id, tab.cookie
    [card] = await ask(llm, tab, Call("notes_delete_notes", {}))

    # Mallory, on her own conversation, with the card's id: as if it did not exist.
    mallory = await logged_in_tab("mallory")
    await mallory.send(answer(card, "approve"))
    assert (await mallory.next("error"))["code"] == "unknown_approval"
    # Alice herself, from another conversation: the approval belongs to this one only.
    elsewhere = Tab(await conversation_of("alice"), alice)
    await elsewhere.open()
    await elsewhere.send(answer(card, "approve"))
    assert (await elsewhere.next("error"))["code"] == "unknown_approval"

    bad = [
        ({"id": 10**9, "decision": "approve"}, "unknown_approval"),
        ({"id": str(card["id"]), "decision": "approve"}, "bad_approval"),
        ({"id": True, "decision": "approve"}, "bad_approval"),
        ({"decision": "approve"}, "bad_approval"),
        ({"id": card["id"], "decision": "yes"}, "bad_approval"),
        ({"id": card["id"], "decision": "approve", "remember": "yes"}, "bad_approval"),
        ({"id": card["id"], "decision": "deny", "remember": True}, "bad_approval"),
    ]
    for frame, code in bad:
        await tab.send({"type": "approval_answer", **frame})
        error = await tab.next("error")
        assert error["code"] == code, frame
    assert [a["id"] for a in approvals.pending(conversation)] == [card["id"]]  # still pending
    assert writes(writes_log) == []

    await tab.send(answer(card, "deny"))
    assert (await tab.next("approval_end"))["decision"] == "denied"
    await tab.until_turn_end()
    for other in (tab, mallory, elsewhere):
        await other.close()


async def test_the_time_limit_of_the_call_waits_for_the_person(
    llm: ScriptedLLM, hub: Hub, writes_log: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Not writes_hub: the 0.3 s limit under test lives only here (a loaded machine would meet it elsewhere).
    entry = toolbox_entry(
        "--feature", "writes", writeTools="approve", timeout=300, env={"TOOLBOX_WRITES_LOG": str(writes_log)}
    )
    await hub.start([make_config("notes", entry)])
    set_hub(hub)
    monkeypatch.setattr(tool_runners, "MCP_GRACE", 0.1)
    tab = await logged_in_tab()
    [card] = await ask(llm, tab, Call("notes_write_note", {"key": "slow", "text": "1"}))
    await asyncio.sleep(0.8)  # the time under test: the person takes longer than the 0.3 s limit
    await tab.send(answer(card, "approve"))
    result = (await tab.next("tool_result"))["call"]
    assert result["output"] == "stored note 'slow'" and not result["is_error"]
    await tab.close()
    set_hub(None)


@pytest.mark.django_db(transaction=True)
async def test_staff_see_every_decision_read_only(llm: ScriptedLLM, writes_hub: Hub) -> None:
    tab = await logged_in_tab()
    conversation = tab.conversation_id
    [card] = await ask(llm, tab, Call("notes_write_note", {"key": "secret-plan", "text": "x"}))
    await tab.send(answer(card, "approve", remember=True))
    await tab.until_turn_end()
    await tab.close()

    @sync_to_async
    def admin_pages() -> tuple[str, str, int, int]:
        staff = get_user_model().objects.create_superuser("root", password="x")
        client = Client()
        client.force_login(staff)
        listing = client.get(reverse("admin:chat_toolapproval_changelist") + "?decision__exact=approved")
        detail = client.get(reverse("admin:chat_toolapproval_change", args=[card["id"]]))
        add = client.get(reverse("admin:chat_toolapproval_add")).status_code
        delete = client.post(reverse("admin:chat_toolapproval_delete", args=[card["id"]])).status_code
        return listing.content.decode(), detail.content.decode(), add, delete

    listing, detail, add, delete = await admin_pages()
    assert "notes_write_note" in listing and "alice" in listing
    assert "secret-plan" in detail and "allowed for the conversation" not in detail
    assert (add, delete) == (403, 403)
    assert await rows(conversation) == [("notes_write_note", "approved", True, "alice")]


@pytest.mark.npx
async def test_a_write_tool_of_server_everything_runs_after_approval(llm: ScriptedLLM, hub: Hub) -> None:
    entry = {
        "command": "npx",
        "args": ["-y", "@modelcontextprotocol/server-everything"],
        "cwd": str(ROOT / "tests" / "node"),
        "writeTools": "approve",
    }
    async with asyncio.timeout(60):
        await hub.start([make_config("every", entry)])
    snapshot = hub.snapshots()[0]
    assert snapshot.status is Status.READY, snapshot.last_error
    offered = {tool.prefixed_name: tool for tool in hub.tools()}
    toggle = offered["every_toggle-simulated-logging"]
    assert toggle.approval_reason and toggle.annotations["readOnlyHint"] is False
    assert not offered["every_echo"].approval_reason
    set_hub(hub)
    tab = await logged_in_tab()
    [card] = await ask(llm, tab, Call("every_toggle-simulated-logging", {}))
    assert card["title"] == "Toggle Simulated Logging"
    assert card["hints"] == {"readOnly": False, "destructive": False, "idempotent": False, "openWorld": False}
    await tab.send(answer(card, "approve"))
    result = (await tab.next("tool_result"))["call"]
    assert result["output"].startswith("Started simulated") and not result["is_error"]
    assert (await tab.until_turn_end())["status"] == "complete"
    await tab.close()
    set_hub(None)


async def test_each_call_of_a_step_gets_its_own_card_and_decision(
    llm: ScriptedLLM, writes_hub: Hub, writes_log: Path
) -> None:
    tab = await logged_in_tab()
    conversation = tab.conversation_id
    write, delete = await ask(
        llm, tab, Call("notes_write_note", {"key": "keep", "text": "1"}), Call("notes_delete_notes", {})
    )
    assert (write["tool"], delete["tool"]) == ("write_note", "delete_notes")
    await tab.send(answer(delete, "deny"))
    assert (await tab.next("approval_end"))["id"] == delete["id"]
    await tab.send(answer(write, "approve"))
    assert (await tab.next("approval_end"))["id"] == write["id"]
    assert (await tab.until_turn_end())["status"] == "complete"
    assert writes(writes_log) == [{"tool": "write_note", "key": "keep", "text": "1"}]
    assert sorted(r[1] for r in await rows(conversation)) == ["approved", "denied"]
    await tab.close()


async def test_an_untrusted_servers_read_only_tool_asks_too(
    llm: ScriptedLLM, hub: Hub, toolbox_config: Any
) -> None:
    await hub.start([toolbox_config("toolbox", trusted=False)])
    set_hub(hub)
    tab = await logged_in_tab()
    [card] = await ask(llm, tab, Call("toolbox_echo", {"text": "hi"}))
    assert card["hints"]["readOnly"] is True and "not trusted" in card["reason"]
    await tab.send(answer(card, "approve"))
    assert (await tab.next("tool_result"))["call"]["output"] == "hi"
    await tab.close()
    set_hub(None)


async def test_a_tool_that_declares_nothing_waits_for_the_person(
    llm: ScriptedLLM, hub: Hub, toolbox_config: Any
) -> None:
    # As the GitLab server's create_issue: no annotations, so it may write (the MCP defaults).
    await hub.start([toolbox_config("gl", "--feature", "undeclared")])
    set_hub(hub)
    tab = await logged_in_tab()
    conversation = tab.conversation_id
    [card] = await ask(llm, tab, Call("gl_create_issue", {"title": "first"}))
    assert card["hints"] == {"readOnly": None, "destructive": None, "idempotent": None, "openWorld": None}
    assert card["reason"].startswith('it does not declare "readOnlyHint": true, so it may change things')
    assert (await hub.call_tool("gl_list_issues", {})).output == "[]"  # it has not run
    await tab.send(answer(card, "approve", remember=True))
    assert (await tab.next("tool_result"))["call"]["output"] == "created issue #1: first"
    assert (await tab.until_turn_end())["status"] == "complete"
    await registry.wait(conversation)

    # "Allow for this conversation" holds for it; the tool that declares readOnlyHint: true never asked.
    llm.script(
        ToolCalls([Call("gl_create_issue", {"title": "second"}), Call("gl_list_issues", {})]), Text("Done.")
    )
    await tab.send({"type": "user_message", "text": "again"})
    await tab.until_turn_end()
    assert not any(frame["type"] == "approval" for frame in tab.frames[-20:])
    assert (await hub.call_tool("gl_list_issues", {})).output == '["first", "second"]'
    decisions = [r[:2] for r in await rows(conversation)]
    assert decisions == [("gl_create_issue", "approved"), ("gl_create_issue", "allowed")]
    await tab.close()
    set_hub(None)


@pytest.mark.django_db
def test_an_approval_left_pending_by_a_dead_process_is_stopped_at_the_next_turn(django_user_model) -> None:
    from boocode.chat.turn.conversations import close_interrupted

    owner = django_user_model.objects.create_user("restarted", password="x")
    conversation = Conversation.objects.create(owner=owner)
    left = ToolApproval.objects.create(conversation=conversation, server="notes", tool="write_note", name="n")
    decided = ToolApproval.objects.create(
        conversation=conversation, server="notes", tool="write_note", name="n", decision="approved"
    )
    close_interrupted(conversation.id)
    left.refresh_from_db()
    decided.refresh_from_db()
    assert (left.decision, left.decided_at is not None) == ("stopped", True)
    assert decided.decision == "approved"

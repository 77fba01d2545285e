"""Approval rules per agent (AGENTS.md ``approve:``) and the audit log of tool calls, through the real stack.

The ASGI application, the scripted LLM over HTTP, and the toolbox with its write group over stdio
(``writeTools: "approve"``): the rules can ask for more than the server's settings (a read-only
tool), never less (a write tool still asks under ``allow``), and ``deny`` takes a tool away. Every
call, the model's and the console's, leaves an audit row; the admin exports them.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import reverse

from agents.parser import parse_agents_text
from agents.policy import approval_rule
from boocode.chat.ledger import audit
from boocode.chat.models import ToolApproval, ToolCallAudit
from mcpclient.engine.hub import Hub
from mcpclient.runtime import set_hub
from tests.support.accounts import new_conversation
from tests.support.hubs import make_config
from tests.support.llm import Call, ScriptedLLM, Text, ToolCalls
from tests.support.processes import toolbox_entry
from tests.support.tabs import logged_in_tab

AGENTS = """## Careful
---
tools: [notes_*]
approve:
  ask: ["notes_read_*"]
  allow: ["notes_write_*"]
  deny: ["notes_delete_*"]
---
Careful with notes.
"""


# --- the rules ----------------------------------------------------------------------------------
def test_rules_deny_first_then_allow_then_ask() -> None:
    rules = {"ask": ["*"], "allow": ["*_read_*"], "deny": ["*_delete_*"]}
    assert approval_rule(rules, "notes_delete_notes") == ("deny", "*_delete_*")
    assert approval_rule(rules, "notes_read_notes") == ("allow", "*_read_*")
    assert approval_rule(rules, "notes_write_note") == ("ask", "*")
    assert approval_rule({}, "x") == ("", "")
    assert approval_rule({"ask": "notes_*"}, "x") == ("deny", "approve: (unreadable)")  # fail closed


@pytest.mark.parametrize(
    ("front", "message"),
    [
        ("approve: ask", 'must map "allow", "ask" and "deny" to tool patterns'),
        ("approve: {maybe: [x]}", 'has an unknown key "maybe"'),
        ("approve: {ask: notes_*}", 'key "approve": "ask" must be a list of non-empty strings'),
    ],
)
def test_bad_rules_name_the_key(front: str, message: str) -> None:
    parsed = parse_agents_text(f"## A\n---\n{front}\n---\nx\n")
    assert parsed.errors and message in str(parsed.errors[0]), parsed.errors


# --- through the chat ---------------------------------------------------------------------------


@sync_to_async
def audit_rows(conversation: int) -> list[ToolCallAudit]:
    return list(
        ToolCallAudit.objects.filter(conversation_id=conversation).order_by("id").select_related("decided_by")
    )


@pytest.mark.django_db(transaction=True)
@pytest.mark.processes
async def test_rules_ask_for_a_read_tool_deny_a_tool_and_never_waive_the_servers_approval(
    llm: ScriptedLLM, writes_hub: Hub, agents_file: Callable[[str], Any]
) -> None:
    agents_file(AGENTS)
    tab = await logged_in_tab("alice", await new_conversation("alice", "Careful"))
    conversation = tab.conversation_id
    llm.script(
        ToolCalls([Call("notes_read_notes", {})]),
        ToolCalls([Call("notes_write_note", {"key": "a", "text": "sk-abcdefghijklmnopqrstuvwxyz123456"})]),
        ToolCalls([Call("notes_delete_notes", {})]),
        Text("Done."),
    )
    await tab.send({"type": "user_message", "text": "go"})
    # The read tool asks because of the agent's rule, and the card says so.
    card = (await tab.next("approval"))["approval"]
    assert card["name"] == "notes_read_notes"
    assert (
        card["reason"]
        == 'the agent\'s approval rules ask for each call ("approve: ask" matches "notes_read_*")'
    )
    await tab.send({"type": "approval_answer", "id": card["id"], "decision": "approve", "remember": False})
    assert not (await tab.next("tool_result"))["call"]["is_error"]
    # "allow" cannot take back what the server's settings ask: the write tool still asks.
    card = (await tab.next("approval"))["approval"]
    assert card["name"] == "notes_write_note" and "writeTools" in card["reason"]
    await tab.send({"type": "approval_answer", "id": card["id"], "decision": "deny", "remember": False})
    assert (await tab.next("tool_result"))["call"]["is_error"]
    # A denied tool is not the agent's at all.
    result = (await tab.next("tool_result"))["call"]
    assert result["is_error"] and "not available to this agent" in result["output"]
    assert (await tab.until_turn_end())["status"] == "complete"
    offered = {tool["function"]["name"] for tool in llm.requests[0]["tools"]}
    assert "notes_read_notes" in offered and "notes_delete_notes" not in offered

    # The console: the same rules, and its call is audited as the console's.
    await tab.send({"type": "user_message", "text": "/call notes_delete_notes"})
    result = (await tab.next("tool_result"))["call"]
    assert result["is_error"] and "not available to this agent" in result["output"]
    await tab.until_turn_end()
    await tab.close()
    await audit.drain()

    rows = await audit_rows(conversation)
    summary = [(r.origin, r.name, r.tool, r.outcome, r.approval, r.username, r.agent) for r in rows]
    assert summary == [
        ("model", "notes_read_notes", "read_notes", "ok", "approved", "alice", "Careful"),
        ("model", "notes_write_note", "write_note", "refused", "denied", "alice", "Careful"),
        ("model", "notes_delete_notes", "notes_delete_notes", "error", "", "alice", "Careful"),
        ("console", "notes_delete_notes", "notes_delete_notes", "error", "", "alice", "Careful"),
    ]
    read, write = rows[0], rows[1]
    assert read.decided_by is not None and read.decided_by.username == "alice"
    assert read.server == "notes" and len(read.digest) == 64 and read.result_bytes > 0
    # The credential-shaped argument is masked; the rest is kept.
    assert json.loads(write.arguments) == {"key": "a", "text": "••••••"}
    assert write.argument_bytes == len(
        json.dumps({"key": "a", "text": "sk-abcdefghijklmnopqrstuvwxyz123456"})
    )

    # The admin: read-only, exported as CSV and JSON.
    admin = await _staff_client()
    changelist = reverse("admin:chat_toolcallaudit_changelist")
    page = await sync_to_async(admin.get)(changelist + "?origin__exact=console")
    assert page.status_code == 200 and "notes_delete_notes" in page.content.decode()
    change = await sync_to_async(admin.get)(reverse("admin:chat_toolcallaudit_change", args=[read.pk]))
    assert b'name="_save"' not in change.content  # no change, no delete
    delete = await sync_to_async(admin.post)(
        reverse("admin:chat_toolcallaudit_delete", args=[read.pk]), {"post": "yes"}
    )
    assert delete.status_code == 403 and await ToolCallAudit.objects.filter(pk=read.pk).aexists()
    selected = [row.pk for row in rows]
    response = await sync_to_async(admin.post)(
        changelist, {"action": "export_csv", "_selected_action": selected}
    )
    parsed = list(csv.DictReader(io.StringIO(response.content.decode())))
    assert response["Content-Type"].startswith("text/csv")
    assert [
        (r["origin"], r["outcome"], r["decided_by"]) for r in sorted(parsed, key=lambda r: int(r["id"]))
    ] == [
        ("model", "ok", "alice"),
        ("model", "refused", "alice"),
        ("model", "error", ""),
        ("console", "error", ""),
    ]
    response = await sync_to_async(admin.post)(
        changelist, {"action": "export_json", "_selected_action": selected}
    )
    exported = json.loads(response.content)
    assert {row["name"] for row in exported} == {"notes_read_notes", "notes_write_note", "notes_delete_notes"}
    assert all(row["arguments"] != "" for row in exported)


@sync_to_async
def _staff_client() -> Client:
    user = get_user_model().objects.create_superuser("auditor", password="x")
    client = Client(raise_request_exception=False)
    client.force_login(user)
    return client


@pytest.mark.django_db
def test_retention_deletes_old_rows_only(settings: Any) -> None:
    import datetime as dt

    from django.utils import timezone

    now = timezone.now()
    fields = {"origin": "model", "server": "s", "tool": "t", "name": "s_t", "outcome": "ok"}
    old = ToolCallAudit.objects.create(created_at=now - dt.timedelta(days=40), **fields)
    recent = ToolCallAudit.objects.create(created_at=now - dt.timedelta(days=2), **fields)
    settings.AUDIT_DAYS = 0
    assert audit.prune() == 0
    settings.AUDIT_DAYS = 30
    assert audit.prune() == 1
    assert list(ToolCallAudit.objects.values_list("pk", flat=True)) == [recent.pk]
    assert not ToolCallAudit.objects.filter(pk=old.pk).exists()


def test_kept_arguments_mask_secrets_and_are_bounded() -> None:
    kept = json.loads(
        audit.kept_arguments(
            json.dumps(
                {
                    "password": "hunter2",
                    "url": "https://u:p@x.example/?token=abc",
                    "n": 1,
                    "deep": {"apiKey": "k"},
                }
            )
        )
    )
    assert kept["password"] == "••••••" and kept["deep"]["apiKey"] == "••••••" and kept["n"] == 1
    assert "p@" not in kept["url"] and "abc" not in kept["url"]
    assert len(audit.kept_arguments(json.dumps({"text": "word " * 5000}))) == audit.MAX_ARGUMENTS
    assert audit.kept_arguments("not json Bearer abcdefghijk") == "not json Bearer ••••••"


def test_an_exported_cell_never_reads_as_a_formula() -> None:
    from django.utils import timezone

    row = ToolCallAudit(
        origin="model", server="=HYPERLINK(1)", tool="t", name="n", outcome="ok", created_at=timezone.now()
    )
    [parsed] = list(csv.DictReader(io.StringIO(audit.export_csv([row]))))
    assert parsed["server"] == "'=HYPERLINK(1)"


VOUCHING = """## Vouching
---
tools: [gl_*]
approve:
  allow: ["gl_create_*"]
---
Files issues.
"""


@pytest.mark.django_db(transaction=True)
@pytest.mark.processes
async def test_allow_vouches_for_a_tool_that_declares_nothing_on_the_record(
    llm: ScriptedLLM, hub: Hub, agents_file: Callable[[str], Any]
) -> None:
    # An operator's "approve: allow" is an explicit word, as the server entry's "readOnly" is: a
    # tool that asks only because it declares nothing runs without a card, recorded as allowed by
    # the rule; a tool the rule does not name still asks.
    await hub.start([make_config("gl", toolbox_entry("--feature", "undeclared"))])
    set_hub(hub)
    agents_file(VOUCHING)
    tab = await logged_in_tab("alice", await new_conversation("alice", "Vouching"))
    conversation = tab.conversation_id
    llm.script(
        ToolCalls([Call("gl_create_issue", {"title": "first"})]),
        ToolCalls([Call("gl_issue_count", {})]),
        Text("Done."),
    )
    await tab.send({"type": "user_message", "text": "file it"})
    assert (await tab.next("tool_result"))["call"]["output"] == "created issue #1: first"
    card = (await tab.next("approval"))["approval"]
    assert card["name"] == "gl_issue_count" and "readOnlyHint" in card["reason"]
    await tab.send({"type": "approval_answer", "id": card["id"], "decision": "deny", "remember": False})
    assert (await tab.until_turn_end())["status"] == "complete"
    assert [f for f in tab.frames if f["type"] == "approval"] == [{"type": "approval", "approval": card}]
    await tab.close()
    await audit.drain()
    rows = await audit_rows(conversation)
    assert [(r.name, r.outcome, r.approval, r.decided_by) for r in rows] == [
        ("gl_create_issue", "ok", "allowed", None),
        ("gl_issue_count", "refused", "denied", rows[1].decided_by),
    ]
    approval = await sync_to_async(
        lambda: ToolApproval.objects.get(conversation_id=conversation, name="gl_create_issue")
    )()
    assert approval.decision == "allowed" and '"approve: allow" matches "gl_create_*"' in approval.reason
    set_hub(None)


@pytest.mark.django_db(transaction=True)
async def test_calls_that_end_together_are_audited_in_order_and_counted_once_each() -> None:
    import datetime as dt

    from django.utils import timezone

    from boocode.chat.models import DailyUsage
    from mcpclient.core.results import ToolResult

    users = get_user_model().objects
    alice, bob = await users.acreate_user("alice"), await users.acreate_user("bob")
    began = timezone.now()
    # 120 calls end at once (no await between them): the writer takes them in batches.
    for number in range(120):
        person = alice if number % 3 else bob
        record = audit.AuditRecord(user_id=person.pk, conversation_id=None, agent="A", origin="model")
        audit.write(
            record,
            server="tb",
            tool="echo",
            name="tb_echo",
            digest="d",
            arguments=json.dumps({"n": number}),
            result=ToolResult(output=f"call {number}"),
            refused=number % 10 == 0,
            began=began + dt.timedelta(microseconds=number),
            seconds=0.01,
        )
    await audit.drain()
    rows = [row async for row in ToolCallAudit.objects.order_by("id")]
    assert [json.loads(row.arguments)["n"] for row in rows] == list(range(120))
    assert {row.username for row in rows if row.user_id == bob.pk} == {"bob"}
    counted = {row.user_id: row.tool_calls async for row in DailyUsage.objects.all()}
    expected = {alice.pk: 0, bob.pk: 0}
    for number in range(120):
        if number % 10:  # refused calls are not the person's usage
            expected[alice.pk if number % 3 else bob.pk] += 1
    assert counted == expected

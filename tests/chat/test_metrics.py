"""``GET /metrics`` of a web process: who may read it, and what the chat counts.

In process: Django's test client and Channels' communicator on the project's application, the
scripted model over real HTTP and a native tool (no MCP server: the MCP side is counted in
tests/chat/test_tracing.py). The registry is the test process's own, shared with every test the
worker ran before, so each test compares two scrapes.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from django.test import Client

from boocode.chat.turn.loop import TurnRequest, run_turn
from tests.support.accounts import new_conversation
from tests.support.llm import Call, Error, ScriptedLLM, Text, ToolCalls
from tests.support.scrape import TOKEN, scrape
from tests.support.tabs import logged_in

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def metrics_token(settings: Any) -> None:
    settings.METRICS_TOKEN = TOKEN


async def ignore(event: dict[str, Any]) -> None:
    """A turn's ``emit`` when no tab listens."""


def test_strangers_wrong_tokens_and_people_without_staff_rights_are_refused(
    client: Client, django_user_model: Any, settings: Any
) -> None:
    assert client.get("/metrics").status_code == 404  # nothing to tell a stranger
    assert client.get("/metrics", headers={"Authorization": "Bearer not-the-token"}).status_code == 403
    assert client.get("/metrics", headers={"Authorization": f"Basic {TOKEN}"}).status_code == 403
    assert client.get("/metrics", headers={"Authorization": f"Bearer {TOKEN}x"}).status_code == 403
    client.force_login(django_user_model.objects.create_user("bob", password="pw"))
    assert client.get("/metrics").status_code == 403
    settings.METRICS_TOKEN = ""  # no token configured: none is accepted, not even an empty one
    assert client.get("/metrics", headers={"Authorization": "Bearer "}).status_code == 403
    assert client.post("/metrics", headers={"Authorization": "Bearer "}).status_code == 405


def test_staff_and_the_token_read_every_family(client: Client, django_user_model: Any) -> None:
    response = client.get("/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/plain; version=")
    assert response["Cache-Control"] == "no-store"
    families = set(re.findall(r"^# TYPE (\S+) ", response.content.decode(), re.MULTILINE))
    assert {
        "boocode_turns_total",
        "boocode_turn_duration_seconds",
        "boocode_model_requests_total",
        "boocode_model_first_token_seconds",
        "boocode_tool_calls_total",
        "boocode_tool_call_duration_seconds",
        "boocode_tool_step_seconds",
        "boocode_mcp_tool_calls_total",
        "boocode_mcp_server_status",
        "boocode_websockets_open",
        "boocode_approvals_waiting",
        "boocode_questions_waiting",
        "process_resident_memory_bytes",
    } <= families
    assert not any(name.endswith("_created") for name in families)

    client.force_login(django_user_model.objects.create_user("ada", password="pw", is_staff=True))
    assert client.get("/metrics").status_code == 200
    openmetrics = client.get("/metrics", headers={"Accept": "application/openmetrics-text; version=1.0.0"})
    assert openmetrics["Content-Type"].startswith("application/openmetrics-text")
    assert openmetrics.content.rstrip().endswith(b"# EOF")


async def test_a_turn_with_a_tool_call_counts_its_model_requests_and_its_call(
    llm: ScriptedLLM, settings: Any, tmp_path: Path
) -> None:
    settings.WORKSPACE = tmp_path
    (tmp_path / "notes.txt").write_text("hello")
    before = await scrape()
    llm.script(ToolCalls([Call("list_dir", {"path": "."})]), Text("One file."))
    assert await run_turn(TurnRequest(await new_conversation(), "what is there?"), ignore) == "complete"
    after = await scrape()
    assert after.delta(before, "boocode_turns_total", status="complete") == 1
    assert after.delta(before, "boocode_turn_duration_seconds_count") == 1
    assert after.delta(before, "boocode_model_requests_total", outcome="ok") == 2
    assert after.delta(before, "boocode_model_first_token_seconds_count") == 2  # the call's and the text's
    assert after.delta(before, "boocode_tool_calls_total", server="native", outcome="ok") == 1
    assert after.delta(before, "boocode_tool_call_duration_seconds_count", server="native") == 1
    assert after.delta(before, "boocode_tool_step_seconds_count") == 0  # a native tool has no MCP request


async def test_a_failed_model_request_fails_its_turn_and_both_are_counted(
    llm: ScriptedLLM, settings: Any
) -> None:
    settings.LLM_MAX_RETRIES = 0
    before = await scrape()
    llm.script(Error(401, "bad key"))
    assert await run_turn(TurnRequest(await new_conversation(), "hi"), ignore) == "failed"
    after = await scrape()
    assert after.delta(before, "boocode_turns_total", status="failed") == 1
    assert after.delta(before, "boocode_model_requests_total", outcome="auth") == 1
    assert after.delta(before, "boocode_model_requests_total", outcome="ok") == 0
    assert after.delta(before, "boocode_model_first_token_seconds_count") == 0


async def test_open_chat_sockets_are_counted_while_they_are_open() -> None:
    conversation = await new_conversation("alice")
    before = await scrape()
    async with logged_in("alice", conversation), logged_in("alice", conversation):
        during = await scrape()
    after = await scrape()
    assert during.delta(before, "boocode_websockets_open") == 2
    assert after.delta(before, "boocode_websockets_open") == 0

"""One turn per conversation across web processes: two real Daphnes on PostgreSQL and Redis.

Each test talks to the processes through real websockets, as the page does. The Daphnes share
a database of their own (``boocode_lock``), Redis database 12 and the scripted model; the turn
lock's TTL is 2 s so that a killed process's turn is settled within seconds.
"""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from boocode.chat.turn.history import INTERRUPTED
from tests.support.live import create_accounts, fresh_database, live_daphne
from tests.support.llm import Call, ScriptedLLM, Stall, Text, ToolCalls
from tests.support.processes import PYTHON, ROOT, redis_url, toolbox_entry
from tests.support.tabs import Tab

pytestmark = [pytest.mark.postgres_only, pytest.mark.redis, pytest.mark.processes]

MODEL = "test-model"
REDIS_URL = redis_url()  # a database of this worker's own: the fixture flushes it


@pytest.fixture(scope="module")
def llm() -> Iterator[ScriptedLLM]:
    with ScriptedLLM(models=(MODEL,)) as server:
        yield server


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory, llm: ScriptedLLM) -> Iterator[dict[str, str]]:
    """The environment of every web process: a fresh database, Redis DB 12, approval-gated writes."""
    redis.Redis.from_url(REDIS_URL).flushdb()
    data = tmp_path_factory.mktemp("lock")
    writes = toolbox_entry(
        "--feature", "writes", writeTools="approve", env={"TOOLBOX_WRITES_LOG": str(data / "w")}
    )
    modern = str(ROOT / "tests" / "servers" / "modern.py")
    forms = {"command": PYTHON, "args": [modern, "--stdio", "--elicit-tools"]}
    (data / "mcp.json").write_text(json.dumps({"mcpServers": {"notes": writes, "forms": forms}}))
    values = {
        **os.environ,
        "BOOCODE_DATA_DIR": str(data),
        "BOOCODE_REDIS_URL": REDIS_URL,
        "BOOCODE_TURN_LOCK_TTL": "2",
        "BOOCODE_MCP_AUTOSTART": "1",
        "BOOCODE_MCP_CONFIG": str(data / "mcp.json"),
        "BOOCODE_MCP_STDIO_COMMANDS": PYTHON,
        "BOOCODE_LLM_BASE_URL": llm.base_url,
        "BOOCODE_LLM_MODEL": MODEL,
        "BOOCODE_ALLOWED_HOSTS": "127.0.0.1",
    }
    values.pop("BOOCODE_TEST_DB_NAME", None)
    with fresh_database("boocode_lock") as values["BOOCODE_DATABASE_URL"]:
        yield values


@pytest.fixture(scope="module")
def accounts(env: dict[str, str]) -> list[dict[str, Any]]:
    return create_accounts(env, 5)


@pytest.fixture(scope="module")
def ports(env: dict[str, str], accounts: list[dict[str, Any]]) -> Iterator[tuple[int, int]]:
    """Two web processes, A and B: ``(port of A, port of B)``."""
    with live_daphne(env) as (_a, port_a), live_daphne(env) as (_b, port_b):
        yield port_a, port_b


async def test_two_tabs_on_two_processes_share_one_turn(
    llm: ScriptedLLM, ports: tuple[int, int], accounts: list[dict[str, Any]]
) -> None:
    port_a, port_b = ports
    account = accounts[0]
    # The first turn stalls until it is stopped (its 30 s default could run out on a loaded machine).
    llm.script(Stall("Hello from A, ", seconds=600), Text("Second turn."))
    async with Tab.live(port_a, account) as on_a, Tab.live(port_b, account) as on_b:
        await on_a.send({"type": "user_message", "text": "first"})
        start = await on_b.next("turn_start")  # A's events reach the tab on B
        await on_a.until_text("Hello from A, ")
        await on_b.send({"type": "user_message", "text": "second"})
        refused = await on_b.next("error")
        assert refused["code"] == "turn_in_progress"

        async with Tab.live(port_b, account) as late:  # connects to B mid-turn
            assert (late.history["running"], late.history["turn_id"]) == (True, start["turn_id"])
            assert late.history["messages"][-1]["content"] == "Hello from A, "

        await on_b.send({"type": "cancel"})  # from B, the turn runs on A
        for tab in (on_a, on_b):
            assert (await tab.next("turn_end"))["status"] == "stopped"

        await on_b.send({"type": "user_message", "text": "again"})  # free again, now from B
        for tab in (on_a, on_b):
            assert (await tab.next("turn_end"))["status"] == "complete"
    assert len(llm.requests) == 2  # the refused message never reached the model


async def test_an_approval_answered_from_the_other_process(
    llm: ScriptedLLM, ports: tuple[int, int], accounts: list[dict[str, Any]]
) -> None:
    port_a, port_b = ports
    account = accounts[1]
    llm.script(ToolCalls([Call("notes_write_note", {"key": "k", "text": "from B"})]), Text("Written."))
    async with Tab.live(port_a, account) as on_a, Tab.live(port_b, account) as on_b:
        await on_a.send({"type": "user_message", "text": "write"})
        approval = (await on_b.next("approval"))["approval"]
        await on_b.send({"type": "approval_answer", "id": approval["id"] + 1000, "decision": "approve"})
        assert (await on_b.next("error"))["code"] == "unknown_approval"  # checked on A, answered on B
        await on_b.send({"type": "approval_answer", "id": approval["id"], "decision": "approve"})
        result = await on_a.next("tool_result")
        assert not result["call"]["is_error"], result
        assert (await on_a.next("turn_end"))["status"] == "complete"


async def test_a_form_answered_from_the_other_process(
    llm: ScriptedLLM, ports: tuple[int, int], accounts: list[dict[str, Any]]
) -> None:
    port_a, port_b = ports
    account = accounts[4]
    llm.script(ToolCalls([Call("forms_ask_profile", {})]), Text("Thanks."))
    async with Tab.live(port_a, account) as on_a, Tab.live(port_b, account) as on_b:
        await on_a.send({"type": "user_message", "text": "ask me"})
        form = (await on_b.next("elicitation"))["elicitation"]
        answer = {"type": "elicitation_answer", "id": form["id"], "action": "accept"}
        await on_b.send({**answer, "content": {}})  # the required name is missing: refused on A
        error = await on_b.next("error")
        assert (error["code"], error["id"]) == ("bad_answer", form["id"])
        assert list(error["fields"]) == ["name"]  # carried back from the other process
        await on_b.send({**answer, "content": {"name": "Ada"}})
        result = await on_a.next("tool_result")
        assert '"name": "Ada"' in result["call"]["output"], result
        assert (await on_a.next("turn_end"))["status"] == "complete"


async def test_a_process_killed_mid_turn_leaves_a_settled_usable_conversation(
    llm: ScriptedLLM, env: dict[str, str], ports: tuple[int, int], accounts: list[dict[str, Any]]
) -> None:
    port_a, _port_b = ports
    account = accounts[2]
    llm.script(Stall("Half an ans", seconds=60), Text("After the crash."))
    with live_daphne(env) as (doomed, port_c):
        async with Tab.live(port_a, account) as on_a:
            async with Tab.live(port_c, account) as on_c:
                await on_c.send({"type": "user_message", "text": "go"})
                start = await on_a.next("turn_start")
                await on_a.until_text("Half an ans")
                doomed.send_signal(signal.SIGKILL)
                doomed.wait(10)
            # A's sweep finds the lock expired and settles the turn; its tabs hear it ended.
            end = await on_a.next("turn_end")
            assert (end["turn_id"], end["status"], end["error"]) == (start["turn_id"], "failed", INTERRUPTED)
        async with Tab.live(port_a, account) as fresh:
            assert fresh.history["running"] is False
            answer = fresh.history["messages"][-1]
            assert (answer["role"], answer["status"], answer["error"]) == ("assistant", "failed", INTERRUPTED)
            # What was saved stays (streamed text is saved every quarter second, so maybe not all).
            assert "Half an ans".startswith(answer["content"])
            await fresh.send({"type": "user_message", "text": "again"})
            assert (await fresh.next("turn_end"))["status"] == "complete"
    llm.release_stalled()


async def test_a_process_stopped_mid_turn_gives_the_conversation_back_at_once(
    llm: ScriptedLLM, env: dict[str, str], ports: tuple[int, int], accounts: list[dict[str, Any]]
) -> None:
    port_a, _port_b = ports
    account = accounts[3]
    llm.script(Stall("Stopping soon", seconds=60), Text("Right away."))
    with live_daphne(env) as (stopping, port_c):
        async with Tab.live(port_a, account) as on_a:
            async with Tab.live(port_c, account) as on_c:
                await on_c.send({"type": "user_message", "text": "go"})
                await on_a.until_text("Stopping soon")
                stopping.send_signal(signal.SIGINT)  # what the process manager's stop sends too
                end = await on_a.next("turn_end")
                assert end["status"] == "stopped"
            # The lock went back with the turn_end, not after the TTL: the next message runs
            # (while the stopping process may still be shutting down).
            await on_a.send({"type": "user_message", "text": "again"})
            assert (await on_a.next("turn_end"))["status"] == "complete"
            assert not [frame for frame in on_a.frames if frame["type"] == "error"]
    llm.release_stalled()


async def test_a_turn_whose_lock_was_lost_ends_saying_so(
    llm: ScriptedLLM, ports: tuple[int, int], accounts: list[dict[str, Any]]
) -> None:
    """Nobody cancelled it: the turn ends failed, and its message says the lock was lost.

    Redis lost its keys (a restart without persistence): the lock and the open-turn marker go.
    """
    from boocode.chat.turn.registry import LOCK_LOST

    port_a, _ = ports
    account = accounts[4]
    llm.script(Stall("Working, ", seconds=30))
    async with Tab.live(port_a, account) as tab:
        await tab.send({"type": "user_message", "text": "go"})
        await tab.until_text("Working, ")
        client = redis.Redis.from_url(REDIS_URL)
        conversation = account["conversation"]
        keys = client.keys(f"*:turn:{conversation}") + client.keys(f"*:turn-open:{conversation}")
        assert client.delete(*keys) == 2
        end = await tab.next("turn_end", within=30)
        assert (end["status"], end["error"]) == ("failed", LOCK_LOST)

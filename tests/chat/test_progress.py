"""Progress of a turn's tool calls over the websocket: ``tool_progress`` frames and history.

The real stack: the ASGI application, the scripted LLM asking for the toolbox's progress tools
(``--feature progress``, over stdio), the hub, and the conversation's channel group. Steps are
driven by files (the tools' ``gate``), so nothing depends on timing but the throttle itself.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from boocode.chat.calls import progress
from mcpclient.core.state import Status
from mcpclient.engine.hub import Hub
from mcpclient.runtime import set_hub
from tests.support.llm import Call, ScriptedLLM, Text, ToolCalls
from tests.support.tabs import Tab, logged_in_tab

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.processes]


@pytest.fixture
async def progress_hub(hub: Hub, toolbox_config: Callable[..., Any]) -> AsyncIterator[Hub]:
    """The process hub with the toolbox's progress tools (``pg_count_steps``, ``pg_chatty``)."""
    await hub.start([toolbox_config("pg", "--feature", "progress")])
    assert hub.snapshots()[0].status is Status.READY
    set_hub(hub)
    yield hub
    set_hub(None)


async def frames_until(tab: Tab, kind: str) -> list[dict[str, Any]]:
    """Every frame (status frames aside) up to and including the next one of ``kind``."""
    seen = []
    while True:
        frame = await tab.next()
        seen.append(frame)
        if frame["type"] == kind:
            return seen


async def test_each_step_reaches_every_tab_of_the_owner_only(
    llm: ScriptedLLM, progress_hub: Hub, tmp_path: Path
) -> None:
    tab = await logged_in_tab()
    conversation, alice = tab.conversation_id, tab.cookie
    other_tab = Tab(conversation, alice)
    await other_tab.open()
    mallory = await logged_in_tab("mallory")

    llm.script(ToolCalls([Call("pg_count_steps", {"steps": 3, "gate": str(tmp_path)})]), Text("Done."))
    await tab.send({"type": "user_message", "text": "count"})
    call = (await tab.next("tool_call"))["call"]
    assert call["status"] == "running"

    (tmp_path / "go-1").touch()
    first = await tab.next("tool_progress")
    assert first == {
        "type": "tool_progress",
        "call_id": call["id"],
        "progress": 1.0,
        "total": 3.0,
        "message": "step 1 of 3",
    }
    assert await other_tab.next("tool_progress") == first  # every open tab of the conversation

    # A page opened mid-call gets the latest progress in its history frame.
    late = Tab(conversation, alice)
    history = await late.open()
    assert history["running"] and history["progress"] == [{k: v for k, v in first.items() if k != "type"}]

    (tmp_path / "go-2").touch()
    second = await tab.next("tool_progress")  # within the throttle's interval: delivered late, not lost
    assert (second["progress"], second["message"]) == (2.0, "step 2 of 3")
    (tmp_path / "go-3").touch()
    rest = await frames_until(tab, "turn_end")
    kinds = [frame["type"] for frame in rest]
    result_at = kinds.index("tool_result")
    assert "tool_progress" not in kinds[result_at:], "nothing after the call's result"
    assert rest[result_at]["call"]["output"] == "counted 3 steps"
    assert progress.running(conversation) == []

    # Mallory's tab, on her own conversation, heard nothing of it.
    mallory.frames.clear()
    await mallory.send({"type": "cancel"})  # answered with an error frame: everything before it is in
    assert (await mallory.next("error"))["code"] == "not_running"
    frames = [frame["type"] for frame in mallory.frames]
    assert "tool_progress" not in frames and "tool_call" not in frames
    for open_tab in (tab, other_tab, late, mallory):
        await open_tab.close()


async def test_a_chatty_server_is_throttled_and_the_latest_value_arrives(
    llm: ScriptedLLM, progress_hub: Hub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(progress, "MIN_INTERVAL", 0.2)
    tab = await logged_in_tab()
    llm.script(ToolCalls([Call("pg_chatty", {"count": 400, "gate": str(tmp_path)})]), Text("Done."))
    await tab.send({"type": "user_message", "text": "chatter"})
    await tab.next("tool_call")

    frames = []
    first = 0.0
    while not frames or frames[-1]["progress"] < 400:
        frames.append(await tab.next("tool_progress"))
        first = first or time.monotonic()
    burst = time.monotonic() - first
    # 400 notifications; the first goes out at once, then at most one per interval (0.2 s), so
    # as many frames as intervals fit in the time they took to arrive, and one more for a frame
    # delayed on its way. (How long the server's burst takes depends on the machine.)
    assert len(frames) <= 2 + burst / 0.2, ([frame["progress"] for frame in frames], burst)
    assert frames[-1] == {
        "type": "tool_progress",
        "call_id": frames[0]["call_id"],
        "progress": 400.0,
        "total": 400.0,
        "message": "update 400",
    }
    assert [f["progress"] for f in frames] == sorted(f["progress"] for f in frames)

    (tmp_path / "done").touch()
    rest = await frames_until(tab, "turn_end")
    assert "tool_progress" not in [frame["type"] for frame in rest]
    await tab.close()


async def test_progress_ends_with_a_stopped_turn(llm: ScriptedLLM, progress_hub: Hub, tmp_path: Path) -> None:
    tab = await logged_in_tab()
    conversation = tab.conversation_id
    llm.script(ToolCalls([Call("pg_count_steps", {"steps": 2, "gate": str(tmp_path)})]), Text("Done."))
    await tab.send({"type": "user_message", "text": "count"})
    await tab.next("tool_call")
    (tmp_path / "go-1").touch()
    await tab.next("tool_progress")
    await tab.send({"type": "cancel"})
    rest = await frames_until(tab, "turn_end")
    assert rest[-1]["status"] == "stopped"
    kinds = [frame["type"] for frame in rest]
    assert "tool_progress" not in kinds[kinds.index("tool_result") :]
    assert progress.running(conversation) == []
    await tab.close()

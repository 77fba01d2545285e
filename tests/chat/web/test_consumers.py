"""The websocket consumer through the real ASGI stack (origin check, session auth, routing)."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from typing import Any

import pytest
from channels.testing import WebsocketCommunicator

from boocode.asgi import application
from boocode.chat.turn.loop import MAX_MESSAGE_CHARS
from boocode.chat.turn.registry import registry
from boocode.chat.web.consumers import MAX_FRAME_BYTES
from tests.support.accounts import login, new_conversation, stored
from tests.support.llm import Call, ScriptedLLM, Stall, Text, ToolCalls
from tests.support.tabs import Tab, logged_in, logged_in_tab

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.processes]


async def closed_with(tab: Tab) -> int:
    connected, _ = await tab.ws.connect(timeout=5)
    assert connected  # accepted first, so that the browser sees the code
    message = await tab.ws.receive_output(timeout=5)
    assert message["type"] == "websocket.close"
    return message["code"]


async def test_anonymous_users_are_refused() -> None:
    conversation = await new_conversation("alice")
    assert await closed_with(Tab(conversation, None)) == 4401


async def test_other_users_conversations_are_refused() -> None:
    conversation = await new_conversation("alice")
    mallory = await login("mallory")
    assert await closed_with(Tab(conversation, mallory)) == 4403
    assert await closed_with(Tab(conversation + 1000, mallory)) == 4403


async def test_foreign_origin_is_refused() -> None:
    cookie = await login("alice")
    conversation = await new_conversation("alice")
    ws = WebsocketCommunicator(
        application,
        f"/ws/conversations/{conversation}/",
        headers=[(b"origin", b"http://evil.example"), (b"cookie", f"sessionid={cookie}".encode())],
    )
    connected, _ = await ws.connect(timeout=5)
    assert not connected


async def test_bad_frames_get_errors_and_the_socket_stays_up(llm: ScriptedLLM) -> None:
    tab = await logged_in_tab()
    conversation = tab.conversation_id
    cases = [
        ("not json", "bad_json"),
        ("[1, 2]", "bad_frame"),
        ('{"type": 5}', "bad_frame"),
        ('{"type": "launch_missiles"}', "unknown_type"),
        ('{"type": "user_message"}', "bad_frame"),
        ('{"type": "user_message", "text": "   "}', "bad_frame"),
        (json.dumps({"type": "user_message", "text": "x" * (MAX_MESSAGE_CHARS + 1)}), "too_long"),
        (json.dumps({"type": "user_message", "text": "x" * (MAX_FRAME_BYTES + 1)}), "too_large"),
        ('{"type": "cancel"}', "not_running"),
    ]
    for text, code in cases:
        await tab.ws.send_to(text_data=text)
        frame = await tab.next()
        assert (frame["type"], frame["code"]) == ("error", code), text
    await tab.ws.send_to(bytes_data=b"\x00\x01")
    assert (await tab.next())["code"] == "bad_frame"

    llm.script(Text("still here"))
    await tab.send({"type": "user_message", "text": "hello"})
    end = await tab.until_turn_end()
    assert end["status"] == "complete"
    assert await stored(conversation) == [
        ("user", "complete", "hello"),
        ("assistant", "complete", "still here"),
    ]
    await tab.close()


async def test_a_turn_with_a_tool_over_the_websocket(llm: ScriptedLLM, toolbox_hub: Any) -> None:
    tab = await logged_in_tab()
    conversation, cookie = tab.conversation_id, tab.cookie
    history = tab.history
    assert history["messages"] == [] and history["running"] is False

    llm.script(ToolCalls([Call("toolbox_echo", {"text": "<script>alert(1)</script>"})]), Text("Done."))
    await tab.send({"type": "user_message", "text": "echo something"})
    await tab.until_turn_end()
    kinds = [frame["type"] for frame in tab.frames if frame["type"] != "status"]
    assert kinds[:3] == ["turn_start", "message", "message_start"]
    assert "tool_call" in kinds and kinds.index("tool_call") < kinds.index("tool_result")
    result = next(frame["call"] for frame in tab.frames if frame["type"] == "tool_result")
    assert result["output"] == "<script>alert(1)</script>"  # text: the page shows it with textContent
    status = [frame for frame in tab.frames if frame["type"] == "status"][-1]  # sent before turn_end
    assert status["servers"][0]["name"] == "toolbox" and status["servers"][0]["status"] == "ready"
    await tab.close()

    # A new connection gets the whole conversation back as history.
    again = Tab(conversation, cookie)
    history = await again.open()
    assert [m["role"] for m in history["messages"]] == ["user", "assistant", "assistant"]
    assert history["messages"][1]["tool_calls"][0]["output"] == "<script>alert(1)</script>"
    assert history["messages"][2]["html"] == "<p>Done.</p>\n"
    await again.close()


async def test_a_tool_call_reaches_its_server_while_its_record_is_still_being_written(
    llm: ScriptedLLM, toolbox_hub: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # With 50 people, the write of the answer and its call rows waits behind other turns' writes
    # on the database thread; the server must not wait with it. The write is held here until the
    # server has the call (it writes to its stderr, which the hub keeps), then let go.
    from boocode.chat.turn import conversations

    arrived = threading.Event()
    real = conversations.finish_message

    def held(*args: Any, **keys: Any) -> Any:
        if keys.get("tool_calls"):
            assert arrived.wait(10), "the call did not reach the server while its record was held"
        return real(*args, **keys)

    monkeypatch.setattr(conversations, "finish_message", held)

    def reached() -> bool:  # the toolbox's stderr tail, as the hub keeps it
        return any("reached the server" in s.stderr_tail for s in toolbox_hub.snapshots())

    async def watch() -> None:
        while not reached():  # noqa: ASYNC110 (another process's stderr: nothing to wait on)
            await asyncio.sleep(0.01)
        arrived.set()

    watcher = asyncio.ensure_future(watch())
    tab = await logged_in_tab()
    llm.script(ToolCalls([Call("toolbox_stderr", {"text": "reached the server"})]), Text("Done."))
    await tab.send({"type": "user_message", "text": "call it"})
    end = await tab.until_turn_end()
    watcher.cancel()
    assert end["status"] == "complete" and arrived.is_set()
    # The tabs still hear of the call in order: its card after the answer's end, before its result.
    told = ("message_complete", "tool_call", "tool_result")
    kinds = [frame["type"] for frame in tab.frames if frame["type"] in told]
    assert kinds[:3] == ["message_complete", "tool_call", "tool_result"]
    await tab.close()


async def test_a_message_sent_the_moment_turn_end_arrives_starts_the_next_turn(
    llm: ScriptedLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    from boocode.chat.wire import payloads

    # The conversation frame that follows turn_end is read slowly: the turn's task is still
    # alive when the tab hears turn_end and answers it at once.
    reading = payloads.conversation_info

    def slow_read(conversation_id: int) -> dict[str, Any]:
        time.sleep(1.0)
        return reading(conversation_id)

    monkeypatch.setattr(payloads, "conversation_info", slow_read)
    async with logged_in() as tab:
        llm.script(Text("one"), Text("two"))
        await tab.send({"type": "user_message", "text": "first"})
        assert (await tab.until_turn_end())["status"] == "complete"
        await tab.send({"type": "user_message", "text": "second"})
        assert (await tab.next_of(("turn_start", "error")))["type"] == "turn_start"
        assert (await tab.until_turn_end())["status"] == "complete"
    assert [content for _, _, content in await stored(tab.conversation_id)] == [
        "first",
        "one",
        "second",
        "two",
    ]


async def test_two_tabs_see_the_same_turn_and_either_can_stop_it(llm: ScriptedLLM) -> None:
    first = await logged_in_tab()
    conversation = first.conversation_id
    second = Tab(conversation, first.cookie)
    await second.open()

    llm.script(Stall(text="thinking hard", seconds=30))
    await first.send({"type": "user_message", "text": "a hard question"})
    for tab in (first, second):
        assert (await tab.next("turn_start"))["type"] == "turn_start"
        await tab.next("message_start")
    delta = await second.next("text_delta")
    assert delta["offset"] == 0
    shown = delta["text"]
    while shown != "thinking hard":  # the model is stalled after this text: cancel only then
        shown += (await second.next("text_delta"))["text"]

    await second.send({"type": "user_message", "text": "me too"})
    error = await second.next("error")
    assert error["code"] == "turn_in_progress"

    await second.send({"type": "cancel"})
    for tab in (first, second):
        end = await tab.until_turn_end()
        assert end["status"] == "stopped"
    assert (await stored(conversation))[-1] == ("assistant", "stopped", "thinking hard")
    await first.close()
    await second.close()


async def test_the_turn_survives_a_dropped_socket_and_a_reconnect_sees_it(llm: ScriptedLLM) -> None:
    tab = await logged_in_tab()
    conversation, cookie = tab.conversation_id, tab.cookie
    llm.script(Stall(text="first half, ", after="second half", seconds=30))
    await tab.send({"type": "user_message", "text": "long answer please"})
    received = ""
    while received != "first half, ":
        received += (await tab.next("text_delta"))["text"]
    await tab.close()  # the browser went away

    back = Tab(conversation, cookie)
    history = await back.open()
    assert history["running"] is True and history["turn_id"]
    streaming = history["messages"][-1]
    # The live text, even though the database was last written after the first delta.
    assert (streaming["status"], streaming["content"]) == ("streaming", "first half, ")

    llm.release()
    end = await back.until_turn_end()
    assert end["status"] == "complete"
    assert (await stored(conversation))[-1] == ("assistant", "complete", "first half, second half")
    # The deltas received after the history continue it: applied the way the page does
    # (skip what is already shown, never leave a gap), they give the whole answer.
    text = streaming["content"]
    for delta in (f for f in back.frames if f["type"] == "text_delta"):
        assert delta["offset"] <= len(text)
        text += delta["text"][len(text) - delta["offset"] :]
    assert text == "first half, second half"
    await back.close()
    async with asyncio.timeout(5):
        await registry.wait(conversation)


async def test_status_line_follows_server_changes_at_once(
    llm: ScriptedLLM, hub: Any, toolbox_config: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from boocode.chat.web import consumers
    from mcpclient import runtime

    monkeypatch.setattr(consumers, "STATUS_INTERVAL", 3600.0)  # only the broadcast can update it
    tab = await logged_in_tab()
    hub.add_listener(runtime.broadcast_listener)
    runtime.set_hub(hub)
    try:
        await hub.start([toolbox_config("tb")])
        while True:
            frame = await tab.next("status", within=5)
            if frame["servers"] and frame["servers"][0]["status"] == "ready":
                break
        assert frame["servers"][0]["name"] == "tb" and frame["servers"][0]["tool_count"] == 12
        await hub.apply([toolbox_config("tb", enabled=False)])
        while (await tab.next("status", within=5))["servers"][0]["status"] != "disabled":
            pass
    finally:
        runtime.set_hub(None)
        await tab.close()


async def test_a_frame_for_a_socket_the_client_just_closed_is_dropped_quietly() -> None:
    # Daphne raises Disconnected for a send between the client closing and the consumer
    # hearing of it; a relayed frame then must neither raise nor be followed by more.
    from autobahn.exception import Disconnected

    from boocode.chat.web.consumers import ChatConsumer

    sent: list[dict[str, Any]] = []

    async def closed_socket(message: dict[str, Any]) -> None:
        sent.append(message)
        raise Disconnected("Attempt to send on a closed protocol")

    consumer = ChatConsumer()
    consumer.base_send = closed_socket
    await consumer.dispatch({"type": "chat.event", "event": {"type": "text_delta", "text": "a"}})
    await consumer.dispatch({"type": "chat.event", "event": {"type": "text_delta", "text": "b"}})
    assert [json.loads(message["text"])["text"] for message in sent] == ["a"]

"""The turn loop with the scripted LLM, the real toolbox MCP server and the real database."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from boocode.chat.models import Conversation, Message, ToolCall
from boocode.chat.turn.loop import TurnRequest, run_turn
from boocode.chat.turn.registry import TurnInProgress, registry
from tests.support.accounts import new_conversation
from tests.support.hubs import stop_process_hub
from tests.support.llm import Call, Error, Raw, ScriptedLLM, Stall, Text, ToolCalls
from tests.support.processes import TEST_COMMANDS, toolbox_entry

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.processes]


class Recorder:
    """An ``emit`` callback that keeps every event and lets a test wait for one."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self._changed = asyncio.Condition()

    async def __call__(self, event: dict[str, Any]) -> None:
        async with self._changed:
            self.events.append(event)
            self._changed.notify_all()

    async def wait_for(
        self, predicate: Callable[[dict[str, Any]], bool], within: float = 10.0
    ) -> dict[str, Any]:
        async with asyncio.timeout(within):
            async with self._changed:
                while True:
                    for event in self.events:
                        if predicate(event):
                            return event
                    await self._changed.wait()

    def of(self, kind: str) -> list[dict[str, Any]]:
        return [event for event in self.events if event["type"] == kind]

    @property
    def types(self) -> list[str]:
        return [event["type"] for event in self.events if event["type"] != "status"]


@sync_to_async
def messages_of(conversation_id: int) -> list[Message]:
    return list(Message.objects.filter(conversation_id=conversation_id).prefetch_related("tool_calls"))


@sync_to_async
def calls_of(conversation_id: int) -> list[ToolCall]:
    return list(ToolCall.objects.filter(message__conversation_id=conversation_id))


async def turn(conversation_id: int, text: str, emit: Recorder) -> str:
    async with asyncio.timeout(20):
        return await run_turn(TurnRequest(conversation_id, text), emit)


async def test_text_answer_is_streamed_and_stored(llm: ScriptedLLM) -> None:
    llm.script(Text("Hello **there**", chunk_size=3))
    conversation = await new_conversation()
    events = Recorder()
    assert await turn(conversation, "hi", events) == "complete"

    assert events.types[:3] == ["turn_start", "message", "message_start"]
    assert events.types[-2:] == ["turn_end", "conversation"]
    assert [kind for kind in events.types if kind != "conversation"][-2:] == ["message_complete", "turn_end"]
    # The first message names the conversation: a frame says so while the answer streams.
    titled, final = events.of("conversation")
    assert titled["conversation"]["title"] == final["conversation"]["title"] == "hi"
    assert events.types.index("conversation") < events.types.index("turn_end")
    deltas = events.of("text_delta")
    assert "".join(d["text"] for d in deltas) == "Hello **there**"
    offsets = [d["offset"] for d in deltas]
    assert offsets == [sum(len(d["text"]) for d in deltas[:i]) for i in range(len(deltas))]
    complete = events.of("message_complete")[0]["message"]
    assert complete["html"] == "<p>Hello <strong>there</strong></p>\n"
    assert events.of("turn_end")[0]["status"] == "complete"

    stored = await messages_of(conversation)
    assert [(m.role, m.status, m.content) for m in stored] == [
        ("user", "complete", "hi"),
        ("assistant", "complete", "Hello **there**"),
    ]
    assert (await sync_to_async(Conversation.objects.get)(pk=conversation)).title == "hi"
    sent = llm.requests[0]["messages"]
    assert sent[0]["role"] == "system" and sent[-1] == {"role": "user", "content": "hi"}


async def test_tool_round_trip_through_a_real_mcp_server(llm: ScriptedLLM, toolbox_hub: Any) -> None:
    llm.script(
        ToolCalls([Call("toolbox_echo", {"text": "ping"}, id="call_echo")]), Text("The server said ping.")
    )
    conversation = await new_conversation()
    events = Recorder()
    assert await turn(conversation, "echo ping", events) == "complete"

    offered = {tool["function"]["name"] for tool in llm.requests[0]["tools"]}
    assert {"toolbox_echo", "toolbox_add"} <= offered
    assert "toolbox_delete_everything" not in offered  # readOnlyHint=false never reaches the model
    result = events.of("tool_result")[0]["call"]
    assert (result["name"], result["status"], result["output"], result["is_error"]) == (
        "toolbox_echo",
        "done",
        "ping",
        False,
    )
    second = llm.requests[1]["messages"]
    assert second[-2]["tool_calls"][0]["id"] == "call_echo"
    assert second[-1] == {"role": "tool", "tool_call_id": "call_echo", "content": "ping"}

    stored = await messages_of(conversation)
    assert [(m.role, m.content) for m in stored] == [
        ("user", "echo ping"),
        ("assistant", ""),
        ("assistant", "The server said ping."),
    ]
    [call] = stored[1].tool_calls.all()
    assert (call.name, json.loads(call.arguments), call.output, call.status) == (
        "toolbox_echo",
        {"text": "ping"},
        "ping",
        "done",
    )
    assert call.duration_ms is not None and call.finished_at is not None


async def test_tool_calls_of_one_step_run_concurrently(
    llm: ScriptedLLM, toolbox_hub: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The calls in flight at the hub, counted: one after the other, never more than one; together,
    # both at once (each sleeps a second on the server). A count, which load cannot move.
    in_flight, most = 0, 0
    call_tool = toolbox_hub.call_tool

    async def counted(*args: Any, **keys: Any) -> Any:
        nonlocal in_flight, most
        in_flight += 1
        most = max(most, in_flight)
        try:
            return await call_tool(*args, **keys)
        finally:
            in_flight -= 1

    monkeypatch.setattr(toolbox_hub, "call_tool", counted)
    llm.script(
        ToolCalls([Call("toolbox_slow", {"seconds": 1.0}), Call("toolbox_slow", {"seconds": 1.0})]),
        Text("both done"),
    )
    conversation = await new_conversation()
    events = Recorder()
    assert await turn(conversation, "twice", events) == "complete"
    results = [event["call"] for event in events.of("tool_result")]
    assert [r["output"] for r in results] == ["slept 1.0", "slept 1.0"]
    assert most == 2


async def test_cap_hit_makes_one_last_call_without_tools(
    llm: ScriptedLLM, toolbox_hub: Any, agents_file: Callable[[str], Any]
) -> None:
    agents_file("## Capped\n---\nmax_tool_calls: 2\n---\nYou are capped.\n")
    llm.script(
        ToolCalls([Call("toolbox_echo", {"text": t}) for t in ("a", "b", "c")]),
        ToolCalls([Call("toolbox_echo", {"text": "ignored"})]),  # tools were not offered: not run
        Text("unused"),
    )
    conversation = await new_conversation()
    events = Recorder()
    assert await turn(conversation, "go", events) == "complete"

    assert len(llm.requests) == 2
    assert "tools" not in llm.requests[1]
    assert llm.requests[0]["messages"][0] == {"role": "system", "content": "You are capped."}
    results = sorted((event["call"] for event in events.of("tool_result")), key=lambda call: call["id"])
    assert [call["status"] for call in results] == ["done", "done", "skipped"]
    end = events.of("turn_end")[0]
    assert end["cap_hit"] is True and end["status"] == "complete"
    notice = [m for m in await messages_of(conversation) if m.role == "notice"]
    assert len(notice) == 1 and "Tool call limit reached" in notice[0].content
    assert len(await calls_of(conversation)) == 3


async def test_cancel_during_a_tool_call(llm: ScriptedLLM, toolbox_hub: Any) -> None:
    llm.script(ToolCalls([Call("toolbox_slow", {"seconds": 30}), Call("toolbox_echo", {"text": "quick"})]))
    conversation = await new_conversation()
    events = Recorder()
    task = registry.start(TurnRequest(conversation, "slow please"), events)
    with pytest.raises(TurnInProgress):
        registry.start(TurnRequest(conversation, "again"), events)
    await events.wait_for(lambda e: e["type"] == "tool_result" and e["call"]["name"] == "toolbox_echo")
    assert registry.cancel(conversation)
    with pytest.raises(asyncio.CancelledError):
        async with asyncio.timeout(10):
            await task
    assert not registry.running(conversation)
    end = events.of("turn_end")[0]
    assert end["status"] == "stopped"
    calls = {call.name: call for call in await calls_of(conversation)}
    assert calls["toolbox_slow"].status == "cancelled" and calls["toolbox_slow"].is_error
    assert calls["toolbox_echo"].status == "done" and calls["toolbox_echo"].output == "quick"
    # The hub and the server are still fine: the next turn can call a tool.
    llm.script(ToolCalls([Call("toolbox_echo", {"text": "after"})]), Text("ok"))
    assert await turn(conversation, "again", Recorder()) == "complete"
    history = llm.requests[-1]["messages"]
    assert any(m.get("content") == "Cancelled by the user before the tool finished." for m in history)


async def test_cancel_while_streaming_keeps_the_partial_text(llm: ScriptedLLM) -> None:
    llm.script(Stall(text="partial answer", seconds=30))
    conversation = await new_conversation()
    events = Recorder()
    task = registry.start(TurnRequest(conversation, "tell me"), events)
    await events.wait_for(lambda e: e["type"] == "text_delta" and e["offset"] + len(e["text"]) == 14)
    assert registry.live_text(conversation)[1] == "partial answer"
    registry.cancel(conversation)
    with pytest.raises(asyncio.CancelledError):
        await task
    await llm.until(lambda server: server.aborted_streams == 1)  # the HTTP stream was closed
    assistant = (await messages_of(conversation))[-1]
    assert (assistant.status, assistant.content) == ("stopped", "partial answer")
    assert events.of("message_complete")[0]["message"]["status"] == "stopped"
    assert events.of("turn_end")[0]["status"] == "stopped"


async def test_stop_before_the_first_token_keeps_the_message_and_ends_the_answer(llm: ScriptedLLM) -> None:
    # The user's message is stored while the first request goes out; a stop at once must still
    # leave it stored and echoed, and the answer's message stopped (not left streaming).
    llm.script(Stall(seconds=30))
    conversation = await new_conversation()
    events = Recorder()
    task = registry.start(TurnRequest(conversation, "never mind"), events)
    await llm.until(lambda server: len(server.requests) == 1)
    registry.cancel(conversation)
    with pytest.raises(asyncio.CancelledError):
        await task
    assert [kind for kind in events.types if kind != "conversation"] == [
        "turn_start",
        "message",
        "message_start",
        "message_complete",
        "turn_end",
    ]
    assert events.types[-1] == "conversation"
    assert events.of("message")[0]["message"]["content"] == "never mind"
    assert events.of("turn_end")[0]["status"] == "stopped"
    stored = await messages_of(conversation)
    assert [(m.role, m.status, m.content) for m in stored] == [
        ("user", "complete", "never mind"),
        ("assistant", "stopped", ""),
    ]


async def test_a_conversation_deleted_before_the_turn_fails_the_turn_cleanly(llm: ScriptedLLM) -> None:
    conversation = await new_conversation()
    await sync_to_async(Conversation.objects.filter(pk=conversation).delete)()
    events = Recorder()
    assert await turn(conversation, "hello?", events) == "failed"
    assert events.of("turn_end")[0]["status"] == "failed"
    assert llm.requests == []  # nothing was sent for a conversation that is gone


async def test_partial_text_is_saved_while_streaming(llm: ScriptedLLM) -> None:
    llm.script(Text("0123456789" * 4, chunk_size=2, delay=0.05))
    conversation = await new_conversation()
    events = Recorder()
    task = registry.start(TurnRequest(conversation, "count"), events)
    await events.wait_for(lambda e: e["type"] == "text_delta" and e["offset"] >= 20)
    saved = (await messages_of(conversation))[-1]
    assert saved.status == "streaming"
    assert saved.content and ("0123456789" * 4).startswith(saved.content)
    async with asyncio.timeout(10):
        await task


async def test_llm_failure_before_any_text(llm: ScriptedLLM, settings: Any) -> None:
    settings.LLM_API_KEY = "wrong"
    llm.api_key = "right"
    conversation = await new_conversation()
    events = Recorder()
    assert await turn(conversation, "hi", events) == "failed"
    end = events.of("turn_end")[0]
    assert end["status"] == "failed" and "BOOCODE_LLM_API_KEY" in end["error"]
    stored = await messages_of(conversation)
    assert [(m.role, m.status) for m in stored] == [("user", "complete"), ("assistant", "failed")]
    assert "HTTP 401" in stored[1].error


async def test_llm_failure_mid_answer_keeps_what_came_before(llm: ScriptedLLM) -> None:
    chunk = {"choices": [{"index": 0, "delta": {"content": "The answer is"}, "finish_reason": None}]}
    llm.script(Raw([json.dumps(chunk)], close=True))
    conversation = await new_conversation()
    events = Recorder()
    assert await turn(conversation, "hi", events) == "failed"
    assistant = (await messages_of(conversation))[-1]
    assert (assistant.status, assistant.content) == ("failed", "The answer is")
    assert "closed in the middle" in assistant.error


async def test_server_errors_are_retried_inside_a_turn(llm: ScriptedLLM) -> None:
    llm.script(Error(503, "busy"), Text("recovered"))
    conversation = await new_conversation()
    assert await turn(conversation, "hi", Recorder()) == "complete"
    assert (await messages_of(conversation))[-1].content == "recovered"


async def test_arguments_that_are_not_json_go_back_to_the_model(llm: ScriptedLLM, toolbox_hub: Any) -> None:
    llm.script(ToolCalls([Call("toolbox_echo", '{"text": "unterminated', id="bad")]), Text("sorry"))
    conversation = await new_conversation()
    events = Recorder()
    assert await turn(conversation, "hi", events) == "complete"
    result = events.of("tool_result")[0]["call"]
    assert result["is_error"] and "not valid JSON" in result["output"]
    second = llm.requests[1]["messages"]
    assert second[-2]["tool_calls"][0]["function"]["arguments"] == "{}"
    assert second[-1]["tool_call_id"] == "bad" and "not valid JSON" in second[-1]["content"]


async def test_history_goes_back_to_the_model_without_console_entries(llm: ScriptedLLM) -> None:
    llm.script(Text("first answer"), Text("second answer"))
    conversation = await new_conversation()
    await turn(conversation, "first", Recorder())
    await turn(conversation, "/help", Recorder())
    await turn(conversation, "second", Recorder())
    roles = [(m["role"], m.get("content")) for m in llm.requests[1]["messages"][1:]]
    assert roles == [("user", "first"), ("assistant", "first answer"), ("user", "second")]


async def test_a_console_command_names_the_conversation_until_the_first_message(llm: ScriptedLLM) -> None:
    """A conversation of console commands only is named after its first command (the list shows
    what it holds, not one more "New conversation"); the person's first message names it then."""
    llm.script(Text("an answer"), Text("another"), Text("a third"))
    conversation = await new_conversation()
    events = Recorder()
    await turn(conversation, "/help", events)
    title = sync_to_async(lambda pk: Conversation.objects.get(pk=pk).title)
    assert await title(conversation) == "/help"
    assert events.of("conversation")[-1]["conversation"]["title"] == "/help"  # the page is told
    await turn(conversation, "/tools", Recorder())
    assert await title(conversation) == "/help"  # the first command's
    await turn(conversation, "What is the weather like?", Recorder())
    assert await title(conversation) == "What is the weather like?"
    await turn(conversation, "/help", Recorder())
    await turn(conversation, "Something else", Recorder())
    assert await title(conversation) == "What is the weather like?"

    # A title the person chose is never replaced, even one that reads like a command.
    renamed = await new_conversation()
    await turn(renamed, "/help", Recorder())
    await sync_to_async(Conversation.objects.filter(pk=renamed).update)(title="/my console")
    await turn(renamed, "A question", Recorder())
    assert await title(renamed) == "/my console"


async def test_no_model_configured(toolbox_hub: Any) -> None:
    conversation = await new_conversation()
    events = Recorder()
    assert await turn(conversation, "hello?", events) == "failed"
    error = events.of("turn_end")[0]["error"]
    assert "BOOCODE_LLM_BASE_URL" in error and "BOOCODE_LLM_MODEL" in error
    assert (await messages_of(conversation))[-1].error == error


async def test_console_lists_and_calls_tools_without_a_model(toolbox_hub: Any) -> None:
    conversation = await new_conversation()
    events = Recorder()
    assert await turn(conversation, "/tools", events) == "complete"
    listing = events.of("message")[-1]["message"]
    assert listing["role"] == "notice" and "`toolbox_echo`" in listing["content"]
    assert "toolbox_delete_everything" not in listing["content"]

    events = Recorder()
    assert await turn(conversation, '/call toolbox_add {"a": 2, "b": 3}', events) == "complete"
    result = events.of("tool_result")[0]["call"]
    assert (result["name"], result["output"], result["status"]) == ("toolbox_add", "5", "done")
    events = Recorder()
    await turn(conversation, '/call toolbox_add {"a": "two"}', events)
    assert events.of("tool_result")[0]["call"]["is_error"]
    events = Recorder()
    await turn(conversation, '/call toolbox_add\n{"a": 1, "b": 1}', events)
    assert events.of("tool_result")[0]["call"]["output"] == "2"

    stored = await messages_of(conversation)
    assert [m.role for m in stored] == ["console", "notice", "console", "console", "console"]
    [call] = stored[2].tool_calls.all()
    assert (call.name, call.output) == ("toolbox_add", "5")


async def test_tool_images_become_data_urls(llm: ScriptedLLM, toolbox_hub: Any) -> None:
    conversation = await new_conversation()
    events = Recorder()
    await turn(conversation, "/call toolbox_media", events)
    result = events.of("tool_result")[0]["call"]
    assert len(result["images"]) == 1 and result["images"][0].startswith("data:image/png;base64,iVBOR")


async def test_tools_console_follows_mcp_json_and_agents_md_edits_at_once(
    settings: Any, tmp_path: Any, agents_file: Any
) -> None:
    settings.MCP_AUTOSTART = True
    settings.MCP_CONFIG = tmp_path / "mcp.json"
    settings.MCP_STDIO_COMMANDS = TEST_COMMANDS
    settings.MCP_CONFIG.write_text(json.dumps({"mcpServers": {"tb": toolbox_entry()}}))
    agents_file("## Everything\n---\ndescription: all\n---\nAnything.\n")
    conversation = await new_conversation()
    try:
        events = Recorder()
        await turn(conversation, "/tools", events)
        listing = events.of("message")[-1]["message"]["content"]
        assert "Agent **Everything**" in listing and "`tb_echo` (tb)" in listing

        settings.MCP_CONFIG.write_text(
            json.dumps({"mcpServers": {"tb": toolbox_entry(enabled=False), "tb2": toolbox_entry()}})
        )
        agents_file("## Renamed\n---\ntools: [tb2_echo, tb_echo]\n---\nEcho.\n")
        events = Recorder()
        await turn(conversation, "/tools", events)
        listing = events.of("message")[-1]["message"]["content"]
        assert "Agent **Renamed** may use 1 tool:" in listing and "`tb2_echo` (tb2)" in listing
        assert "`tb_echo`" not in listing
    finally:
        await stop_process_hub()

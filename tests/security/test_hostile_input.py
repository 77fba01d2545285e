"""Around the probe's cases: hostile but well-formed input from the model and in tool calls.

A model server (or whatever sits at BOOCODE_LLM_BASE_URL) is not trusted: JSON nested deep
enough to exhaust the parser's stack, in a stream chunk or in a tool call's arguments, must
end as a readable error, not an internal error.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth import get_user_model

from boocode.chat.models import Conversation, Message
from boocode.chat.turn.loop import TurnRequest, run_turn
from boocode.tools.execution import execute_tool
from tests.support.accounts import conversation_of_new, login
from tests.support.llm import Raw, ScriptedLLM
from tests.support.tabs import Tab

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("fresh_state", "close_model_session"),  # the chat tests' state
    pytest.mark.processes,
]

DEEP = "[" * 100_000 + "]" * 100_000


async def _emit(event: dict[str, Any]) -> None:
    return None


@sync_to_async
def _conversation() -> int:
    user, _ = get_user_model().objects.get_or_create(username="alice")
    return Conversation.objects.create(owner=user).pk


async def test_a_stream_chunk_nested_too_deep_is_a_malformed_stream(llm: ScriptedLLM) -> None:
    llm.script(Raw(['{"choices": [{"delta": {"content": ' + DEEP + "}}]}"], close=True))
    conversation = await _conversation()
    async with asyncio.timeout(20):
        assert await run_turn(TurnRequest(conversation, "hi"), _emit) == "failed"
    answer = await Message.objects.filter(conversation_id=conversation, role=Message.Role.ASSISTANT).alast()
    assert answer is not None and "malformed stream" in answer.error  # not "Internal error"


async def test_tool_arguments_nested_too_deep_are_an_error_the_model_can_read() -> None:
    result = await execute_tool("view_file", '{"path": ' + DEEP + "}")
    assert result.is_error and result.output == (
        "Invalid arguments for view_file: JSON nested too deeply; send a flat object"
    )


async def test_model_text_with_an_unpaired_surrogate_is_stored_safely(llm: ScriptedLLM) -> None:
    chunk = '{"choices": [{"delta": {"content": "ok \\ud800 done"}, "finish_reason": "stop"}]}'
    llm.script(Raw([chunk, "[DONE]"]))
    conversation = await _conversation()
    async with asyncio.timeout(20):
        assert await run_turn(TurnRequest(conversation, "hi"), _emit) == "complete"
    answer = await Message.objects.filter(conversation_id=conversation, role=Message.Role.ASSISTANT).alast()
    assert answer is not None and answer.content == "ok \ufffd done"


async def test_tool_arguments_with_an_unpaired_surrogate_never_reach_the_server(
    toolbox_hub: Any,
) -> None:
    # Before, the stdio server died on the request ("unreachable: connection closed").
    result = await execute_tool("toolbox_echo", '{"text": "a\\ud800b"}')
    assert result.is_error and "unpaired surrogate (U+D800)" in result.output
    after = await execute_tool("toolbox_echo", '{"text": "still alive"}')
    assert not after.is_error and after.output == "still alive"


async def test_a_websocket_frame_nested_too_deep_gets_an_error_frame_and_the_socket_lives() -> None:
    tab = Tab(await conversation_of_new("alice", staff=False), await login("alice"))
    await tab.open()
    try:
        await tab.ws.send_to(text_data="[" * 30_000 + "]" * 30_000)
        error = await tab.next("error")
        assert error["code"] == "bad_json" and "nested too deeply" in error["message"]
        await tab.send({"type": "cancel"})  # the socket still works
        assert (await tab.next("error"))["code"] == "not_running"
    finally:
        await tab.ws.disconnect()

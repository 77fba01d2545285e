"""The hub worker's shape fails in words: a turn that cannot reach the worker says so.

(The renewal of held turn locks and a lost lock's wording are in tests/chat/test_redis_layer.py
and tests/chat/test_turn_lock.py, with the real Redis and two Daphnes they need.)
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from boocode.chat.models import Message
from boocode.chat.turn import console
from boocode.chat.turn import loop as turn
from boocode.chat.turn.loop import TurnRequest, run_turn
from mcpclient.runtime import WorkerUnavailable
from tests.support.accounts import new_conversation
from tests.support.llm import ScriptedLLM, Text

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("fresh_state")]

AWAY = "the MCP hub worker is not running (last heard 40 s ago)"


async def _worker_away(user_id: int | None, *, fresh: bool = False) -> None:
    raise WorkerUnavailable(AWAY)


async def _emit(event: dict[str, Any]) -> None:
    return None


@pytest.mark.parametrize("text", ["hello", "/call box_echo {}"])
async def test_a_turn_without_the_hub_worker_says_so(
    llm: ScriptedLLM, monkeypatch: pytest.MonkeyPatch, text: str
) -> None:
    monkeypatch.setattr(turn, "prepare_hub", _worker_away)
    monkeypatch.setattr(console, "prepare_hub", _worker_away)
    llm.script(Text("never"))
    conversation = await new_conversation()
    async with asyncio.timeout(20):
        assert await run_turn(TurnRequest(conversation, text), _emit) == "failed"
    last = await Message.objects.filter(conversation_id=conversation).alast()
    assert last is not None and last.error == f"The MCP servers cannot be reached: {AWAY}.", last.error
    assert not llm.requests

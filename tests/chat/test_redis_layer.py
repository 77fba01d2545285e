"""Scale-out: the same consumer and turn loop over the real Redis channel layer."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from channels.layers import channel_layers, get_channel_layer

from mcpclient.worker.signing import layer_key
from tests.support.accounts import stored
from tests.support.llm import ScriptedLLM, Text
from tests.support.tabs import Tab, logged_in_tab

TEXT = "Hello from the model, streamed in small pieces."

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.redis]


@pytest.fixture
def redis_layer(settings: Any) -> Iterator[None]:
    """Point Channels at the local Redis as settings.py does, with a prefix of this test's own."""
    settings.CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "mcpclient.worker.signing.SignedRedisPubSubChannelLayer",
            "CONFIG": {
                "hosts": [{"address": "redis://127.0.0.1:6379/0", "socket_timeout": 30}],
                "prefix": f"boocode-test-{uuid.uuid4().hex}",
                "signing_key": layer_key(settings.SECRET_KEY),
            },
        }
    }
    channel_layers.backends.clear()
    yield
    channel_layers.backends.clear()


async def test_an_idle_listener_outlives_the_socket_timeout(redis_layer: None) -> None:
    # Once, every idle websocket died after 5 s with redis' TimeoutError (close code 1011):
    # redis-py's default socket timeout. A listener idle for longer still hears.
    layer = get_channel_layer()
    channel = await layer.new_channel()
    listening = asyncio.ensure_future(layer.receive(channel))
    await asyncio.sleep(6.5)
    assert not listening.done()
    await layer.send(channel, {"type": "still.here"})
    assert (await asyncio.wait_for(listening, 5))["type"] == "still.here"
    await layer.flush()


async def test_two_tabs_get_every_event_through_redis(redis_layer: None, llm: ScriptedLLM) -> None:
    from channels_redis.pubsub import RedisPubSubChannelLayer

    assert isinstance(get_channel_layer(), RedisPubSubChannelLayer)
    first = await logged_in_tab()
    conversation = first.conversation_id
    second = Tab(conversation, first.cookie)
    await second.open()
    llm.script(Text(TEXT))
    await first.send({"type": "user_message", "text": "hi"})
    for tab in (first, second):
        end = await tab.until_turn_end()
        assert end["status"] == "complete"
        text = "".join(frame["text"] for frame in tab.frames if frame["type"] == "text_delta")
        assert text == TEXT
    assert (await stored(conversation))[-1] == ("assistant", "complete", TEXT)
    await first.close()
    await second.close()
    await get_channel_layer().flush()


async def test_held_turn_locks_are_renewed_in_one_round_trip(redis_layer: None, settings: Any) -> None:
    """200 turns held by one process: each renewal is one script call, and every lock stays."""
    from boocode.chat.turn.locks import SharedTurns

    async def ignore(message: dict[str, Any]) -> None:
        return None

    config = settings.CHANNEL_LAYERS["default"]["CONFIG"]
    shared = SharedTurns(config["hosts"][0]["address"], config["prefix"], 0.6, ignore)
    renew = shared._renew
    calls: list[int] = []

    async def counted(keys: list[str], args: list[Any]) -> Any:
        calls.append(len(keys))
        return await renew(keys=keys, args=args)

    shared._renew = counted
    for conversation in range(200):
        await shared.acquire(conversation, f"turn-{conversation}")  # starts the renewer too
    calls.clear()  # (rounds while they were being taken renewed those held then)
    await asyncio.sleep(1.5)  # past the 0.6 s TTL: only renewals keep the locks
    assert calls and set(calls) == {200}, calls  # one call per round, for all of them
    assert all([await shared.holder(conversation) for conversation in range(200)])
    for task in shared._tasks:
        task.cancel()

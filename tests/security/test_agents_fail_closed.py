"""Tool limits never fail open: a broken or vanished agent never hands a conversation more tools.

Real turns: the scripted model server records each request body, so the tools offered to the
model are read from what it actually received; the toolbox MCP server runs over real stdio.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth import get_user_model

from agents.models import Agent
from boocode.chat.models import Conversation, Message
from boocode.chat.turn.loop import TurnRequest, run_turn
from boocode.tools.agent_rules import agent_tools
from tests.support.llm import ScriptedLLM, Text

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("fresh_state", "close_model_session"),  # the chat tests' state
    pytest.mark.processes,
]

# The first agent is the default and may use every tool; the conversation picks the narrow one.
AGENTS = """\
## Everything
---
description: may use every tool
---
You may use anything.

## Reader
---
description: reads files only
tools: [view_file]
---
You only read.
"""


async def _emit(event: dict[str, Any]) -> None:
    return None


@sync_to_async
def new_conversation(agent_name: str) -> int:
    user, _ = get_user_model().objects.get_or_create(username="alice")
    return Conversation.objects.create(owner=user, agent_name=agent_name).pk


@sync_to_async
def messages_of(conversation_id: int) -> list[Message]:
    return list(Message.objects.filter(conversation_id=conversation_id).order_by("id"))


async def turn(conversation_id: int, text: str) -> str:
    async with asyncio.timeout(20):
        return await run_turn(TurnRequest(conversation_id, text), _emit)


def offered(request: dict[str, Any]) -> list[str]:
    return sorted(tool["function"]["name"] for tool in request.get("tools", []))


async def test_an_agent_whose_section_breaks_keeps_its_last_valid_tools(
    llm: ScriptedLLM, agents_file: Any, toolbox_hub: Any
) -> None:
    agents_file(AGENTS)
    conversation = await new_conversation("Reader")
    llm.script(Text("read"), Text("still reading"))
    assert await turn(conversation, "first") == "complete"
    assert offered(llm.requests[0]) == ["view_file"]

    # A typo in Reader's section: before, Reader vanished and the turn fell back to Everything.
    agents_file(AGENTS.replace("tools: [view_file]", "tools: [view_file"))
    assert await turn(conversation, "second") == "complete"
    assert offered(llm.requests[1]) == ["view_file"]
    notices = [m.content for m in await messages_of(conversation) if m.role == Message.Role.NOTICE]
    assert any('"Reader" has an error in AGENTS.md' in notice for notice in notices)
    row = await Agent.objects.aget(name="Reader")
    assert row.tools == ["view_file"] and "invalid YAML" in row.error


async def test_a_conversation_whose_agent_is_gone_gets_a_message_and_no_model_call(
    llm: ScriptedLLM, agents_file: Any, toolbox_hub: Any
) -> None:
    agents_file(AGENTS)
    conversation = await new_conversation("Reader")
    agents_file(AGENTS.split("## Reader")[0])  # Reader removed from the file
    assert await turn(conversation, "are you there?") == "failed"
    assert llm.requests == []  # nothing reached the model, so no tool could be offered
    stored = await messages_of(conversation)
    assert [m.content for m in stored if m.role == Message.Role.USER] == ["are you there?"]  # not lost
    assert any('"Reader" of this conversation is no longer defined' in m.error for m in stored)


async def test_a_file_with_no_valid_agent_offers_no_tools(
    llm: ScriptedLLM, agents_file: Any, toolbox_hub: Any
) -> None:
    # Before, such a file fell back to the built-in agent with every tool.
    agents_file("## Broken\n---\ntools: nope\n---\nHi.\n")
    conversation = await new_conversation("")
    llm.script(Text("hello"))
    assert await turn(conversation, "hi") == "complete"
    assert "tools" not in llm.requests[0]


async def test_a_file_nested_too_deep_keeps_the_agents_as_they_were(
    llm: ScriptedLLM, agents_file: Any, toolbox_hub: Any
) -> None:
    agents_file(AGENTS)
    conversation = await new_conversation("Reader")
    llm.script(Text("one"), Text("two"))
    assert await turn(conversation, "first") == "complete"
    deep = "[" * 400 + "]" * 400
    agents_file(AGENTS.replace("description: may use every tool", f"description: {deep}"))
    assert await turn(conversation, "second") == "complete"
    assert offered(llm.requests[1]) == ["view_file"]
    assert await Agent.objects.filter(name="Everything", error="").aexists()  # untouched


@pytest.mark.parametrize("patterns", ["*", {"allow": "*"}, [1, "*"]])
def test_a_policy_that_cannot_be_read_allows_nothing(patterns: object) -> None:
    # A row edited by hand (or a bug) could hold anything; "*" as a string read as patterns
    # one character at a time allowed every tool.
    assert agent_tools(Agent(name="odd", tools=patterns)) == []

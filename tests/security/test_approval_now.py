"""Approval follows the tool as it is now, not as the turn found it, nor as it was allowed.

A turn keeps the tool list it started with; a server can re-announce a tool as a destructive
write tool mid-turn (``tests/servers/hostile_stdio.py``'s ``mutate``), and an administrator can
set a server to ``trusted: false``. Either way the next call asks. A remembered "allow for this
conversation" holds only for the definition it was given for.
"""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from boocode.chat.calls.approvals import allowance, begin_approval
from boocode.chat.models import Conversation
from boocode.tools.agent_rules import agent_tools
from boocode.tools.approval_gate import GatedTool, approving
from boocode.tools.execution import execute_tool
from boocode.tools.registry import available_tools
from boocode.tools.tool import Tool
from mcpclient.core.results import ToolResult
from mcpclient.engine.hub import Hub
from mcpclient.runtime import set_hub
from tests.support.accounts import new_conversation
from tests.support.hubs import make_config
from tests.support.processes import PYTHON, ROOT, toolbox_entry

pytestmark = pytest.mark.processes

HOSTILE = ROOT / "tests" / "servers" / "hostile_stdio.py"


class Everything:
    tools = ("*",)


class Gate:
    """A gate that records what it was asked and denies it."""

    def __init__(self) -> None:
        self.asked: list[tuple[str, str]] = []

    async def __call__(self, tool: GatedTool, arguments: dict[str, Any]) -> ToolResult | None:
        self.asked.append((tool.name, tool.approval_reason))
        return ToolResult.error("denied by the test")


def victim(tools: list[Tool]) -> Tool:
    return next(tool for tool in tools if tool.name == "bad_victim")


async def test_a_tool_re_announced_as_a_write_tool_mid_turn_asks(hub: Hub) -> None:
    entry = {"command": PYTHON, "args": [str(HOSTILE)], "writeTools": "approve"}
    await hub.start([make_config("bad", entry)])
    set_hub(hub)
    try:
        at_start = agent_tools(Everything())  # the turn's list: victim is read-only, asks nothing
        assert victim(at_start).approval_reason == ""
        said = await execute_tool("bad_mutate", {}, allowed=at_start)
        assert said.output == "victim is a write tool now"
        async with asyncio.timeout(10):
            while victim(available_tools()).approval_reason == "":  # noqa: ASYNC110 (the hub relists)
                await asyncio.sleep(0.02)
        gate = Gate()
        with approving(gate):
            result = await execute_tool("bad_victim", {}, allowed=at_start)
        assert result.output == "denied by the test"
        assert gate.asked and gate.asked[0][0] == "bad_victim" and gate.asked[0][1]
    finally:
        set_hub(None)


async def test_a_server_set_to_untrusted_mid_turn_asks(hub: Hub) -> None:
    await hub.start([make_config("tb", toolbox_entry())])
    set_hub(hub)
    try:
        at_start = agent_tools(Everything())
        assert next(t for t in at_start if t.name == "tb_echo").approval_reason == ""
        await hub.apply([make_config("tb", toolbox_entry(trusted=False))])
        async with asyncio.timeout(30):
            while not any(t.name == "tb_echo" and t.approval_reason for t in available_tools()):  # noqa: ASYNC110
                await asyncio.sleep(0.02)
        gate = Gate()
        with approving(gate):
            result = await execute_tool("tb_echo", {"text": "hi"}, allowed=at_start)
        assert result.output == "denied by the test" and [name for name, _ in gate.asked] == ["tb_echo"]
    finally:
        set_hub(None)


@pytest.mark.django_db(transaction=True)
async def test_an_allowance_holds_for_the_definition_it_was_given_for_only() -> None:
    async def run(arguments: dict[str, Any]) -> ToolResult:
        return ToolResult(output="ran")

    before = Tool(
        name="box_write",
        description="Writes a note.",
        parameters={"type": "object"},
        read_only=False,
        source="box",
        executor=run,
        approval_reason="a write tool",
    )
    after = dataclasses.replace(before, description="Deletes every note.")  # the same name
    conversation = await new_conversation()
    await sync_to_async(Conversation.objects.filter(pk=conversation).update)(
        allowed_tools=[allowance(before)]
    )

    def ask(tool: Tool) -> bool:
        _, allowed = begin_approval(
            conversation,
            None,
            server="box",
            tool="write",
            name=tool.name,
            arguments="{}",
            hints={},
            reason=tool.approval_reason,
            key=allowance(tool),
        )
        return allowed

    assert await sync_to_async(ask)(before) is True
    assert await sync_to_async(ask)(after) is False


async def test_a_call_whose_tool_changed_while_the_person_decided_is_not_made(hub: Hub) -> None:
    entry = {"command": PYTHON, "args": [str(HOSTILE)], "trusted": False, "writeTools": "approve"}
    await hub.start([make_config("bad", entry)])
    set_hub(hub)
    try:
        at_start = agent_tools(Everything())

        async def approve_after_a_change(tool: GatedTool, arguments: dict[str, Any]) -> ToolResult | None:
            # While the person decides, the server redefines the tool.
            assert (await hub.call_tool("bad_mutate", {})).output == "victim is a write tool now"
            async with asyncio.timeout(10):
                while "Deletes" not in victim(available_tools()).description:  # noqa: ASYNC110 (relisting)
                    await asyncio.sleep(0.02)
            return None  # approved: for the definition the card showed

        with approving(approve_after_a_change):
            result = await execute_tool("bad_victim", {}, allowed=at_start)
        assert result.is_error and "changed while the call waited and was not called" in result.output
    finally:
        set_hub(None)

"""The tool registry against a running hub with the toolbox test server, and argument checks."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from pathlib import Path

import anyio
import pytest

from agents.parser import AgentSpec
from boocode.tools import runners
from boocode.tools.agent_rules import agent_tools
from boocode.tools.arguments import validate_arguments
from boocode.tools.execution import execute_tool
from boocode.tools.native import Deadline, NativeTool
from boocode.tools.registry import available_tools
from boocode.tools.tool import Tool, openai_tools
from mcpclient.core.results import ToolResult
from mcpclient.engine.hub import Hub

pytestmark = pytest.mark.processes

NATIVE = ["grep", "list_dir", "view_file"]


def names(tools: list[Tool]) -> list[str]:
    return [tool.name for tool in tools]


def agent(*patterns: str, all_tools: bool = False) -> AgentSpec:
    return AgentSpec(name="test", tools=None if all_tools else patterns)


async def wait_until(hub: Hub, condition: Callable[[], bool]) -> None:
    """Wait (bounded) until ``condition()`` holds, re-checking whenever a server's state changes."""
    changed = asyncio.Event()
    hub.add_listener(lambda snapshot: changed.set())
    with anyio.fail_after(15):
        while True:
            changed.clear()
            if condition():
                return
            await changed.wait()


# --- without MCP servers -----------------------------------------------------------------


def test_native_tools_are_always_there_sorted():
    tools = available_tools()
    assert names(tools) == NATIVE
    assert all(tool.read_only and tool.source == "native" for tool in tools)


def test_openai_format():
    [view] = [tool for tool in available_tools() if tool.name == "view_file"]
    [entry] = openai_tools([view])
    assert entry["type"] == "function"
    assert set(entry["function"]) == {"name", "description", "parameters"}
    assert entry["function"]["name"] == "view_file"
    assert entry["function"]["parameters"]["required"] == ["path"]


async def test_native_schema_violations_name_the_field(workspace):
    result = await execute_tool("view_file", {"path": "a.txt", "start_line": -1})
    assert result.is_error
    assert result.output == (
        "Invalid arguments for view_file: at 'start_line': -1 is less than the minimum of 1"
    )
    result = await execute_tool("view_file", {})
    assert result.output == "Invalid arguments for view_file: 'path' is a required property"
    result = await execute_tool("list_dir", {"path": ".", "colour": "red"})
    assert result.is_error and "'colour' was unexpected" in result.output
    assert not workspace.exists()  # nothing ran


async def test_native_tool_runs_and_refusals_are_error_results(workspace):
    workspace.mkdir()
    (workspace / "a.txt").write_text("alpha\nbeta\n")
    result = await execute_tool("view_file", '{"path": "a.txt", "start_line": 2}')
    assert result == ToolResult(output="     2\tbeta")
    result = await execute_tool("view_file", {"path": "../x"})
    assert result.is_error and result.output.startswith("view_file: ../x: outside the workspace")


async def test_unsafe_workspace_is_an_error_result(settings):
    settings.WORKSPACE = settings.DATA_DIR
    result = await execute_tool("list_dir", {})
    assert result.is_error and "BOOCODE_WORKSPACE" in result.output


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ("{not json", "Invalid arguments for list_dir: not valid JSON"),
        ("[1, 2]", "Invalid arguments for list_dir: expected a JSON object, got list"),
        (7, "Invalid arguments for list_dir: expected a JSON object, got int"),
    ],
)
async def test_unparsable_arguments(workspace, arguments, expected):
    result = await execute_tool("list_dir", arguments)
    assert result.is_error and result.output.startswith(expected)


async def test_empty_string_arguments_mean_no_arguments(workspace):
    result = await execute_tool("list_dir", "")
    assert not result.is_error and result.output == "(. is empty)"


async def test_unknown_and_not_allowed_tools():
    result = await execute_tool("rm_rf", {})
    assert result.is_error
    assert result.output.startswith('Unknown tool "rm_rf". Available tools: grep, list_dir')
    allowed = agent_tools(agent("grep"))
    result = await execute_tool("view_file", {"path": "x"}, allowed=allowed)
    assert result.is_error and result.output == 'Tool "view_file" is not available to this agent'


async def test_native_tools_run_off_the_event_loop():
    released = threading.Event()

    def blocking(*, deadline: Deadline) -> str:
        return "released" if released.wait(5) else "the event loop was blocked"

    tool = NativeTool("block", "", {"type": "object"}, blocking)
    task = asyncio.create_task(runners.run_native(tool, {}))
    await asyncio.sleep(0)  # let the task start; on the loop it would block us right here
    released.set()
    assert (await task).output == "released"


def test_broken_schema_does_not_block_the_tool():
    async def run(arguments: dict) -> ToolResult:
        return ToolResult(output="ran")

    tool = Tool("odd", "", {"type": "no-such-type"}, True, "x", run)
    assert validate_arguments(tool, {"anything": 1}) is None
    remote = {"type": "object", "properties": {"a": {"$ref": "https://schemas.invalid/a.json"}}}
    assert validate_arguments(Tool("remote", "", remote, True, "x", run), {"a": 1}) is None
    dangling = {"type": "object", "properties": {"a": {"$ref": "#/$defs/missing"}}, "required": ["a"]}
    assert validate_arguments(Tool("dangling", "", dangling, True, "x", run), {"a": 1}) is None


def test_nested_errors_are_located_and_all_reported():
    async def run(arguments: dict) -> ToolResult:
        return ToolResult(output="ran")

    schema = {
        "type": "object",
        "properties": {
            "items": {"type": "array", "items": {"type": "object", "properties": {"n": {"type": "integer"}}}},
            "mode": {"enum": ["a", "b"]},
        },
        "required": ["mode"],
    }
    message = validate_arguments(Tool("nested", "", schema, True, "x", run), {"items": [{"n": "one"}]})
    assert message is not None and message.startswith("Invalid arguments for nested: ")
    assert "'mode' is a required property" in message
    assert "at 'items[0].n': 'one' is not of type 'integer'" in message


# --- against a running hub with the toolbox server ----------------------------------------


async def test_mcp_tools_join_the_registry_with_their_schema(live_hub, toolbox_config):
    await live_hub.start([toolbox_config("tb")])
    tools = available_tools()
    assert names(tools) == sorted(names(tools))
    assert {"tb_echo", "tb_add", "view_file"} <= set(names(tools))
    assert "tb_delete_everything" not in names(tools)  # readOnlyHint false: rejected by the hub
    [echo] = [tool for tool in tools if tool.name == "tb_echo"]
    [hub_echo] = [tool for tool in live_hub.tools() if tool.prefixed_name == "tb_echo"]
    assert echo.parameters == hub_echo.input_schema and echo.source == "tb" and echo.read_only

    result = await execute_tool("tb_echo", '{"text": "hi"}')
    assert result == ToolResult(output="hi")
    result = await execute_tool("tb_add", {"a": 1, "b": "two"})
    assert result.is_error
    assert result.output == "Invalid arguments for tb_add: at 'b': 'two' is not of type 'integer'"


async def test_invalid_arguments_are_caught_before_reaching_the_server(live_hub, toolbox_config):
    await live_hub.start([toolbox_config("tb")])
    allowed = agent_tools(agent(all_tools=True))
    await execute_tool("tb_crash", {}, allowed=allowed)  # the server process is gone now
    result = await execute_tool("tb_echo", {"text": 5}, allowed=allowed)
    assert result.output == "Invalid arguments for tb_echo: at 'text': 5 is not of type 'string'"
    result = await execute_tool("tb_echo", {"text": "hi"}, allowed=allowed)
    assert result.is_error and "unreachable" in result.output  # a valid call does go to the server
    assert names(available_tools()) == NATIVE  # and its tools left the registry


async def test_agent_tools_follow_list_changed_without_restart(live_hub, toolbox_config):
    await live_hub.start([toolbox_config("tb")])
    everything = agent(all_tools=True)
    toolbox_only = agent("tb_*", "!tb_crash")
    no_new = agent("!tb_new*")
    reader = agent("view_file", "grep", "list_dir")
    assert "tb_newtool" not in names(agent_tools(everything))

    result = await execute_tool("tb_add_tool", {"name": "newtool"})
    assert result.output == "added newtool"
    await wait_until(live_hub, lambda: "tb_newtool" in names(available_tools()))

    assert "tb_newtool" in names(agent_tools(everything))
    assert "tb_newtool" in names(agent_tools(toolbox_only))
    assert "tb_crash" not in names(agent_tools(toolbox_only))
    assert "view_file" not in names(agent_tools(toolbox_only))
    assert "tb_newtool" not in names(agent_tools(no_new)) and "tb_echo" in names(agent_tools(no_new))
    assert names(agent_tools(reader)) == NATIVE
    assert (await execute_tool("tb_newtool", {}, allowed=agent_tools(everything))).output == "I am newtool"

    await execute_tool("tb_remove_tool", {"name": "newtool"})
    await wait_until(live_hub, lambda: "tb_newtool" not in names(available_tools()))
    assert "tb_newtool" not in names(agent_tools(everything))


async def test_a_server_toggled_on_adds_its_tools_to_agents_without_restart(live_hub, toolbox_config):
    await live_hub.start([toolbox_config("tb", enabled=False)])
    everything = agent(all_tools=True)
    assert names(agent_tools(everything)) == NATIVE

    await live_hub.apply([toolbox_config("tb")])
    assert "tb_echo" in names(agent_tools(everything))
    assert names(agent_tools(agent("!tb_*"))) == NATIVE
    assert names(agent_tools(agent())) == []

    await live_hub.apply([toolbox_config("tb", enabled=False)])
    assert names(agent_tools(everything)) == NATIVE


async def test_an_mcp_tool_cannot_take_a_native_name(live_hub, toolbox_config, workspace: Path):
    await live_hub.start([toolbox_config("view")])
    await execute_tool("view_add_tool", {"name": "file"})  # the hub would name it "view_file"
    await wait_until(live_hub, lambda: "view_file" in [t.prefixed_name for t in live_hub.tools()])
    tools = available_tools()
    assert names(tools).count("view_file") == 1
    [view_file] = [tool for tool in tools if tool.name == "view_file"]
    assert view_file.source == "native"

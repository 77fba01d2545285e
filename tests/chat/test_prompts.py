"""Prompts in the chat: ``GET /api/prompts``, the ``prompt`` frame's checks, and the turn that
inserts a prompt's messages and answers them (the scripted model's request is read back).

Real things: the toolbox with its prompts group over stdio, the websocket through the ASGI
stack, the scripted OpenAI-compatible server, the database.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import anyio
import pytest
from asgiref.sync import sync_to_async
from django.test import AsyncClient

from boocode.chat.models import Message
from boocode.chat.turn import prompt_insertion as prompting
from boocode.chat.turn.console import COMMANDS
from boocode.chat.turn.registry import registry
from mcpclient.engine import prompts
from mcpclient.engine.hub import Hub
from mcpclient.runtime import set_hub
from tests.support.accounts import login
from tests.support.llm import ScriptedLLM, Text
from tests.support.tabs import logged_in_tab

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.processes]

BRIEFING = [
    ("user", "I need a briefing on the launch."),
    ("assistant", "Here are the launch notes; ask me anything about them."),
    (
        "user",
        "[resource: toolbox://notes/brief.txt (text/plain)]\n"
        "The launch moved to Thursday. Ada owns the checklist.",
    ),
    ("user", "[image from the prompt: image/png, 70 bytes, not included]"),
]


@pytest.fixture
async def prompt_hub(hub: Hub, toolbox_config: Callable[..., Any]) -> AsyncIterator[Hub]:
    """The process hub running the toolbox with its prompts group (server ``box``), listed."""
    await hub.start([toolbox_config("box", "--feature", "prompts")])
    connection = hub.connection("box")
    assert connection is not None
    found = prompts.catalog(connection)
    assert found is not None
    with anyio.fail_after(10):
        while not found.listed:
            await found.updated.wait()
    set_hub(hub)
    yield hub
    set_hub(None)


@sync_to_async
def rows(conversation_id: int) -> list[tuple[str, str]]:
    return [(m.role, m.content) for m in Message.objects.filter(conversation_id=conversation_id)]


async def test_the_menu_lists_console_commands_and_prompts(prompt_hub: Hub) -> None:
    client = AsyncClient()
    assert (await client.get("/api/prompts/")).status_code == 302  # login first
    await login("alice")
    await sync_to_async(client.force_login)(await _user("alice"))
    data = (await client.get("/api/prompts/")).json()

    assert [c["name"] for c in data["commands"]] == list(COMMANDS)
    assert all(c["description"] for c in data["commands"])
    assert [(p["server"], p["name"]) for p in data["prompts"]] == [
        ("box", "greeting"),
        ("box", "code_review"),
        ("box", "briefing"),
        ("box", "broken"),
    ]
    review = data["prompts"][1]
    assert review["title"] == "Code review" and review["description"] == "Review a piece of code."
    assert review["completions"] is True
    assert review["arguments"] == [
        {"name": "language", "description": "The programming language", "required": True},
        {"name": "code", "description": "The code to review", "required": True},
        {"name": "focus", "description": "What to look at first (optional)", "required": False},
    ]


async def test_a_prompt_is_got_for_the_composer_or_shown_whole(prompt_hub: Hub) -> None:
    client = AsyncClient()
    url = "/api/prompts/get/"
    review = {
        "server": "box",
        "name": "code_review",
        "arguments": json.dumps({"language": "go", "code": "x"}),
    }
    assert (await client.post(url, review)).status_code == 302  # login first
    await login("alice")
    await sync_to_async(client.force_login)(await _user("alice"))
    assert (await client.get(url)).status_code == 405

    # User messages only, fitting one message: text for the box (nothing stored, no turn).
    got = (await client.post(url, review)).json()
    assert got["insert"] == "Please review this go code:\nx" and got["count"] == 1
    assert await sync_to_async(Message.objects.count)() == 0

    # The assistant's turns in it: no text for the box, the messages' start with their roles.
    whole = (await client.post(url, {"server": "box", "name": "briefing"})).json()
    assert whole["insert"] is None and whole["count"] == 4
    assert [(m["role"], m["text"]) for m in whole["messages"]] == BRIEFING
    assert [m["length"] for m in whole["messages"]] == [len(text) for _, text in BRIEFING]

    # Checked like a prompt frame; a server's failure is a 502 with its reason.
    for fields, status, code in [
        ({"server": "box", "name": "nope"}, 400, "unknown_prompt"),
        ({"server": "box", "name": "code_review", "arguments": '{"language": "go"}'}, 400, "bad_arguments"),
        ({"server": "box", "name": "code_review", "arguments": "[1"}, 400, "bad_frame"),
        ({"server": "box", "name": "code_review", "arguments": '{"code": 5}'}, 400, "bad_frame"),
        ({"server": "box", "name": "broken"}, 502, "prompt_failed"),
    ]:
        answer = await client.post(url, fields)
        assert (answer.status_code, answer.json()["code"]) == (status, code), fields
        assert answer.json()["error"]


@sync_to_async
def _user(username: str) -> Any:
    from django.contrib.auth import get_user_model

    return get_user_model().objects.get(username=username)


async def test_prompt_frames_are_checked(llm: ScriptedLLM, prompt_hub: Hub) -> None:
    tab = await logged_in_tab()
    conversation = tab.conversation_id
    review = {"type": "prompt", "server": "box", "name": "code_review"}
    cases = [
        ({"type": "prompt"}, "bad_frame", 'prompt needs a non-empty string "server".'),
        (
            {"type": "prompt", "server": "box", "name": 5},
            "bad_frame",
            'prompt needs a non-empty string "name".',
        ),
        (
            {**review, "arguments": ["python"]},
            "bad_frame",
            'prompt "arguments" must be an object of strings.',
        ),
        (
            {**review, "arguments": {"language": 3}},
            "bad_frame",
            'prompt argument "language" must be a string.',
        ),
        (
            {**review, "arguments": {"language": "x" * 32_001, "code": "x"}},
            "too_long",
            "Prompt arguments are limited to 32000 characters.",
        ),
        ({**review, "arguments": {"language": "py\x00", "code": "x"}}, "bad_text", None),
        (
            {"type": "prompt", "server": "box", "name": "nope"},
            "unknown_prompt",
            'No prompt "nope" of MCP server "box" is available to you now.',
        ),
        (
            {"type": "prompt", "server": "other", "name": "greeting"},
            "unknown_prompt",
            'No prompt "greeting" of MCP server "other" is available to you now.',
        ),
        (
            {**review, "arguments": {"language": "go"}},
            "bad_arguments",
            "The prompt \"code_review\" needs 'code'.",
        ),
        (
            {**review, "arguments": {"language": "go", "code": "x", "tone": "kind"}},
            "bad_arguments",
            "The prompt \"code_review\" takes no argument 'tone'.",
        ),
    ]
    for frame, code, message in cases:
        await tab.send(frame)
        error = await tab.next()
        assert (error["type"], error["code"]) == ("error", code), frame
        if message is not None:
            assert error["message"] == message
    assert await rows(conversation) == []
    assert llm.requests == []
    await tab.close()


async def test_a_prompt_is_inserted_and_the_model_answers_it(llm: ScriptedLLM, prompt_hub: Hub) -> None:
    tab = await logged_in_tab()
    conversation = tab.conversation_id
    llm.script(Text("Thursday it is."))

    await tab.send({"type": "prompt", "server": "box", "name": "briefing", "arguments": {}})
    end = await tab.until_turn_end()

    assert end["status"] == "complete"
    shown = [(f["message"]["role"], f["message"]["content"]) for f in tab.frames if f["type"] == "message"]
    assert shown == [("console", "from prompt box/briefing"), *BRIEFING]
    assert await rows(conversation) == [
        ("console", "from prompt box/briefing"),
        *BRIEFING,
        ("assistant", "Thursday it is."),
    ]
    # The model read the prompt's messages in order, right after the system prompt.
    sent = llm.requests[0]["messages"]
    assert [(m["role"], m["content"]) for m in sent if m["role"] != "system"] == BRIEFING
    await tab.close()


async def test_arguments_reach_the_server_and_a_failure_inserts_nothing(
    llm: ScriptedLLM, prompt_hub: Hub
) -> None:
    tab = await logged_in_tab()
    conversation = tab.conversation_id
    llm.script(Text("Looks fine."))
    arguments = {"language": "python", "code": "print(1)", "focus": ""}

    await tab.send({"type": "prompt", "server": "box", "name": "code_review", "arguments": arguments})
    assert (await tab.until_turn_end())["status"] == "complete"
    mark = 'from prompt box/code_review {"language": "python", "code": "print(1)"}'  # blank optional left out
    question = "Please review this python code:\nprint(1)"
    assert await rows(conversation) == [("console", mark), ("user", question), ("assistant", "Looks fine.")]
    assert llm.requests[0]["messages"][-1] == {"role": "user", "content": question}

    async with asyncio.timeout(10):
        await registry.wait(conversation)  # turn_end goes out just before the turn's task ends
    tab.frames.clear()
    await tab.send({"type": "prompt", "server": "box", "name": "broken"})
    end = await tab.until_turn_end()
    assert end["status"] == "failed"
    assert end["error"].startswith('MCP server "box": prompt "broken" failed: ')
    notice = [f["message"] for f in tab.frames if f["type"] == "message"]
    assert [(m["role"], m["content"]) for m in notice] == [
        ("notice", f"The prompt was not inserted: {end['error']}")
    ]
    assert (await rows(conversation))[3:] == [("notice", f"The prompt was not inserted: {end['error']}")]
    assert len(llm.requests) == 1  # the model was not asked again
    await tab.close()


def test_the_mark_names_the_prompt_and_its_arguments() -> None:
    request = prompting.PromptRequest("box", "code_review", (("language", "日本"),))
    assert prompting.mark_text(request) == 'from prompt box/code_review {"language": "日本"}'
    assert json.loads(prompting.mark_text(request).split(" ", 3)[3]) == {"language": "日本"}

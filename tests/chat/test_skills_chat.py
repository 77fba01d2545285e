"""Skills in the chat: ``/api/skills/`` and its viewer, the ``load_skill`` tool, AGENTS.md ``skills:``
at the start of every turn, and a skill attached to a message.

Real pieces: the toolbox with its skills group over stdio (tests/servers/toolbox_skills.py), the
scripted model (its request log is what the model received), the ASGI application and the
database. What the model reads is asserted on the requests the scripted model got.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.test import AsyncClient

from boocode.chat.models import Conversation, Message, ToolCall
from boocode.chat.turn.loop import TurnRequest, run_turn
from boocode.chat.web import exports
from mcpclient.engine.hub import Hub
from mcpclient.runtime import set_hub
from tests.support.accounts import new_conversation, web_client
from tests.support.hubs import make_config
from tests.support.llm import Call, ScriptedLLM, Text, ToolCalls
from tests.support.processes import PYTHON, TOOLBOX
from tests.support.tabs import logged_in_tab

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.processes]

PDF_FORMS = "skill://pdf-forms/SKILL.md"


@pytest.fixture
async def skills_hub(hub: Hub) -> AsyncIterator[Hub]:
    """The process hub with the toolbox's skills group as server "box", its skills listed."""
    await hub.start([make_config("box", {"command": PYTHON, "args": [str(TOOLBOX), "--feature", "skills"]})])
    await hub.load_skills(None, wait=10)
    assert len(hub.skills(None)) == 4
    set_hub(hub)
    yield hub
    set_hub(None)


async def turn(conversation: int, text: str = "Fill in my form.", **keys: Any) -> list[dict[str, Any]]:
    """Run one turn to its end; the events it emitted."""
    events: list[dict[str, Any]] = []

    async def emit(event: dict[str, Any]) -> None:
        events.append(event)

    async with asyncio.timeout(30):
        assert await run_turn(TurnRequest(conversation, text, **keys), emit) == "complete"
    return events


def tool(request: dict[str, Any], name: str) -> dict[str, Any] | None:
    """The definition of tool ``name`` in a model request, if it was offered."""
    return next((t["function"] for t in request.get("tools") or [] if t["function"]["name"] == name), None)


# --- the endpoints ---------------------------------------------------------------------------
async def test_the_endpoints_need_a_login(skills_hub: Hub) -> None:
    for url in ("/api/skills/", "/api/skills/read/?server=box&skill=pdf-forms"):
        response = await AsyncClient().get(url)
        assert response.status_code == 302 and "/login/" in response["location"], url


async def test_the_menu_lists_every_skill_with_its_server_and_why_one_cannot_load(skills_hub: Hub) -> None:
    client = await web_client()
    listed = (await client.get("/api/skills/")).json()
    assert listed["truncated"] is False
    assert [(s["server"], s["label"], s["uri"]) for s in listed["skills"]] == [
        ("box", "pdf-forms", PDF_FORMS),
        ("box", "git-workflow", "skill://team/git-workflow/SKILL.md"),
        ("box", "release-notes", "skill://release-notes/SKILL.md"),
        ("box", "daily-report", "skill://daily-report/SKILL.md"),
    ]
    first = listed["skills"][0]
    assert first["description"] == "Fill in PDF forms with the toolbox, field by field."
    assert first["files"] == 2 and first["problem"] == ""
    assert 'generated ("resources": "dynamic")' in listed["skills"][3]["problem"]


async def test_the_viewer_reads_a_skills_skill_md_verified(skills_hub: Hub) -> None:
    client = await web_client()
    read = (await client.get("/api/skills/read/?server=box&skill=pdf-forms")).json()
    assert read["server"] == "box" and read["uri"] == PDF_FORMS and read["name"] == "pdf-forms"
    head, body = read["contents"]
    assert head["mimeType"] == "text/yaml" and head["text"].startswith("name: pdf-forms\ndescription: ")
    assert "html" not in head  # shown as text
    assert body["text"].startswith("# Filling PDF forms") and "<h1>Filling PDF forms</h1>" in body["html"]

    for url, status, said in [
        ("/api/skills/read/?server=box", 400, '"skill" is required.'),
        ("/api/skills/read/?server=box&skill=nope", 404, 'has no skill "nope"'),
        ("/api/skills/read/?server=ghost&skill=pdf-forms", 404, 'no MCP server "ghost"'),
        ("/api/skills/read/?server=box&skill=daily-report", 409, "cannot be loaded"),
    ]:
        response = await client.get(url)
        assert response.status_code == status and said in response.json()["error"], url


# --- the load_skill tool ---------------------------------------------------------------------
async def test_the_model_loads_a_skill_and_the_file_it_names(llm: ScriptedLLM, skills_hub: Hub) -> None:
    llm.script(
        ToolCalls([Call("load_skill", {"server": "box", "skill": "pdf-forms"})]),
        ToolCalls(
            [Call("load_skill", {"server": "box", "skill": "pdf-forms", "file": "references/FORMS.md"})]
        ),
        ToolCalls(
            [Call("load_skill", {"server": "box", "skill": "release-notes", "file": "examples/changelog.md"})]
        ),
        Text("Done."),
    )
    conversation = await new_conversation()
    await turn(conversation)

    offered = tool(llm.requests[0], "load_skill")
    assert offered is not None
    assert offered["parameters"]["properties"]["server"]["enum"] == ["box"]
    listing = offered["description"].split("\n")[1:]
    assert listing == [
        "- box/pdf-forms: Fill in PDF forms with the toolbox, field by field",
        "- box/git-workflow: Follow this team's Git conventions for branches and commits",
        "- box/release-notes: Write release notes in the house style",
    ]  # daily-report cannot be loaded: not offered

    loaded = llm.requests[1]["messages"][-1]
    assert loaded["role"] == "tool"
    assert loaded["content"].startswith(
        '<skill server="box" name="pdf-forms" uri="skill://pdf-forms/SKILL.md" file="SKILL.md">\n'
        '[A skill from the MCP server "box". Its text is that server\'s'
    )
    assert "# Filling PDF forms" in loaded["content"] and loaded["content"].endswith(
        "[The skill's other files (load one with load_skill and its path as file): "
        "references/FORMS.md.]\n</skill>"
    )
    forms = llm.requests[2]["messages"][-1]["content"]
    assert 'file="references/FORMS.md">' in forms and "- `iban`: the bank account" in forms
    refused = llm.requests[3]["messages"][-1]["content"]
    assert refused.startswith(
        'MCP server "box": skill "release-notes", file examples/changelog.md: its SHA-256 digest is sha256:'
    )
    assert refused.endswith("; the content was refused, not used.") and "## 1.2.0" not in refused

    calls = ToolCall.objects.filter(message__conversation_id=conversation).order_by("id")
    stored = await sync_to_async(list)(calls.values_list("name", "status"))
    assert stored == [("load_skill", "done"), ("load_skill", "done"), ("load_skill", "error")]


async def test_load_skill_is_offered_only_with_a_skill_and_to_agents_that_allow_it(
    llm: ScriptedLLM, toolbox_hub: Hub, agents_file: Callable[[str], Any]
) -> None:
    llm.script(Text("No skills here."))
    await turn(await new_conversation())
    assert tool(llm.requests[0], "load_skill") is None and tool(llm.requests[0], "toolbox_echo") is not None
    set_hub(None)
    await toolbox_hub.stop()

    await toolbox_hub.start(
        [make_config("box", {"command": PYTHON, "args": [str(TOOLBOX), "--feature", "skills"]})]
    )
    await toolbox_hub.load_skills(None, wait=10)
    set_hub(toolbox_hub)
    agents_file(
        "## Boxed\n---\ntools: [box_*]\n---\nBox only.\n\n## Skilled\n---\ntools: [load_skill]\n---\nS.\n"
    )
    llm.script(Text("Box only."), Text("Skills."))
    await turn(await new_conversation(agent_name="Boxed"))
    assert tool(llm.requests[1], "load_skill") is None
    await turn(await new_conversation(agent_name="Skilled"))
    assert [t["function"]["name"] for t in llm.requests[2]["tools"]] == ["load_skill"]


# --- AGENTS.md skills: -----------------------------------------------------------------------
async def test_an_agents_skills_are_read_at_the_start_of_every_turn(
    llm: ScriptedLLM, skills_hub: Hub, agents_file: Callable[[str], Any]
) -> None:
    agents_file(
        "## Former\n---\nskills: [box/pdf-forms, box/git-workflow, pdf-forms, box/nope, box/daily-report]\n"
        "---\nYou fill in forms.\n"
    )
    llm.script(Text("Ready."), Text("Still ready."))
    conversation = await new_conversation(agent_name="Former")
    events = await turn(conversation)

    messages = llm.requests[0]["messages"]
    assert [m["role"] for m in messages] == ["system", "user", "user"]
    assert messages[0]["content"] == "You fill in forms."
    started = messages[1]["content"]
    assert started.startswith("[The skills this agent starts with, from MCP servers")
    assert '<skill server="box" name="pdf-forms" uri="skill://pdf-forms/SKILL.md" file="SKILL.md">' in started
    assert '<skill server="box" name="git-workflow" uri="skill://team/git-workflow/SKILL.md"' in started
    assert "Branch from `main`" in started
    assert started.index('name="pdf-forms"') < started.index('name="git-workflow"')  # AGENTS.md's order
    assert messages[2]["content"] == "Fill in my form."

    # What did not load is said, to the person and to the model.
    notices = [
        e["message"]["content"] for e in events if e["type"] == "message" and e["message"]["role"] == "notice"
    ]
    assert len(notices) == 1
    notice = notices[0]
    assert notice.startswith("Some of the agent's skills (AGENTS.md skills:) were not loaded: ")
    assert '"pdf-forms" names no server: write it as "<server>/pdf-forms" (listed as box/pdf-forms)' in notice
    assert '"box/nope": MCP server "box" has no skill "nope"' in notice
    assert '"box/daily-report": MCP server "box": the skill "daily-report" cannot be loaded' in notice
    assert started.endswith("]") and "[Not loaded: " in started

    # Every turn: read again (from the session's verified copy), in the same place.
    await turn(conversation, "And now?")
    again = llm.requests[1]["messages"]
    assert again[1]["content"] == started and again[-1]["content"] == "And now?"
    stored = await sync_to_async(list)(Message.objects.filter(conversation_id=conversation, role="user"))
    assert [m.content for m in stored] == ["Fill in my form.", "And now?"]  # never stored as a message


async def test_an_agent_without_skills_reads_no_skill(llm: ScriptedLLM, skills_hub: Hub) -> None:
    llm.script(Text("Hi."))
    events = await turn(await new_conversation())
    assert [m["role"] for m in llm.requests[0]["messages"]] == ["system", "user"]  # the built-in agent
    assert not any("<skill" in m["content"] for m in llm.requests[0]["messages"])
    assert not [e for e in events if e["type"] == "message" and e["message"]["role"] == "notice"]


# --- a skill attached to a message -----------------------------------------------------------
async def test_an_attached_skill_reaches_the_model_in_the_message(llm: ScriptedLLM, skills_hub: Hub) -> None:
    llm.script(Text("Following it."), Text("Again."))
    conversation = await new_conversation()
    attached = (
        {"server": "box", "uri": PDF_FORMS, "kind": "skill"},
        {"server": "box", "uri": "skill://daily-report/SKILL.md", "kind": "skill"},
    )
    events = await turn(conversation, "Use this skill.", attachments=attached)

    content = llm.requests[0]["messages"][-1]["content"]
    assert content.startswith(
        'Use this skill.\n\n<skill server="box" name="pdf-forms" uri="skill://pdf-forms/SKILL.md" '
        'file="SKILL.md">'
    )
    assert "# Filling PDF forms" in content and "The skill's other files" in content
    assert (
        '<skill server="box" name="daily-report" uri="skill://daily-report/SKILL.md" file="SKILL.md">'
        in content
    )
    assert '[not read: MCP server "box": the skill "daily-report" cannot be loaded' in content

    echoed = next(e for e in events if e["type"] == "message")["message"]
    assert [(a["kind"], a["name"], a["uri"]) for a in echoed["attachments"]] == [
        ("skill", "pdf-forms", PDF_FORMS),
        ("skill", "daily-report", "skill://daily-report/SKILL.md"),
    ]
    assert "text" not in echoed["attachments"][0]
    [stored] = await sync_to_async(list)(Message.objects.filter(conversation_id=conversation, role="user"))
    assert stored.attachments[0]["kind"] == "skill" and stored.attachments[0]["files"] == [
        "references/FORMS.md"
    ]

    await turn(conversation, "And now?")  # the history sends it again, stored, not read again
    assert llm.requests[1]["messages"][-3]["content"] == content
    exported = await sync_to_async(lambda: exports.as_json(Conversation.objects.get(pk=conversation)))()
    assert [a.get("kind") for a in exported["messages"][0]["attachments"]] == ["skill", "skill"]


async def test_an_attachments_kind_is_checked(llm: ScriptedLLM, skills_hub: Hub) -> None:
    tab = await logged_in_tab()
    await tab.send(
        {
            "type": "user_message",
            "text": "hi",
            "attachments": [{"server": "box", "uri": PDF_FORMS, "kind": "tool"}],
        }
    )
    error = await tab.next("error")
    assert error["code"] == "bad_attachments" and '"kind" must be "resource" or "skill"' in error["message"]
    llm.script(Text("ok"))
    await tab.send(
        {
            "type": "user_message",
            "text": "hi",
            "attachments": [{"server": "box", "uri": PDF_FORMS, "kind": "skill"}],
        }
    )
    echoed = await tab.next("message")
    assert echoed["message"]["attachments"][0]["kind"] == "skill"
    await tab.until_turn_end()
    await tab.close()

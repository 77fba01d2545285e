"""Resources in the chat: the JSON endpoints, attachments in a turn and the ``user_message`` checks.

Real pieces: the toolbox with its resources group over stdio (tests/servers/toolbox_resources.py),
the scripted model (its request log is what the model received), the ASGI application.
"""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Callable
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.test import AsyncClient

from boocode.chat.models import Message
from boocode.chat.turn.loop import TurnRequest, run_turn
from boocode.chat.wire.attachments import MAX_ATTACHMENTS
from mcpclient.engine.hub import Hub
from tests.support.accounts import conversation_of, new_conversation, web_client
from tests.support.llm import ScriptedLLM, Text
from tests.support.processes import ROOT
from tests.support.tabs import Tab, logged_in_tab

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.processes]

SCRIPT = ROOT / "tests" / "servers" / "toolbox_resources.py"


# --- the endpoints ---------------------------------------------------------------------------
async def test_the_endpoints_need_a_login(box_hub: Hub) -> None:
    anonymous = AsyncClient()
    for url in (
        "/api/resources/",
        "/api/resources/read/?server=box&uri=toolbox://notes/readme.txt",
        "/api/complete/?server=box&ref=resource&name=x&argument=city",
    ):
        response = await anonymous.get(url)
        assert response.status_code == 302 and "/login/" in response["location"], url


async def test_the_picker_lists_and_searches(box_hub: Hub) -> None:
    client = await web_client()
    listed = (await client.get("/api/resources/")).json()
    assert listed["servers"] == [{"name": "box", "completions": True, "error": ""}]
    assert len(listed["resources"]) == 6
    assert [t["uriTemplate"] for t in listed["templates"]] == ["toolbox://cities/{city}"]
    assert listed["templates"][0]["arguments"] == ["city"]

    # Words of q over name, title, URI and description, any case.
    found = (await client.get("/api/resources/?q=READ")).json()
    assert [r["uri"] for r in found["resources"]] == ["toolbox://notes/readme.txt"]
    found = (await client.get("/api/resources/?q=toolbox%20megabytes")).json()
    assert [r["uri"] for r in found["resources"]] == ["toolbox://data/large.txt"]
    found = (await client.get("/api/resources/?q=europe city")).json()
    assert found["resources"] == [] and found["templates"] == []
    found = (await client.get("/api/resources/?q=facts")).json()
    assert [t["name"] for t in found["templates"]] == ["city"]


async def test_the_picker_follows_the_conversations_agent_and_owner(
    box_hub: Hub, agents_file: Callable[[str], Any]
) -> None:
    agents_file("## Boxed\n---\ntools: [box_*]\n---\nBox.\n\n## Native\n---\ntools: [grep]\n---\nFiles.\n")
    client = await web_client()
    boxed = await new_conversation(agent_name="Boxed")
    native = await new_conversation(agent_name="Native")
    theirs = await new_conversation("mallory")

    assert len((await client.get(f"/api/resources/?conversation={boxed}")).json()["resources"]) == 6
    # An agent that can reach none of the server's tools sees none of its resources.
    assert (await client.get(f"/api/resources/?conversation={native}")).json()["servers"] == []
    read = await client.get(
        f"/api/resources/read/?conversation={native}&server=box&uri=toolbox://data/config.json"
    )
    assert read.status_code == 404 and "not reachable" in read.json()["error"]
    # Somebody else's conversation does not exist for alice.
    for url in (
        f"/api/resources/?conversation={theirs}",
        f"/api/resources/read/?conversation={theirs}&server=box&uri=toolbox://data/config.json",
    ):
        response = await client.get(url)
        assert response.status_code == 404 and response.json() == {"error": "No such conversation."}


async def test_reading_for_the_viewer(box_hub: Hub) -> None:
    client = await web_client()
    text = (await client.get("/api/resources/read/?server=box&uri=toolbox://data/config.json")).json()
    assert text["contents"] == [
        {
            "uri": "toolbox://data/config.json",
            "mimeType": "application/json",
            "note": "",
            "text": text["contents"][0]["text"],
        }
    ]
    image = (await client.get("/api/resources/read/?server=box&uri=toolbox://images/dot.png")).json()
    [blob] = image["contents"]
    assert base64.b64decode(blob["blob"]).startswith(b"\x89PNG") and blob["mimeType"] == "image/png"

    missing = await client.get("/api/resources/read/?server=box&uri=toolbox://no/such")
    assert missing.status_code == 404 and "toolbox://no/such" in missing.json()["error"]
    unknown = await client.get("/api/resources/read/?server=ghost&uri=toolbox://data/config.json")
    assert unknown.status_code == 404 and '"ghost"' in unknown.json()["error"]
    bad = await client.get("/api/resources/read/?server=box")
    assert bad.status_code == 400 and bad.json() == {"error": '"uri" is required.'}


async def test_a_server_that_is_down_is_a_clear_error(box_hub: Hub) -> None:
    client = await web_client()
    await box_hub.call_tool("box_crash", {})
    await box_hub.wait_until(lambda: box_hub.snapshots()[0].status.value == "unavailable", 10)

    response = await client.get("/api/resources/read/?server=box&uri=toolbox://data/config.json")
    assert response.status_code == 502 and "unreachable" in response.json()["error"]
    assert (await client.get("/api/resources/")).json()["servers"] == []


async def test_completions_endpoint(box_hub: Hub) -> None:
    client = await web_client()
    base = "/api/complete/?server=box&ref=resource&name=toolbox://cities/{city}&argument=city"
    assert (await client.get(base + "&value=l")).json() == {
        "values": ["Lisbon", "London"],
        "total": 2,
        "hasMore": False,
    }
    bad_ref = await client.get("/api/complete/?server=box&ref=tool&name=x&argument=city")
    assert bad_ref.status_code == 400 and "prompt" in bad_ref.json()["error"]
    bad_context = await client.get(base + "&context=[1]")
    assert bad_context.status_code == 400
    unknown = await client.get(base.replace("argument=city", "argument=country"))
    assert unknown.status_code == 400 and "country" in unknown.json()["error"]


# --- a turn with attachments -----------------------------------------------------------------
async def test_attached_resources_reach_the_model_and_are_stored(llm: ScriptedLLM, box_hub: Hub) -> None:
    llm.script(Text("Read them."), Text("Again."))
    conversation = await new_conversation()
    events: list[dict[str, Any]] = []

    async def emit(event: dict[str, Any]) -> None:
        events.append(event)

    attached = (
        {"server": "box", "uri": "toolbox://cities/Paris"},
        {"server": "box", "uri": "toolbox://images/dot.png"},
        {"server": "box", "uri": "toolbox://no/such"},
    )
    request = TurnRequest(conversation, "What is in these?", attachments=attached)
    async with asyncio.timeout(20):
        assert await run_turn(request, emit) == "complete"

    sent = llm.requests[0]["messages"][-1]
    assert sent["role"] == "user"
    content = sent["content"]
    assert content.startswith("What is in these?\n\n")
    assert (
        '<resource uri="toolbox://cities/Paris" server="box" mimeType="text/plain">\nParis is a city'
        in content
    )
    assert "image/png" in content and "not shown to the model" in content
    assert '<resource uri="toolbox://no/such" server="box">\n[not read: ' in content

    echoed = next(e for e in events if e["type"] == "message")["message"]
    assert [a["uri"] for a in echoed["attachments"]] == [a["uri"] for a in attached]
    assert "text" not in echoed["attachments"][0]  # pages get no content, only what to show
    [user_message] = await sync_to_async(list)(
        Message.objects.filter(conversation_id=conversation, role="user")
    )
    assert user_message.attachments[0]["text"] == "Paris is a city in Europe."
    assert user_message.attachments[0]["name"] == "Paris"

    # The history sends them again on the next turn (stored, not read again).
    async with asyncio.timeout(20):
        assert await run_turn(TurnRequest(conversation, "And now?"), emit) == "complete"
    history = llm.requests[1]["messages"]
    assert history[-3]["content"] == content


async def test_user_message_attachments_are_checked(llm: ScriptedLLM, box_hub: Hub) -> None:
    tab = await logged_in_tab()
    cookie = tab.cookie
    cases = [
        ("nope", '"attachments" must be a list'),
        ([{"server": "box"}], 'Attachment 1: "uri" must be'),
        ([{"server": "box", "uri": "x" * 3000}], "at most 2048 characters"),
        ([{"server": "box", "uri": "a\nb"}], "control characters"),
        (
            [{"server": "box", "uri": f"u{i}"} for i in range(MAX_ATTACHMENTS + 1)],
            f"At most {MAX_ATTACHMENTS}",
        ),
    ]
    for value, expected in cases:
        await tab.send({"type": "user_message", "text": "hi", "attachments": value})
        error = await tab.next("error")
        assert error["code"] == "bad_attachments" and expected in error["message"], (value, error)
    llm.script(Text("ok"))
    await tab.send(
        {
            "type": "user_message",
            "text": "hi",
            "attachments": [{"server": "box", "uri": "toolbox://notes/readme.txt"}],
        }
    )
    echoed = await tab.next("message")
    assert echoed["message"]["attachments"][0]["name"] == "Read me"
    await tab.until_turn_end()
    history = await Tab(await conversation_of("alice"), cookie).open()
    assert history["messages"] == []
    await tab.close()

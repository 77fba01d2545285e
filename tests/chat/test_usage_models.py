"""Token usage, the model list, each conversation's model, titles from the model, the model's status.

All against the scripted OpenAI-compatible server over HTTP and the real websocket stack.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.test import AsyncClient, Client

from boocode.chat.llm import client as llm_client
from boocode.chat.llm import status
from boocode.chat.models import Conversation, Message
from boocode.chat.turn import titles as turns
from boocode.chat.turn.titles import TITLE_PROMPT
from tests.support.accounts import client_of, new_conversation
from tests.support.llm import MODELS, Call, Error, ScriptedLLM, Text, ToolCalls
from tests.support.processes import PYTHON, ROOT
from tests.support.tabs import Tab, finished, logged_in_tab

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("no_periodic_checks"),
    pytest.mark.processes,
    pytest.mark.postgres,  # the conversation frame's statement is plain SQL
]


# --- usage -----------------------------------------------------------------------------------
async def test_usage_is_asked_for_and_stored_per_answer(models_llm: ScriptedLLM, toolbox_hub: Any) -> None:
    tab = await logged_in_tab()
    conversation, cookie = tab.conversation_id, tab.cookie
    models_llm.script(
        ToolCalls([Call("toolbox_echo", {"text": "hi"})], usage=(100, 7)),
        Text("It said hi.", usage=(120, 5)),
    )
    await tab.send({"type": "user_message", "text": "echo hi"})
    info = await finished(tab)

    assert all(request["stream_options"] == {"include_usage": True} for request in models_llm.requests)
    answers = [frame["message"] for frame in tab.frames if frame["type"] == "message_complete"]
    assert [answer["usage"] for answer in answers] == [
        {"prompt_tokens": 100, "completion_tokens": 7},
        {"prompt_tokens": 120, "completion_tokens": 5},
    ]
    assert {answer["model"] for answer in answers} == {"test-model"}
    assert info["usage"] == {
        "prompt_tokens": 220,
        "completion_tokens": 12,
        "answers": 2,
        "answers_without_usage": 0,
    }

    # A server that sends no usage: the answer says so (null) and the conversation counts it.
    models_llm.script(Text("No numbers."))
    await tab.send({"type": "user_message", "text": "again"})
    info = await finished(tab)
    last = [frame["message"] for frame in tab.frames if frame["type"] == "message_complete"][-1]
    assert last["usage"] is None
    assert info["usage"]["answers_without_usage"] == 1 and info["usage"]["prompt_tokens"] == 220
    stored = await sync_to_async(list)(
        Message.objects.filter(conversation_id=conversation, role="assistant").values_list(
            "prompt_tokens", "completion_tokens", "model"
        )
    )
    assert stored == [(100, 7, "test-model"), (120, 5, "test-model"), (None, None, "test-model")]

    # History after a reconnect carries the same numbers.
    again = Tab(conversation, cookie)
    history = await again.open()
    assert history["conversation_info"] == {**info, "title": "echo hi"}
    assert history["messages"][-1]["usage"] is None
    assert history["messages"][2]["usage"]["prompt_tokens"] == 120
    await again.close()
    await tab.close()


async def test_usage_can_be_left_out_of_the_request(models_llm: ScriptedLLM, settings: Any) -> None:
    settings.LLM_STREAM_USAGE = False
    tab = await logged_in_tab()
    models_llm.script(Text("ok"))
    await tab.send({"type": "user_message", "text": "hi"})
    await finished(tab)
    assert "stream_options" not in models_llm.requests[0]
    await tab.close()


# --- the model list and the conversation's model --------------------------------------------
def test_models_api_lists_the_server_models_and_caches_them(models_llm: ScriptedLLM) -> None:
    client, _ = client_of("alice")
    answer = {"models": list(MODELS), "default": "test-model", "error": "", "window": None}
    assert client.get("/api/models/").json() == answer
    asked = models_llm.model_list_requests  # the list, and the window looked for in it
    assert client.get("/api/models/").json()["models"] == list(MODELS)
    assert models_llm.model_list_requests == asked  # cached, the unknown window too
    assert Client().get("/api/models/").status_code == 302  # login required


def test_models_api_says_the_default_models_window(models_llm: ScriptedLLM) -> None:
    models_llm.model_fields = {"max_model_len": 32768}  # as vLLM lists its models
    client, _ = client_of("alice")
    assert client.get("/api/models/").json()["window"] == 32768


def test_models_api_names_the_problem(models_llm: ScriptedLLM, settings: Any) -> None:
    client, _ = client_of("alice")
    models_llm.models_status = 500
    answer = client.get("/api/models/").json()
    assert answer["models"] == [] and "HTTP 500" in answer["error"] and "no models today" in answer["error"]
    llm_client.forget_models()
    models_llm.models_status = 404
    assert "offers no model list" in client.get("/api/models/").json()["error"]
    settings.LLM_BASE_URL = ""
    assert "BOOCODE_LLM_BASE_URL" in client.get("/api/models/").json()["error"]


def test_models_api_default_follows_the_conversation_agent(models_llm: ScriptedLLM, agents_file: Any) -> None:
    agents_file("## Writer\n---\nmodel: big-model\n---\nWrite.\n\n## Plain\nAnswer.\n")
    client, alice = client_of("alice")
    writer = Conversation.objects.create(owner=alice, agent_name="Writer")
    plain = Conversation.objects.create(owner=alice, agent_name="Plain")
    assert client.get(f"/api/models/?conversation={writer.pk}").json()["default"] == "big-model"
    assert client.get(f"/api/models/?conversation={plain.pk}").json()["default"] == "test-model"
    assert client.get("/api/models/").json()["default"] == "big-model"  # the first agent is the default
    mallory, _ = client_of("mallory")
    assert mallory.get(f"/api/models/?conversation={writer.pk}").status_code == 404
    assert client.get("/api/models/?conversation=nope").status_code == 404


async def test_the_conversation_model_is_used_for_its_turns(models_llm: ScriptedLLM) -> None:
    conversation = await new_conversation("alice")
    client, _ = await sync_to_async(client_of)("alice")
    post = sync_to_async(client.post)
    response = await post(f"/c/{conversation}/model/", {"model": "big-model"}, HTTP_ACCEPT="application/json")
    assert response.json() == {"id": conversation, "model": "big-model"}

    tab = await logged_in_tab("alice", conversation)
    assert tab.history["conversation_info"]["model"] == "big-model"
    models_llm.script(Text("Big answer.", usage=(1, 2)))
    await tab.send({"type": "user_message", "text": "hi"})
    info = await finished(tab)
    assert models_llm.requests[-1]["model"] == "big-model"
    assert info["model"] == "big-model"
    answer = [frame["message"] for frame in tab.frames if frame["type"] == "message_complete"][-1]
    assert answer["model"] == "big-model"

    # Back to the default: the next turn asks for it.
    response = await post(f"/c/{conversation}/model/", {"model": ""}, HTTP_ACCEPT="application/json")
    assert response.json()["model"] == ""
    models_llm.script(Text("Default answer."))
    await tab.send({"type": "user_message", "text": "again"})
    await finished(tab)
    assert models_llm.requests[-1]["model"] == "test-model"
    await tab.close()


def test_set_model_refuses_unknown_models_and_other_users(models_llm: ScriptedLLM) -> None:
    client, alice = client_of("alice")
    conversation = Conversation.objects.create(owner=alice)
    url = f"/c/{conversation.pk}/model/"
    response = client.post(url, {"model": "gpt-9"}, HTTP_ACCEPT="application/json")
    assert response.status_code == 400 and 'no model "gpt-9"' in response.json()["error"]
    assert "big-model" in response.json()["error"]
    response = client.post(url, {"model": "a\x00b"}, HTTP_ACCEPT="application/json")
    assert response.status_code == 400 and "NUL" in response.json()["error"]
    mallory, _ = client_of("mallory")
    assert mallory.post(url, {"model": "big-model"}, HTTP_ACCEPT="application/json").status_code == 404
    assert client.get(url).status_code == 405
    conversation.refresh_from_db()
    assert conversation.model == ""

    # When the list cannot be read, the name is taken (the first turn will tell).
    models_llm.models_status = 500
    llm_client.forget_models()
    response = client.post(url, {"model": "  local  model "}, HTTP_ACCEPT="application/json")
    assert response.json()["model"] == "local model"

    # Without JSON: back to the page.
    assert client.post(url, {"model": ""})["Location"] == f"/c/{conversation.pk}/"


def test_set_model_needs_the_csrf_token(models_llm: ScriptedLLM) -> None:
    _, alice = client_of("alice")
    conversation = Conversation.objects.create(owner=alice)
    client = Client(enforce_csrf_checks=True)
    client.force_login(alice)
    response = client.post(f"/c/{conversation.pk}/model/", {"model": "big-model"})
    assert response.status_code == 403
    conversation.refresh_from_db()
    assert conversation.model == ""


# --- titles ----------------------------------------------------------------------------------
async def test_title_from_the_model_after_the_first_answer(models_llm: ScriptedLLM, settings: Any) -> None:
    settings.TITLE_FROM_MODEL = True
    tab = await logged_in_tab()
    conversation = tab.conversation_id
    models_llm.script(Text("Rome has the Colosseum."), Text('"Visiting **Rome**."'))
    await tab.send({"type": "user_message", "text": "What should I see in *Rome*?"})
    info = await finished(tab)
    assert info["title"] == "What should I see in Rome?"  # the first message, as plain text
    titled = await tab.next("conversation")
    assert titled["conversation"]["title"] == "Visiting Rome."
    stored = await Conversation.objects.aget(pk=conversation)
    assert stored.title == "Visiting Rome."
    request = models_llm.requests[-1]
    assert "tools" not in request and request["messages"][0] == {"role": "system", "content": TITLE_PROMPT}
    assert [m["content"] for m in request["messages"][1:]] == [
        "What should I see in *Rome*?",
        "Rome has the Colosseum.",
    ]

    # Only the first answer: the next turn asks for no title.
    models_llm.script(Text("And the Pantheon."))
    await tab.send({"type": "user_message", "text": "More?"})
    await finished(tab)
    await asyncio.sleep(0)
    assert len(models_llm.requests) == 3
    await tab.close()


async def test_a_failed_title_request_keeps_the_first_message_title(
    models_llm: ScriptedLLM, settings: Any, caplog: pytest.LogCaptureFixture
) -> None:
    settings.TITLE_FROM_MODEL = True
    tab = await logged_in_tab()
    conversation = tab.conversation_id
    models_llm.script(Text("Sure."), Error(500, "title machine broke"))
    await tab.send({"type": "user_message", "text": "Plan my week"})
    await finished(tab)
    await models_llm.until(lambda server: len(server.requests) == 2)
    async with asyncio.timeout(5):
        while turns._titling:  # the title request's task, running after the turn
            await asyncio.wait(set(turns._titling))
    assert "no title from the model" in caplog.text
    assert (await Conversation.objects.aget(pk=conversation)).title == "Plan my week"
    assert "Plan my week" not in caplog.text  # the log names the failure, not the conversation
    await tab.close()


# --- the model's status ----------------------------------------------------------------------
async def test_status_rechecks_the_model_server_on_connect(models_llm: ScriptedLLM) -> None:
    conversation = await new_conversation("alice")
    models_llm.models_status = 503
    tab = await logged_in_tab("alice", conversation)
    frame = await tab.next("status")
    while frame["model"]["last_error"] is None:
        frame = await tab.next("status")
    assert "HTTP 503" in frame["model"]["last_error"]
    await tab.close()

    # The server is back: the next page to connect (a reconnect) sees the truth at once.
    models_llm.models_status = 200
    status._last_check = float("-inf")
    again = Tab(conversation, tab.cookie)
    await again.open()
    frame = await again.next("status")
    assert frame["model"]["last_error"] is None
    assert models_llm.model_list_requests == 2
    await again.close()


async def test_status_rechecks_the_model_server_in_the_background(
    models_llm: ScriptedLLM, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings.LLM_CHECK_INTERVAL = 0.2  # the setting refuses less than 5 s; a test has no minutes
    # Count only this test's socket: one another test left open must not keep the checks alive.
    monkeypatch.setattr(status, "_watchers", 0)
    monkeypatch.setattr(status, "_loop_task", None)
    tab = await logged_in_tab()
    await models_llm.until(lambda server: server.model_list_requests >= 1)
    models_llm.models_status = 502
    frame = await tab.next("status")
    while frame["model"]["last_error"] is None:
        frame = await tab.next("status")
    assert "HTTP 502" in frame["model"]["last_error"]
    models_llm.models_status = 200
    while frame["model"]["last_error"] is not None:
        frame = await tab.next("status")
    await tab.close()
    assert status._loop_task is None  # the last socket closed: no more checks


async def test_a_turn_error_about_the_model_name_survives_a_working_check(models_llm: ScriptedLLM) -> None:
    client = AsyncClient()
    _, alice = await sync_to_async(client_of)("alice")
    await client.aforce_login(alice)
    conversation = await Conversation.objects.acreate(owner=alice, model="gone-model")
    tab = await logged_in_tab("alice", conversation.pk)
    await tab.send({"type": "user_message", "text": "hi"})
    end = await tab.until_turn_end()
    assert end["status"] == "failed" and "gone-model" in end["error"]
    await status.check_model(min_gap=0)
    assert llm_client.last_error is not None and "gone-model" in llm_client.last_error
    await tab.close()


@pytest.mark.parametrize(("value", "ok"), [("2", False), ("0", True), ("5", True), ("soon", False)])
def test_check_interval_is_off_or_at_least_five_seconds(tmp_path: Any, value: str, ok: bool) -> None:
    env = {**os.environ, "BOOCODE_DATA_DIR": str(tmp_path), "BOOCODE_LLM_CHECK_INTERVAL": value}
    done = subprocess.run([PYTHON, "manage.py", "check"], cwd=ROOT, env=env, capture_output=True, text=True)
    assert (done.returncode == 0) is ok, done.stderr
    if not ok:
        assert "BOOCODE_LLM_CHECK_INTERVAL" in done.stderr

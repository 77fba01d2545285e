"""Secrets stay on the server: URLs with credentials, server stderr, literal values in mcp.json.

Each place a secret could leak is read the way an outsider would meet it: websocket frames of
a real Daphne, its log on stderr, the rows in its database, the admin's HTML, the output of
``mcp_discover --json`` and the text the model receives.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sqlite3
import subprocess
from io import StringIO
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth.models import User
from django.core.management import call_command
from django.test import Client
from django.urls import reverse

from boocode.chat.models import Message
from boocode.chat.turn.loop import TurnRequest, run_turn
from mcpclient import runtime
from mcpclient.admin.changes import MASK
from mcpclient.models import McpServer
from tests.support.accounts import conversation_of_new, login
from tests.support.admin import form_fields
from tests.support.live import create_accounts, live_daphne, seed_migrated, server_log
from tests.support.llm import MODEL, Call, ScriptedLLM, Text, ToolCalls
from tests.support.processes import PYTHON, ROOT, TEST_COMMANDS, TOOLBOX, free_port
from tests.support.tabs import Tab

LLM_PASSWORD = "llmPassw0rd-hunter2"
MCP_PASSWORD = "mcpPassw0rd-xyzzy"
QUERY_TOKEN = "qu3ryT0ken-abc123"
FTP_PASSWORD = "ftpPassw0rd-plugh"
STDERR_SECRET = "sekrit-from-stderr-42"

# The chat tests' state: a fresh channel layer and settings per test, the model session closed after.
pytestmark = [pytest.mark.usefixtures("fresh_state", "close_model_session"), pytest.mark.processes]


# --- credentials in URLs -----------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
async def test_a_model_url_with_userinfo_and_an_api_key_works(settings: Any) -> None:
    # Before: aiohttp refused to combine the URL's credentials with the Authorization header,
    # and the turn ended with "Internal error".
    with ScriptedLLM(api_key="k-123", models=(MODEL,)) as server:
        settings.LLM_BASE_URL = server.base_url.replace("http://", f"http://bob:{LLM_PASSWORD}@")
        settings.LLM_MODEL = MODEL
        settings.LLM_API_KEY = "k-123"
        server.script(Text("signed in"))
        user = await User.objects.acreate(username="alice")
        conversation = await sync_to_async(lambda: user.conversations.create().pk)()

        async def emit(event: dict[str, Any]) -> None:
            return None

        assert await run_turn(TurnRequest(conversation, "hi"), emit) == "complete"
        answer = await Message.objects.filter(role=Message.Role.ASSISTANT).alast()
        assert answer is not None and answer.content == "signed in"


async def _turn_frames(port: int, account: dict[str, Any]) -> list[str]:
    url = f"ws://127.0.0.1:{port}/ws/conversations/{account['conversation']}/"
    headers = {"Cookie": f"sessionid={account['cookie']}", "Origin": f"http://127.0.0.1:{port}"}
    frames: list[str] = []
    async with aiohttp.ClientSession() as session, session.ws_connect(url, headers=headers) as socket:
        await socket.send_json({"type": "user_message", "text": "hello"})
        async with asyncio.timeout(60):
            while True:
                frames.append(await socket.receive_str())
                if json.loads(frames[-1])["type"] == "turn_end":
                    return frames


def test_credentials_in_urls_never_leave_the_server(tmp_path: Path) -> None:
    closed = free_port()
    servers = {
        "remote": {
            "url": f"http://bob:{MCP_PASSWORD}@127.0.0.1:{closed}/mcp?token={QUERY_TOKEN}",
            "initTimeout": 3000,
        },
        "badscheme": {"url": f"ftp://bob:{FTP_PASSWORD}@files.invalid/mcp"},
    }
    (tmp_path / "mcp.json").write_text(json.dumps({"mcpServers": servers}))
    env = {
        **os.environ,
        "BOOCODE_DATA_DIR": str(tmp_path),
        "BOOCODE_LLM_BASE_URL": f"http://bob:{LLM_PASSWORD}@127.0.0.1:{free_port()}/v1",
        "BOOCODE_LLM_MODEL": MODEL,
        "BOOCODE_LLM_MAX_RETRIES": "0",
        "BOOCODE_ALLOWED_HOSTS": "127.0.0.1",
        "BOOCODE_LOG_LEVEL": "DEBUG",
        "BOOCODE_MCP_AUTOSTART": "1",
    }
    env.pop("BOOCODE_DATABASE_URL", None)
    [account] = create_accounts(env, 1)
    subprocess.run([PYTHON, "manage.py", "mcp_sync"], cwd=ROOT, env=env, capture_output=True, check=True)
    with live_daphne(env) as (daphne, port):
        frames = asyncio.run(_turn_frames(port, account))
        daphne.send_signal(signal.SIGINT)
        daphne.wait(20)
        log = server_log(daphne)
    end = json.loads(frames[-1])
    assert end["status"] == "failed" and "Cannot connect to the model server" in end["error"]
    with sqlite3.connect(tmp_path / "boocode.sqlite3") as db:
        rows = db.execute("SELECT name, last_error, config_error, status FROM mcpclient_mcpserver").fetchall()
        errors = [row[0] for row in db.execute("SELECT error FROM chat_message")]
    assert any(row[0] == "badscheme" and "ftp://" in row[2] for row in rows)
    assert any(row[0] == "remote" and row[3] == "failed" and row[1] for row in rows)
    stored = json.dumps([rows, errors])
    for secret in (LLM_PASSWORD, MCP_PASSWORD, QUERY_TOKEN, FTP_PASSWORD):
        assert secret not in "".join(frames), secret
        assert secret not in log, secret
        assert secret not in stored, secret


# --- server stderr is for staff -------------------------------------------------------------------


async def _crash_after_stderr(hub: Any) -> None:
    await runtime.hub_call("toolbox_stderr", {"text": f"API_TOKEN={STDERR_SECRET}"})
    await runtime.hub_call("toolbox_crash", {})
    await hub.wait_until(lambda: hub.snapshots()[0].status.value == "unavailable", 10)


@pytest.mark.django_db(transaction=True)
async def test_server_stderr_reaches_staff_only(toolbox_hub: Any) -> None:
    await _crash_after_stderr(toolbox_hub)
    # The model's view of a dead server: a readable error, without the stderr tail.
    result = await runtime.hub_call("toolbox_echo", {"text": "hi"})
    assert result.is_error and "unreachable" in result.output and STDERR_SECRET not in result.output
    # A regular user's status line: name, state and tool counts only.
    counts = {"name", "status", "tool_count", "held_count"}
    assert [set(status) for status in runtime.hub_statuses()] == [counts]
    # Staff (and the admin, from the row) keep the detail.
    assert STDERR_SECRET in runtime.hub_statuses(staff=True)[0]["last_error"]


@pytest.mark.django_db(transaction=True)
async def test_status_frames_carry_stderr_only_to_staff(toolbox_hub: Any) -> None:
    user_tab = Tab(await conversation_of_new("alice", staff=False), await login("alice"))
    staff_tab = Tab(await conversation_of_new("root", staff=True), await login("root"))
    await user_tab.open()
    await staff_tab.open()
    try:
        await _crash_after_stderr(toolbox_hub)
        user_status = await _status_with(user_tab, "unavailable")
        staff_status = await _status_with(staff_tab, "unavailable")
        assert set(user_status["servers"][0]) == {"name", "status", "tool_count", "held_count"}
        assert STDERR_SECRET not in json.dumps(user_tab.frames)
        assert STDERR_SECRET in staff_status["servers"][0]["last_error"]
    finally:
        await user_tab.ws.disconnect()
        await staff_tab.ws.disconnect()


async def _status_with(tab: Tab, state: str) -> dict[str, Any]:
    while True:
        frame = await tab.next("status")
        if frame["servers"] and frame["servers"][0]["status"] == state:
            return frame


@pytest.mark.django_db(transaction=True)
async def test_the_model_never_reads_a_servers_stderr(llm: ScriptedLLM, toolbox_hub: Any) -> None:
    # The server writes a secret to stderr, then dies in the middle of the turn.
    llm.script(
        ToolCalls([Call("toolbox_stderr", {"text": f"API_TOKEN={STDERR_SECRET}"})]),
        ToolCalls([Call("toolbox_crash", {})]),
        Text("it is down"),
    )
    user = await User.objects.acreate(username="alice")
    conversation = await sync_to_async(lambda: user.conversations.create().pk)()

    async def emit(event: dict[str, Any]) -> None:
        return None

    assert await run_turn(TurnRequest(conversation, "echo hi"), emit) == "complete"
    tool_messages = [m for m in llm.requests[2]["messages"] if m["role"] == "tool"]
    assert len(tool_messages) == 2 and "unreachable" in tool_messages[1]["content"]
    assert STDERR_SECRET not in tool_messages[1]["content"]  # before: "... (stderr: API_TOKEN=...)"


# --- literal secrets in mcp.json are masked ------------------------------------------------------

ARG_TOKEN = "sk-live-0123456789abcdefXYZ"
FLAG_SECRET = "flagS3cret-value"
ENV_SECRET = "envS3cret-value"
HEADER_SECRET = "headerS3cret-value"
ALL_SECRETS = (ARG_TOKEN, FLAG_SECRET, ENV_SECRET, HEADER_SECRET, MCP_PASSWORD, QUERY_TOKEN)


def _secret_entries(http_url: str) -> dict[str, Any]:
    return {
        "tb": {
            "command": PYTHON,
            "args": [str(TOOLBOX), "--tag", ARG_TOKEN, f"--tag=--api-key={FLAG_SECRET}"],
            "env": {"API_TOKEN": ENV_SECRET, "FROM_ENV": "${HOME}"},
        },
        "web": {
            "url": http_url.replace("http://", f"http://bob:{MCP_PASSWORD}@") + f"?token={QUERY_TOKEN}",
            "headers": {"X-Api-Key": HEADER_SECRET},
        },
    }


@pytest.mark.django_db
def test_the_admin_masks_literal_secrets_and_keeps_them_on_save(tmp_path: Path, settings: Any) -> None:
    settings.MCP_CONFIG = tmp_path / "mcp.json"
    settings.MCP_STDIO_COMMANDS = TEST_COMMANDS
    text = json.dumps({"mcpServers": _secret_entries("http://127.0.0.1:9/mcp")}, indent=2) + "\n"
    settings.MCP_CONFIG.write_text(text)
    call_command("mcp_sync", stdout=StringIO())
    client = Client()
    client.force_login(User.objects.create_superuser("root", password="x"))
    for name in ("tb", "web"):
        url = reverse("admin:mcpclient_mcpserver_change", args=[McpServer.objects.get(name=name).pk])
        page = client.get(url).content.decode()
        assert (MASK in page and "${HOME}" in page) or name == "web"
        for secret in ALL_SECRETS:
            assert secret not in page, (name, secret)
        # Submitted back as shown: the file keeps every secret, byte for byte.
        response = client.post(url, {**form_fields(page), "_save": "Save"})
        assert response.status_code == 302, response.content.decode()[:2000]
        assert settings.MCP_CONFIG.read_text() == text
    listing = client.get(reverse("admin:mcpclient_mcpserver_changelist")).content.decode()
    assert not any(secret in listing for secret in ALL_SECRETS)


def test_mcp_discover_json_masks_literal_secrets(tmp_path: Path, shared_http_toolbox: Any) -> None:
    server = shared_http_toolbox()
    (tmp_path / "mcp.json").write_text(json.dumps({"mcpServers": _secret_entries(server.url)}))
    env = {
        **os.environ,
        "BOOCODE_DATA_DIR": str(tmp_path),
        "BOOCODE_MCP_STDIO_COMMANDS": ",".join(TEST_COMMANDS),
        "BOOCODE_LOG_LEVEL": "DEBUG",
    }
    env.pop("BOOCODE_DATABASE_URL", None)
    run = {"cwd": ROOT, "env": env, "capture_output": True, "text": True, "timeout": 120}
    seed_migrated(tmp_path, env)
    subprocess.run([PYTHON, "manage.py", "migrate", "-v0"], check=True, **run)
    done = subprocess.run([PYTHON, "manage.py", "mcp_discover", "--json"], **run)
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert {s["name"]: s["status"] for s in data["servers"]} == {"tb": "ready", "web": "ready"}
    shown = {s["name"]: s["config"] for s in data["servers"]}
    assert shown["tb"]["args"][1:3] == ["--tag", MASK] and shown["tb"]["env"]["FROM_ENV"] == "${HOME}"
    for secret in ALL_SECRETS:
        assert secret not in done.stdout and secret not in done.stderr, secret

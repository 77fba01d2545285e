"""Server logs in the database and the admin: coalesced writes of the log tail, the level set from
the server's page reaching the live session at once (and again at every connect), staff only.

A real hub (the process hub, as under Daphne) runs the toolbox with the "logs" group on
2026-07-28 (``tb``) and as a 2025-11-25 server (``old``), plus one without the logging
capability (``plain``). The admin is driven with Django's async test client, so its views run
in a thread while the hub runs on the test's loop, as in production.
"""

from __future__ import annotations

import asyncio
import json
from io import StringIO
from pathlib import Path
from typing import Any

import anyio
import pytest
from asgiref.sync import ThreadSensitiveContext, sync_to_async
from channels.db import database_sync_to_async
from django.contrib.auth.models import Permission, User
from django.core.management import call_command
from django.db import connection
from django.test import AsyncClient
from django.urls import reverse

from mcpclient import runtime
from mcpclient.engine.hub import Hub
from mcpclient.models import McpServer
from mcpclient.runtime.log_store import LogTailWriter
from tests.support.hubs import stop_process_hub
from tests.support.processes import PYTHON, ROOT, TEST_COMMANDS, toolbox_entry

pytestmark = pytest.mark.processes

HANDSHAKE_TOOLBOX = ROOT / "tests" / "servers" / "handshake_toolbox.py"
LOGS = ("--feature", "logs")


class Admin:
    """An admin session whose requests run like Daphne's (thread-sensitive context, fresh DB connection)."""

    def __init__(self, client: AsyncClient) -> None:
        self.client = client

    async def request(self, method: str, url: str, data: dict[str, Any] | None = None) -> Any:
        async with ThreadSensitiveContext():
            try:
                if method == "post":
                    return await self.client.post(url, data or {}, follow=True)
                return await self.client.get(url)
            finally:
                await sync_to_async(lambda: connection.close())()


async def _admin(username: str, *, view_only: bool = False) -> Admin:
    def make() -> User:
        if not view_only:
            return User.objects.create_superuser(username, password="x")
        user = User.objects.create_user(username, password="x", is_staff=True)
        user.user_permissions.add(Permission.objects.get(codename="view_mcpserver"))
        return user

    client = AsyncClient()
    await client.aforce_login(await database_sync_to_async(make)())
    return Admin(client)


def _messages(response: Any) -> list[str]:
    return [str(message) for message in response.context["messages"]] if response.context else []


async def _set_level(admin: Admin, name: str, level: str) -> Any:
    row = await McpServer.objects.aget(name=name)
    url = reverse("admin:mcpclient_mcpserver_log_level", args=[row.pk])
    return await admin.request("post", url, {"mcp_log_level": level})


def _writer(hub: Hub) -> LogTailWriter:
    writers = [getattr(listener, "__self__", None) for listener in hub._log_listeners]
    return next(writer for writer in writers if isinstance(writer, LogTailWriter))


async def _entries(hub: Hub, name: str, count: int) -> None:
    connection_ = hub.connection(name)
    assert connection_ is not None
    changed = asyncio.Event()
    _writer(hub)  # the runtime's writer is registered
    hub.add_log_listener(lambda server, entries: changed.set())
    with anyio.fail_after(10):
        while len(connection_.logs.entries) < count:
            changed.clear()
            await changed.wait()


@pytest.fixture
def mcp_file(tmp_path: Path, settings: Any) -> Path:
    settings.MCP_CONFIG = tmp_path / "mcp.json"
    settings.MCP_STDIO_COMMANDS = TEST_COMMANDS
    settings.MCP_AUTOSTART = True
    servers = {
        "tb": toolbox_entry(*LOGS),
        "old": {"command": PYTHON, "args": [str(HANDSHAKE_TOOLBOX), *LOGS]},
        "plain": toolbox_entry(),
    }
    settings.MCP_CONFIG.write_text(json.dumps({"mcpServers": servers}))
    return settings.MCP_CONFIG


@pytest.mark.django_db(transaction=True)
async def test_level_from_the_admin_logs_in_the_database_and_on_the_page(mcp_file: Path) -> None:
    await database_sync_to_async(call_command)("mcp_sync", stdout=StringIO())
    await McpServer.objects.filter(name="old").aupdate(log_level="error")  # chosen before the start
    try:
        async with asyncio.timeout(90):
            hub = await runtime.ensure_hub()
            # Read at the start and applied at connect: logging/setLevel on the 2025 session.
            assert (await runtime.hub_call("old_log_level_set", {})).output == "error"
            admin = await _admin("root")

            # 2026-07-28: the level rides each tool call; set from the page, used at once.
            response = await _set_level(admin, "tb", "warning")
            assert response.redirect_chain[-1][1] == 302
            assert _messages(response) == [
                "Log level of tb: warning. Protocol 2026-07-28: each tool call asks for messages at "
                "warning and above."
            ]
            assert (await McpServer.objects.aget(name="tb")).log_level == "warning"
            await runtime.hub_call("tb_log_levels", {"text": "<b>bold</b> https://u:pw@example.com/x"})
            await _entries(hub, "tb", 5)
            writer = _writer(hub)
            await writer.idle()
            assert writer.writes == 1, "five messages, one write"
            tail = (await McpServer.objects.aget(name="tb")).log_tail
            assert [entry["level"] for entry in tail] == [
                "warning",
                "error",
                "critical",
                "alert",
                "emergency",
            ]
            assert "pw@" not in json.dumps(tail)

            # A state change of the server (a re-listing) does not overwrite the tail or the level.
            await hub.rediscover("tb")
            await hub.drain_listeners()
            row = await McpServer.objects.aget(name="tb")
            assert len(row.log_tail) == 5 and row.log_level == "warning"

            # The page shows them as text beside stderr, with the level chosen.
            page = await admin.request("get", reverse("admin:mcpclient_mcpserver_change", args=[row.pk]))
            html = page.content.decode()
            assert "Server logs (notifications/message)" in html
            assert "warning: &lt;b&gt;bold&lt;/b&gt;" in html and "<b>bold</b>" not in html
            assert '<option value="warning" selected>' in html
            assert "Now: protocol 2026-07-28: each tool call asks for messages at warning and above." in html

            # 2025-11-25: sent with logging/setLevel to the live session at once...
            response = await _set_level(admin, "old", "debug")
            assert _messages(response) == [
                "Log level of old: debug. Sent logging/setLevel debug to the live session."
            ]
            assert (await runtime.hub_call("old_log_level_set", {})).output == "debug"
            # ...and again at every connect (the new process knows nothing).
            await hub.reconnect("old")
            assert (await runtime.hub_call("old_log_level_set", {})).output == "debug"

            # A server without the logging capability: said so.
            response = await _set_level(admin, "plain", "info")
            assert _messages(response) == [
                "Log level of plain: info. The server does not declare the logging capability: "
                "it sends no log messages."
            ]

            # Not a level: refused, nothing changed.
            response = await _set_level(admin, "tb", "loud")
            assert "is not a log level" in _messages(response)[0]
            assert (await McpServer.objects.aget(name="tb")).log_level == "warning"

            # Staff who may only look: the level and the log, no control; posting is refused.
            viewer = await _admin("viewer", view_only=True)
            html = await viewer.request("get", reverse("admin:mcpclient_mcpserver_change", args=[row.pk]))
            html = html.content.decode()
            assert "warning: &lt;b&gt;bold&lt;/b&gt;" in html and 'name="mcp_log_level"' not in html
            assert (await _set_level(viewer, "tb", "debug")).status_code == 403
    finally:
        await stop_process_hub()


@pytest.mark.django_db(transaction=True)
async def test_a_chatty_server_costs_few_writes(mcp_file: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    await database_sync_to_async(call_command)("mcp_sync", stdout=StringIO())
    await McpServer.objects.filter(name="tb").aupdate(log_level="debug")
    try:
        async with asyncio.timeout(90):
            hub = await runtime.ensure_hub()
            await runtime.hub_call("tb_log_levels", {"rounds": 40})  # 320 messages: the ring keeps 200
            await _entries(hub, "tb", 200)
            writer = _writer(hub)
            await writer.idle()
            await writer.flush()
            assert 1 <= writer.writes <= 2
            tail = (await McpServer.objects.aget(name="tb")).log_tail
            assert len(tail) == 200 and tail[-1]["data"] == "emergency: hello"
    finally:
        await stop_process_hub()

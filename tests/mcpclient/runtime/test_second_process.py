"""Changes made by another process reach the running hub without a restart.

The test process runs the hub (as the web server does); a real second process,
``python manage.py ...`` on the same database and mcp.json, changes things. The running
hub notices the version stamp before its next turn (``ensure_hub``).
"""

from __future__ import annotations

import asyncio
import json
import os
from io import StringIO
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

import pytest
from channels.db import database_sync_to_async
from django.core.management import call_command
from django.db import connection

from mcpclient import runtime
from mcpclient.config.entries import parse_server
from mcpclient.engine.hub import Hub
from mcpclient.models import McpServer, McpState, McpTool
from tests.support.hubs import stop_process_hub
from tests.support.processes import PYTHON, ROOT, TEST_COMMANDS

pytestmark = [pytest.mark.postgres, pytest.mark.processes]


def database_url() -> str:
    """A BOOCODE_DATABASE_URL for the test database this process uses."""
    db = connection.settings_dict
    if db["ENGINE"] == "django.db.backends.sqlite3":
        name = str(db["NAME"])
        assert not name.startswith(("file:", ":memory:")), "the test database must be a file"
        options = {key: value for key, value in db.get("OPTIONS", {}).items() if isinstance(value, str | int)}
        return f"sqlite:///{name}" + (f"?{urlencode(options)}" if options else "")
    user = quote(db.get("USER") or "")
    password = f":{quote(db['PASSWORD'])}" if db.get("PASSWORD") else ""
    host = db.get("HOST") or "127.0.0.1"
    port = f":{db['PORT']}" if db.get("PORT") else ""
    return f"postgres://{user}{password}@{host}{port}/{db['NAME']}"


async def manage(*args: str, config: Path) -> str:
    """Run ``python manage.py <args>`` in a second process on the same database and file."""
    env = {
        **os.environ,
        "BOOCODE_DATABASE_URL": database_url(),
        "BOOCODE_MCP_CONFIG": str(config),
        "BOOCODE_MCP_STDIO_COMMANDS": ",".join(TEST_COMMANDS),
        "BOOCODE_MCP_AUTOSTART": "0",
    }
    process = await asyncio.create_subprocess_exec(
        PYTHON,
        "manage.py",
        *args,
        cwd=ROOT,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        out, err = await process.communicate()
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    assert process.returncode == 0, err.decode()
    return out.decode()


def hub_tool_names() -> set[str]:
    return {tool.prefixed_name for tool in runtime.hub_tools()}


@pytest.mark.django_db(transaction=True)
async def test_discovery_and_toggles_in_another_process_reach_the_running_hub(
    tmp_path: Path, settings: Any, http_toolbox: Any
) -> None:
    settings.MCP_CONFIG = config = tmp_path / "mcp.json"
    settings.MCP_STDIO_COMMANDS = TEST_COMMANDS
    settings.MCP_AUTOSTART = True
    server = http_toolbox()
    # acceptNewTools: the tool added below is a new tool of a known server (held for review otherwise).
    entry = {"url": server.url, "acceptNewTools": True}
    config.write_text(json.dumps({"mcpServers": {"web": entry}}, indent=2))
    await database_sync_to_async(call_command)("mcp_sync", stdout=StringIO())
    other_client = Hub(base_dir=ROOT, allowed_commands=TEST_COMMANDS)
    try:
        async with asyncio.timeout(90):
            await runtime.ensure_hub()
            assert "web_echo" in hub_tool_names() and "web_fresh" not in hub_tool_names()

            # The server changes without telling anyone (on 2026-07-28 a notice would reach every
            # subscriber, the running hub included): only the version stamp can tell the hub.
            await other_client.start([parse_server("web", {"url": server.url})])
            added = await other_client.call_tool("web_add_tool", {"name": "fresh", "notify": False})
            assert not added.is_error
            await other_client.stop()
            await runtime.ensure_hub()
            assert "web_fresh" not in hub_tool_names()

            # A second process discovers the tools, stores them and bumps the version.
            version = (await McpState.objects.aget()).version
            out = await manage("mcp_discover", "web", config=config)
            assert out.startswith("mcp.json shape: mcpServers\nweb: ready, 13 tools, 1 rejected")
            assert (await McpState.objects.aget()).version > version
            assert await McpTool.objects.filter(server__name="web", prefixed_name="web_fresh").aexists()

            # Before its next turn the running hub sees the stamp and lists the tools again.
            await runtime.ensure_hub()
            assert "web_fresh" in hub_tool_names()

            # The admin's service in another process disables the server: the file and the
            # rows change there, and the running hub closes the session here.
            await manage(
                "shell",
                "-c",
                "from mcpclient.admin.changes import set_servers_enabled; "
                "set_servers_enabled(names=['web'], enabled=False)",
                config=config,
            )
            assert json.loads(config.read_text())["mcpServers"]["web"]["enabled"] is False
            await runtime.ensure_hub()
            assert not any(name.startswith("web_") for name in hub_tool_names())
            hub = runtime.get_hub()
            assert hub is not None and hub.connection("web") is None
            await hub.drain_listeners()
            row = await McpServer.objects.aget(name="web")
            assert (row.enabled, row.status, row.tool_count) == (False, "disabled", 0)
    finally:
        await other_client.stop()
        await stop_process_hub()

"""A ``url`` without a ``type``: Streamable HTTP first, legacy SSE when the server only speaks that.

The real toolbox server runs over ``--sse`` (GET /sse + POST /messages) or ``--http`` (/mcp): the
session's servers, which these tests only connect to and read from.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
from channels.db import database_sync_to_async
from django.test import Client
from django.urls import reverse

from mcpclient.core.state import Status
from mcpclient.engine.hub import Hub
from mcpclient.models import McpServer
from mcpclient.runtime.sync import persist_snapshot, sync_servers
from tests.support.admin import write_config
from tests.support.hubs import make_config
from tests.support.processes import free_port

pytestmark = pytest.mark.processes


async def test_a_url_entry_falls_back_to_sse_for_an_sse_only_server(
    hub: Hub, shared_http_toolbox: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="mcpclient.hub")
    server = shared_http_toolbox(sse=True)
    config = make_config("old", {"url": server.url})
    assert config.transport == "streamableHttp" and config.sse_fallback

    await hub.start([config])
    snapshot = hub.snapshots()[0]
    assert snapshot.status is Status.READY, snapshot.last_error
    assert snapshot.transport == "sse"
    assert "old_echo" in {tool.prefixed_name for tool in hub.tools()}
    result = await hub.call_tool("old_echo", {"text": "over sse"})
    assert not result.is_error and result.output == "over sse"
    assert 'MCP server "old": Streamable HTTP answered HTTP 405; trying legacy SSE' in caplog.text
    assert 'MCP server "old" ready over sse (Streamable HTTP answered HTTP 405)' in caplog.text


async def test_without_the_fallback_an_sse_only_server_fails_as_before(
    hub: Hub, shared_http_toolbox: Any
) -> None:
    server = shared_http_toolbox(sse=True)
    config = make_config("strict", {"type": "http", "url": server.url})
    assert not config.sse_fallback
    await hub.start([config])
    snapshot = hub.snapshots()[0]
    assert snapshot.status is Status.FAILED and "legacy SSE" not in snapshot.last_error


async def test_a_streamable_http_server_stays_on_streamable_http(
    hub: Hub, shared_http_toolbox: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="mcpclient.hub")
    server = shared_http_toolbox()
    await hub.start([make_config("new", {"url": server.url})])
    snapshot = hub.snapshots()[0]
    assert snapshot.status is Status.READY and snapshot.transport == "streamableHttp"
    assert "trying legacy SSE" not in caplog.text


async def test_a_server_that_is_down_is_not_retried_over_sse(hub: Hub) -> None:
    await hub.start([make_config("down", {"url": f"http://127.0.0.1:{free_port()}/mcp"})])
    snapshot = hub.snapshots()[0]
    assert snapshot.status is Status.FAILED
    assert "connection refused" in snapshot.last_error and "SSE" not in snapshot.last_error


async def test_when_both_transports_fail_the_error_tells_both(hub: Hub, shared_http_toolbox: Any) -> None:
    server = shared_http_toolbox(sse=True)
    await hub.start([make_config("lost", {"url": server.url.replace("/sse", "/nothing-here")})])
    snapshot = hub.snapshots()[0]
    assert snapshot.status is Status.FAILED
    assert snapshot.last_error == (
        "Streamable HTTP answered HTTP 404, and legacy SSE failed too: HTTP 404 from the server"
    )


@pytest.mark.django_db(transaction=True)  # the hub's listener thread writes through its own connection
async def test_the_transport_that_worked_is_stored_and_shown(
    hub: Hub, shared_http_toolbox: Any, tmp_path: Path, settings: Any, admin_user: Any
) -> None:
    server = shared_http_toolbox(sse=True)
    settings.MCP_CONFIG = tmp_path / "mcp.json"
    write_config(settings.MCP_CONFIG, {"old": {"url": server.url}})
    await database_sync_to_async(sync_servers)()
    await hub.start([make_config("old", {"url": server.url})])
    await database_sync_to_async(persist_snapshot)(hub.snapshots()[0])
    row = await McpServer.objects.aget(name="old")
    assert (row.transport, row.active_transport, row.status) == ("streamableHttp", "sse", "ready")

    def pages() -> tuple[str, str]:
        client = Client()
        client.force_login(admin_user)
        listing = client.get(reverse("admin:mcpclient_mcpserver_changelist")).content.decode()
        detail = client.get(reverse("admin:mcpclient_mcpserver_change", args=[row.pk])).content.decode()
        return listing, detail

    listing, detail = await database_sync_to_async(pages)()
    assert "Streamable HTTP → SSE (legacy)" in listing
    assert "SSE (legacy)" in detail and "field-active_transport" in detail

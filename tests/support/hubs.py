"""Hubs in the test process: server configs parsed like mcp.json, and the process hub put away."""

from __future__ import annotations

from typing import Any

from channels.db import database_sync_to_async
from django.db import connection

from mcpclient import runtime
from mcpclient.config.entries import parse_server
from mcpclient.config.model import ServerConfig


def make_config(name: str, entry: dict[str, Any]) -> ServerConfig:
    """Parse an mcp.json entry (validated like the file)."""
    return parse_server(name, entry)


async def stop_process_hub() -> None:
    """Stop the process-wide hub a test installed, let its listeners finish, forget it.

    Also closes the database connection of the async ORM's thread, which would otherwise
    stay open and keep PostgreSQL from dropping the test database.
    """
    hub = runtime.get_hub()
    if hub is not None:
        await hub.stop()
        await hub.drain_listeners()
    runtime.set_hub(None)
    await database_sync_to_async(lambda: connection.close())()

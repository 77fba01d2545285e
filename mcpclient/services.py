"""Service functions behind the ``mcp_discover`` and ``mcp_call`` commands.

Both run their own short-lived hub (``asyncio.run``), then write what they learned to the
database and bump the version so a running web process picks the change up.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from mcpclient.config import ServerConfig
from mcpclient.hub import ServerSnapshot, Status
from mcpclient.redaction import masked_entry
from mcpclient.results import ToolResult
from mcpclient.runtime import new_hub
from mcpclient.sync import bump_version, persist_snapshot, server_configs, sync_servers


@dataclass
class DiscoveryOutcome:
    """One server's result of a discovery run."""

    snapshot: ServerSnapshot
    entry: Any = None  # the mcp.json entry as written

    @property
    def failed(self) -> bool:
        """True unless the server became ready."""
        return self.snapshot.status is not Status.READY

    def as_dict(self) -> dict[str, Any]:
        """The JSON form printed by ``mcp_discover --json``."""
        s = self.snapshot
        return {
            "name": s.name,
            "status": s.status.value,
            "config": masked_entry(self.entry),
            "tool_count": sum(not t.rejected for t in s.tools),
            "rejected_count": sum(t.rejected for t in s.tools),
            "error": s.last_error,
            "protocol_version": s.protocol_version,
            "server_info": s.server_info,
            "tools": [
                {
                    "prefixed_name": s.prefixed_names.get(t.name, ""),
                    "name": t.name,
                    "rejected": t.rejected,
                    "reason": t.reject_reason,
                    "warning": s.warnings.get(t.name, ""),
                }
                for t in s.tools
            ],
        }


def _targets(names: list[str]) -> tuple[list[ServerConfig], list[ServerConfig]]:
    """(configs to connect, every enabled config); unknown or disabled names raise ValueError."""
    sync_servers()
    configs = server_configs()
    by_name = {config.name: config for config in configs}
    from mcpclient.models import McpServer

    for name in names:
        row = McpServer.objects.filter(name=name).first()
        if row is None:
            raise ValueError(f'no MCP server named "{name}" in mcp.json')
        if row.config_error:
            raise ValueError(row.config_error)
        if not by_name[name].enabled:
            raise ValueError(f'MCP server "{name}" is disabled; enable it in mcp.json or the admin first')
    enabled = [config for config in configs if config.enabled]
    chosen = [by_name[name] for name in names] if names else enabled
    return chosen, enabled


def discover_servers(names: list[str]) -> list[DiscoveryOutcome]:
    """Connect the named (or all enabled) servers, list their tools and store them."""
    chosen, _ = _targets(names)

    async def run() -> list[ServerSnapshot]:
        hub = new_hub(persist=False)
        try:
            await hub.start(chosen)
            return hub.snapshots()
        finally:
            await hub.stop()

    snapshots = asyncio.run(run())
    for snapshot in snapshots:
        persist_snapshot(snapshot)
    bump_version()
    entries = {config.name: config.raw for config in chosen}
    return [DiscoveryOutcome(snapshot, entries.get(snapshot.name)) for snapshot in snapshots]


def call_tool_once(prefixed_name: str, arguments: dict[str, Any]) -> ToolResult:
    """Start the enabled servers, call one tool by its prefixed name, stop them."""
    _, enabled = _targets([])

    async def run() -> ToolResult:
        hub = new_hub(persist=False)
        try:
            await hub.start(enabled)
            return await hub.call_tool(prefixed_name, arguments)
        finally:
            await hub.stop()

    return asyncio.run(run())

"""The toolbox's undeclared group: tools that say nothing about what they do, as published servers'
often do (the GitLab server's ``create_issue``, ``push_files``...).

``python tests/servers/toolbox.py --feature undeclared`` adds it to the toolbox. Without
annotations a tool may write (the MCP schema's defaults: ``readOnlyHint: false``,
``destructiveHint: true``), so each call waits for the person unless the server's entry vouches
for it (``"readOnly"``). The tools share one in-memory issue list (per server process), read back
through the hub with the read-only ``list_issues``:

- ``create_issue(title)``: adds an issue; no annotations;
- ``issue_count()``: how many issues there are; annotations without ``readOnlyHint``;
- ``list_issues()``: the issues as JSON; ``readOnlyHint: true``.
"""

from __future__ import annotations

import json
from typing import Any

import mcp.types as types
from common import READ_ONLY


def register(server: Any) -> None:
    """Add the undeclared tools and their read-only reader to ``server``."""
    issues: list[str] = []

    @server.tool()
    def create_issue(title: str) -> str:
        """Create an issue with this title."""
        issues.append(title)
        return f"created issue #{len(issues)}: {title}"

    @server.tool(annotations=types.ToolAnnotations(title="Count the issues", open_world_hint=False))
    def issue_count() -> int:
        """How many issues there are."""
        return len(issues)

    @server.tool(annotations=READ_ONLY)
    def list_issues() -> str:
        """The issues as a JSON array."""
        return json.dumps(issues)

"""The status line: MCP servers and their state, and whether a model is configured."""

from __future__ import annotations

from typing import Any

from boocode.chat import llm as llm_client
from boocode.chat.llm import LLMSettings


def status_payload(*, staff: bool = False) -> dict[str, Any]:
    """The ``status`` frame (see docs/protocol.md); servers' errors only for ``staff``."""
    from mcpclient.runtime import hub_statuses

    settings = LLMSettings.from_settings()
    return {
        "type": "status",
        "servers": hub_statuses(staff=staff),
        "model": {
            "configured": settings.configured,
            "name": settings.model,
            "last_error": llm_client.last_error,
        },
    }

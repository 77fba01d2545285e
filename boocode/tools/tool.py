"""A tool as the model sees it and how to run it (:class:`Tool`), and what one model request may
carry of them (:func:`within_model_bounds`): at most :data:`MAX_MODEL_TOOLS` definitions and
:data:`MAX_MODEL_TOOL_BYTES` bytes of them.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from mcpclient.core.results import ToolResult

NATIVE_SOURCE = "native"

Executor = Callable[[dict[str, Any]], Awaitable[ToolResult]]


@dataclass(frozen=True)
class Tool:
    """A tool as the model sees it, and how to run it.

    ``title`` (the MCP tool's display name) and ``output_schema`` are for pages, not the model:
    :meth:`openai` leaves them out. A native tool has neither.
    """

    name: str
    description: str
    parameters: dict[str, Any]  # JSON schema of the arguments (an MCP tool's inputSchema as-is)
    read_only: bool
    source: str  # "native" or the MCP server's name
    executor: Executor = field(repr=False, compare=False)
    title: str = ""
    output_schema: dict[str, Any] | None = None
    # Why each call waits for the person's approval ("" when it does not; boocode.tools.approval_gate),
    # and the annotations the approval card shows.
    approval_reason: str = ""
    annotations: dict[str, Any] | None = None
    user_id: int | None = None  # whose sessions an MCP tool's calls run in
    views: bool = False  # a tool its server's views may call (MCP Apps), not the model's
    # The MCP tool's name on its server, and the SHA-256 of its accepted definition
    # (mcpclient.core.pinning); "" for a native tool.
    remote_name: str = ""
    definition_digest: str = ""
    # Why the agent's approval rules ask for each call ("" when they do not;
    # :func:`boocode.tools.agent_rules.agent_tools`).
    rule_reason: str = ""
    # The agent's ``approve: allow`` pattern that vouches for a tool whose only reason to ask is
    # that it does not declare ``readOnlyHint: true`` ("" for none): its calls are allowed, on the
    # record, without a card (boocode.chat.calls.approvals).
    allowed_by: str = ""

    async def execute(self, arguments: dict[str, Any]) -> ToolResult:
        """Run the tool with already-validated ``arguments``."""
        return await self.executor(arguments)

    def digest(self) -> str:
        """A digest of what the person and the model are shown and what decides the tool's safety."""
        shown = [
            self.name,
            self.source,
            self.title,
            self.description,
            self.parameters,
            self.output_schema,
            self.annotations,
            self.approval_reason,
            self.definition_digest,
        ]
        return hashlib.sha256(json.dumps(shown, sort_keys=True, default=str).encode()).hexdigest()[:32]

    def openai(self) -> dict[str, Any]:
        """The tool in the OpenAI Chat Completions ``tools`` format."""
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": self.parameters},
        }

    @cached_property
    def definition_json(self) -> str:
        """:meth:`openai` as the JSON a request carries; made once per tool (a turn's checks weigh
        every definition: whether to defer them, what one request may carry, their tokens)."""
        return json.dumps(self.openai(), ensure_ascii=False)


def openai_tools(tools: Iterable[Tool]) -> list[dict[str, Any]]:
    """``tools`` in the OpenAI ``tools`` request format, in the order given."""
    return [tool.openai() for tool in tools]


# What one model request may carry: at most this many tools and this many bytes of their
# definitions (as JSON). Past either, the rest of the agent's tools are left out of the request.
MAX_MODEL_TOOLS = 512
MAX_MODEL_TOOL_BYTES = 1024 * 1024


def within_model_bounds(tools: list[Tool]) -> tuple[list[Tool], list[dict[str, Any]]]:
    """The first of ``tools`` that fit one model request (:data:`MAX_MODEL_TOOLS`), with their definitions."""
    kept: list[Tool] = []
    definitions: list[dict[str, Any]] = []
    size = 0
    for tool in tools[:MAX_MODEL_TOOLS]:
        size += len(tool.definition_json.encode())
        if size > MAX_MODEL_TOOL_BYTES:
            break
        kept.append(tool)
        definitions.append(tool.openai())
    return kept, definitions

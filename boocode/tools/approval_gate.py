"""The approval gate: a tool call that needs the person's approval waits here before it runs.

A tool needs approval unless it declares ``readOnlyHint: true`` on a trusted server or its
server's entry vouches for it (``readOnly``); ``writeTools: "approve"`` offers the tools whose
``readOnlyHint`` is false, each call approved; ``trusted: false`` makes all of them ask
(:mod:`mcpclient.core.approval`).
:func:`boocode.tools.execution.execute_tool` calls :func:`check_approval` after the arguments
were validated and before the tool runs, so the tool's time limit does not run while the
person decides. Whoever runs the call puts a gate in the context with :func:`approving` (the
chat turn: :func:`boocode.chat.calls.approvals.gate_for`); without one, the call is refused:
nothing that needs approval ever runs unapproved. A gate sees the tool as a :class:`GatedTool`.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, Protocol

from mcpclient.core.results import ToolResult


class GatedTool(Protocol):
    """What a gate knows of the tool being called (:class:`boocode.tools.tool.Tool` is one)."""

    @property
    def name(self) -> str: ...

    @property
    def title(self) -> str: ...

    @property
    def source(self) -> str: ...

    @property
    def approval_reason(self) -> str: ...

    @property
    def annotations(self) -> dict[str, Any] | None: ...

    @property
    def allowed_by(self) -> str:
        """The agent's ``approve: allow`` pattern that vouches for the call ("" for none)."""
        ...

    def digest(self) -> str:
        """A digest of the definition the person and the model are shown (name, schema, annotations...)."""
        ...


# Answers None to let the call run, or the error result the model gets instead.
Gate = Callable[[GatedTool, dict[str, Any]], Awaitable[ToolResult | None]]

_gate: contextvars.ContextVar[Gate | None] = contextvars.ContextVar("boocode_approval_gate", default=None)


@contextlib.contextmanager
def approving(gate: Gate) -> Iterator[None]:
    """Run the block with ``gate`` deciding the calls that need approval."""
    token = _gate.set(gate)
    try:
        yield
    finally:
        _gate.reset(token)


async def check_approval(tool: GatedTool, arguments: dict[str, Any]) -> ToolResult | None:
    """None when ``tool`` may run with ``arguments`` now; else the error result for the model."""
    if not tool.approval_reason:
        return None
    gate = _gate.get()
    if gate is None:
        return ToolResult.error(
            f'Not run: calls of "{tool.name}" need a person\'s approval ({tool.approval_reason}), '
            "and nobody can be asked here."
        )
    return await gate(tool, arguments)

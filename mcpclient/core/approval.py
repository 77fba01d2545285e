"""Which tools need the person's approval before each call, and why.

An mcp.json entry decides with two BooCode keys (docs/configuration.md):

- ``writeTools``: ``"reject"`` (the default, the read-only guard: a tool whose
  ``readOnlyHint`` is false is never offered) or ``"approve"`` (it is offered, and every call
  waits for the person's approval);
- ``trusted``: ``false`` makes every tool of the server need approval, read-only ones too. Tool
  annotations are hints the server gives about itself, untrusted by the MCP spec: a server that
  says "read-only" may still write.

The hub applies this at discovery (:func:`mcpclient.core.state.discover_tool`); the admin's tool pages
use :func:`stored_approval_reason` to say the same thing about stored tools. Nothing here asks
anybody: the chat turn does (:mod:`boocode.chat.approval_requests`).

Where the call runs in another process (the hub worker), approval is enforced there too: the
caller names the approval it got (:func:`grant`, carried by ``hub.call``), and the worker runs a
tool that needs approval only when the check the application registered
(:func:`check_approvals_with`) finds that approval good for this very call.
"""

from __future__ import annotations

import contextvars
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

# "writeTools": what the hub does with tools whose readOnlyHint is false.
WRITE_TOOLS_REJECT = "reject"
WRITE_TOOLS_APPROVE = "approve"
WRITE_TOOLS = (WRITE_TOOLS_REJECT, WRITE_TOOLS_APPROVE)

WRITE_REASON = 'readOnlyHint is false: each call needs the person\'s approval ("writeTools": "approve")'
UNTRUSTED_REASON = 'the server is not trusted ("trusted": false): each call needs the person\'s approval'
# The annotation keys shown on an approval card, as the page names them.
HINT_KEYS = {
    "readOnly": "readOnlyHint",
    "destructive": "destructiveHint",
    "idempotent": "idempotentHint",
    "openWorld": "openWorldHint",
}


def is_write_tool(annotations: Mapping[str, Any] | None) -> bool:
    """True only when the server says explicitly that the tool is not read-only."""
    return bool(annotations) and annotations.get("readOnlyHint") is False  # type: ignore[union-attr]


def approval_reason(annotations: Mapping[str, Any] | None, *, write_tools: str, trusted: bool) -> str:
    """Why calls of an offered tool need approval ("" when they do not).

    A write tool is only offered with ``writeTools: "approve"`` (else the read-only guard
    rejects it before this is asked), so its reason is the write; an untrusted server's
    read-only tools need approval because their annotations cannot be believed.
    """
    if is_write_tool(annotations) and write_tools == WRITE_TOOLS_APPROVE:
        return WRITE_REASON if trusted else f"{WRITE_REASON}; {UNTRUSTED_REASON}"
    if not trusted:
        return UNTRUSTED_REASON
    return ""


def declared_hints(annotations: Mapping[str, Any] | None) -> dict[str, bool | None]:
    """``{readOnly, destructive, idempotent, openWorld}`` as the server declared them (None: not said)."""
    annotations = annotations or {}
    hints: dict[str, bool | None] = {}
    for name, key in HINT_KEYS.items():
        value = annotations.get(key)
        hints[name] = value if isinstance(value, bool) else None
    return hints


def entry_policy(entry: Mapping[str, Any] | None) -> tuple[str, bool]:
    """``(writeTools, trusted)`` of a stored entry as written; the defaults for anything invalid.

    For display only (the admin): a connected server's entry has been validated already.
    """
    entry = entry or {}
    write_tools = entry.get("writeTools", WRITE_TOOLS_REJECT)
    trusted = entry.get("trusted", True)
    return (
        write_tools if write_tools in WRITE_TOOLS else WRITE_TOOLS_REJECT,
        trusted if isinstance(trusted, bool) else True,
    )


def stored_approval_reason(entry: Mapping[str, Any] | None, annotations: Mapping[str, Any] | None) -> str:
    """:func:`approval_reason` of a stored tool, from its server's stored entry."""
    write_tools, trusted = entry_policy(entry)
    return approval_reason(annotations, write_tools=write_tools, trusted=trusted)


# --- approvals granted, and checked where the call runs ------------------------------------------
# (approval id, prefixed tool name, arguments, user id) -> "" when that approval holds for this
# call, else why not.
ApprovalCheck = Callable[[int, str, dict[str, Any], int | None], Awaitable[str]]

_granted: contextvars.ContextVar[int | None] = contextvars.ContextVar("mcpclient_approval", default=None)
_check: ApprovalCheck | None = None


def grant(approval_id: int | None) -> None:
    """The approval of the call about to be made in this context (``None``: none)."""
    _granted.set(approval_id)


def granted() -> int | None:
    """The approval :func:`grant` recorded in this context."""
    return _granted.get()


def check_approvals_with(check: ApprovalCheck | None) -> None:
    """Register how a worker checks a named approval (the application that records them does)."""
    global _check
    _check = check


async def approval_refusal(
    reason: str, name: str, arguments: dict[str, Any], user_id: int | None, approval_id: int | None
) -> str:
    """Why a call of ``name`` that needs approval (``reason``) and names ``approval_id`` may not
    run here ("" when it may)."""
    if not reason:
        return ""
    needs = f'Not run: calls of "{name}" need a person\'s approval ({reason})'
    if _check is None:
        return f"{needs}, and it cannot be checked here."
    if approval_id is None:
        return f"{needs}, and none came with the call."
    problem = await _check(approval_id, name, arguments, user_id)
    return f"{needs}, and the approval that came with this call does not hold: {problem}." if problem else ""

"""Which tools need the person's approval before each call, and why.

The MCP schema's defaults are ``readOnlyHint: false`` and ``destructiveHint: true``: a tool that
says nothing may write. So a call runs without the person's approval only when the tool declares
``readOnlyHint: true`` on a trusted server, or its server's entry vouches for it (``readOnly``);
everything else asks. An mcp.json entry decides with three BooCode keys (docs/configuration.md):

- ``writeTools``: ``"reject"`` (the default, the read-only guard: a tool whose
  ``readOnlyHint`` is explicitly false is never offered) or ``"approve"`` (it is offered, and
  every call waits for the person's approval);
- ``trusted``: ``true`` (the default) believes the server's ``readOnlyHint: true``; ``false``
  makes every tool of the server need approval, read-only ones too. Tool annotations are hints
  the server gives about itself, untrusted by the MCP spec: a server that says "read-only" may
  still write;
- ``readOnly``: tool-name globs (``*`` as in ``includeTools``) the administrator vouches for:
  tools that declare nothing run without asking. It never frees a tool that declares
  ``readOnlyHint: false`` (``writeTools`` decides those), and it cannot go with
  ``trusted: false``.

The hub applies this at discovery (:func:`mcpclient.core.state.discover_tool`); the admin's tool pages
use :func:`stored_approval_reason` to say the same thing about stored tools. Nothing here asks
anybody: the chat turn does (:mod:`boocode.chat.calls.approvals`).

Where the call runs in another process (the hub worker), approval is enforced there too: the
caller names the approval it got (:func:`grant`, carried by ``hub.call``), and the worker runs a
tool that needs approval only when the check the application registered
(:func:`check_approvals_with`) finds that approval good for this very call.
"""

from __future__ import annotations

import contextvars
import json
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any

from mcpclient.core.patterns import glob_match

# "writeTools": what the hub does with tools whose readOnlyHint is false.
WRITE_TOOLS_REJECT = "reject"
WRITE_TOOLS_APPROVE = "approve"
WRITE_TOOLS = (WRITE_TOOLS_REJECT, WRITE_TOOLS_APPROVE)

WRITE_REASON = 'readOnlyHint is false: each call needs the person\'s approval ("writeTools": "approve")'
UNTRUSTED_REASON = 'the server is not trusted ("trusted": false): each call needs the person\'s approval'
UNDECLARED = 'it does not declare "readOnlyHint": true, so it may change things'
UNDECLARED_REASON = f'{UNDECLARED} ("readOnly": [...] in its server\'s entry vouches for it)'
# A person's own server has no entry to vouch in (mcpclient.runtime.personal): the reason says less.
UNDECLARED_OWN_REASON = UNDECLARED
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


def declares_read_only(annotations: Mapping[str, Any] | None) -> bool:
    """True only when the server says explicitly that the tool only reads."""
    return bool(annotations) and annotations.get("readOnlyHint") is True  # type: ignore[union-attr]


def vouched(patterns: Sequence[str], name: str) -> bool:
    """Whether an entry's ``readOnly`` globs vouch for the tool ``name`` (its name on its server)."""
    return any(glob_match(pattern, name) for pattern in patterns)


def approval_reason(
    annotations: Mapping[str, Any] | None,
    *,
    write_tools: str,
    trusted: bool,
    vouched_for: bool = False,
    own: bool = False,
) -> str:
    """Why calls of an offered tool need approval ("" when they do not).

    A write tool is only offered with ``writeTools: "approve"`` (else the read-only guard
    rejects it before this is asked), so its reason is the write; an untrusted server's
    read-only tools need approval because their annotations cannot be believed; a tool that
    does not declare ``readOnlyHint: true`` may write (the schema's default) unless its server's
    entry vouches for it (``vouched_for``; ``own``: a person's own server, which has no entry to
    vouch in).
    """
    if is_write_tool(annotations) and write_tools == WRITE_TOOLS_APPROVE:
        return WRITE_REASON if trusted else f"{WRITE_REASON}; {UNTRUSTED_REASON}"
    if not trusted:
        return UNTRUSTED_REASON
    if is_write_tool(annotations) or declares_read_only(annotations) or vouched_for:
        return ""  # (a write tool here is rejected by the read-only guard: never offered)
    return UNDECLARED_OWN_REASON if own else UNDECLARED_REASON


def declared_hints(annotations: Mapping[str, Any] | None) -> dict[str, bool | None]:
    """``{readOnly, destructive, idempotent, openWorld}`` as the server declared them (None: not said)."""
    annotations = annotations or {}
    hints: dict[str, bool | None] = {}
    for name, key in HINT_KEYS.items():
        value = annotations.get(key)
        hints[name] = value if isinstance(value, bool) else None
    return hints


def entry_policy(entry: Mapping[str, Any] | None) -> tuple[str, bool, tuple[str, ...]]:
    """``(writeTools, trusted, readOnly)`` of a stored entry as written; the safe defaults for
    anything invalid (an unreadable ``readOnly`` vouches for nothing).

    For display only (the admin): a connected server's entry has been validated already.
    """
    entry = entry or {}
    write_tools = entry.get("writeTools", WRITE_TOOLS_REJECT)
    trusted = entry.get("trusted", True)
    read_only = entry.get("readOnly", [])
    readable = isinstance(read_only, list) and all(isinstance(p, str) and p.strip() for p in read_only)
    return (
        write_tools if write_tools in WRITE_TOOLS else WRITE_TOOLS_REJECT,
        trusted if isinstance(trusted, bool) else True,
        tuple(read_only) if readable else (),
    )


def stored_approval_reason(
    entry: Mapping[str, Any] | None, name: str, annotations: Mapping[str, Any] | None
) -> str:
    """:func:`approval_reason` of the stored tool ``name``, from its server's stored entry."""
    write_tools, trusted, read_only = entry_policy(entry)
    return approval_reason(
        annotations, write_tools=write_tools, trusted=trusted, vouched_for=vouched(read_only, name)
    )


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


# --- how many tools ask, and why (mcp_discover, mcp_import, the admin, the start-up log) ---------
# Each reason above as the cause a count names.
CAUSES = {
    UNDECLARED_REASON: (
        'not declaring "readOnlyHint": true (vouch for them with "readOnly": [...] in the server\'s entry)'
    ),
    WRITE_REASON: 'declaring "readOnlyHint": false ("writeTools": "approve")',
    UNDECLARED_OWN_REASON: 'not declaring "readOnlyHint": true',
    UNTRUSTED_REASON: 'on a server that is not trusted ("trusted": false)',
    f"{WRITE_REASON}; {UNTRUSTED_REASON}": 'declaring "readOnlyHint": false ("writeTools": "approve")',
}


def asking_causes(reasons: Iterable[str]) -> dict[str, int]:
    """How many of ``reasons`` (the approval reasons of offered tools, "" for none) fall under each
    cause of :data:`CAUSES`, most first; a reason this module does not know counts as itself."""
    counts: dict[str, int] = {}
    for reason in reasons:
        if reason:
            cause = CAUSES.get(reason, reason)
            counts[cause] = counts.get(cause, 0) + 1
    return dict(sorted(counts.items(), key=lambda item: -item[1]))


def asking_summary(reasons: Sequence[str]) -> str:
    """``"3 of 9 tools ask before each call: 3 do not declare ..."`` ("" when none asks).

    ``reasons`` holds one approval reason per offered tool ("" for a tool that runs freely).
    """
    causes = asking_causes(reasons)
    asking = sum(causes.values())
    if not asking:
        return ""
    plural = "s" if len(reasons) != 1 else ""
    verb = "asks" if asking == 1 else "ask"
    why = "; ".join(f"{count} {cause}" for cause, count in causes.items())
    return f"{asking} of {len(reasons)} tool{plural} {verb} before each call: {why}"


def policy_summary(*, trusted: bool, read_only: Sequence[str]) -> str:
    """Which of a server's tools will ask before each call, from its entry alone (no listing)."""
    if not trusted:
        return 'every tool asks before each call (the server is not trusted: "trusted": false)'
    shown = json.dumps(list(read_only), ensure_ascii=False)
    vouching = f' or match its "readOnly" {shown}' if read_only else ""
    return (
        f'its tools ask before each call unless they declare "readOnlyHint": true{vouching} '
        "(a tool that declares nothing may change things)"
    )

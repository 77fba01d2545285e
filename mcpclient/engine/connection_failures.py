"""What ended a server connection's attempt or session, in one line (URLs redacted), and whether
the egress policy refused it; a failed ``tools/call`` is :mod:`mcpclient.engine.tool_calls`'s.

Nothing here touches a connection: :class:`~mcpclient.engine.connection.ServerConnection` records
what these functions say.
"""

from __future__ import annotations

import anyio
import httpx2
import pydantic
from mcp import MCPError

from mcpclient.core.redaction import redact_text
from mcpclient.engine import listing
from mcpclient.engine.egress import EgressRefused

# Why a stdio server whose launcher found no package is not tried again (the stderr line follows).
PACKAGE_NOT_FOUND = (
    "its package was not found in the registry, so it is not retried until its entry in mcp.json "
    "changes or an administrator reconnects it"
)


def describe(exc: BaseException) -> str:
    """A one-line description of a connection failure, without secrets from URLs."""
    return redact_text(_description(exc))


def egress_refused(exc: BaseException) -> bool:
    """Whether ``exc`` is, holds or was caused by an :class:`EgressRefused`."""
    seen: list[BaseException] = [exc]
    while seen:
        current = seen.pop()
        if isinstance(current, EgressRefused):
            return True
        if isinstance(current, BaseExceptionGroup):
            seen.extend(current.exceptions)
        seen.extend(e for e in (current.__cause__, current.__context__) if e is not None and e is not current)
        if len(seen) > 100:  # a cycle of causes: give up rather than loop
            return False
    return False


def _description(exc: BaseException) -> str:
    if isinstance(exc, BaseExceptionGroup):
        inner = [e for e in exc.exceptions if not isinstance(e, anyio.get_cancelled_exc_class())]
        if inner:
            return _description(inner[0])
    if isinstance(exc, FileNotFoundError):
        return f"command not found: {exc.filename or exc}"
    if isinstance(exc, PermissionError):
        return f"permission denied: {exc.filename or exc}"
    if isinstance(exc, MCPError):
        return exc.error.message if hasattr(exc, "error") else str(exc)
    if isinstance(exc, EgressRefused):  # not the server's answer: BooCode did not connect
        return f"not connected: the egress policy refused it ({exc})"
    if isinstance(exc, httpx2.ConnectError):
        return f"connection refused or unreachable ({exc})"
    if isinstance(exc, httpx2.HTTPStatusError):
        return f"HTTP {exc.response.status_code} from the server"
    if isinstance(exc, pydantic.ValidationError) and exc.errors():  # one sentence, not pydantic's dump
        errors = exc.errors(include_url=False, include_input=False)
        said = listing.sentence(errors, whole="the answer")
        return f"the server's answer does not follow the protocol: {said}"
    text = str(exc) or type(exc).__name__
    return text if len(text) < 500 else text[:500] + "..."

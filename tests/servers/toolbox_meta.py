"""The toolbox's meta group: a tool that says what its request carried in ``params._meta``.

``python tests/servers/toolbox.py --feature meta`` adds it to the toolbox. The tracing tests read
the ``traceparent`` (and ``tracestate``) BooCode put there (MCP reserves those keys for W3C Trace
Context), as the server received them, whatever process and transport the call went through.

- ``request_meta()``: the request's ``_meta`` as a JSON object (``{}`` when it had none); read-only.
- ``request_header(name)``: the value of the HTTP header ``name`` the request came with ("" when
  it had none, or over stdio); the tests of a person's own server read the header it signs in with.
"""

from __future__ import annotations

import json
from typing import Any

from common import READ_ONLY
from mcp.server.mcpserver import Context


def register(server: Any) -> None:
    """Add ``request_meta`` to ``server``."""

    @server.tool(annotations=READ_ONLY)
    def request_meta(ctx: Context) -> str:
        """The _meta of this very request, as JSON."""
        meta = ctx.request_context.meta or {}
        return json.dumps(dict(meta), default=str, sort_keys=True)

    @server.tool(annotations=READ_ONLY)
    def request_header(name: str, ctx: Context) -> str:
        """The value of one HTTP header of this very request ("" without it)."""
        return (ctx.headers or {}).get(name.lower(), "")

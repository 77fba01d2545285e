"""The tools the model may call: native read-only tools and the MCP servers' tools, as one registry.

Owns the tool list, argument validation, time limits and the approval gate every call that
needs approval passes. May import :mod:`agents` (the glob policy) and :mod:`mcpclient`, never
:mod:`boocode.chat`: whoever runs a call puts its approval gate in the context.
"""

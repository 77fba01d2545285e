"""Agents: AGENTS.md parsed, mirrored into ``Agent`` rows, and the glob policy on tool names.

May import :mod:`mcpclient` (the shared glob matcher) and, for its admin page only,
:mod:`boocode.tools`; never :mod:`boocode.chat`.
"""

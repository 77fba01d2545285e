"""BooCode: a self-hosted chat host for MCP tools."""

__version__ = "0.1.0"

"""BooCode: a self-hosted chat host for MCP tools.

Owns the product above ``mcpclient``: settings, ASGI routing and URLs (the modules here), the chat
(``chat``), the tool list a turn offers (``tools``) and the ways in (``security``). The packages
are layers (docs/architecture.md, checked by ``lint-imports``): ``chat`` above ``security`` and
``tools``, above ``agents``, above ``mcpclient``.
"""

__version__ = "0.1.0"

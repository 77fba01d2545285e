"""The values every layer of mcpclient shares, and nothing that does I/O.

Owns: a server's state and its discovered tools (``state``), the discovery policy and who needs
approval (``state``, ``approval``), tool names (``naming``, ``patterns``), what a tool call
returns (``results``), what is kept out of sight (``redaction``), tool display metadata.
May import: the standard library and the MCP SDK's types. Nothing of mcpclient above it, no
Django.
"""

"""The values every layer of mcpclient shares, and nothing that does I/O.

Owns: a server's state and its discovered tools (``state``), the discovery policy and who needs
approval (``state``, ``approval``), tool names (``naming``, ``patterns``), what a tool call
returns (``results``), what is kept out of sight (``redaction``), tool display metadata, what a
tool's ``_meta.ui`` says (``mcp_apps``), the one rule for a header name (``headers``), and the
values and errors the engine hands its users: resources, skills, prompts, a server's questions
and a call's progress (``resources``, ``skills``, ``prompts``, ``elicitation``,
``elicitation_form``, ``progress``).
May import: the standard library and the MCP SDK's types. Nothing of mcpclient above it, no
Django.
"""

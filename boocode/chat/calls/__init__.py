"""During a tool call: its scope and its run, and what the call waits on.

Owns one call's scope and execution (``execution``: the hub, the audit record, the asker and
the reporter), calls waiting for the owner's approval (``approvals``), forms and links a server
asks for (``questions``) and ``tool_progress`` frames (``progress``).

May import :mod:`boocode.chat.wire`, :mod:`boocode.chat.llm`, :mod:`boocode.chat.ledger`,
``models`` and ``storable``; never the turn or the doors above it.
"""

"""The chat: conversations, the turn loop, the websocket and the page's endpoints.

Owns the ``Conversation``, ``Message``, ``ToolCall``, ``ToolApproval`` and ``Preference`` rows
and everything a person does with them. May import :mod:`boocode.tools`, :mod:`agents` and
:mod:`mcpclient`; none of them imports it. The message, tool call and conversation objects of
the frames (docs/protocol.md) are built in :mod:`boocode.chat.payloads` only, so a live page and
a reloaded one render the same.
"""

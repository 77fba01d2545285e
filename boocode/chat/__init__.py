"""The chat: conversations, the turn loop, the websocket and the page's endpoints.

Owns the ``Conversation``, ``Message``, ``ToolCall``, ``ToolApproval`` and ``Preference`` rows
and everything a person does with them. May import :mod:`boocode.tools`, :mod:`agents`,
:mod:`boocode.security` and :mod:`mcpclient`; none of them imports it.

In rooms by phase, each importing only the rooms below it (the ``chat-rooms`` contract in
pyproject.toml):

- the entry points Django expects at the root: ``apps``, ``admin``, ``urls``, ``routing``,
  ``layers`` (the channel layer), ``management``, ``migrations``;
- :mod:`boocode.chat.web`: the doors, HTTP views and the websocket consumer;
- :mod:`boocode.chat.turn`: one turn, its context, the running turns and their locks;
- :mod:`boocode.chat.calls`: during a tool call: its scope, approvals, questions, progress;
- :mod:`boocode.chat.wire`: frames and presentation: payloads, events, sizes, rendering;
- :mod:`boocode.chat.llm`: talking to the model: client, windows, budgets of a request;
- :mod:`boocode.chat.ledger`: accounting: audit, usage, budgets, metrics;
- at the bottom, ``models`` and ``storable`` (what the database can store).

The message, tool call and conversation objects of the frames (docs/protocol.md) are built in
:mod:`boocode.chat.wire.payloads` only, so a live page and a reloaded one render the same.
"""

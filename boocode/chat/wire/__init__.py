"""The wire and presentation: what goes out to a tab, and how it looks.

Owns the frames' JSON objects (``payloads``) and their sizes (``sizes``), the conversation's
channel group (``events``), stored answers rendered with highlighting (``rendering``), an answer
rendered as it streams (``live_markdown``) and resources and skills attached to messages
(``attachments``).

May import :mod:`boocode.chat.llm`, :mod:`boocode.chat.ledger`, ``models`` and ``storable``;
never the calls, the turn or the doors above it.
"""

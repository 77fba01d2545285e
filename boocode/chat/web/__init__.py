"""The chat's doors: HTTP views and the websocket consumer.

Owns the page and its endpoints (``views``, ``app_views`` with ``view_guard.js``,
``prompt_views``, ``resource_views``, ``server_views``, ``skill_views``), what an MCP App's view
asks of its host (``view_requests``), conversation search (``search``) and exports
(``exports``), and the websocket consumer (``consumers``). Each parses its input, calls the
rooms below and formats the answer.

May import :mod:`boocode.chat.turn`, :mod:`boocode.chat.calls`, :mod:`boocode.chat.wire`,
:mod:`boocode.chat.llm`, :mod:`boocode.chat.ledger`, ``models`` and ``storable``; only the chat's
root (``urls``, ``routing``, ``admin``, ``apps``) imports it.
"""

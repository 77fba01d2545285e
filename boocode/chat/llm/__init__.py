"""Talking to the model.

Owns the model client (``client``: Chat Completions and Ollama's API, streamed; its stream
readers in ``streams``), the values it deals in (``types``), one HTTP session per event loop
(``server``), Ollama's own API (``ollama``), reasoning split from the answer (``thinking``),
what each server says of a model's window (``model_windows``) and the window a request is
measured against (``windows``), a request's token budget (``request_budget``), summaries of old
turns (``compaction``), the model server's state (``status``) and long tool results served by
pages (``result_pages``).

May import :mod:`boocode.chat.ledger`, ``models`` and ``storable``; never the wire, the calls,
the turn or the doors above it.
"""

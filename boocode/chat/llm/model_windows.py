"""Each model's context window, as its server says it: :func:`server_window`.

Where each server says it:

- Ollama (found at ``/api/version``): ``POST /api/show``, ``model_info["<arch>.context_length"]``
  (the model's own window; else the Modelfile's ``num_ctx``). BooCode chats with Ollama over
  ``/api/chat`` with ``num_ctx`` sized per request (:mod:`boocode.chat.llm.ollama`), so the window
  a request can use is that, at most ``BOOCODE_OLLAMA_MAX_CTX``.
- vLLM: ``max_model_len`` of the model's entry in ``GET /v1/models``.
- OpenRouter: ``context_length`` (or ``top_provider.context_length``) of the model's entry in
  ``GET /v1/models``.
- llama.cpp: ``GET /props``, ``default_generation_settings.n_ctx`` (the window of a slot).
- LM Studio: ``GET /api/v0/models``, the model's ``loaded_context_length`` (loaded), else its
  ``max_context_length``.

Asked in that order until one answers; the result (``None`` when no server said) is cached
per base URL and model for :data:`WINDOW_CACHE_SECONDS` (:data:`UNKNOWN_CACHE_SECONDS` for
``None``; :func:`boocode.chat.llm.client.forget_models` forgets them). Every read is bounded
(:mod:`boocode.chat.llm.server`, a session of its own closed at once: this runs from views
on whatever loop they have) and nothing here raises.
"""

from __future__ import annotations

import time
from typing import Any

from django.conf import settings

from boocode.chat.llm import ollama
from boocode.chat.llm import server as model_server
from boocode.chat.llm.types import LLMSettings, without_userinfo

WINDOW_CACHE_SECONDS = 600.0
UNKNOWN_CACHE_SECONDS = 60.0
MODEL_LIST_BYTES = 8 * 1024 * 1024  # OpenRouter's list of every model is a few megabytes
MAX_WINDOW = 2**31 - 1


async def server_window(llm: LLMSettings, model: str) -> int | None:
    """The context window (tokens) the model server says ``model`` has, or ``None`` if it does not say."""
    if not llm.base_url or not model:
        return None
    key = (llm.base_url, model)
    cached = model_server.windows.get(key)
    if cached is not None:
        when, window = cached
        if time.monotonic() - when < (WINDOW_CACHE_SECONDS if window else UNKNOWN_CACHE_SECONDS):
            return window
    window = await _discover(llm, model)
    model_server.windows[key] = (time.monotonic(), window)
    return window


def known_window(llm: LLMSettings, model: str) -> int | None:
    """What :func:`server_window` last found for ``model`` on ``llm``'s server, asking nobody
    (``None``: not asked yet, or the server did not say): for the pages that show the window."""
    cached = model_server.windows.get((llm.base_url, model))
    return cached[1] if cached is not None else None


async def _discover(llm: LLMSettings, model: str) -> int | None:
    if await model_server.is_ollama(llm):
        shown = await model_server.ollama_show(llm, model)
        window = ollama.context_length(shown) or ollama.modelfile_num_ctx(shown)
        return min(window, settings.OLLAMA_MAX_CTX) if window else None
    listed = await model_server.read_json(
        llm, f"{without_userinfo(llm.base_url)}/models", limit=MODEL_LIST_BYTES
    )
    entry = _entry(listed, model)
    window = _first(
        entry.get("max_model_len"),  # vLLM
        entry.get("context_length"),  # OpenRouter
        (entry.get("top_provider") or {}).get("context_length")
        if isinstance(entry.get("top_provider"), dict)
        else None,
        entry.get("loaded_context_length"),
        entry.get("max_context_length"),
    )
    if window:
        return window
    props = await model_server.read_json(llm, f"{llm.root_url}/props")
    if isinstance(props, dict):
        settings_ = props.get("default_generation_settings")
        window = _first(settings_.get("n_ctx") if isinstance(settings_, dict) else None, props.get("n_ctx"))
        if window:
            return window
    studio = _entry(await model_server.read_json(llm, f"{llm.root_url}/api/v0/models"), model)
    return _first(studio.get("loaded_context_length"), studio.get("max_context_length"))


def _entry(listed: Any, model: str) -> dict[str, Any]:
    """The model's entry of a model list (``{"data": [{"id": ...}, ...]}``), or ``{}``."""
    entries = listed.get("data") if isinstance(listed, dict) else None
    if not isinstance(entries, list):
        return {}
    for entry in entries:
        if isinstance(entry, dict) and entry.get("id") == model:
            return entry
    return {}


def _first(*values: Any) -> int | None:
    """The first value that is a whole number of tokens."""
    for value in values:
        if isinstance(value, int) and not isinstance(value, bool) and 0 < value <= MAX_WINDOW:
            return value
    return None

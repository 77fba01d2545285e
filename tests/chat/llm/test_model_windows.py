"""Each model's window as its server says it (:func:`boocode.chat.llm.model_windows.server_window`):
Ollama's /api/show, vLLM's max_model_len, OpenRouter's context_length, llama.cpp's /props,
LM Studio's /api/v0/models; None when no server says, never an exception; asked once.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from boocode.chat.llm import client as llm_client
from boocode.chat.llm.client import LLMSettings
from boocode.chat.llm.model_windows import server_window
from boocode.chat.llm.windows import Window, configured_window
from tests.support.llm import MODEL, ScriptedLLM
from tests.support.processes import free_port


@pytest.fixture(autouse=True)
def forget() -> Iterator[None]:
    llm_client.forget_models()
    yield
    llm_client.forget_models()


def settings_of(server: ScriptedLLM) -> LLMSettings:
    return LLMSettings(base_url=server.base_url, model=MODEL, timeout=5.0)


async def test_ollama_says_the_models_window_within_the_setting(settings: Any) -> None:
    settings.OLLAMA_MAX_CTX = 131072
    with ScriptedLLM(ollama=True, models=(MODEL,), model_context=40960) as server:
        assert await server_window(settings_of(server), MODEL) == 40960
        assert await server_window(settings_of(server), MODEL) == 40960
        assert (server.version_requests, server.show_requests) == (1, 1)  # cached
        assert await server_window(settings_of(server), "missing") is None
    llm_client.forget_models()
    settings.OLLAMA_MAX_CTX = 16384
    with ScriptedLLM(ollama=True, model_context=40960) as server:
        assert await server_window(settings_of(server), MODEL) == 16384  # what a request can get


async def test_ollama_without_model_info_gives_the_modelfiles_num_ctx(settings: Any) -> None:
    with ScriptedLLM(ollama=True, model_context=0, model_num_ctx=12288) as server:
        assert await server_window(settings_of(server), MODEL) == 12288


@pytest.mark.parametrize(
    ("options", "window"),
    [
        ({"model_fields": {"max_model_len": 32768}}, 32768),  # vLLM
        ({"model_fields": {"context_length": 200000}}, 200000),  # OpenRouter
        ({"model_fields": {"top_provider": {"context_length": 65536}}}, 65536),  # OpenRouter, per provider
        ({"routes": {"/props": {"default_generation_settings": {"n_ctx": 8192}}}}, 8192),  # llama.cpp
        (
            {
                "routes": {
                    "/api/v0/models": {
                        "data": [
                            {"id": "other", "max_context_length": 4096},
                            {"id": MODEL, "max_context_length": 131072, "loaded_context_length": 16384},
                        ]
                    }
                }
            },
            16384,
        ),  # LM Studio: the loaded window first
        ({}, None),  # a server that does not say
        ({"model_fields": {"max_model_len": "lots"}}, None),  # nor one that says nonsense
    ],
)
async def test_each_server_says_it_where_it_does(options: dict[str, Any], window: int | None) -> None:
    with ScriptedLLM(models=(MODEL,), **options) as server:
        assert await server_window(settings_of(server), MODEL) == window
        lists = server.model_list_requests
        assert await server_window(settings_of(server), MODEL) == window
        assert server.model_list_requests == lists  # cached, the unknown too


async def test_a_server_that_does_not_answer_gives_none() -> None:
    llm = LLMSettings(base_url=f"http://127.0.0.1:{free_port()}/v1", model=MODEL, timeout=2.0)
    assert await server_window(llm, MODEL) is None
    assert await server_window(LLMSettings(base_url="", model=""), MODEL) is None


async def test_the_pages_and_the_admin_show_the_window_the_server_said(settings: Any) -> None:
    # What a turn asked the server is what configured_window gives the conversation's meter and
    # the admin afterwards, without asking again (the person sees the window the model has).
    with ScriptedLLM(models=(MODEL,), model_fields={"max_model_len": 32768}) as server:
        settings.LLM_BASE_URL, settings.LLM_MODEL = server.base_url, MODEL
        assert configured_window(None, MODEL) == Window(8192, "default")  # not asked yet
        assert await server_window(LLMSettings.from_settings(MODEL), MODEL) == 32768
        listed = server.model_list_requests
        assert configured_window(None, MODEL) == Window(32768, "server")
        assert configured_window(None, "") == Window(32768, "server")  # the default model
        assert server.model_list_requests == listed

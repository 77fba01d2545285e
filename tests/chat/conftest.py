"""Fixtures for the chat tests: the scripted LLM, a hub with the toolbox server, agents, users."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from channels.layers import channel_layers

from boocode.chat import llm as llm_client
from mcpclient.hub import Hub
from mcpclient.runtime import set_hub
from tests.llm_server import ScriptedLLM

MODEL = "test-model"


@pytest.fixture(autouse=True)
def fresh_state(settings: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A new channel layer (its queues belong to one loop), no agents file, fast retries."""
    from agents.services import reset_sync_state

    channel_layers.backends.clear()
    settings.AGENTS_FILE = tmp_path / "AGENTS.md"
    settings.LLM_BASE_URL = ""
    settings.LLM_MODEL = ""
    reset_sync_state()
    llm_client.last_error = None
    # Backoff is the client's own timing knob; tests keep its shape but not its seconds.
    monkeypatch.setattr(llm_client, "RETRY_BASE_DELAY", 0.01)
    yield
    set_hub(None)
    channel_layers.backends.clear()
    reset_sync_state()


@pytest.fixture
def llm(settings: Any) -> Iterator[ScriptedLLM]:
    """A scripted OpenAI-compatible server the settings point at."""
    with ScriptedLLM(models=(MODEL,)) as server:
        settings.LLM_BASE_URL = server.base_url
        settings.LLM_MODEL = MODEL
        settings.LLM_API_KEY = ""
        settings.LLM_TIMEOUT = 5.0
        settings.LLM_MAX_RETRIES = 2
        yield server
        server.release()


@pytest.fixture
def agents_file(settings: Any) -> Callable[[str], Path]:
    """Write AGENTS.md (the next turn re-reads it)."""

    def write(text: str) -> Path:
        path = Path(settings.AGENTS_FILE)
        path.write_text(text)
        return path

    return write


@pytest.fixture
async def toolbox_hub(hub: Hub, toolbox_config: Callable[..., Any]) -> AsyncIterator[Hub]:
    """The process hub, running the toolbox test server over stdio (tools ``toolbox_*``)."""
    await hub.start([toolbox_config("toolbox")])
    set_hub(hub)
    yield hub
    set_hub(None)


@pytest.fixture(autouse=True)
async def close_model_session() -> AsyncIterator[None]:
    """Close the model client's session of the test's loop (one loop per test)."""
    yield
    await llm_client.close_http_session()

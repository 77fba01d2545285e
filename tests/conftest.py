"""Fixtures shared by the whole suite: MCP test servers and hubs, the scripted model, chat state.

Helpers (functions, classes, constants) live in tests/support/; only fixtures live here. The
chat state fixtures are not autouse: tests/chat/conftest.py turns them on for the chat tests,
and another module that drives the chat names them (``pytest.mark.usefixtures``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from channels.layers import channel_layers

from agents.roster import reset_sync_state
from boocode.chat.llm import client as llm_client
from mcpclient.config.model import ServerConfig
from mcpclient.engine.hub import Hub
from mcpclient.runtime import set_hub
from tests.support.browser import CHROMIUM, CHROMIUM_ARGS
from tests.support.hubs import make_config
from tests.support.llm import MODEL, ScriptedLLM
from tests.support.processes import PYTHON, ROOT, TEST_COMMANDS, TOOLBOX, HttpServer, free_port, toolbox_entry


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The browser tests run last, in their files' order (so also last on each xdist worker).

    Playwright's sync API runs an event loop in the thread while the session's Chromium is
    open; a test needing the thread without one (pytest-asyncio, Django's ORM) must not come
    after the first browser test. ``make test`` runs the two kinds in separate runs anyway.
    """
    items.sort(key=lambda item: item.get_closest_marker("browser") is not None)  # stable


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    """Chromium for the whole session (each xdist worker has its own); a test opens contexts."""
    from playwright.sync_api import expect, sync_playwright  # a test run without Chromium never loads it

    if not Path(CHROMIUM).exists():
        pytest.skip("Chromium is not installed (make test-deps)")
    expect.set_options(timeout=20_000)
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


@pytest.fixture
def toolbox_config() -> Callable[..., ServerConfig]:
    """Factory: ``toolbox_config("name", "--extra-tools", "3", timeout=2000)``."""

    def factory(name: str = "toolbox", *extra: str, **keys: Any) -> ServerConfig:
        return make_config(name, toolbox_entry(*extra, **keys))

    return factory


@pytest.fixture
def http_toolbox() -> Iterator[Callable[..., HttpServer]]:
    """Factory starting the toolbox server over Streamable HTTP (``--sse`` for legacy SSE)."""
    started: list[HttpServer] = []

    def start(*extra: str, sse: bool = False) -> HttpServer:
        port = free_port()
        flag, path = ("--sse", "/sse") if sse else ("--http", "/mcp")
        server = HttpServer([PYTHON, str(TOOLBOX), flag, str(port), *extra], port, path)
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


@pytest.fixture(scope="session")
def shared_http_toolbox() -> Iterator[Callable[..., HttpServer]]:
    """Like ``http_toolbox``, but one server per set of arguments for the whole session.

    Only for tests that read from the server: a test that stops it, crashes it or changes its
    tools (``add_tool``, ``remove_tool``) takes ``http_toolbox`` and a server of its own.
    """
    running: dict[tuple[tuple[str, ...], bool], HttpServer] = {}

    def start(*extra: str, sse: bool = False) -> HttpServer:
        if (extra, sse) not in running:
            port = free_port()
            flag, path = ("--sse", "/sse") if sse else ("--http", "/mcp")
            running[extra, sse] = HttpServer([PYTHON, str(TOOLBOX), flag, str(port), *extra], port, path)
        return running[extra, sse]

    yield start
    for server in running.values():
        server.stop()


@pytest.fixture
async def hub() -> AsyncIterator[Hub]:
    """A hub allowed to run the test servers; stopped (children closed) after the test."""
    instance = Hub(base_dir=ROOT, allowed_commands=TEST_COMMANDS)
    try:
        yield instance
    finally:
        await instance.stop()


# --- the chat -------------------------------------------------------------------------------


@pytest.fixture
def fresh_state(settings: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A new channel layer (its queues belong to one loop), no agents file, fast retries."""
    channel_layers.backends.clear()
    settings.AGENTS_FILE = tmp_path / "AGENTS.md"
    settings.LLM_BASE_URL = ""
    settings.LLM_MODEL = ""
    reset_sync_state()
    llm_client.last_error = None
    # What model servers said of themselves is kept per base URL, and a later test's server may
    # get an earlier one's port: each test asks its own afresh.
    llm_client.forget_models()
    # Backoff is the client's own timing knob; tests keep its shape but not its seconds.
    monkeypatch.setattr(llm_client, "RETRY_BASE_DELAY", 0.01)
    yield
    set_hub(None)
    channel_layers.backends.clear()
    reset_sync_state()


@pytest.fixture
async def close_model_session() -> AsyncIterator[None]:
    """Close the model client's session of the test's loop (one loop per test)."""
    yield
    await llm_client.close_http_session()


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
    """Write AGENTS.md (the next turn re-reads it). tests/agents/ has its own ``agents_file``."""

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

"""The chat tests' fixtures: a fresh chat state for every test, the two-model server, the hubs
of more than one test module ("box", the apps group, the write tools), Alice and her web clients.

The chat fixtures themselves (``fresh_state``, ``close_model_session``, ``llm``,
``toolbox_hub``, ``agents_file``) are in tests/conftest.py, shared with the security tests.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from boocode.chat.llm import client as llm_client
from boocode.chat.llm import status
from mcpclient.core.state import Status
from mcpclient.engine import resources
from mcpclient.engine.hub import Hub
from mcpclient.runtime import set_hub
from tests.support.hubs import make_config
from tests.support.llm import MODELS, ScriptedLLM
from tests.support.processes import PYTHON, ROOT, toolbox_entry

TOOLBOX_RESOURCES = ROOT / "tests" / "servers" / "toolbox_resources.py"


@pytest.fixture(autouse=True)
def chat_state(request: pytest.FixtureRequest, fresh_state: None) -> None:
    """Every chat test: a fresh channel layer and settings, the model client's session closed after.

    Not the session's closing for a browser test: it runs in Playwright's event loop, where an
    async fixture cannot run (and it opens no model session in this process).
    """
    if request.node.get_closest_marker("browser") is None:
        request.getfixturevalue("close_model_session")


@pytest.fixture
def models_llm(settings: Any) -> Iterator[ScriptedLLM]:
    """A scripted server offering two models (``MODELS``), the first the default."""
    llm_client.forget_models()
    with ScriptedLLM(models=MODELS) as server:
        settings.LLM_BASE_URL = server.base_url
        settings.LLM_MODEL = MODELS[0]
        settings.LLM_API_KEY = ""
        settings.LLM_TIMEOUT = 5.0
        settings.LLM_MAX_RETRIES = 0
        yield server
        server.release()
    llm_client.forget_models()


@pytest.fixture
def no_periodic_checks(settings: Any) -> Iterator[None]:
    """The periodic model check only where a test turns it on; a connect checks at once anyway."""
    settings.LLM_CHECK_INTERVAL = 0
    status._last_check = float("-inf")
    yield
    status._last_check = float("-inf")


@pytest.fixture
async def box_hub(hub: Hub) -> AsyncIterator[Hub]:
    """The process hub with the toolbox's resources group as server "box" (tools ``box_*``)."""
    await hub.start([make_config("box", {"command": PYTHON, "args": [str(TOOLBOX_RESOURCES)]})])
    await resources.catalog_of(hub, "box", None, wait=10)
    set_hub(hub)
    yield hub
    set_hub(None)


@pytest.fixture
async def apps_hub(hub: Hub) -> AsyncIterator[Hub]:
    """The process hub with the toolbox's apps group as ``tb`` (writes behind approval), the same
    with ``"apps": false`` as ``quiet``, and a plain toolbox as ``other``."""
    apps = toolbox_entry("--feature", "apps", writeTools="approve")
    await hub.start(
        [
            make_config("tb", apps),
            make_config("quiet", {**apps, "apps": False}),
            make_config("other", toolbox_entry()),
        ]
    )
    assert all(snapshot.status is Status.READY for snapshot in hub.snapshots())
    set_hub(hub)
    yield hub
    set_hub(None)


@pytest.fixture
def writes_log(tmp_path: Path) -> Path:
    """Where the toolbox's write tools log each write that reached them (``TOOLBOX_WRITES_LOG``)."""
    return tmp_path / "writes.jsonl"


@pytest.fixture
async def writes_hub(hub: Hub, writes_log: Path) -> AsyncIterator[Hub]:
    """The process hub with the toolbox's write tools offered behind approval (tools ``notes_*``)."""
    entry = toolbox_entry(
        "--feature", "writes", writeTools="approve", env={"TOOLBOX_WRITES_LOG": str(writes_log)}
    )
    await hub.start([make_config("notes", entry)])
    assert hub.snapshots()[0].status is Status.READY
    set_hub(hub)
    yield hub
    set_hub(None)


@pytest.fixture
def alice() -> Any:
    """Alice, a person with a password (for the login page)."""
    return get_user_model().objects.create_user("alice", password="correct horse battery")


@pytest.fixture
def client_for(alice: Any) -> Callable[..., Client]:
    """Django's test client logged in as a user (Alice by default)."""

    def make(user: Any = alice) -> Client:
        client = Client()
        client.force_login(user)
        return client

    return make

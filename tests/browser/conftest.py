"""The browser tests' fixtures: one live site for the whole session, Chromium, logged-in pages.

The session's site (tests/support/browser.py) runs two real MCP servers over stdio
(tests/servers/toolbox.py with its titled tools, and tests/browser/catalog_server.py for
structured results) and an AGENTS.md with two agents. Each test opens its own browser context
at the width it is parametrized with (375 px: a phone, 1280 px: a laptop), logs in, and fails if
the page threw an error. ``site.db(code)`` runs Django code on the server's database.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.support.browser import (
    AGENTS,
    CATALOG,
    HEIGHTS,
    Site,
    log_in,
    running_site,
)
from tests.support.processes import PYTHON, TOOLBOX


@pytest.fixture(scope="session")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    servers = {
        "toolbox": {"command": PYTHON, "args": [str(TOOLBOX), "--titled-tools"]},
        "catalog": {"command": PYTHON, "args": [str(CATALOG)]},
    }
    yield from running_site(
        tmp_path_factory.mktemp("browser-page"),
        servers,
        AGENTS,
        models=("test-model", "other-model"),
        env={"BOOCODE_LLM_CHECK_INTERVAL": "5"},
    )


@pytest.fixture(autouse=True)
def fresh_script(site: Site) -> Iterator[None]:
    """Replies one test scripted and did not use never reach the next test."""
    yield
    with site.llm._lock:
        site.llm._queue.clear()


@pytest.fixture
def open_page(browser: Any, site: Site) -> Iterator[Callable[..., Any]]:
    """``open_page(width, user="admin", scheme="light")``: a logged-in page on the chat."""
    contexts: list[Any] = []
    errors: list[str] = []

    def opener(width: int, user: str = "admin", scheme: str = "light", **options: Any) -> Any:
        context = browser.new_context(
            viewport={"width": width, "height": HEIGHTS.get(width, 800)}, color_scheme=scheme, **options
        )
        context.set_default_timeout(20_000)
        contexts.append(context)
        page = context.new_page()
        page.on("pageerror", lambda error: errors.append(str(error)))
        log_in(page, site.url, user)
        return page

    yield opener
    for context in contexts:
        context.close()
    assert errors == [], errors


@pytest.fixture
def box_server(site: Site) -> Iterator[None]:
    """The site with a ``box`` server (the toolbox's resources group) for this test only."""
    with site.with_servers({"box": {"command": PYTHON, "args": [str(TOOLBOX), "--feature", "resources"]}}):
        yield

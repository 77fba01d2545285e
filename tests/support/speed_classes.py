"""The suite's speed classes, kept true: a test that starts a process says so with a marker.

Three classes (docs/testing.md): in-process tests (no marker; ``make test-fast`` runs only
these), ``processes`` (a real MCP server, Daphne, ``manage.py``, a hub worker), and ``browser``
(Chromium). A test without either marker that starts a process, in its own body or through a
fixture it sets up, errors at teardown naming what it started, so the fast class stays fast.

Every process a test starts goes through ``subprocess.Popen`` (asyncio's and anyio's
subprocesses included), which is where this counts them.
"""

from __future__ import annotations

import subprocess
from collections.abc import Generator
from typing import Any

import pytest

_started: list[str] = []
_original_execute_child = subprocess.Popen._execute_child  # type: ignore[attr-defined]


def _counting_execute_child(self: subprocess.Popen[Any], args: Any, *rest: Any, **keys: Any) -> Any:
    program = args if isinstance(args, str | bytes) else next(iter(args), "?")
    _started.append(str(program))
    return _original_execute_child(self, args, *rest, **keys)


def pytest_configure(config: pytest.Config) -> None:
    subprocess.Popen._execute_child = _counting_execute_child  # type: ignore[attr-defined,method-assign]


def pytest_unconfigure(config: pytest.Config) -> None:
    subprocess.Popen._execute_child = _original_execute_child  # type: ignore[attr-defined,method-assign]


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None, Any, Any]:
    item.stash[_first_key] = len(_started)
    return (yield)


_first_key = pytest.StashKey[int]()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None, Any, Any]:
    result = yield
    if item.get_closest_marker("processes") or item.get_closest_marker("browser"):
        return result
    started = _started[item.stash[_first_key] :]
    if started:
        raise pytest.fail.Exception(
            f"{item.nodeid} started {len(started)} process(es) ({', '.join(sorted(set(started)))}) "
            "but is not marked `processes` (or `browser`): mark it so `make test-fast` stays fast",
            pytrace=False,
        )
    return result

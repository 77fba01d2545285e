"""Native tool tests run against a real workspace directory in ``tmp_path``."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def workspace(settings, tmp_path: Path) -> Path:
    """``settings.WORKSPACE`` pointed at an empty ``tmp_path/workspace`` (created on first use)."""
    root = tmp_path / "workspace"
    settings.WORKSPACE = root
    return root


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A directory next to the workspace holding a file the tools must never read."""
    directory = tmp_path / "outside"
    directory.mkdir()
    (directory / "secret.txt").write_text("top secret\n")
    return directory


@pytest.fixture
async def live_hub(hub):
    """The test hub installed as the process-wide hub, so ``hub_tools()``/``hub_call()`` use it."""
    from mcpclient.runtime import set_hub

    set_hub(hub)
    try:
        yield hub
    finally:
        set_hub(None)

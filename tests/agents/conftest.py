"""Agents tests read a real AGENTS.md in a temporary directory."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from agents.roster import reset_sync_state


@pytest.fixture
def agents_file(settings, tmp_path: Path) -> Iterator[Path]:
    """``settings.AGENTS_FILE`` pointed at a not-yet-written file in ``tmp_path``."""
    path = tmp_path / "AGENTS.md"
    settings.AGENTS_FILE = path
    reset_sync_state()
    yield path
    reset_sync_state()

"""Fixtures shared by the tests of ``mcpclient`` (tests/mcpclient/<layer>/)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.support.processes import TEST_COMMANDS


@pytest.fixture
def mcp_file(tmp_path: Path, settings: Any) -> Path:
    """``settings.MCP_CONFIG``, a not-yet-written mcp.json in ``tmp_path``; the test servers allowed."""
    settings.MCP_CONFIG = tmp_path / "mcp.json"
    settings.MCP_STDIO_COMMANDS = TEST_COMMANDS
    return settings.MCP_CONFIG

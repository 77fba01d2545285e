"""Counts in words: one tool, never "1 tools"."""

from __future__ import annotations

from mcpclient.core.words import counted


def test_a_count_of_one_takes_the_singular() -> None:
    assert counted(1, "tool") == "1 tool"
    assert [counted(n, "tool") for n in (0, 2, 1500)] == ["0 tools", "2 tools", "1,500 tools"]
    assert counted(1, "entry", "entries") == "1 entry" and counted(3, "entry", "entries") == "3 entries"

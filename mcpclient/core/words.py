"""Counts in words people read: "1 tool", "3 tools" (never "1 tools")."""

from __future__ import annotations


def counted(count: int, noun: str, plural: str = "") -> str:
    """``count`` and ``noun``, the noun plural unless the count is one (``plural``, else noun + "s")."""
    return f"{count:,} {noun if count == 1 else plural or noun + 's'}"

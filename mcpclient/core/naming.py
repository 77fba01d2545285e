"""Prefixed tool names that every LLM API accepts, and that never collide silently.

A tool ``t`` of server ``s`` is offered as ``s_t``. Names must match
``^[a-zA-Z0-9_-]{1,64}$`` (the strictest API): other characters become ``_`` and a name
that is too long is shortened with a stable hash suffix. When two tools would end up with
the same name, the later one gets a hash suffix and a warning is recorded.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from dataclasses import dataclass

MAX_NAME = 64
_INVALID = re.compile(r"[^a-zA-Z0-9_-]")


def _suffix(server: str, tool: str, salt: int = 0) -> str:
    digest = hashlib.sha256(f"{server}\0{tool}\0{salt}".encode()).hexdigest()
    return digest[:8]


def server_prefix(server: str) -> str:
    """How the prefixed names of ``server``'s tools begin (a name cut short keeps it, unless the
    server's own name fills the 64 characters)."""
    return _INVALID.sub("_", server) + "_"


def prefixed_name(server: str, tool: str) -> str:
    """The sanitised ``<server>_<tool>`` name, shortened with a stable hash when too long."""
    name = _INVALID.sub("_", f"{server}_{tool}")
    if len(name) > MAX_NAME:
        name = f"{name[: MAX_NAME - 9]}_{_suffix(server, tool)}"
    return name


@dataclass(frozen=True)
class NamedTool:
    """A (server, tool) pair with the name the model sees and any naming warning."""

    server: str
    tool: str
    prefixed: str
    warning: str = ""


def assign_names(pairs: Iterable[tuple[str, str]]) -> list[NamedTool]:
    """Name every (server, tool) pair, in order; later duplicates are disambiguated."""
    taken: dict[str, tuple[str, str]] = {}
    named: list[NamedTool] = []
    for server, tool in pairs:
        name = prefixed_name(server, tool)
        warning = ""
        if name in taken:
            other = taken[name]
            salt = 0
            candidate = name
            while candidate in taken:
                candidate = f"{name[: MAX_NAME - 9]}_{_suffix(server, tool, salt)}"
                salt += 1
            warning = (
                f'tool "{tool}" of server "{server}" would be named "{name}" like tool "{other[1]}" '
                f'of server "{other[0]}"; it is offered as "{candidate}"'
            )
            name = candidate
        taken[name] = (server, tool)
        named.append(NamedTool(server, tool, name, warning))
    return named

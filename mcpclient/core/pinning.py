"""Pinned tool definitions: what a tool was when it was accepted, and what changed since.

A tool's *definition* is what the model and the person are shown and what decides the tool's
safety: its name, title, description, input and output schema, annotations and ``_meta.ui``.
Its *digest* is the SHA-256 of that definition as canonical JSON. The first time a server's
tools are seen (by ``manage.py mcp_discover``, which the operator reads, or by the first process
that connects it) their digests are recorded (accepted), except a definition the poisoning check
flags, which is held for review from the start; later, a tool whose digest differs from
the accepted one (a ``list_changed``, a reconnect, a new server version: a "rug pull") and a new
tool of a server already known are held back until an administrator accepts them, as the
entry's ``pinTools`` says (:data:`PIN_BLOCK`, the default; :data:`PIN_WARN` offers the tool and
flags it; :data:`PIN_OFF` accepts every definition as it comes). ``acceptNewTools: true`` lets a
known server add tools without a review (never a flagged one).

:func:`review` is the decision, on values only; the runtime keeps the accepted definitions in
the database (:mod:`mcpclient.runtime.pins`). :func:`findings` is a conservative check of a
description for tool poisoning: text aimed at the model rather than at describing the tool, or
naming another server's tools. It never removes an accepted tool: it holds a definition that
nobody accepted yet, and flags for the admin. :func:`held_call` is what a call of a held tool
answers; :func:`held_count` counts them wherever a server's tools are counted.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import mcp.types as types

from mcpclient.core.results import ToolResult

PIN_BLOCK = "block"
PIN_WARN = "warn"
PIN_OFF = "off"
PIN_MODES = (PIN_BLOCK, PIN_WARN, PIN_OFF)

CHANGED = "changed"  # its definition differs from the accepted one
NEW = "new"  # a new tool of a server whose tools were already accepted
FLAGGED = "flagged"  # never accepted, and the poisoning check flags its definition

HELD_CHANGED = "its definition changed since it was accepted: held until an administrator accepts it"
HELD_NEW = "a new tool of a known server: held until an administrator accepts it"
WARN_CHANGED = 'its definition changed since it was accepted ("pinTools": "warn": offered anyway)'
WARN_NEW = 'a new tool of a known server, not yet accepted ("pinTools": "warn": offered anyway)'
HELD_FLAGGED = "the poisoning check flagged its definition ({}): held until an administrator accepts it"
WARN_FLAGGED = 'the poisoning check flagged its definition ({}) ("pinTools": "warn": offered anyway)'


def definition(tool: types.Tool) -> dict[str, Any]:
    """The parts of a listed tool that are pinned, as JSON values."""
    meta = tool.meta if isinstance(tool.meta, Mapping) else {}
    return {
        "name": tool.name,
        "title": tool.title,
        "description": tool.description,
        "inputSchema": tool.input_schema,
        "outputSchema": tool.output_schema,
        "annotations": tool.annotations.model_dump(by_alias=True, exclude_none=True)
        if tool.annotations
        else None,
        "ui": meta.get("ui"),
    }


def digest(value: Mapping[str, Any]) -> str:
    """SHA-256 (hex) of a definition as canonical JSON."""
    text = json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


@dataclass(frozen=True)
class Seen:
    """One listed tool as the pin review sees it."""

    name: str
    digest: str
    definition: dict[str, Any]
    findings: tuple[str, ...] = ()  # what :func:`findings` says of its description


@dataclass(frozen=True)
class Verdict:
    """What the review says of one tool: held back or not, and the sentence the admin shows."""

    held: bool = False
    note: str = ""
    kind: str = ""  # CHANGED, NEW or "" (accepted as it is)
    findings: tuple[str, ...] = ()  # what :func:`findings` says of the definition listed now


ACCEPTED = Verdict()


class PinBook(Protocol):
    """Where accepted definitions are kept: reviews a listing, records what it saw."""

    async def review(
        self, server: str, seen: Sequence[Seen], *, mode: str, accept_new: bool
    ) -> dict[str, Verdict]:
        """The verdict on each tool of ``server``'s listing ``seen`` (and remember the listing)."""
        ...


def review(
    seen: Sequence[Seen], accepted: Mapping[str, str], *, mode: str, accept_new: bool
) -> dict[str, Verdict]:
    """The verdict on each of ``seen`` given the ``accepted`` digests (tool name -> digest).

    A server with nothing accepted yet is seen for the first time: every tool is accepted as it
    is (the caller records them), but one whose definition the poisoning check flags
    (``Seen.findings``), which waits for a review like a changed one. ``mode`` is the entry's
    ``pinTools``.
    """
    if mode == PIN_OFF:
        return {tool.name: ACCEPTED for tool in seen}
    blocked = mode == PIN_BLOCK
    verdicts: dict[str, Verdict] = {}
    for tool in seen:
        known = accepted.get(tool.name)
        if known == tool.digest:
            verdicts[tool.name] = ACCEPTED
        elif known is not None:
            verdicts[tool.name] = Verdict(blocked, HELD_CHANGED if blocked else WARN_CHANGED, CHANGED)
        elif tool.findings:
            said = "; ".join(tool.findings)
            note = (HELD_FLAGGED if blocked else WARN_FLAGGED).format(said)
            verdicts[tool.name] = Verdict(blocked, note, FLAGGED)
        elif accept_new or not accepted:
            verdicts[tool.name] = ACCEPTED
        else:
            verdicts[tool.name] = Verdict(blocked, HELD_NEW if blocked else WARN_NEW, NEW)
    return verdicts


def held_call(prefixed_name: str) -> ToolResult:
    """What a call of a tool held for review answers (the person, the console, the model read it)."""
    return ToolResult.error(
        f'The tool "{prefixed_name}" waits for an administrator\'s review of its definition and cannot '
        "be called until it is accepted (admin: MCP servers, Tool definitions)."
    )


class _Listed(Protocol):
    @property
    def held(self) -> bool: ...

    @property
    def rejected(self) -> bool: ...

    @property
    def filtered(self) -> bool: ...


def held_count(tools: Iterable[_Listed]) -> int:
    """How many of a server's listed tools are held for review (and would be offered otherwise)."""
    return sum(tool.held and not (tool.rejected or tool.filtered) for tool in tools)


def diff(old: Mapping[str, Any] | None, new: Mapping[str, Any]) -> str:
    """A unified diff of two definitions as indented JSON (``old`` None: a new tool)."""
    before = json.dumps(old, indent=2, sort_keys=True, ensure_ascii=False).splitlines() if old else []
    after = json.dumps(new, indent=2, sort_keys=True, ensure_ascii=False).splitlines()
    lines = difflib.unified_diff(before, after, "accepted", "listed now", lineterm="", n=3)
    return "\n".join(lines)


# --- poisoning findings ------------------------------------------------------------------------

# Text that addresses the model instead of describing the tool: the documented tool-poisoning
# phrasings (hidden tags, "ignore previous instructions", "do not tell the user", calls to make
# first, files to read). Conservative on purpose: a finding is shown, never acted on alone.
_AIMED_AT_MODEL = [
    (
        re.compile(r"<\s*/?\s*(important|system|instructions?|secret|hidden)\b[^>]*>", re.I),
        "a hidden-instruction tag",
    ),
    (
        re.compile(
            r"\b(ignore|disregard|forget)\b.{0,40}\b(previous|prior|above|earlier|other|all)\b.{0,30}"
            r"\b(instructions?|rules?|prompts?|messages?)",
            re.I | re.S,
        ),
        "asks to ignore other instructions",
    ),
    (
        re.compile(
            r"\b(do not|don'?t|never)\b.{0,30}\b(tell|mention|inform|reveal|show|notify)\b"
            r".{0,80}\b(the )?user",
            re.I | re.S,
        ),
        "asks to keep something from the person",
    ),
    (
        re.compile(
            r"(~/\.ssh|\bid_(rsa|ed25519)\b|/etc/(passwd|shadow)|\bmcp\.json\b|\.aws/credentials)", re.I
        ),
        "names a secret file",
    ),
    (
        re.compile(
            r"\b(send|include|pass|put|forward|append|add|copy)\b.{0,40}\b(conversation history|"
            r"chat history|system prompt|previous messages|passwords?|private keys?)\b",
            re.I | re.S,
        ),
        "asks for the conversation or secrets as arguments",
    ),
]


_WORD = re.compile(r"[\w-]+")


class OtherTools:
    """Every server's tools, indexed once per listing for :func:`findings`: by the name the model
    sees, and by server (lower case) for the tools' own names."""

    def __init__(self, tools: Iterable[tuple[str, str, str]]) -> None:
        self.prefixed: dict[str, str] = {}  # prefixed name -> its server
        self.by_server: dict[str, list[tuple[str, str, str]]] = {}
        for owner, name, prefixed in tools:
            self.prefixed[prefixed] = owner
            self.by_server.setdefault(owner.lower(), []).append((owner, name, prefixed))
        # Names that are not one word (a "." or "/" in them): looked for with a regular expression.
        self.unusual = [
            (prefixed, owner) for prefixed, owner in self.prefixed.items() if not _WORD.fullmatch(prefixed)
        ]


def findings(
    description: str, *, server: str, other_tools: Iterable[tuple[str, str, str]] | OtherTools
) -> list[str]:
    """Why a tool's description looks written to steer the model ([] when nothing was found).

    ``other_tools``: ``(server, tool name, prefixed name)`` of every other server's tools; a
    description naming one of them by the name the model sees, or by its server's name and its
    own within a few words, is shadowing another server. (A bare tool name alone is not: servers
    share names such as ``read_file`` or ``update_issue`` all the time.)
    """
    text = description or ""
    found = [label for pattern, label in _AIMED_AT_MODEL if pattern.search(text)]
    # The description's words, once: each of the (many) other tools is then a set lookup, and a
    # regular expression runs only for the few whose names appear at all.
    index = other_tools if isinstance(other_tools, OtherTools) else OtherTools(other_tools)
    words = set(_WORD.findall(text))
    lowered = {word.lower() for word in words}
    shadowed = {word for word in words if index.prefixed.get(word, server) != server}
    shadowed |= {
        prefixed for prefixed, owner in index.unusual if owner != server and _mentions(text, prefixed)
    }
    for key in lowered & index.by_server.keys():
        for owner, name, prefixed in index.by_server[key]:
            if owner != server and name.lower() in lowered and _near(text, owner, name):
                shadowed.add(prefixed)
    named = sorted(shadowed)
    if named:
        shown = ", ".join(named[:3]) + (f" and {len(named) - 3} more" if len(named) > 3 else "")
        found.append(f"names another server's tools ({shown})")
    return found


def _mentions(text: str, name: str) -> bool:
    """``name`` in ``text`` as a whole word."""
    return re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", text) is not None


def _near(text: str, server: str, name: str) -> bool:
    """``server`` and its tool ``name`` within 40 characters of each other, in either order."""
    if len(server) < 3 or not _mentions(text, name):
        return False
    gap = r"[\s\S]{0,40}?"
    pattern = rf"(?<![\w-]){re.escape(server)}(?![\w-]){gap}(?<![\w-]){re.escape(name)}(?![\w-])"
    reverse = rf"(?<![\w-]){re.escape(name)}(?![\w-]){gap}(?<![\w-]){re.escape(server)}(?![\w-])"
    return re.search(pattern, text, re.I) is not None or re.search(reverse, text, re.I) is not None

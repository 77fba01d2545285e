"""The toolbox's write group: tools with ``readOnlyHint: false`` and observable side effects.

``python tests/servers/toolbox.py --feature writes`` adds it to the toolbox. The tools share one
in-memory notebook (per server process), so a test can prove whether a write ran by reading it
back through the hub with the read-only ``read_notes``; with ``TOOLBOX_WRITES_LOG`` set to a file
path every write is also appended to that file (one JSON line per call), which a test reads
without going through the hub at all.

- ``write_note(key, text)``: stores a note; not destructive, idempotent (the same call twice
  leaves the same notebook);
- ``delete_notes()``: empties the notebook; destructive, not idempotent in what it reports;
- ``read_notes()``: the notebook as JSON; read-only.
"""

from __future__ import annotations

import json
import os
from typing import Any

import mcp.types as types
from common import READ_ONLY

WRITE_NOTE = types.ToolAnnotations(
    title="Write a note",
    read_only_hint=False,
    destructive_hint=False,
    idempotent_hint=True,
    open_world_hint=False,
)
DELETE_NOTES = types.ToolAnnotations(
    read_only_hint=False,
    destructive_hint=True,
    idempotent_hint=False,
    open_world_hint=False,
)


def _log(entry: dict[str, Any]) -> None:
    path = os.environ.get("TOOLBOX_WRITES_LOG")
    if path:
        with open(path, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(entry) + "\n")


def register(server: Any) -> None:
    """Add the write tools and their read-only reader to ``server``."""
    notes: dict[str, str] = {}

    @server.tool(annotations=WRITE_NOTE)
    def write_note(key: str, text: str) -> str:
        """Store a note under key (replacing the note that was there)."""
        notes[key] = text
        _log({"tool": "write_note", "key": key, "text": text})
        return f"stored note {key!r}"

    @server.tool(annotations=DELETE_NOTES)
    def delete_notes() -> str:
        """Delete every note."""
        count = len(notes)
        notes.clear()
        _log({"tool": "delete_notes", "deleted": count})
        return f"deleted {count} note(s)"

    @server.tool(annotations=READ_ONLY)
    def read_notes() -> str:
        """The notes as a JSON object."""
        return json.dumps(notes, sort_keys=True)

"""MCP Apps (the ``io.modelcontextprotocol/ui`` extension): what a tool's ``_meta.ui`` says.

A tool may point at a view (``_meta.ui.resourceUri``, a ``ui://`` resource of its server whose
MIME type is :data:`MIME_TYPE`) and say who may use it (``_meta.ui.visibility``): ``"model"``
(offered to the model) and ``"app"`` (callable from its server's views). Both come from the
server and are untrusted: a value that does not fit is ignored (the defaults apply) and said in
the tool's note, never an error that costs the tool. The flat ``_meta["ui/resourceUri"]`` of
earlier drafts is read when ``ui.resourceUri`` is absent.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

EXTENSION = "io.modelcontextprotocol/ui"
MIME_TYPE = "text/html;profile=mcp-app"
SCHEME = "ui://"
MODEL = "model"
APP = "app"
VISIBILITY = (MODEL, APP)  # the spec's default, and the order they are kept in
MAX_URI_CHARS = 2048
LEGACY_URI_KEY = "ui/resourceUri"


def settings() -> dict[str, Any]:
    """What a host advertises under ``capabilities.extensions`` to say it renders views."""
    return {"mimeTypes": [MIME_TYPE]}


@dataclass(frozen=True)
class ToolUi:
    """A tool's view and visibility, checked; ``note`` says what was ignored ("" when nothing)."""

    resource_uri: str = ""
    visibility: tuple[str, ...] = VISIBILITY
    note: str = ""


def _uri_problem(value: Any) -> str:
    if not isinstance(value, str):
        return f"it is not a string but {type(value).__name__}"
    if not value.startswith(SCHEME):
        return f'it does not start with "{SCHEME}"'
    if len(value) > MAX_URI_CHARS:
        return f"it is longer than {MAX_URI_CHARS} characters"
    if any(char <= " " or char == "\x7f" for char in value):
        return "it holds spaces or control characters"
    return ""


def tool_ui(meta: Mapping[str, Any] | None) -> ToolUi:
    """The view and visibility a tool's ``_meta`` declares (the defaults where it declares none)."""
    if not isinstance(meta, Mapping):
        return ToolUi()
    ui = meta.get("ui")
    notes: list[str] = []
    if ui is not None and not isinstance(ui, Mapping):
        return ToolUi(note=f'_meta.ui ignored: it is not an object but {type(ui).__name__}')
    ui = ui or {}
    uri_key = "_meta.ui.resourceUri"
    uri = ui.get("resourceUri")
    if uri is None and LEGACY_URI_KEY in meta:
        uri_key, uri = f'_meta["{LEGACY_URI_KEY}"]', meta[LEGACY_URI_KEY]
    resource_uri = ""
    if uri is not None:
        if problem := _uri_problem(uri):
            notes.append(f"{uri_key} ignored: {problem}")
        else:
            resource_uri = uri
    visibility: tuple[str, ...] = VISIBILITY
    declared = ui.get("visibility")
    if declared is not None:
        if not isinstance(declared, list):
            notes.append(f"_meta.ui.visibility ignored: it is not a list but {type(declared).__name__}")
        else:
            unknown = [item for item in declared if item not in VISIBILITY]
            if unknown:
                shown = ", ".join(repr(item)[:40] for item in unknown[:3])
                notes.append(f"_meta.ui.visibility: unknown {shown} left out")
            visibility = tuple(kind for kind in VISIBILITY if kind in declared)
    return ToolUi(resource_uri=resource_uri, visibility=visibility, note="; ".join(notes))


def visibility_note(visibility: tuple[str, ...]) -> str:
    """Why a tool the server lists is not offered to the model, by its visibility ("" if it is)."""
    if MODEL in visibility:
        return ""
    if APP in visibility:
        return '_meta.ui.visibility is ["app"]: only its server\'s views call it'
    return "_meta.ui.visibility is []: neither the model nor a view may call it"

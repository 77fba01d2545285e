"""Turning an MCP ``CallToolResult`` into what the model reads and what the UI shows.

The model gets one string: text blocks joined with newlines, embedded resources as JSON,
resource links as ``[resource: uri]``, images and audio as short placeholders (their bytes
go to the UI as parts; so do the URIs of resource links and embedded resources, which the page
opens in its viewer), structured content when nothing else was returned. The whole
string is capped at 5 MB of UTF-8 with an explicit marker saying how much was cut.
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import asdict, dataclass, field
from typing import Any

import mcp.types as types

MAX_OUTPUT_BYTES = 5 * 1024 * 1024
# Images and audio kept for the UI share the same budget as the text.
MAX_PARTS_BYTES = 5 * 1024 * 1024
NO_OUTPUT = "(no output)"


@dataclass
class ToolResult:
    """The outcome of one tool call: text for the model, parts for the UI."""

    output: str
    is_error: bool = False
    parts: list[dict[str, Any]] = field(default_factory=list)
    # The result's structuredContent as the server sent it (pages show it; the model reads output).
    # Not compared: two results the model reads alike are equal.
    structured: Any = field(default=None, compare=False)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable form (``output``, ``is_error``, ``parts``)."""
        return asdict(self)

    @classmethod
    def error(cls, message: str) -> ToolResult:
        """An error result the model can read."""
        return cls(output=message, is_error=True)


def cap_output(text: str, limit: int = MAX_OUTPUT_BYTES) -> str:
    """Cut ``text`` to at most ``limit`` UTF-8 bytes (on a character boundary) plus a marker."""
    encoded = text.encode("utf-8")
    if len(encoded) <= limit:
        return text
    kept = encoded[:limit].decode("utf-8", errors="ignore")
    cut = len(encoded) - len(kept.encode("utf-8"))
    return f"{kept}\n[output truncated: {cut} of {len(encoded)} bytes cut; the limit is {limit} bytes]"


def _decoded_size(data: str) -> int:
    try:
        return len(base64.b64decode(data, validate=False))
    except (binascii.Error, ValueError):
        return len(data)


def _resource_text(resource: types.TextResourceContents | types.BlobResourceContents) -> str:
    entry: dict[str, Any] = {"uri": str(resource.uri)}
    if resource.mime_type:
        entry["mimeType"] = resource.mime_type
    if isinstance(resource, types.TextResourceContents):
        entry["text"] = resource.text
    else:
        entry["blob"] = (
            f"[binary data: {_decoded_size(resource.blob)} bytes, {resource.mime_type or 'unknown type'}]"
        )
    return json.dumps({"resource": entry}, ensure_ascii=False)


def _resource_part(kind: str, uri: str, name: str | None, mime_type: str | None) -> dict[str, Any]:
    """A resource a result links to or embeds, for the UI to open in its viewer (read through the hub)."""
    return {"type": kind, "uri": uri[:2048], "name": (name or "")[:300], "mime_type": (mime_type or "")[:200]}


def extract_result(result: types.CallToolResult) -> ToolResult:
    """Convert an MCP ``CallToolResult`` into a :class:`ToolResult` (capped)."""
    texts: list[str] = []
    parts: list[dict[str, Any]] = []
    parts_bytes = 0
    for block in result.content:
        if isinstance(block, types.TextContent):
            texts.append(block.text)
        elif isinstance(block, types.ImageContent | types.AudioContent):
            kind = "image" if isinstance(block, types.ImageContent) else "audio"
            size = _decoded_size(block.data)
            texts.append(f"[{kind}: {block.mime_type}, {size} bytes, shown to the user]")
            if parts_bytes + len(block.data) <= MAX_PARTS_BYTES:
                parts.append({"type": kind, "mime_type": block.mime_type, "data": block.data})
                parts_bytes += len(block.data)
            else:
                texts.append(f"[{kind} not kept: over the {MAX_PARTS_BYTES} byte limit for media]")
        elif isinstance(block, types.EmbeddedResource):
            texts.append(_resource_text(block.resource))
            parts.append(_resource_part("resource", str(block.resource.uri), "", block.resource.mime_type))
        elif isinstance(block, types.ResourceLink):
            texts.append(f"[resource: {block.uri}]")
            parts.append(_resource_part("resource_link", str(block.uri), block.name, block.mime_type))
        else:  # a block type newer than this code: keep its JSON rather than drop it
            texts.append(block.model_dump_json(by_alias=True, exclude_none=True))
    if not texts and result.structured_content is not None:
        texts.append(json.dumps(result.structured_content, ensure_ascii=False))
    output = "\n".join(texts) if texts else NO_OUTPUT
    return ToolResult(
        output=cap_output(output),
        is_error=bool(result.is_error),
        parts=parts,
        structured=result.structured_content,
    )


def unknown_tool(prefixed_name: str) -> ToolResult:
    """The error for a tool name no ready server the caller may use offers."""
    return ToolResult.error(f'Unknown tool "{prefixed_name}": it is not offered by any ready MCP server')

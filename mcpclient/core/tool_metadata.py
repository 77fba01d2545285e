"""What the hub keeps of a tool's display metadata: its title and its icons.

Both come from the server and are untrusted. The title is the MCP spec's ``title``, else
``annotations.title``; it is made one line and capped so it fits its column. Icons are kept
only when their ``src`` is ``https:`` (with a host) or ``data:image/``: the spec says clients
must reject other schemes (``javascript:``, ``file:``, plain ``http:``...). At most
:data:`MAX_ICONS` are kept, and an icon whose ``src`` is longer than :data:`MAX_ICON_SRC_BYTES`
is dropped. Nothing here fetches or renders an icon: BooCode only shows their addresses as text.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

import mcp.types as types

MAX_TITLE_CHARS = 255  # McpTool.title's max_length
MAX_ICONS = 8
MAX_ICON_SRC_BYTES = 8 * 1024


def tool_title(tool: types.Tool) -> str:
    """The tool's display title: ``title``, else ``annotations.title``, else ""."""
    for candidate in (tool.title, tool.annotations.title if tool.annotations else None):
        text = " ".join((candidate or "").split())
        if text:
            return text[:MAX_TITLE_CHARS]
    return ""


def icon_src_allowed(src: str) -> bool:
    """True for an ``https:`` URL with a host or a ``data:image/`` URI, small enough to keep."""
    if len(src.encode()) > MAX_ICON_SRC_BYTES:
        return False
    if src[:11].lower() == "data:image/":
        return True
    if any(char <= " " or char == "\x7f" for char in src):
        return False  # urlsplit would quietly drop tabs and newlines; a real URL has none
    try:
        parts = urlsplit(src)
    except ValueError:  # e.g. an unbalanced "[" in the host
        return False
    return parts.scheme.lower() == "https" and bool(parts.hostname)


def safe_icons(icons: list[types.Icon] | None) -> tuple[dict[str, Any], ...]:
    """The icons worth keeping, as ``{src, mimeType, sizes, theme}`` dicts (absent keys left out)."""
    kept = [
        icon.model_dump(by_alias=True, exclude_none=True, mode="json")
        for icon in icons or ()
        if icon_src_allowed(icon.src)
    ]
    return tuple(kept[:MAX_ICONS])

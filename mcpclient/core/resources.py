"""What a resource listing, a read and a completion hand to their users: values and the error.

The machinery that lists, reads and completes is :mod:`mcpclient.engine.resources`; the chat,
the tools and the worker's wire take these values from here. A :class:`ResourceError`'s
``str()`` is for people, its ``status`` HTTP-like (404 unknown, 409 not supported, 502 server
trouble).
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from typing import Any

import mcp.types as types


class ResourceError(Exception):
    """A read, listing or completion that cannot be served; ``str()`` is for people."""

    def __init__(self, message: str, status: int = 502) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class ResourceEntry:
    """One listed resource (display data from the server: untrusted text)."""

    server: str
    uri: str
    name: str
    title: str = ""
    description: str = ""
    mime_type: str = ""
    size: int | None = None

    def to_dict(self) -> dict[str, Any]:
        """The JSON shape of the API (docs/protocol.md)."""
        return {
            "kind": "resource",
            "server": self.server,
            "uri": self.uri,
            "name": self.name,
            "title": self.title,
            "description": self.description,
            "mimeType": self.mime_type,
            "size": self.size,
        }


@dataclass(frozen=True)
class TemplateEntry:
    """One listed resource template; ``arguments`` are the names of its variables, in order."""

    server: str
    uri_template: str
    name: str
    title: str = ""
    description: str = ""
    mime_type: str = ""
    arguments: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """The JSON shape of the API (docs/protocol.md)."""
        return {
            "kind": "template",
            "server": self.server,
            "uriTemplate": self.uri_template,
            "name": self.name,
            "title": self.title,
            "description": self.description,
            "mimeType": self.mime_type,
            "arguments": list(self.arguments),
        }


# --- reading ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class ResourceContent:
    """One item of a read: its text, or its bytes (a blob), or a note saying why neither is kept."""

    uri: str
    mime_type: str
    text: str | None = None
    data: bytes | None = None
    note: str = ""
    # The item's _meta with only its "ui" (an MCP Apps view's CSP domains and permissions), if small.
    meta: dict[str, Any] | None = None
    cut: bool = False  # the text was cut at the size limit

    def to_dict(self) -> dict[str, Any]:
        """The JSON shape of the API: ``text``, or ``blob`` as base64, or only a ``note``."""
        shaped: dict[str, Any] = {"uri": self.uri, "mimeType": self.mime_type, "note": self.note}
        if self.text is not None:
            shaped["text"] = self.text
        if self.data is not None:
            shaped["blob"] = base64.b64encode(self.data).decode("ascii")
            shaped["size"] = len(self.data)
        return shaped


@dataclass(frozen=True)
class ReadResult:
    """What ``resources/read`` returned, capped (see the module docstring)."""

    server: str
    uri: str
    contents: tuple[ResourceContent, ...]

    def size(self) -> int:
        """The bytes of its texts (UTF-8) and blobs."""
        return sum(
            len(item.text.encode("utf-8")) if item.text is not None else len(item.data or b"")
            for item in self.contents
        )

    def model_text(self) -> str:
        """The contents as the model reads them: texts joined, blobs as a short note."""
        parts = []
        for item in self.contents:
            if item.text is not None:
                parts.append(item.text)
            else:
                size = f"{len(item.data)} bytes" if item.data is not None else item.note
                parts.append(
                    f"[binary content: {item.mime_type or 'unknown type'}, {size}; not shown to the model]"
                )
        return "\n".join(parts)


# --- completion/complete ---------------------------------------------------------------------
@dataclass(frozen=True)
class Completions:
    """Suggested values for one argument (at most :data:`MAX_COMPLETIONS`)."""

    values: tuple[str, ...]
    total: int | None = None
    has_more: bool = False

    def to_dict(self) -> dict[str, Any]:
        """The JSON shape of the API."""
        return {"values": list(self.values), "total": self.total, "hasMore": self.has_more}


def make_ref(kind: str, name: str) -> types.ResourceTemplateReference | types.PromptReference:
    """A completion reference: ``kind`` is ``"resource"`` (a template's URI) or ``"prompt"`` (a name)."""
    if kind == "resource":
        return types.ResourceTemplateReference(uri=name)
    if kind == "prompt":
        return types.PromptReference(name=name)
    raise ResourceError(f'A completion reference is "resource" or "prompt", not "{kind}".', 400)


MAX_URI_CHARS = 2048

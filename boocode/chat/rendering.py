"""Safe presentation of model and tool text: Markdown to sanitized HTML, images to data URLs.

Model output and tool results are untrusted (a tool can return a web page, a model can be
talked into writing ``<script>``). Markdown is rendered with raw HTML disabled and the result
then passes through the ``nh3`` sanitizer with a small allowlist; images are never loaded
from URLs (no tracking pixels, no exfiltration through query strings): only ``data:`` URLs
built here from base64 bytes of an allowlisted raster type.
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any

import nh3
from markdown_it import MarkdownIt

ALLOWED_TAGS = {
    "p",
    "br",
    "hr",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "strong",
    "em",
    "del",
    "s",
    "code",
    "pre",
    "blockquote",
    "ul",
    "ol",
    "li",
    "a",
    "table",
    "thead",
    "tbody",
    "tr",
    "th",
    "td",
}
ALLOWED_ATTRIBUTES = {"a": {"href", "title"}, "ol": {"start"}}
ALLOWED_URL_SCHEMES = {"http", "https", "mailto"}
IMAGE_MIME_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
MAX_IMAGE_BYTES = 2 * 1024 * 1024  # base64 characters per tool call shown in the page
PREVIEW_CHARS = 4000

_markdown = (
    MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False})
    .enable(["table", "strikethrough"])
    .disable("image")
)


def render_markdown(text: str) -> str:
    """Markdown to HTML that is safe to insert into the page."""
    html = _markdown.render(text)
    return nh3.clean(
        html,
        tags=ALLOWED_TAGS,
        attributes=ALLOWED_ATTRIBUTES,
        url_schemes=ALLOWED_URL_SCHEMES,
        link_rel="noopener noreferrer nofollow",
        set_tag_attribute_values={"a": {"target": "_blank"}},
    )


def image_data_url(part: dict[str, Any]) -> str | None:
    """A ``data:`` URL for an image part, or ``None`` if the type or the base64 is not acceptable."""
    if part.get("type") != "image":
        return None
    mime = str(part.get("mime_type", "")).lower().strip()
    data = part.get("data")
    if mime not in IMAGE_MIME_TYPES or not isinstance(data, str) or not data:
        return None
    try:
        raw = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        return None
    # Re-encode: the URL then contains nothing but canonical base64.
    return f"data:{mime};base64,{base64.b64encode(raw).decode('ascii')}"


def images_for(parts: list[dict[str, Any]]) -> tuple[list[str], int]:
    """The displayable images of a tool result and how many were left out."""
    urls: list[str] = []
    left_out = 0
    budget = MAX_IMAGE_BYTES
    for part in parts or []:
        if part.get("type") != "image":
            continue
        url = image_data_url(part)
        if url is None or len(url) > budget:
            left_out += 1
            continue
        budget -= len(url)
        urls.append(url)
    return urls, left_out


def preview(text: str, limit: int = PREVIEW_CHARS) -> tuple[str, bool]:
    """The first ``limit`` characters and whether text was cut."""
    if len(text) <= limit:
        return text, False
    return text[:limit], True


def pretty_arguments(arguments: str) -> str:
    """Arguments as indented JSON when they parse, else as written."""
    try:
        return json.dumps(json.loads(arguments), indent=2, ensure_ascii=False)
    except ValueError:
        return arguments

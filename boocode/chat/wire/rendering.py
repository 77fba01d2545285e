"""Safe presentation of model and tool text: Markdown to sanitized HTML, images to data URLs.

Model output and tool results are untrusted (a tool can return a web page, a model can be
talked into writing ``<script>``). Markdown is rendered with raw HTML disabled and the result
then passes through the ``nh3`` sanitizer with a small allowlist; images are never loaded
from URLs (no tracking pixels, no exfiltration through query strings): only ``data:`` URLs
built here from base64 bytes of an allowlisted raster type. Links open in a new tab with
``rel="noopener noreferrer nofollow"``.

Fenced code whose info string names a language Pygments knows is highlighted on the server:
``<pre class="code"><code class="language-python">`` holding ``<span class="tok-k">`` token
spans (Pygments' short class names, prefixed ``tok-``). The sanitizer lets through exactly those
classes and nothing else, and ``static/chat/pygments.css`` (:func:`pygments_stylesheet`) colours
them for the light and the dark theme.
"""

from __future__ import annotations

import base64
import binascii
import functools
import re
from typing import Any

import nh3
from markdown_it import MarkdownIt
from markdown_it.token import Token
from pygments import highlight as pygments_highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import get_all_lexers, get_lexer_by_name
from pygments.token import STANDARD_TYPES, Text
from pygments.util import ClassNotFound

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
ALLOWED_TAGS.add("span")  # Pygments' token spans (their classes are checked below)
ALLOWED_ATTRIBUTES = {"a": {"href", "title"}, "ol": {"start"}}
ALLOWED_URL_SCHEMES = {"http", "https", "mailto"}
LINK_REL = "noopener noreferrer nofollow"
TOKEN_CLASS_PREFIX = "tok-"
# Fenced code longer than this is shown without colours: lexing it would hold the loop too long.
HIGHLIGHT_MAX_CHARS = 50_000
LIGHT_STYLE = "default"
DARK_STYLE = "monokai"
IMAGE_MIME_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
MAX_IMAGE_BYTES = 2 * 1024 * 1024  # base64 characters per tool call shown in the page
PREVIEW_CHARS = 4000
ELLIPSIS = "…"

_formatter = HtmlFormatter(nowrap=True, classprefix=TOKEN_CLASS_PREFIX)


def _language_aliases() -> set[str]:
    """Every lexer's first alias: the names a ``language-`` class may carry."""
    return {aliases[0] for _, aliases, _, _ in get_all_lexers() if aliases}


TOKEN_CLASSES = frozenset(TOKEN_CLASS_PREFIX + short for short in STANDARD_TYPES.values() if short)
ALLOWED_CLASSES = {
    "pre": {"code"},
    "code": {f"language-{alias}" for alias in _language_aliases()},
    "span": set(TOKEN_CLASSES),
}


@functools.lru_cache(maxsize=256)
def _lexer(language: str) -> Any:
    """The lexer for a fence's language name (case-insensitive), or ``None``."""
    try:
        return get_lexer_by_name(language.lower(), stripnl=False, ensurenl=False)
    except ClassNotFound:
        return None


def highlight_code(code: str, language: str, attributes: str = "") -> str:
    """A fence as ``<pre class="code"><code class="language-x">`` with token spans (markdown-it hook).

    Unknown languages and very long blocks keep the plain, escaped text (no class on ``code``).
    """
    lexer = _lexer(language) if language and len(language) <= 50 else None
    if lexer is None or not lexer.aliases:
        return f'<pre class="code"><code>{_escape(code)}</code></pre>'
    css_class = f"language-{lexer.aliases[0]}"
    if len(code) > HIGHLIGHT_MAX_CHARS:
        body = _escape(code)
    else:
        body = pygments_highlight(code, lexer, _formatter)
        if not code.endswith("\n") and body.endswith("\n"):
            body = body[:-1]  # Pygments ends every text with a newline; the fence's text is as written
    return f'<pre class="code"><code class="{css_class}">{body}</code></pre>'


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")


_markdown = (
    MarkdownIt(
        "commonmark", {"html": False, "linkify": False, "typographer": False, "highlight": highlight_code}
    )
    .enable(["table", "strikethrough"])
    .disable("image")
)


# Highlighting costs ~2 ms per KB of code: every page that connects renders up to 200 stored
# messages, mostly the same ones, so recent renderings are kept (small texts only: bounded memory).
RENDER_CACHE_SIZE = 128
RENDER_CACHE_MAX_CHARS = 16_000


def render_markdown(text: str) -> str:
    """Markdown to HTML that is safe to insert into the page (code highlighted, links in a new tab)."""
    if len(text) <= RENDER_CACHE_MAX_CHARS:
        return _render_cached(text)
    return _render(text)


@functools.lru_cache(maxsize=RENDER_CACHE_SIZE)
def _render_cached(text: str) -> str:
    return _render(text)


def _render(text: str) -> str:
    return sanitize(_markdown.render(text))


def parse_markdown(text: str, env: dict[str, Any]) -> list[Token]:
    """The tokens of ``text`` as :func:`render_markdown` parses it.

    ``env`` carries link reference definitions in (``env["references"]``, from text before this
    one) and out (those ``text`` defines are added): the streamed answer's renderer
    (:mod:`boocode.chat.wire.live_markdown`) renders an answer block by block with it.
    """
    return _markdown.parse(text, env)


def render_tokens(tokens: list[Token], env: dict[str, Any]) -> str:
    """Tokens of :func:`parse_markdown` as HTML, sanitized exactly as :func:`render_markdown`'s."""
    return sanitize(_markdown.renderer.render(tokens, _markdown.options, env))


def sanitize(html: str) -> str:
    """The one policy for HTML that reaches the page: the allowlist of docs/security.md."""
    return nh3.clean(
        html,
        tags=ALLOWED_TAGS,
        attributes=ALLOWED_ATTRIBUTES,
        allowed_classes=ALLOWED_CLASSES,
        url_schemes=ALLOWED_URL_SCHEMES,
        link_rel=LINK_REL,
        set_tag_attribute_values={"a": {"target": "_blank"}},
    )


_SPACES = re.compile(r"\s+")


def markdown_text(text: str) -> str:
    """The words of a Markdown text without its markup, on one line (titles, search snippets).

    Emphasis, links, headings and list markers go; link texts, inline code and the content of
    code blocks stay. Nothing here is HTML: the result is shown as text.
    """
    words: list[str] = []
    for token in _markdown.parse(text):
        if token.type == "inline":
            words.extend(_inline_text(token.children or []))
        elif token.type in ("fence", "code_block"):
            words.append(token.content)
        words.append(" ")
    return _SPACES.sub(" ", "".join(words)).strip()


def _inline_text(children: list[Token]) -> list[str]:
    out = []
    for child in children:
        if child.type in ("text", "code_inline"):
            out.append(child.content)
        elif child.type in ("softbreak", "hardbreak"):
            out.append(" ")
    return out


def pygments_stylesheet() -> str:
    """The CSS of ``static/chat/pygments.css``: light token colours, dark ones for the dark theme.

    Dark applies under ``[data-theme="dark"]`` and, when the page follows the system, under
    ``prefers-color-scheme: dark`` unless the user chose light.
    """
    light = HtmlFormatter(style=LIGHT_STYLE, classprefix=TOKEN_CLASS_PREFIX)
    dark = HtmlFormatter(style=DARK_STYLE, classprefix=TOKEN_CLASS_PREFIX)
    scope = "pre.code"

    def rules(formatter: HtmlFormatter, prefix: str) -> str:
        lines = list(formatter.get_token_style_defs(f"{prefix}{scope}"))
        background = formatter.style.background_color
        lines.insert(0, f"{prefix}{scope} {{ background: {background}; color: {_text_colour(formatter)} }}")
        return "\n".join(lines)

    dark_system = rules(dark, ':root:not([data-theme="light"]) ')
    indented = "\n".join("  " + line for line in dark_system.splitlines())
    return (
        "/* Generated by boocode.chat.wire.rendering.pygments_stylesheet() (Pygments "
        f"{LIGHT_STYLE} and {DARK_STYLE}); tests/chat/wire/test_rendering.py checks it is current. */\n"
        f"{rules(light, '')}\n\n"
        f"{rules(dark, '[data-theme="dark"] ')}\n\n"
        f"@media (prefers-color-scheme: dark) {{\n{indented}\n}}\n"
    )


def _text_colour(formatter: HtmlFormatter) -> str:
    style = formatter.style.style_for_token(Text)
    return f"#{style['color']}" if style.get("color") else "inherit"


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


def shorten(text: str, limit: int) -> str:
    """``text`` in at most ``limit`` characters, cut at a word boundary and ended with "…"."""
    if len(text) <= limit:
        return text
    window = text[:limit]  # one character more than is kept: is the cut at a space?
    space = window.rfind(" ")
    kept = window[:space] if space >= limit // 2 else window[: limit - len(ELLIPSIS)]
    return kept.rstrip(" ,;:.-\u2013\u2014") + ELLIPSIS

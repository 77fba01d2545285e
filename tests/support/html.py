"""HTML as a browser would read it, for the tests of what the server renders."""

from __future__ import annotations

from html.parser import HTMLParser

Element = tuple[str, list[tuple[str, str | None]]]


class _Elements(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.found: list[Element] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.found.append((tag, attrs))


def elements(html: str) -> list[Element]:
    """The elements a browser would build from ``html``: (tag, attributes), in order."""
    parser = _Elements()
    parser.feed(html)
    return parser.found

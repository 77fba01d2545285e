"""The admin as a browser drives it: a form's fields as it would submit them, mcp.json written
as the write-back writes it, and requests run as under Daphne's ASGI handler."""

from __future__ import annotations

import json
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

from asgiref.sync import ThreadSensitiveContext, sync_to_async
from django.db import connection
from django.test import AsyncClient


class _FormReader(HTMLParser):
    """Collects what a browser would submit for one form (by id)."""

    def __init__(self, form_id: str) -> None:
        super().__init__(convert_charrefs=True)
        self.form_id = form_id
        self.inside = False
        self.fields: list[tuple[str, str]] = []
        self._textarea: str | None = None
        self._text = ""
        self._select: str | None = None
        self._options: list[tuple[str, bool]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {key: value or "" for key, value in attrs}
        if tag == "form":
            self.inside = a.get("id") == self.form_id
            return
        if not self.inside:
            return
        if tag == "input" and "name" in a:
            kind = a.get("type", "text")
            if kind in ("submit", "button", "image", "reset", "file"):
                return
            if kind in ("checkbox", "radio") and "checked" not in a:
                return
            self.fields.append((a["name"], a.get("value", "on" if kind == "checkbox" else "")))
        elif tag == "textarea" and "name" in a:
            self._textarea, self._text = a["name"], ""
        elif tag == "select" and "name" in a:
            self._select, self._options = a["name"], []
        elif tag == "option" and self._select is not None:
            self._options.append((a.get("value", ""), "selected" in a))

    def handle_data(self, data: str) -> None:
        if self._textarea is not None:
            self._text += data

    def handle_endtag(self, tag: str) -> None:
        if tag == "form":
            self.inside = False
        elif tag == "textarea" and self._textarea is not None:
            # A browser drops the newline right after <textarea>.
            text = self._text[1:] if self._text.startswith("\n") else self._text
            self.fields.append((self._textarea, text))
            self._textarea = None
        elif tag == "select" and self._select is not None:
            chosen = [value for value, selected in self._options if selected] or [self._options[0][0]]
            self.fields.append((self._select, chosen[0]))
            self._select = None


def form_fields(html: str, form_id: str = "mcpserver_form") -> dict[str, Any]:
    """The form's fields as the test client posts them (a list for repeated names)."""
    reader = _FormReader(form_id)
    reader.feed(html)
    data: dict[str, Any] = {}
    for name, value in reader.fields:
        if name in data:
            data[name] = [*data[name], value] if isinstance(data[name], list) else [data[name], value]
        else:
            data[name] = value
    assert data, f"no form {form_id!r} on the page"
    return data


def write_config(path: Path, servers: dict[str, Any], **top: Any) -> str:
    """Write mcp.json formatted like the write-back formats it; return the text."""
    text = json.dumps({**top, "mcpServers": servers}, indent=2, ensure_ascii=False) + "\n"
    path.write_text(text)
    return text


class AsgiAdmin:
    """An AsyncClient whose requests run as under Django's ASGI handler (Daphne).

    ``ASGIHandler`` gives each request its own ``ThreadSensitiveContext``, so a sync admin
    view runs in a thread of its own while the hub keeps the shared database thread; the
    test client alone would run the view in that shared thread. Like the handler at the end
    of a request, the request thread's database connection is closed.
    """

    def __init__(self, client: AsyncClient) -> None:
        self.client = client

    async def get(self, url: str) -> Any:
        async with ThreadSensitiveContext():
            try:
                return await self.client.get(url)
            finally:
                await sync_to_async(lambda: connection.close())()

    async def post(self, url: str, data: dict[str, Any]) -> Any:
        async with ThreadSensitiveContext():
            try:
                return await self.client.post(url, data)
            finally:
                await sync_to_async(lambda: connection.close())()

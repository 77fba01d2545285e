"""The toolbox's "questions" group: tools that elicit (form and URL mode) and one that asks for sampling.

Registered by ``python tests/servers/toolbox.py --feature questions`` (2026-07-28 and 2025-11-25,
whichever the client negotiates); ``python tests/servers/handshake_toolbox.py --feature questions
[--http PORT]`` forces the 2025-11-25 handshake.

Each tool asks the way the negotiated revision does (an ``InputRequiredResult`` on 2026-07-28, a
request mid-call on 2025-11-25) and answers with what came back:

* ``ask_form``: a form with every field kind (string formats and lengths, integer and number
  bounds, boolean, single and multi-select enums in both spellings, defaults); answers
  ``accept {json}``, ``decline`` or ``cancel``.
* ``ask_link``: URL mode. The URL is a page of this process's own small web server
  (``http://127.0.0.1:PORT/connect/ID``); submitting its form (a POST to the same URL, which a
  test may also send itself) completes it. On 2025-11-25 the tool then sends
  ``notifications/elicitation/complete`` and answers ``connected: VALUE``; on 2026-07-28 the
  retried call (``requestState`` = the id) blocks until the page is submitted. ``url`` replaces
  the page's URL (e.g. a ``javascript:`` one, which the client must refuse).
* ``needs_link``: answers with a ``-32042`` URLElicitationRequired error naming a page until
  that page is submitted for ``account``; the completion notification goes out when it is.
* ``ask_sampling``: sends ``sampling/createMessage`` (2025-11-25) or returns it as an input
  request (2026-07-28); on 2025-11-25 it answers ``refused: MESSAGE`` with the client's error.
* ``client_capabilities``: the capabilities the client declared, as JSON.

The page server is a thread started with the first link; it reaches the MCP side with
``anyio.from_thread`` and the event-loop token of the tool that made the link.
"""

from __future__ import annotations

import html
import json
import threading
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs

import anyio
import anyio.from_thread
import anyio.lowlevel
import common
import mcp.types as types
from common import READ_ONLY
from mcp import MCPError, UrlElicitationRequiredError
from mcp.server.mcpserver import Context, MCPServer

MODERN = "2026-07-28"
LINK_WAIT = 300.0  # seconds a tool waits for its page to be submitted

FORM_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "title": "Name", "minLength": 2, "maxLength": 40},
        "email": {"type": "string", "title": "Email", "format": "email"},
        "homepage": {"type": "string", "title": "Homepage", "format": "uri"},
        "birthday": {"type": "string", "title": "Birthday", "format": "date"},
        "meeting": {"type": "string", "title": "Meeting", "format": "date-time"},
        "age": {"type": "integer", "title": "Age", "minimum": 0, "maximum": 150, "default": 30},
        "ratio": {"type": "number", "title": "Ratio", "minimum": 0, "maximum": 1},
        "agree": {"type": "boolean", "title": "I agree", "default": False},
        "size": {
            "type": "string",
            "title": "Size",
            "enum": ["s", "m", "l"],
            "enumNames": ["Small", "Medium", "Large"],
        },
        "color": {
            "type": "string",
            "title": "Colour",
            "oneOf": [{"const": "red", "title": "Red"}, {"const": "blue", "title": "Blue"}],
            "default": "blue",
        },
        "days": {
            "type": "array",
            "title": "Days",
            "items": {"type": "string", "enum": ["mon", "tue", "wed"]},
            "minItems": 1,
            "default": ["mon"],
        },
        "pets": {
            "type": "array",
            "title": "Pets",
            "items": {"anyOf": [{"const": "cat", "title": "Cat"}, {"const": "dog", "title": "Dog"}]},
        },
    },
    "required": ["name", "email"],
}


@dataclass
class Page:
    """One link's page: set ``done`` (on the MCP side's loop) once it is submitted."""

    id: str
    token: Any  # the anyio event-loop token of the MCP side
    done: anyio.Event = field(default_factory=anyio.Event)
    value: str = ""
    after: Any = None  # an async callable run on the loop once the page is submitted


_pages: dict[str, Page] = {}
_connected: set[str] = set()  # accounts whose needs_link page was submitted
_web: ThreadingHTTPServer | None = None


class _Handler(BaseHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass  # stdout may be the MCP stdio channel

    def _page(self) -> Page | None:
        parts = self.path.split("?", 1)[0].strip("/").split("/")
        if len(parts) == 2 and parts[0] == "connect":
            return _pages.get(parts[1])
        return None

    def _reply(self, status: int, body: str) -> None:
        data = body.encode()
        self.send_response(status)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        page = self._page()
        if page is None:
            self._reply(404, "<p>No such page.</p>")
            return
        self._reply(
            200,
            "<!doctype html><title>Connect</title><h1>Connect your account</h1>"
            f'<form method="post" action="/connect/{html.escape(page.id)}">'
            '<label>Value <input name="value" id="value"></label>'
            '<button type="submit">Connect</button></form>',
        )

    def do_POST(self) -> None:
        page = self._page()
        if page is None:
            self._reply(404, "<p>No such page.</p>")
            return
        length = int(self.headers.get("Content-Length") or 0)
        fields = parse_qs(self.rfile.read(length).decode())
        value = fields.get("value", [""])[0]
        anyio.from_thread.run(_submitted, page, value, token=page.token)
        self._reply(200, '<p id="done">Done. You can close this tab.</p>')


async def _submitted(page: Page, value: str) -> None:
    if page.done.is_set():
        return
    page.value = value
    page.done.set()
    if page.after is not None:
        await page.after()


def _base_url() -> str:
    global _web
    if _web is None:
        _web = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        threading.Thread(target=_web.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{_web.server_address[1]}"


def _new_page(after: Any = None) -> tuple[Page, str]:
    page = Page(id=uuid.uuid4().hex, token=anyio.lowlevel.current_token(), after=after)
    _pages[page.id] = page
    return page, f"{_base_url()}/connect/{page.id}"


def _outcome(result: Any) -> str:
    result = types.ElicitResult.model_validate(result) if isinstance(result, dict) else result
    if result.action == "accept":
        return f"accept {json.dumps(result.content, sort_keys=True)}" if result.content else "accept"
    return result.action


async def _connected_value(page: Page) -> str:
    with anyio.move_on_after(LINK_WAIT):
        await page.done.wait()
    return f"connected: {page.value}" if page.done.is_set() else "not connected in time"


def register(server: MCPServer) -> None:
    """Add the group's tools to ``server`` (see the module docstring)."""

    @server.tool(annotations=READ_ONLY)
    async def ask_form(ctx: Context) -> str | types.InputRequiredResult:
        """Asks for a form with every kind of field."""
        message = "Tell me about <i>yourself</i>"
        if ctx.protocol_version == MODERN:
            answers = ctx.input_responses or {}
            if "form" not in answers:
                params = types.ElicitRequestFormParams(message=message, requested_schema=FORM_SCHEMA)
                return types.InputRequiredResult(input_requests={"form": types.ElicitRequest(params=params)})
            return _outcome(answers["form"])
        request_id = ctx.request_context.request_id
        return _outcome(await ctx.session.elicit_form(message, FORM_SCHEMA, related_request_id=request_id))

    @server.tool(annotations=READ_ONLY)
    async def ask_link(ctx: Context, url: str = "") -> str | types.InputRequiredResult:
        """Asks the person to open a page (URL mode) and waits until it is submitted."""
        message = "Connect your Example account"
        if ctx.protocol_version == MODERN:
            answers = ctx.input_responses or {}
            if "link" not in answers or ctx.request_state is None:
                page, own_url = _new_page()
                params = types.ElicitRequestURLParams(message=message, url=url or own_url)
                return types.InputRequiredResult(
                    input_requests={"link": types.ElicitRequest(params=params)}, request_state=page.id
                )
            action = _outcome(answers["link"])
            if action != "accept":
                return action
            return await _connected_value(_pages[ctx.request_state])
        page, own_url = _new_page()
        request_id = ctx.request_context.request_id
        try:
            result = await ctx.session.elicit_url(
                message, url or own_url, page.id, related_request_id=request_id
            )
        except MCPError as exc:
            return f"refused: {exc.error.message}"
        if result.action != "accept":
            return result.action
        text = await _connected_value(page)
        if page.done.is_set():
            await ctx.session.send_elicit_complete(page.id, related_request_id=request_id)
        return text

    @server.tool(annotations=READ_ONLY)
    async def needs_link(ctx: Context, account: str) -> str:
        """Fails with -32042 (URL elicitation required) until ``account``'s page is submitted."""
        if account in _connected:
            return f"account {account} is connected"
        session = ctx.session

        async def after() -> None:
            _connected.add(account)
            await session.send_elicit_complete(page.id)

        page, url = _new_page(after)
        params = types.ElicitRequestURLParams(message=f"Connect {account}", url=url, elicitation_id=page.id)
        raise UrlElicitationRequiredError([params], "This tool needs your account connected first.")

    @server.tool(annotations=READ_ONLY)
    async def ask_sampling(ctx: Context) -> str | types.InputRequiredResult:
        """Asks the client's model for a completion (sampling)."""
        message = types.SamplingMessage(role="user", content=types.TextContent(type="text", text="Say hi"))
        if ctx.protocol_version == MODERN:
            answers = ctx.input_responses or {}
            if "llm" not in answers:
                params = types.CreateMessageRequestParams(messages=[message], max_tokens=20)
                request = types.CreateMessageRequest(params=params)
                return types.InputRequiredResult(input_requests={"llm": request})
            return f"sampled: {answers['llm']}"
        try:
            result = await ctx.session.create_message(
                [message], max_tokens=20, related_request_id=ctx.request_context.request_id
            )
        except MCPError as exc:
            return f"refused: {exc.error.message}"
        return f"sampled: {result}"

    @server.tool(annotations=READ_ONLY)
    def client_capabilities(ctx: Context) -> str:
        """The capabilities the client declared, as JSON."""
        return common.declared_capabilities(ctx)

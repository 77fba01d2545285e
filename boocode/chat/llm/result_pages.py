"""``read_result``: the model reads on in a tool result it was given only the beginning and end of.

A result over its share of the window (:func:`boocode.chat.llm.request_budget.cut_result`) reaches
the model cut, with a marker naming the call's id; the result is stored whole (the person sees
and downloads all of it, exports keep it). This read-only native tool pages through the stored
result by character offset and length, or lists its lines that match an RE2 pattern
(:func:`boocode.tools.native.page_text`), within the conversation the turn belongs to and its
messages that are not superseded. A call id the model server gave more than once in the
conversation reads the newest result with that id.
"""

from __future__ import annotations

import asyncio
from functools import partial
from typing import Any

from channels.db import database_sync_to_async
from django.conf import settings

from boocode.chat.llm.request_budget import READ_RESULT
from boocode.chat.models import ToolCall
from boocode.tools.native import (
    PAGE_DEFAULT_CHARS,
    PAGE_MAX_CHARS,
    Deadline,
    ToolTimeoutError,
    page_text,
)
from boocode.tools.tool import NATIVE_SOURCE, Tool
from boocode.tools.workspace import WorkspaceError
from mcpclient.core.results import ToolResult

__all__ = ["read_result_tool", "stored_output"]

DESCRIPTION = (
    "Read a tool result of this conversation that was given to you cut (its beginning and end, "
    "with a marker saying how much was left out). Give the call's id and either an offset and a "
    f"length in characters (at most {PAGE_MAX_CHARS:,}) to read a page, or an RE2 pattern to list "
    "the result's lines that match it, with their offsets."
)
PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "call_id": {"type": "string", "description": "The id of the tool call whose result to read."},
        "offset": {
            "type": "integer",
            "minimum": 0,
            "description": "The first character to read (0: the start).",
        },
        "length": {
            "type": "integer",
            "minimum": 1,
            "maximum": PAGE_MAX_CHARS,
            "description": f"How many characters to read (default {PAGE_DEFAULT_CHARS:,}).",
        },
        "pattern": {"type": "string", "description": "An RE2 regular expression: list the lines that match."},
        "ignore_case": {"type": "boolean", "description": "Match the pattern regardless of case."},
    },
    "required": ["call_id"],
    "additionalProperties": False,
}


def stored_output(conversation_id: int, call_id: str) -> str | None:
    """The stored output of the newest call ``call_id`` of the conversation (``None``: no such call)."""
    found = (
        ToolCall.objects.filter(
            message__conversation_id=conversation_id, message__superseded_at__isnull=True, call_id=call_id
        )
        .order_by("-id")
        .values_list("output", flat=True)
        .first()
    )
    return found


async def _read(conversation_id: int, arguments: dict[str, Any]) -> ToolResult:
    call_id = str(arguments["call_id"])
    output = await database_sync_to_async(stored_output, thread_sensitive=False)(conversation_id, call_id)
    if output is None:
        return ToolResult.error(f'{READ_RESULT}: no tool call "{call_id}" in this conversation')
    deadline = Deadline.after(float(settings.TOOL_TIMEOUT))
    read = partial(
        page_text,
        output,
        arguments.get("offset", 0),
        arguments.get("length", PAGE_DEFAULT_CHARS),
        arguments.get("pattern"),
        bool(arguments.get("ignore_case", False)),
        deadline=deadline,
    )
    try:
        return ToolResult(output=await asyncio.to_thread(read))
    except ToolTimeoutError as exc:
        return ToolResult.error(
            f"{READ_RESULT}: {exc}" + (f"\nFound before the limit:\n{exc.partial}" if exc.partial else "")
        )
    except WorkspaceError as exc:
        return ToolResult.error(f"{READ_RESULT}: {exc}")


def read_result_tool(conversation_id: int) -> Tool:
    """The ``read_result`` tool of one conversation (read-only, native)."""
    return Tool(
        name=READ_RESULT,
        description=DESCRIPTION,
        parameters=PARAMETERS,
        read_only=True,
        source=NATIVE_SOURCE,
        executor=partial(_read, conversation_id),
    )

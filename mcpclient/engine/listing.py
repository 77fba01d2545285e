"""A server's tool list read tool by tool: one bad definition costs that tool, not the server.

The SDK checks a ``tools/list`` answer as a whole against the negotiated revision's schema, so
one tool whose ``inputSchema`` lacks ``"type": "object"`` (published servers do this) fails the
listing and the server ends "failed" with a validation dump. Hosts are expected to be liberal in
what they accept: here every page is checked first as the SDK will check it, and only when that
fails, tool by tool (:func:`read_page`):

* a definition that can be repaired is: an ``inputSchema`` without ``type`` (or no
  ``inputSchema`` at all) is an object schema, which is what the tool's arguments are;
* a definition that still does not fit is left out, with the reason in a sentence;
* the rest is the page the SDK sees.

What was repaired and left out is said in the server's tools note (the admin's server page;
:func:`describe`). :func:`install` puts the reading in front of the SDK's check on one session.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import pydantic
from mcp.client.session import ClientSession
from mcp_types import methods

METHOD = "tools/list"
SHOWN_NAMES = 5  # names listed per kind of note; the rest are counted
NAME_CHARS = 80  # of a tool's name in a note


@dataclass
class PageNotes:
    """What reading one page changed: tools repaired and tools left out, each with why."""

    repaired: list[tuple[str, str]] = field(default_factory=list)
    left_out: list[tuple[str, str]] = field(default_factory=list)


def _name_of(tool: Any, index: int) -> str:
    name = tool.get("name") if isinstance(tool, dict) else None
    if isinstance(name, str) and name:
        return name if len(name) <= NAME_CHARS else name[:NAME_CHARS] + "…"
    return f"tool #{index + 1}"


def _tool_errors(error: pydantic.ValidationError) -> list[Any]:
    """The errors inside ``tools`` (a page's own fields are the SDK's to report)."""
    errors = error.errors(include_url=False, include_input=False)
    return [item for item in errors if item["loc"][:1] == ("tools",)]


def sentence(errors: list[Any], *, skip: int = 0, whole: str = "the definition") -> str:
    """Validation errors (pydantic's ``errors()``) as one sentence: where, what, how many more.

    ``skip``: leading parts of each location not to name (``tools``, the index); ``whole``: what
    an error at the top is about.
    """
    first = errors[0]
    where = ".".join(str(part) for part in first["loc"][skip:])
    text = f'{where or whole}: {first.get("msg", "invalid")}'
    return text + (f" (and {len(errors) - 1} more)" if len(errors) > 1 else "")


def _repaired(tool: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """The tool with what can be repaired repaired, and what was ("" when nothing)."""
    schema = tool.get("inputSchema")
    if schema is None:
        return {**tool, "inputSchema": {"type": "object"}}, "no inputSchema: takes any arguments"
    if isinstance(schema, dict) and "type" not in schema:
        repaired = {**tool, "inputSchema": {"type": "object", **schema}}
        return repaired, 'its inputSchema had no "type": read as an object'
    return tool, ""


def read_page(raw: dict[str, Any], version: str, notes: PageNotes) -> dict[str, Any]:
    """``raw`` (a ``tools/list`` result) with each tool repaired or left out as it needs.

    A page that passes the revision's check as it is comes back unchanged (the usual case: one
    check). Anything other than a list of tools is left to the SDK, whose error then names it.
    """
    try:
        methods.validate_server_result(METHOD, version, raw)
        return raw
    except pydantic.ValidationError as exc:
        if not _tool_errors(exc):
            return raw  # the page's own fields: the SDK says what is wrong
    except (KeyError, ValueError):  # a revision without a schema here: the SDK's own checks apply
        return raw
    tools = raw.get("tools")
    if not isinstance(tools, list):
        return raw
    kept: list[Any] = []
    for index, tool in enumerate(tools):
        name = _name_of(tool, index)
        if not isinstance(tool, dict):
            notes.left_out.append((name, "it is not an object"))
            continue
        tool, repair = _repaired(tool)
        try:  # alone, with the page's own fields (a 2026-07-28 page has required ones)
            methods.validate_server_result(METHOD, version, {**raw, "tools": [tool]})
        except pydantic.ValidationError as exc:
            if errors := _tool_errors(exc):
                notes.left_out.append((name, sentence(errors, skip=2)))
                continue
        if repair:
            notes.repaired.append((name, repair))
        kept.append(tool)
    return {**raw, "tools": kept}


def describe(notes: Mapping[Any, PageNotes]) -> str:
    """What the admin reads about the last listing ("" when every tool was read as it was)."""
    repaired = [item for page in notes.values() for item in page.repaired]
    left_out = [item for page in notes.values() for item in page.left_out]
    parts = []
    if repaired:
        parts.append(f"{_count(repaired, 'tool definition')} repaired: " + _listed(repaired))
    if left_out:
        unusable = f"{_count(left_out, 'tool')} left out, unusable as the server defines them: "
        parts.append(unusable + _listed(left_out))
    return ". ".join(parts) + ("." if parts else "")


def _count(items: list[Any], noun: str) -> str:
    return f"{len(items)} {noun}{'' if len(items) == 1 else 's'}"


def _listed(items: list[tuple[str, str]]) -> str:
    shown = "; ".join(f"{name} ({why})" for name, why in items[:SHOWN_NAMES])
    return shown + (f"; and {len(items) - SHOWN_NAMES} more" if len(items) > SHOWN_NAMES else "")


def install(session: ClientSession, notes: dict[str | None, PageNotes], version: Callable[[], str]) -> None:
    """Read every ``tools/list`` answer of ``session`` with :func:`read_page` before the SDK checks it.

    ``notes`` gets each page's notes under its cursor (``None``: the first page), replaced when
    the page is listed again; ``version`` gives the negotiated revision. The SDK (pinned in
    requirements.txt) sends every request through its dispatcher's ``send_raw_request`` and
    checks the raw result after it returns: the one place both transports and every revision
    pass through before that check.
    """
    dispatcher = session._dispatcher  # the SDK's own (see the docstring)
    send = dispatcher.send_raw_request

    async def send_raw_request(
        method: str, params: Mapping[str, Any] | None, *args: Any, **kwargs: Any
    ) -> Any:
        raw = await send(method, params, *args, **kwargs)
        if method != METHOD or not isinstance(raw, dict):
            return raw
        cursor = params.get("cursor") if isinstance(params, Mapping) else None
        if cursor is None:
            notes.clear()  # a new listing: the pages of the last one no longer apply
        page = notes[cursor] = PageNotes()
        return read_page(raw, version(), page)

    dispatcher.send_raw_request = send_raw_request  # type: ignore[method-assign]

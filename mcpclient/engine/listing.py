"""A server's tool list read tool by tool: one bad definition costs that tool, not the server.

The SDK checks a ``tools/list`` answer as a whole against the negotiated revision's schema, so
one tool whose ``inputSchema`` lacks ``"type": "object"`` (published servers do this) fails the
listing and the server ends "failed" with a validation dump. Hosts are expected to be liberal in
what they accept: here every page is checked first as the SDK will check it, and only when that
fails, tool by tool (:func:`read_page`):

* a definition that can be repaired is: an ``inputSchema`` without ``type`` (or no
  ``inputSchema`` at all) is an object schema, which is what the tool's arguments are, with what
  it names kept; one left naming no parameter (a published server's whole schema came out as
  ``{"$schema": ...}``) is not said to take none, for all its server told: the model reads
  :data:`PARAMETERS_UNKNOWN` at the end of its description (:func:`parameters_unknown`);
* a definition that still does not fit is left out, with the reason in a sentence;
* the rest is the page the SDK sees.

What was repaired and left out is said in the server's tools note (the admin's server page;
:func:`describe`). :func:`install` puts the reading in front of the SDK's check on one session.

Bounds. Before any of that, each tool is measured (:func:`json_bytes`: a walk that stops past its
limit, so measuring costs at most about the limit whatever the size) against the caps below. A
tool over one is *held*: what goes on is a stub (its name and an object input schema), and the
reason (``description is 48 KB, over the 16 KB limit``) is in the page's notes, so nothing more
is parsed, digested, reviewed, stored or indexed of it. A name over its cap cannot even be named
and is left out. The tools a listing keeps are counted across its pages against
:data:`MAX_LISTING_BYTES`: past it the page keeps what fits, the listing stops (its cursor is
dropped) and the note says what was left out. The caps were set from the largest definitions of
the published servers recorded in ``bench/fixtures/tool_catalog.json`` and those the tests run
(tests/node): each value is several times the largest seen.
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

KB = 1024
# The name is what the model calls the tool by: MCP asks for names of 1 to 128 characters, and the
# longest recorded is 40 bytes. One over it is left out (a cut name would call another tool).
MAX_NAME_BYTES = 128
# A title is a label on the page; the longest recorded is 35 bytes.
MAX_TITLE_BYTES = 512
# The description is sent to the model in every request that offers the tool and scanned for
# poisoning; the longest recorded is 6.6 KB (desktop-commander's start_search).
MAX_DESCRIPTION_BYTES = 16 * KB
# Schemas are sent to the model too and validated against: the longest recorded input schema is
# 12.3 KB (mongodb's export), output schema 6.6 KB (todoist's get-productivity-stats).
MAX_INPUT_SCHEMA_BYTES = 64 * KB
MAX_OUTPUT_SCHEMA_BYTES = 64 * KB
# The whole definition, so that what the fields above do not cover (annotations, icons, _meta)
# is bounded too; the largest recorded is 13 KB (mongodb's explain).
MAX_TOOL_BYTES = 192 * KB
# Every tool one listing keeps, all pages together: the largest recorded server lists 166 KB
# (gitlab, 118 tools); 4 MB is a thousand tools of 4 KB, and bounds what each listing costs to
# digest, review, store and index.
MAX_LISTING_BYTES = 4 * KB * KB
# What a held tool is listed as instead of its definition (its name is added).
STUB_SCHEMA = {"type": "object"}
FIELD_CAPS = {
    "title": MAX_TITLE_BYTES,
    "description": MAX_DESCRIPTION_BYTES,
    "inputSchema": MAX_INPUT_SCHEMA_BYTES,
    "outputSchema": MAX_OUTPUT_SCHEMA_BYTES,
}
FIELD_WORDS = {"inputSchema": "input schema", "outputSchema": "output schema"}
# What the model reads after the description of a tool whose repaired schema names no parameter.
PARAMETERS_UNKNOWN = (
    "(Its server lists no parameters for this tool: its input schema came without any, so the "
    "arguments it needs, if any, are unknown.)"
)


@dataclass
class PageNotes:
    """What reading one page changed: tools repaired and tools left out, each with why."""

    repaired: list[tuple[str, str]] = field(default_factory=list)
    left_out: list[tuple[str, str]] = field(default_factory=list)
    # Held for their size (listed as a stub): name -> why ("description is 48 KB, over the 16 KB limit").
    oversized: dict[str, str] = field(default_factory=dict)
    kept_bytes: int = field(default=0, compare=False)  # of the definitions kept (MAX_LISTING_BYTES)
    past_total: list[str] = field(default_factory=list)  # names left out past MAX_LISTING_BYTES
    # Repaired tools whose schema names no parameter: what they take is unknown (PARAMETERS_UNKNOWN).
    parameters_unknown: list[str] = field(default_factory=list)


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
    text = f"{where or whole}: {first.get('msg', 'invalid')}"
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


# What in an object schema says which arguments it takes (or that it takes any of a kind).
_PARAMETER_KEYWORDS = (
    "properties",
    "patternProperties",
    "additionalProperties",
    "required",
    "$ref",
    "anyOf",
    "oneOf",
    "allOf",
    "if",
    "dependentSchemas",
    "propertyNames",
)


def _names_parameters(schema: dict[str, Any]) -> bool:
    """Whether a repaired input schema says anything of the arguments (not only ``type``, ``$schema``)."""
    return any(schema.get(keyword) not in (None, {}, []) for keyword in _PARAMETER_KEYWORDS)


def _text_bytes(text: str) -> int:
    """UTF-8 bytes of ``text`` (no copy for ASCII, the usual case)."""
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))


def json_bytes(value: Any, limit: int) -> int:
    """The size of ``value`` as compact JSON in UTF-8 bytes, counted only until it is over ``limit``.

    Past ``limit`` the count stops and a number over it is returned (the size so far), so the
    work is bounded by ``limit`` whatever was sent: every value costs at least a byte, and a
    container's separators are counted before its items are visited. Strings count their bytes
    without escapes (a lower bound); nothing is serialized.
    """
    total = 0
    stack: list[Any] = [iter((value,))]
    while stack:
        item = next(stack[-1], _END)
        if item is _END:
            stack.pop()
            continue
        if isinstance(item, str):
            total += _text_bytes(item) + 2
        elif isinstance(item, dict):
            total += 1 + max(len(item), 1)  # braces and commas
            stack.append(iter(item.values()))
            total += sum(_text_bytes(str(key)) + 3 for key in _first(item, limit - total))
        elif isinstance(item, list | tuple):
            total += 1 + max(len(item), 1)
            stack.append(iter(item))
        elif item is None or isinstance(item, bool):
            total += 5
        else:
            total += _number_bytes(item)
        if total > limit:
            return total
    return total


_END = object()


def _number_bytes(value: Any) -> int:
    """Digits of a number (one too long to print counts as a thousand: over any cap that matters)."""
    try:
        return len(str(value))
    except ValueError:  # Python refuses to print integers of more than 4,300 digits
        return 1000


def _first(mapping: dict[Any, Any], room: int) -> list[Any]:
    """The keys of ``mapping`` while there is room for them (each takes at least three bytes)."""
    if room <= 0:
        return []
    keys = []
    for key in mapping:
        keys.append(key)
        if len(keys) * 3 > room:
            break
    return keys


def _size(value: int) -> str:
    """A size for people: bytes under a kilobyte, else whole kilobytes (or megabytes)."""
    if value < KB:
        return f"{value} bytes"
    if value < KB * KB:
        return f"{value // KB} KB"
    return f"{value / (KB * KB):.1f}".rstrip("0").rstrip(".") + " MB"


def measure(tool: dict[str, Any]) -> tuple[str, int]:
    """Why ``tool`` (a raw definition) is over a cap ("" when it fits), and its size in bytes.

    Each field is measured once, up to its own cap; the whole definition is their sum (the
    count stops once that is over :data:`MAX_TOOL_BYTES`).
    """
    walked, reason = 0, ""
    for key, value in tool.items():  # (a definition of many keys is over the whole cap soon)
        cap = FIELD_CAPS.get(key, MAX_TOOL_BYTES) if isinstance(key, str) else MAX_TOOL_BYTES
        text = isinstance(value, str)  # its bytes, known at once; a schema's count stops past the cap
        size = _text_bytes(value) if text else json_bytes(value, cap)
        walked += size + (_text_bytes(key) if isinstance(key, str) else 0) + 4
        if size > cap and key in FIELD_CAPS:
            said = f"is {_size(size)}, over" if text else "is over"
            return f"{FIELD_WORDS.get(key, key)} {said} the {_size(cap)} limit", walked
        if walked > MAX_TOOL_BYTES:
            return f"the definition is over the {_size(MAX_TOOL_BYTES)} limit", walked
    return reason, walked


def _bounded(tools: list[Any], notes: PageNotes, room: int) -> tuple[list[Any], bool]:
    """The page's tools with each held one as a stub, up to ``room`` bytes kept; and whether the
    listing is over :data:`MAX_LISTING_BYTES` (the tools past it are in ``notes.past_total``)."""
    kept: list[Any] = []
    for index, tool in enumerate(tools):
        if not isinstance(tool, dict):
            kept.append(tool)  # (the schema check names it)
            continue
        name = tool.get("name")
        if isinstance(name, str) and _text_bytes(name) > MAX_NAME_BYTES:
            why = f"its name is {_size(_text_bytes(name))}, over the {_size(MAX_NAME_BYTES)} limit"
            notes.left_out.append((_name_of(tool, index), why))
            continue
        reason, walked = measure(tool)
        if reason and not (isinstance(name, str) and name):
            notes.left_out.append((_name_of(tool, index), reason))
            continue
        if reason and isinstance(name, str):
            tool = {"name": name, "inputSchema": dict(STUB_SCHEMA)}
            walked = _text_bytes(name) + 40
        if notes.kept_bytes + walked > room:
            notes.past_total = [_name_of(item, index + n) for n, item in enumerate(tools[index:])]
            return kept, True
        if reason and isinstance(name, str):
            notes.oversized[name] = reason
        notes.kept_bytes += walked
        kept.append(tool)
    return kept, False


def read_page(
    raw: dict[str, Any], version: str, notes: PageNotes, *, room: int = MAX_LISTING_BYTES
) -> dict[str, Any]:
    """``raw`` (a ``tools/list`` result) bounded (see the module docstring), then with each tool
    repaired or left out as it needs; ``room``: the bytes the listing may still keep.

    A page within its bounds that passes the revision's check as it is comes back unchanged (the
    usual case: one check). Anything other than a list of tools is left to the SDK, whose error
    then names it.
    """
    tools = raw.get("tools")
    if isinstance(tools, list):
        bounded, full = _bounded(tools, notes, room)
        if full or len(bounded) != len(tools) or notes.oversized:
            raw = {key: value for key, value in raw.items() if not (full and key == "nextCursor")}
            raw["tools"] = bounded
    return _read_checked(raw, version, notes)


def _read_checked(raw: dict[str, Any], version: str, notes: PageNotes) -> dict[str, Any]:
    """``raw`` with each tool repaired or left out as it needs (:func:`read_page`)."""
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
            if not _names_parameters(tool["inputSchema"]):
                notes.parameters_unknown.append(tool["name"])
        kept.append(tool)
    return {**raw, "tools": kept}


def describe(notes: Mapping[Any, PageNotes]) -> str:
    """What the admin reads about the last listing ("" when every tool was read as it was)."""
    repaired = [item for page in notes.values() for item in page.repaired]
    left_out = [item for page in notes.values() for item in page.left_out]
    oversized = [item for page in notes.values() for item in page.oversized.items()]
    past_total = [name for page in notes.values() for name in page.past_total]
    parts = []
    if repaired:
        parts.append(f"{_count(repaired, 'tool definition')} repaired: " + _listed(repaired))
    if left_out:
        unusable = f"{_count(left_out, 'tool')} left out, unusable as the server defines them: "
        parts.append(unusable + _listed(left_out))
    if oversized:
        parts.append(f"{_count(oversized, 'tool')} held, over a size limit: " + _listed(oversized))
    if past_total:
        names = ", ".join(past_total[:SHOWN_NAMES]) + (", …" if len(past_total) > SHOWN_NAMES else "")
        parts.append(
            f"The listing is over {_size(MAX_LISTING_BYTES)}: the tools that fit are kept and "
            f"{len(past_total):,} or more were left out ({names})"
        )
    return ". ".join(parts) + ("." if parts else "")


def oversized(notes: Mapping[Any, PageNotes]) -> dict[str, str]:
    """The tools of the last listing held for their size: name -> why."""
    return {name: why for page in notes.values() for name, why in page.oversized.items()}


def parameters_unknown(notes: Mapping[Any, PageNotes]) -> set[str]:
    """The tools of the last listing whose repaired schema names no parameter (:data:`PARAMETERS_UNKNOWN`)."""
    return {name for page in notes.values() for name in page.parameters_unknown}


def with_parameters_note(description: str) -> str:
    """``description`` as the model reads it for a tool whose parameters are unknown."""
    return f"{description.rstrip()} {PARAMETERS_UNKNOWN}" if description.strip() else PARAMETERS_UNKNOWN


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
        notes.pop(cursor, None)
        room = MAX_LISTING_BYTES - sum(page.kept_bytes for page in notes.values())
        page = notes[cursor] = PageNotes()
        return read_page(raw, version(), page, room=room)

    dispatcher.send_raw_request = send_raw_request  # type: ignore[method-assign]

"""Resources attached to a user message: which servers a person may use, checks, reads, model text.

A person attaches resources (``{server, uri}``) from the composer's picker. Which servers they
may take them from (:func:`reachable_servers`): the ready servers they see (shared sessions and
their own "perUser" sessions), narrowed, for a conversation, to those its agent can reach: every
server when the agent has no ``tools:`` patterns, else the servers at least one of whose offered
tools the patterns allow. The same rule lists the picker, serves the viewer and checks a message.

The turn reads each attachment through the hub (:func:`read_attachments`, the owner's sessions)
before the message is stored: ``Message.attachments`` keeps uri, server, name, mimeType and the
text the model read (or a note for binary content and for a read that failed), so a reload, a
regenerate and the model's history all see what was sent. The reads run concurrently (at most
:data:`MAX_CONCURRENT_READS` at once); the shared 5 MB budget is then applied in the message's
order, so what is cut does not depend on which server answered first. :func:`model_content`
puts them after the person's text, each in a ``<resource uri=.. server=..>...</resource>``
block with its URI, in the user message the model receives; a ``</resource`` inside a text is
written ``<\\/resource`` (:func:`unforgeable`), so a server cannot close the block early.

An ``edit`` carries the attachments of the new message (without them, the replaced message's
are kept, :func:`refs`); they are read again, and a read that fails because the server is in
trouble keeps the text read before. A turn stopped while reading stores them as not read
(:func:`unread`), so the message itself is never lost.
"""

from __future__ import annotations

import asyncio
import json
import re
from typing import TYPE_CHECKING, Any

from agents.policy import is_allowed
from mcpclient.core.results import MAX_OUTPUT_BYTES, cap_output
from mcpclient.engine import resources
from mcpclient.engine.resources import ResourceError
from mcpclient.runtime import TURN_CHECK_INTERVAL
from mcpclient.runtime.signin import person_hub

if TYPE_CHECKING:
    from mcpclient.engine.hub import Hub

MAX_ATTACHMENTS = 10
MAX_URI_CHARS = resources.MAX_URI_CHARS
MAX_SERVER_CHARS = 100
MAX_NAME_CHARS = 300
MAX_CONCURRENT_READS = 4  # attachments read at the same time (a message has at most 10)


class BadAttachments(Exception):
    """The ``attachments`` of a frame are malformed; ``str()`` names what is wrong."""


def checked_attachments(value: Any) -> list[dict[str, str]]:
    """The frame's ``attachments`` as ``[{server, uri}]`` (duplicates dropped), or :class:`BadAttachments`."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise BadAttachments('"attachments" must be a list of {"server", "uri"} objects.')
    if len(value) > MAX_ATTACHMENTS:
        raise BadAttachments(f"At most {MAX_ATTACHMENTS} resources can be attached to one message.")
    checked: list[dict[str, str]] = []
    for position, item in enumerate(value, 1):
        if not isinstance(item, dict):
            raise BadAttachments(f'Attachment {position} must be an object with "server" and "uri".')
        server, uri = item.get("server"), item.get("uri")
        if not isinstance(server, str) or not server.strip() or len(server) > MAX_SERVER_CHARS:
            raise BadAttachments(
                f'Attachment {position}: "server" must be a non-empty string '
                f"of at most {MAX_SERVER_CHARS} characters."
            )
        if not isinstance(uri, str) or not uri.strip() or len(uri) > MAX_URI_CHARS:
            raise BadAttachments(
                f'Attachment {position}: "uri" must be a non-empty string '
                f"of at most {MAX_URI_CHARS} characters."
            )
        if any(ord(ch) < 32 for ch in server + uri):
            raise BadAttachments(f"Attachment {position}: control characters are not allowed.")
        entry = {"server": server, "uri": uri}
        if entry not in checked:
            checked.append(entry)
    return checked


def reachable_servers(hub: Hub, user_id: int | None, patterns: Any = None) -> list[str]:
    """The servers ``user_id`` may take resources from (see the module); ``patterns``: the agent's."""
    visible = resources.visible_servers(hub, user_id)
    if patterns is None:
        return visible
    allowed = {tool.server for tool in hub.tools(user_id) if is_allowed(patterns, tool.prefixed_name)}
    return [name for name in visible if name in allowed]


def _listed_name(hub: Hub, server: str, uri: str, user_id: int | None) -> tuple[str, str]:
    """The listed name and MIME type of ``uri`` ("" when it is not listed, e.g. from a template)."""
    try:
        catalog = resources.live_connection(hub, server, user_id).resources
    except ResourceError:
        return "", ""
    for entry in catalog.resources:
        if entry.uri == uri:
            return entry.title or entry.name, entry.mime_type
    return "", ""


def refs(stored: Any) -> list[dict[str, str]]:
    """The ``{server, uri}`` of stored attachments (what an ``edit`` without ``attachments`` keeps)."""
    if not isinstance(stored, list):
        return []
    return [
        {"server": item["server"], "uri": item["uri"]}
        for item in stored
        if isinstance(item, dict) and isinstance(item.get("server"), str) and isinstance(item.get("uri"), str)
    ]


def _earlier_read(earlier: list[dict[str, Any]], server: str, uri: str) -> dict[str, Any] | None:
    """The entry of ``earlier`` for ``server``/``uri`` if that read worked (it has text), else None."""
    for item in earlier:
        if isinstance(item, dict) and item.get("server") == server and item.get("uri") == uri:
            return item if item.get("text") else None
    return None


async def read_attachments(
    hub: Hub,
    attachments: list[dict[str, str]],
    user_id: int | None,
    reachable: list[str],
    earlier: list[dict[str, Any]] | None = None,
) -> list[dict[str, Any]]:
    """Read each attachment; the entries to store (see the module). Failures become notes.

    The texts share one budget of :data:`~mcpclient.core.results.MAX_OUTPUT_BYTES`, like a tool result.
    ``earlier``: the stored entries of the message an ``edit`` replaces. Each is read again (the
    resource may have changed), but when the server fails to answer now, the text read before
    is kept with a note instead of being lost.
    """
    reads = await _read_all(hub, attachments, user_id, reachable)
    stored: list[dict[str, Any]] = []
    budget = MAX_OUTPUT_BYTES
    for item, read in zip(attachments, reads, strict=True):  # in order: the budget is deterministic
        server, uri = item["server"], item["uri"]
        name, mime = _listed_name(hub, server, uri, user_id)
        entry: dict[str, Any] = {"server": server, "uri": uri, "name": name or uri.rsplit("/", 1)[-1] or uri}
        entry["name"] = entry["name"][:MAX_NAME_CHARS]
        if read is None:
            entry.update(
                mimeType=mime, text="", note=f'not read: the server "{server}" is not available here'
            )
            stored.append(entry)
            continue
        if isinstance(read, ResourceError):
            exc = read
            before = _earlier_read(earlier or [], server, uri)
            if before is not None and exc.status == 502:  # the server is in trouble: keep what it gave
                text = cap_output(str(before["text"]), max(budget, 0))
                budget -= len(text.encode("utf-8"))
                note = f"read earlier; reading it again failed: {exc}"
                entry.update(name=str(before.get("name") or entry["name"])[:MAX_NAME_CHARS])
                entry.update(mimeType=str(before.get("mimeType") or mime), text=text, note=note)
            else:
                entry.update(mimeType=mime, text="", note=f"not read: {exc}")
            stored.append(entry)
            continue
        first = read.contents[0] if read.contents else None
        texts = [c.text for c in read.contents if c.text is not None]
        text = cap_output("\n".join(texts), max(budget, 0)) if texts else ""
        budget -= len(text.encode("utf-8"))
        binary = [c for c in read.contents if c.text is None]
        note = ""
        if binary:
            kinds = ", ".join(sorted({c.mime_type or "unknown type" for c in binary}))
            note = f"{len(binary)} binary item(s) ({kinds}) not shown to the model"
        entry.update(mimeType=(first.mime_type if first else "") or mime, text=text, note=note)
        stored.append(entry)
    return stored


async def _read_all(
    hub: Hub, attachments: list[dict[str, str]], user_id: int | None, reachable: list[str]
) -> list[resources.ReadResult | ResourceError | None]:
    """Every attachment read concurrently (at most :data:`MAX_CONCURRENT_READS` at a time), in order.

    ``None`` for a server out of reach (never asked), the :class:`ResourceError` of a failed read.
    Each read is already capped at 5 MB; the shared budget is applied afterwards, in order.
    """
    gate = asyncio.Semaphore(MAX_CONCURRENT_READS)

    async def one(item: dict[str, str]) -> resources.ReadResult | ResourceError | None:
        if item["server"] not in reachable:
            return None
        async with gate:
            try:
                return await hub.read_resource(item["server"], item["uri"], user_id)
            except ResourceError as exc:
                return exc

    return list(await asyncio.gather(*(one(item) for item in attachments)))


def unread(attachments: list[dict[str, str]], reason: str) -> list[dict[str, Any]]:
    """Entries to store for attachments that were not read (a turn stopped while reading)."""
    return [
        {
            "server": item["server"],
            "uri": item["uri"],
            "name": (item["uri"].rsplit("/", 1)[-1] or item["uri"])[:MAX_NAME_CHARS],
            "mimeType": "",
            "text": "",
            "note": f"not read: {reason}",
        }
        for item in attachments
    ]


async def read_for_turn(
    patterns: Any,
    attachments: list[dict[str, str]],
    user_id: int | None,
    earlier: list[dict[str, Any]] | None = None,
) -> list[dict[str, Any]]:
    """A turn's attachments read through the hub (started, the person's sessions open)."""
    hub = await person_hub(user_id, max_age=TURN_CHECK_INTERVAL)
    reachable = reachable_servers(hub, user_id, patterns)
    return await read_attachments(hub, attachments, user_id, reachable, earlier)


def public(attachments: Any) -> list[dict[str, Any]]:
    """What pages receive of stored attachments: no text (it can be megabytes), a note if any."""
    if not isinstance(attachments, list):
        return []
    return [
        {key: item.get(key, "") for key in ("server", "uri", "name", "mimeType", "note")}
        for item in attachments
        if isinstance(item, dict)
    ]


# "</resource" in any case, also with blanks after "</": what would end a block early.
_CLOSING = re.compile(r"</(?=\s*resource)", re.IGNORECASE)


def unforgeable(text: str) -> str:
    """``text`` with every ``</resource`` written ``<\\/resource``: it cannot end the block it is in.

    A resource's text (or a server's error in a note) comes from the server; without this a text
    holding ``</resource>`` would close the block early and what follows would read as the
    person's own words. The model sees ``<\\/resource>`` instead, an escape it reads as text.
    """
    return _CLOSING.sub(r"<\\/", text)


def _attribute(value: Any) -> str:
    """A value inside ``"..."`` of the resource tag: a server's MIME type cannot add attributes."""
    return unforgeable(str(value or "").replace('"', "&quot;"))


def model_content(text: str, attachments: Any) -> str:
    """The user message the model receives: the person's text, then each attachment with its URI."""
    if isinstance(attachments, str):  # a raw JSON column (SQLite through plain SQL)
        try:
            attachments = json.loads(attachments)
        except ValueError:
            attachments = []
    if not attachments or not isinstance(attachments, list):
        return text
    blocks = [text]
    for item in attachments:
        if not isinstance(item, dict):
            continue
        head = f'<resource uri="{_attribute(item.get("uri"))}" server="{_attribute(item.get("server"))}"'
        if item.get("mimeType"):
            head += f' mimeType="{_attribute(item["mimeType"])}"'
        body = item.get("text") or ""
        note = item.get("note") or ""
        lines = [head + ">"]
        if body:
            lines.append(unforgeable(body))
        if note:
            lines.append(f"[{unforgeable(note)}]")
        lines.append("</resource>")
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


MAX_LINKED = 20  # resource links a tool card offers


def linked_resources(parts: Any) -> list[dict[str, str]]:
    """The resources a tool result linked or embedded (``{kind, uri, name, mimeType}``), for its card."""
    linked = []
    for part in parts or []:
        if isinstance(part, dict) and part.get("type") in ("resource_link", "resource"):
            uri = part.get("uri")
            if isinstance(uri, str) and uri:
                linked.append(
                    {
                        "kind": part["type"],
                        "uri": uri,
                        "name": str(part.get("name") or ""),
                        "mimeType": str(part.get("mime_type") or ""),
                    }
                )
    return linked[:MAX_LINKED]

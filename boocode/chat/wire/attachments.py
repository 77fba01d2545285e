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

An attachment may also be a *skill* (``{server, uri, kind: "skill"}``, the URI of its
``SKILL.md``; chosen in the composer's ``/`` menu): it is read with
:meth:`~mcpclient.engine.api.HubApi.read_skill`, verified against the skill's manifest, and reaches
the model as a ``<skill server=.. name=.. uri=..>`` block marked as that server's untrusted text
(:func:`boocode.tools.skills.skill_block`). Skills come from every server the person may use,
not only those the agent's tool patterns reach: a skill is text, like a prompt.

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
from boocode.tools.skills import LOAD_SKILL, MAX_OTHERS_SHOWN, skill_block
from mcpclient.core.resources import MAX_URI_CHARS, ReadResult, ResourceError
from mcpclient.core.results import MAX_OUTPUT_BYTES, cap_output
from mcpclient.core.skills import SkillError, SkillText
from mcpclient.runtime import TURN_CHECK_INTERVAL
from mcpclient.runtime.signin import person_hub

if TYPE_CHECKING:
    from mcpclient.engine.api import HubApi

MAX_ATTACHMENTS = 10
MAX_SERVER_CHARS = 100
MAX_NAME_CHARS = 300
MAX_CONCURRENT_READS = 4  # attachments read at the same time (a message has at most 10)
SKILL = "skill"  # the ``kind`` of an attached skill (a resource has none)


class BadAttachments(Exception):
    """The ``attachments`` of a frame are malformed; ``str()`` names what is wrong."""


def checked_attachments(value: Any) -> list[dict[str, str]]:
    """The frame's ``attachments`` as ``[{server, uri}]`` (a skill's with ``kind: "skill"``; duplicates
    dropped), or :class:`BadAttachments`."""
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
        kind = item.get("kind", "resource")
        if kind not in ("resource", SKILL):
            raise BadAttachments(f'Attachment {position}: "kind" must be "resource" or "skill".')
        entry = {"server": server, "uri": uri, **({"kind": SKILL} if kind == SKILL else {})}
        if entry not in checked:
            checked.append(entry)
    return checked


def reachable_servers(hub: HubApi, user_id: int | None, patterns: Any = None) -> list[str]:
    """The servers ``user_id`` may take resources from (see the module); ``patterns``: the agent's."""
    visible = hub.visible_servers(user_id)
    if patterns is None:
        return visible
    allowed = {tool.server for tool in hub.tools(user_id) if is_allowed(patterns, tool.prefixed_name)}
    return [name for name in visible if name in allowed]


def _listed_name(hub: HubApi, server: str, uri: str, user_id: int | None) -> tuple[str, str]:
    """The listed name and MIME type of ``uri`` ("" when it is not listed, e.g. from a template)."""
    try:
        catalog = hub.listed_resources(server, user_id)
    except ResourceError:
        return "", ""
    for entry in catalog.resources:
        if entry.uri == uri:
            return entry.title or entry.name, entry.mime_type
    return "", ""


def _skill_name(hub: HubApi, server: str, uri: str, user_id: int | None) -> str:
    """The label of the skill whose SKILL.md is ``uri`` ("" when it is not listed now)."""
    return next((s.label for s in hub.skills(user_id) if s.server == server and s.uri == uri), "")


def refs(stored: Any) -> list[dict[str, str]]:
    """The ``{server, uri}`` of stored attachments (what an ``edit`` without ``attachments`` keeps)."""
    if not isinstance(stored, list):
        return []
    return [
        {"server": item["server"], "uri": item["uri"], **_kind(item)}
        for item in stored
        if isinstance(item, dict) and isinstance(item.get("server"), str) and isinstance(item.get("uri"), str)
    ]


def _kind(item: dict[str, Any]) -> dict[str, str]:
    """``{"kind": "skill"}`` for a skill's entry, ``{}`` for a resource's (which has no kind)."""
    return {"kind": SKILL} if item.get("kind") == SKILL else {}


def _earlier_read(earlier: list[dict[str, Any]], attached: dict[str, str]) -> dict[str, Any] | None:
    """The entry of ``earlier`` for the same attachment if that read worked (it has text), else None."""
    for item in earlier:
        if isinstance(item, dict) and {key: item.get(key) for key in attached} == attached:
            return item if item.get("text") and item.get("kind") == attached.get("kind") else None
    return None


async def read_attachments(
    hub: HubApi,
    attachments: list[dict[str, str]],
    user_id: int | None,
    reachable: list[str],
    earlier: list[dict[str, Any]] | None = None,
    skill_servers: list[str] | None = None,
) -> list[dict[str, Any]]:
    """Read each attachment; the entries to store (see the module). Failures become notes.

    The texts share one budget of :data:`~mcpclient.core.results.MAX_OUTPUT_BYTES`, like a tool result.
    ``earlier``: the stored entries of the message an ``edit`` replaces. Each is read again (the
    resource may have changed), but when the server fails to answer now, the text read before
    is kept with a note instead of being lost. ``skill_servers``: the servers skills may come
    from (default ``reachable``).
    """
    reads = await _read_all(hub, attachments, user_id, reachable, skill_servers)
    stored: list[dict[str, Any]] = []
    budget = MAX_OUTPUT_BYTES
    for item, read in zip(attachments, reads, strict=True):  # in order: the budget is deterministic
        server, uri = item["server"], item["uri"]
        if item.get("kind") == SKILL:
            name, mime = _skill_name(hub, server, uri, user_id), ""
        else:
            name, mime = _listed_name(hub, server, uri, user_id)
        entry: dict[str, Any] = {"server": server, "uri": uri, "name": name or uri.rsplit("/", 1)[-1] or uri}
        entry["name"] = entry["name"][:MAX_NAME_CHARS]
        if item.get("kind") == SKILL:
            entry["kind"] = SKILL
        if read is None:
            entry.update(
                mimeType=mime, text="", note=f'not read: the server "{server}" is not available here'
            )
            stored.append(entry)
            continue
        if isinstance(read, SkillText):
            text = cap_output(read.text or "", max(budget, 0))
            budget -= len(text.encode("utf-8"))
            entry.update(name=read.label[:MAX_NAME_CHARS], mimeType=read.mime_type, text=text, note=read.note)
            entry["files"] = list(read.others[:MAX_OTHERS_SHOWN])
            stored.append(entry)
            continue
        if isinstance(read, ResourceError | SkillError):
            exc = read
            before = _earlier_read(earlier or [], item)
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


type Read = ReadResult | SkillText | ResourceError | SkillError | None


async def _read_all(
    hub: HubApi,
    attachments: list[dict[str, str]],
    user_id: int | None,
    reachable: list[str],
    skill_servers: list[str] | None = None,
) -> list[Read]:
    """Every attachment read concurrently (at most :data:`MAX_CONCURRENT_READS` at a time), in order.

    ``None`` for a server out of reach (never asked), the :class:`ResourceError` (or
    :class:`SkillError`) of a failed read. Each read is already capped at 5 MB; the shared budget
    is applied afterwards, in order.
    """
    gate = asyncio.Semaphore(MAX_CONCURRENT_READS)

    async def one(item: dict[str, str]) -> Read:
        skill = item.get("kind") == SKILL
        if item["server"] not in (skill_servers if skill and skill_servers is not None else reachable):
            return None
        async with gate:
            try:
                if skill:
                    return await hub.read_skill(item["server"], item["uri"], "", user_id)
                return await hub.read_resource(item["server"], item["uri"], user_id)
            except (ResourceError, SkillError) as exc:
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
            **_kind(item),
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
    visible = hub.visible_servers(user_id)
    return await read_attachments(hub, attachments, user_id, reachable, earlier, visible)


def public(attachments: Any) -> list[dict[str, Any]]:
    """What pages receive of stored attachments: no text (it can be megabytes), a note if any, and
    ``kind: "skill"`` for a skill."""
    if not isinstance(attachments, list):
        return []
    return [
        {
            **{key: item.get(key, "") for key in ("server", "uri", "name", "mimeType", "note")},
            **_kind(item),
        }
        for item in attachments
        if isinstance(item, dict)
    ]


# "</resource" (or "</skill") in any case, also with blanks after "</": what would end a block early.
_CLOSING = re.compile(r"</(?=\s*(?:resource|skill))", re.IGNORECASE)


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
        if item.get("kind") == SKILL:
            blocks.append(_skill_content(item))
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


def _skill_content(item: dict[str, Any]) -> str:
    """An attached skill as the model reads it: a skill block, its other files and a failure named."""
    note = str(item.get("note") or "")
    files = [str(name) for name in item.get("files") or []]
    if files:
        listed = ", ".join(files)
        others = f"The skill's other files (load one with {LOAD_SKILL} when it is offered): {listed}."
        note = f"{note} {others}".strip()
    server, uri = str(item.get("server") or ""), str(item.get("uri") or "")
    name = str(item.get("name") or uri)
    return skill_block(server, name, uri, "SKILL.md", str(item.get("text") or ""), note=note)


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

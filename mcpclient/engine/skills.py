"""Skills of the MCP servers (the ``io.modelcontextprotocol/skills`` extension, SEP-2640): listed per
live session, kept fresh, and read file by file with every byte checked against the skill's manifest.

A server that declares the extension (``capabilities.extensions["io.modelcontextprotocol/skills"]``,
in its ``server/discover`` or ``initialize`` result) answers ``skills/list`` (paginated) and
``skills/get`` (one skill by the URI of its ``SKILL.md``). Each entry carries the skill's
frontmatter verbatim and a manifest of its files (``uri``, ``sha256:`` digest, ``size``); the files
themselves are ordinary resources, read with ``resources/read``. The SDK (``mcp`` 2.3) knows none
of this: the requests go out through the session's public ``send_request`` with request and
result models defined here.

Invariants. :func:`keep_listed` runs in the session owner's watcher task group, so a listing lives
and dies with its session (a reconnect lists again). The extension defines no change
notification; since a skill's files are resources, the session lists its skills again whenever
its resources change (``notifications/resources/list_changed``, a ``resourcesListChanged`` event)
and on an administrator's rediscovery. A listing is bounded (:data:`MAX_PAGES`, :data:`MAX_SKILLS`,
the server's ``timeout``). Each entry is checked by :mod:`mcpclient.engine.skill_entries`: names
over its ``MAX_NAME_CHARS`` are left out, descriptions are cut at its ``MAX_DESCRIPTION_CHARS``.
An entry that breaks the extension's rules (no manifest, a manifest
without ``SKILL.md``, over the limits of 512 files or 16 MiB, a URI that does not end in
``<name>/SKILL.md``, ``"resources": "dynamic"``) stays listed with its ``problem`` and is never
loaded: a ``dynamic`` skill has no digests to verify, and BooCode loads only verified content.

Reading (:func:`read`) goes through the session that serves the person
(:func:`mcpclient.engine.serving.session_for`), bounded by the server's ``timeout``. A file is read
only if the skill's manifest lists it (a relative path resolves against the skill's root, ``..``
never leaves it), at most :data:`MAX_FILE_BYTES` (a larger one is refused before it is read); its
size and SHA-256 digest must match the manifest, and a ``SKILL.md``'s frontmatter must equal the
entry's. On a mismatch the entry is fetched again (``skills/get``) once, in case the skill changed;
content that still does not match is refused, never used. Verified files are kept in the session's
memory (at most :data:`CACHE_BYTES`), keyed by URI and digest, and are served again only for the
same digest. Every failure is a :class:`SkillError` naming the server, the skill, the file and
what differed. Skill text is untrusted input to the model: this module verifies that it is what
the server published, not that it is safe.

The tour: docs/architecture.md (*Skills*), docs/tools.md (*Skills from servers*).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import logging
import time
from collections import OrderedDict
from dataclasses import dataclass, field, replace
from typing import Any, Literal

import anyio
import anyio.abc
import httpx2
import mcp.types as types
import pydantic
from mcp import Client, MCPError
from mcp_types import CONNECTION_CLOSED, INVALID_PARAMS, METHOD_NOT_FOUND, REQUEST_TIMEOUT

from mcpclient.core.results import MAX_OUTPUT_BYTES
from mcpclient.core.skills import Skill, SkillError, SkillText
from mcpclient.core.state import Status
from mcpclient.engine.catalog import KeptFresh
from mcpclient.engine.protocol import SKILLS_EXTENSION, all_pages
from mcpclient.engine.serving import Session, Sessions, config_for, ready_servers, session_for
from mcpclient.engine.skill_entries import (
    MAX_URI_CHARS,
    SKILL_FILE,
    HeldSkill,
    SkillFile,
    frontmatter_of,
    held,
    labelled,
    plain_text,
    relative,
    same,
    skill_path,
)

logger = logging.getLogger(__name__)

EXTENSION = SKILLS_EXTENSION
LIST_METHOD = "skills/list"
GET_METHOD = "skills/get"
MAX_PAGES = 100  # of skills/list per listing
MAX_SKILLS = 1000  # kept per server; more are left out with a warning in the log
MAX_FILE_BYTES = MAX_OUTPUT_BYTES  # one file as the model reads it (a tool result's limit)
MAX_GOT = 100  # skills reached by URI alone (skills/get) kept per session
CACHE_BYTES = 8 * 1024 * 1024  # verified file contents kept per session


@dataclass(eq=False)
class SkillCatalog(KeptFresh):
    """The skills of one session, as last listed, and what was verified on it."""

    entries: tuple[HeldSkill, ...] = ()
    directory_read: bool = False  # the server declared ``directoryRead`` (not used: manifests suffice)
    got: dict[str, HeldSkill] = field(default_factory=dict, repr=False)  # by URI, from skills/get
    cache: OrderedDict[tuple[str, str], tuple[bytes, str]] = field(default_factory=OrderedDict, repr=False)
    cached_bytes: int = 0

    def skills(self) -> tuple[Skill, ...]:
        """The listed skills, in the server's order."""
        return tuple(entry.skill for entry in self.entries)

    def remember(self, key: tuple[str, str], data: bytes, mime: str) -> None:
        """Keep verified ``data`` and its MIME type (least recently used out first, :data:`CACHE_BYTES`)."""
        if len(data) > CACHE_BYTES or key in self.cache:
            return
        self.cache[key] = (data, mime)
        self.cached_bytes += len(data)
        while self.cached_bytes > CACHE_BYTES:
            _, (dropped, _) = self.cache.popitem(last=False)
            self.cached_bytes -= len(dropped)

    def recall(self, key: tuple[str, str]) -> tuple[bytes, str] | None:
        """Verified bytes and their MIME type kept for ``key`` (a file's URI and digest), if any."""
        kept = self.cache.get(key)
        if kept is not None:
            self.cache.move_to_end(key)
        return kept


# --- the wire: requests and results the SDK does not define ------------------------------------
class ListSkillsRequest(types.PaginatedRequest[Literal["skills/list"]]):
    """``skills/list``: one page of a server's skills."""

    method: Literal["skills/list"] = "skills/list"


class GetSkillParams(types.RequestParams):
    """``skills/get``'s params: the URI of the skill's ``SKILL.md``."""

    uri: str


class GetSkillRequest(types.Request[GetSkillParams, Literal["skills/get"]]):
    """``skills/get``: the entry of one skill."""

    method: Literal["skills/get"] = "skills/get"
    params: GetSkillParams


class SkillsPage(types.PaginatedResult):
    """A ``skills/list`` page; its entries are read one by one (``skill_entries.held``), not by pydantic."""

    skills: list[Any] = []


class GotSkill(types.Result):
    """A ``skills/get`` result; its entry is read like a listed one."""

    skill: Any = None


def declared(client: Client) -> dict[str, Any] | None:
    """The server's settings for the extension (``{}`` when declared without any), else ``None``."""
    extensions = client.server_capabilities.extensions or {}
    settings = extensions.get(EXTENSION)
    return settings if isinstance(settings, dict) else None


# --- listing -------------------------------------------------------------------------------------
async def list_everything(client: Client, server: str) -> list[HeldSkill]:
    """Every page of ``skills/list``, entries read one by one (each page's limits and the pages')."""

    async def page(cursor: str | None) -> SkillsPage:
        params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
        return await client.session.send_request(ListSkillsRequest(params=params), SkillsPage)

    raw = await all_pages(page, "skills", LIST_METHOD, MAX_PAGES, enough=MAX_SKILLS)
    entries: list[HeldSkill] = []
    seen: set[str] = set()
    left_out: list[str] = []
    for item in raw[:MAX_SKILLS]:
        entry = held(server, item)
        if isinstance(entry, str):
            left_out.append(entry)
        elif entry.skill.uri in seen:
            left_out.append(f"{entry.skill.uri} is listed twice")
        else:
            seen.add(entry.skill.uri)
            entries.append(entry)
    if left_out:
        shown = "; ".join(left_out[:5])
        logger.warning('MCP server "%s": %d skills left out of its listing: %s', server, len(left_out), shown)
    if len(raw) > MAX_SKILLS:
        logger.warning('MCP server "%s" lists more than %d skills; the first are kept', server, MAX_SKILLS)
    return labelled(entries)


async def keep_listed(
    connection: Session,
    client: Client,
    *,
    task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """Keep ``connection.skills`` listed for the life of the session (see the module docstring)."""
    catalog = connection.skills
    settings = declared(client)
    if settings is None:
        catalog.mark_listed()
        task_status.started()
        return
    catalog.supported = True
    catalog.directory_read = settings.get("directoryRead") is True
    task_status.started()
    await catalog.keep_fresh(lambda: _relist(connection, client, catalog))


def changed(connection: Session) -> None:
    """The session's resources changed: a skill's files may have, so list the skills again."""
    catalog = getattr(connection, "skills", None)
    if catalog is not None and catalog.supported:
        catalog.request_refresh()


async def refresh_now(connection: Session) -> None:
    """List ``connection``'s skills again and wait for it (an administrator's rediscovery)."""
    if connection.client is not None:
        await connection.skills.refresh_now(2 * connection.config.timeout + 1)


async def _relist(connection: Session, client: Client, catalog: SkillCatalog) -> bool:
    """List into ``catalog``; False when the connection has ended."""
    try:
        with anyio.fail_after(connection.config.timeout):
            entries = await list_everything(client, connection.name)
    except TimeoutError:
        catalog.error = f"skills/list timed out after {connection.config.timeout:g} s"
    except MCPError as exc:
        if exc.error.code == CONNECTION_CLOSED:
            return False
        catalog.error = f"skills/list failed: {exc.error.message}"
    except pydantic.ValidationError as exc:
        catalog.error = f"skills/list returned an invalid result: {str(exc).splitlines()[0]}"
    except Exception as exc:  # the top of a background loop: a bad listing must not end the session
        catalog.error = f"skills/list failed: {type(exc).__name__}: {str(exc).splitlines()[0][:300]}"
    else:
        catalog.entries, catalog.error = tuple(entries), ""
        catalog.got.clear()  # a fresh listing is the held entry from now on
    if catalog.error:
        logger.warning('MCP server "%s": %s', connection.name, catalog.error)
    catalog.finish_listing()
    return True


# --- queries ---------------------------------------------------------------------------------------
def skills_for(hub: Sessions[Session], user_id: int | None) -> list[Skill]:
    """The skills ``user_id`` may use now: the ready shared sessions' and their own, in server order."""
    found: list[Skill] = []
    for _, session in ready_servers(hub, user_id):
        catalog = getattr(session, "skills", None)
        if catalog is not None:
            found.extend(catalog.skills())
    return found


async def wait_listed(hub: Sessions[Session], user_id: int | None, wait: float) -> None:
    """Wait up to ``wait`` seconds for the first skill listings of the sessions ``user_id`` uses."""
    if wait <= 0:
        return
    with anyio.move_on_after(wait):
        for _, session in ready_servers(hub, user_id):
            catalog = getattr(session, "skills", None)
            if catalog is not None:
                await catalog.wait_listed(wait)


def find(catalog: SkillCatalog, server: str, wanted: str) -> HeldSkill | None:
    """The entry ``wanted`` names: its URI, label or path, or its name when only one skill has it.

    A name two skills share is a :class:`SkillError` listing their labels (none is preferred).
    """
    entries = [*catalog.entries, *catalog.got.values()]
    for entry in entries:
        if wanted in (entry.skill.uri, entry.skill.label):
            return entry
    by_path = [entry for entry in entries if skill_path(entry.skill.uri) == wanted]
    if len(by_path) == 1:
        return by_path[0]
    named = [entry for entry in catalog.entries if entry.skill.name == wanted]
    if len(named) > 1:
        labels = ", ".join(f'"{entry.skill.label}"' for entry in named)
        raise SkillError(
            f'MCP server "{server}" lists {len(named)} skills named "{wanted}"; name one of them: {labels}.',
            409,
        )
    return named[0] if named else None


def _live(hub: Sessions[Session], server: str, user_id: int | None) -> tuple[Session, SkillCatalog]:
    """The ready session of ``server`` that ``user_id`` may use, and its skills; or a :class:`SkillError`."""
    if config_for(hub, server, user_id) is None:
        raise SkillError(f'There is no MCP server "{server}".', 404)
    connection = session_for(hub, server, user_id)
    if connection is None or connection.status is not Status.READY or connection.client is None:
        why = (connection.reason if connection is not None else "") or "it is not connected"
        raise SkillError(f'MCP server "{server}" is unreachable: {why}', 502)
    catalog = getattr(connection, "skills", None)
    if not isinstance(catalog, SkillCatalog) or not catalog.supported:
        raise SkillError(f'MCP server "{server}" serves no skills (it declares no skills extension).', 409)
    return connection, catalog


def _server_error(connection: Session, what: str, exc: BaseException) -> SkillError:
    """A failed request of ``what`` as a :class:`SkillError` (the session marked when it closed)."""
    server, timeout = connection.name, connection.config.timeout
    if isinstance(exc, TimeoutError):
        return SkillError(f'MCP server "{server}": {what} timed out after {timeout:g} s', 502)
    if isinstance(exc, MCPError):
        code, message = exc.error.code, exc.error.message
        if code == CONNECTION_CLOSED:
            connection.mark_unavailable_if_closed(exc)
            return SkillError(f'MCP server "{server}" is unreachable: connection closed', 502)
        if code == REQUEST_TIMEOUT:
            return SkillError(f'MCP server "{server}": {what} timed out', 502)
        if code in (INVALID_PARAMS, METHOD_NOT_FOUND, -32002):
            return SkillError(f'MCP server "{server}": {what}: {message}', 404)
        return SkillError(f'MCP server "{server}": {what} failed: {message}', 502)
    if isinstance(exc, pydantic.ValidationError):
        first = str(exc).splitlines()[0]
        return SkillError(f'MCP server "{server}": {what} returned an invalid result: {first}', 502)
    return SkillError(f'MCP server "{server}" is unreachable: {exc or type(exc).__name__}', 502)


_FAILURES = (
    TimeoutError,
    MCPError,
    pydantic.ValidationError,
    httpx2.TransportError,
    anyio.ClosedResourceError,
    anyio.BrokenResourceError,
    OSError,
)


async def get(connection: Session, catalog: SkillCatalog, uri: str) -> HeldSkill:
    """``skills/get`` of ``uri``: the server's current entry for that skill (kept as the held one)."""
    client = connection.client
    assert client is not None
    connection.last_used = time.monotonic()
    request = GetSkillRequest(params=GetSkillParams(uri=uri))
    try:
        with anyio.fail_after(connection.config.timeout):
            got = await client.session.send_request(request, GotSkill)
    except _FAILURES as exc:
        raise _server_error(connection, f"{GET_METHOD} {uri}", exc) from None
    entry = held(connection.name, got.skill)
    if isinstance(entry, str):
        raise SkillError(
            f'MCP server "{connection.name}": {GET_METHOD} {uri} returned no usable entry: {entry}'
        )
    if entry.skill.uri != uri:
        raise SkillError(
            f'MCP server "{connection.name}": {GET_METHOD} {uri} returned the entry of {entry.skill.uri}', 502
        )
    listed = [item for item in catalog.entries if item.skill.uri == uri]
    if listed:
        entry = replace(entry, skill=replace(entry.skill, label=listed[0].skill.label))
        catalog.entries = tuple(entry if item.skill.uri == uri else item for item in catalog.entries)
    else:
        if any(item.skill.name == entry.skill.name for item in catalog.entries):
            entry = replace(entry, skill=replace(entry.skill, label=entry.skill.uri))
        if len(catalog.got) >= MAX_GOT:
            catalog.got.clear()
        catalog.got[uri] = entry
    return entry


def _file_of(entry: HeldSkill, uri: str) -> SkillFile | None:
    return next((file for file in entry.files if file.uri == uri), None)


def _relative_name(entry: HeldSkill, uri: str) -> str:
    prefix = entry.root + "/"
    return uri[len(prefix) :] if uri.startswith(prefix) else uri


async def _fetch(connection: Session, skill: HeldSkill, file: SkillFile) -> tuple[bytes, str]:
    """``resources/read`` of ``file``: its raw bytes (text as UTF-8) and MIME type."""
    client = connection.client
    assert client is not None
    connection.last_used = time.monotonic()
    try:
        with anyio.fail_after(connection.config.timeout):
            result = await client.read_resource(file.uri, cache_mode="bypass")
    except _FAILURES as exc:
        raise _server_error(connection, f"reading {file.uri}", exc) from None
    contents = list(result.contents)
    matching = [item for item in contents if str(item.uri) == file.uri]
    if not matching and len(contents) == 1:
        matching = contents
    if len(matching) != 1:
        raise SkillError(
            f"{_where(connection.name, skill, file)}: the server returned {len(contents)} items and not one "
            f"for {file.uri}; nothing was used.",
            409,
        )
    item = matching[0]
    if isinstance(item, types.TextResourceContents):
        return item.text.encode("utf-8", errors="surrogatepass"), item.mime_type or ""
    try:
        return base64.b64decode(item.blob, validate=True), item.mime_type or ""
    except (binascii.Error, ValueError):
        raise SkillError(
            f"{_where(connection.name, skill, file)}: its content is not valid base64; nothing was used.", 409
        ) from None


def _where(server: str, skill: HeldSkill, file: SkillFile) -> str:
    """The server, the skill and the file, as every error about a file begins."""
    return f'MCP server "{server}": skill "{skill.skill.label}", file {_relative_name(skill, file.uri)}'


def _mismatch(server: str, skill: HeldSkill, file: SkillFile, data: bytes) -> str:
    """What differs between ``data`` and the manifest's ``file`` ("" when nothing does)."""
    where = _where(server, skill, file)
    if len(data) != file.size:
        return f"{where}: the server sent {len(data):,} bytes, the skill's manifest says {file.size:,}"
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    if digest != file.digest:
        return f"{where}: its SHA-256 digest is {digest}, the skill's manifest says {file.digest}"
    return ""


async def _verified(
    connection: Session, catalog: SkillCatalog, skill: HeldSkill, file: SkillFile
) -> tuple[HeldSkill, SkillFile, bytes, str]:
    """The file's bytes as the manifest describes them (fetched again once after ``skills/get``)."""
    kept = catalog.recall((file.uri, file.digest))
    if kept is not None:
        return skill, file, *kept
    data, mime = await _fetch(connection, skill, file)
    problem = _mismatch(connection.name, skill, file, data)
    if problem:
        # The skill may have changed since it was listed: its current entry decides (once).
        try:
            fresh = await get(connection, catalog, skill.skill.uri)
        except SkillError as exc:
            refused = "the content was refused, not used (fetching the skill's entry again failed:"
            raise SkillError(f"{problem}; {refused} {exc})", 409) from None
        now = _file_of(fresh, file.uri)
        if fresh.skill.problem or now is None or (now.digest, now.size) == (file.digest, file.size):
            raise SkillError(f"{problem}; the content was refused, not used.", 409)
        skill, file = fresh, now
        if file.size > MAX_FILE_BYTES:
            raise _oversized(connection.name, skill, file)
        data, mime = await _fetch(connection, skill, file)
        problem = _mismatch(connection.name, skill, file, data)
        if problem:
            again = "(after fetching the skill's entry again); the content was refused, not used."
            raise SkillError(f"{problem} {again}", 409)
    catalog.remember((file.uri, file.digest), data, mime)
    return skill, file, data, mime


def _oversized(server: str, skill: HeldSkill, file: SkillFile) -> SkillError:
    return SkillError(
        f"{_where(server, skill, file)} is {file.size:,} bytes, over the {MAX_FILE_BYTES:,} bytes the "
        "model may read at once; it was not read.",
        409,
    )


def _frontmatter_problem(skill: HeldSkill, text: str) -> str:
    """Why ``text`` (a verified SKILL.md) does not carry the entry's frontmatter ("" when it does)."""
    parsed = frontmatter_of(text)
    if isinstance(parsed, str):
        return parsed
    for key in sorted(set(parsed) | set(skill.frontmatter), key=str):
        if key not in skill.frontmatter:
            return f'its frontmatter has the field "{key}", which the skill\'s entry does not'
        if key not in parsed:
            return f'its frontmatter lacks the field "{key}" of the skill\'s entry'
        if not same(parsed[key], skill.frontmatter[key]):
            return f'its frontmatter field "{key}" differs from the skill\'s entry'
    return ""


def _as_text(data: bytes) -> str | None:
    """``data`` as text when it is UTF-8 without NUL characters, else ``None`` (binary)."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return None if "\x00" in text else text


MAX_OTHERS = 100  # other files of a skill named with its SKILL.md


async def read(hub: Sessions[Session], server: str, wanted: str, path: str, user_id: int | None) -> SkillText:
    """The skill ``wanted`` (a label, name, path or ``SKILL.md`` URI) of ``server``: its ``SKILL.md``,
    or the file ``path`` of it, verified (see the module docstring), through ``user_id``'s session.

    A skill the listing does not name is asked for by URI (``skills/get``), as the extension
    requires hosts to support.
    """
    connection, catalog = _live(hub, server, user_id)
    entry = find(catalog, server, wanted)
    if entry is None and "://" in wanted and len(wanted) <= MAX_URI_CHARS and plain_text(wanted):
        entry = await get(connection, catalog, wanted)
    if entry is None:
        shown = ", ".join(f'"{skill.label}"' for skill in catalog.skills()[:20]) or "none"
        raise SkillError(f'MCP server "{server}" has no skill "{wanted}" (it lists: {shown}).', 404)
    if entry.skill.problem:
        why = entry.skill.problem
        raise SkillError(
            f'MCP server "{server}": the skill "{entry.skill.label}" cannot be loaded: {why}.', 409
        )
    uri = relative(entry, path)
    file = _file_of(entry, uri)
    if file is None:
        listed = ", ".join(_relative_name(entry, f.uri) for f in entry.files[:MAX_OTHERS])
        raise SkillError(
            f'MCP server "{server}": the skill "{entry.skill.label}" has no file "{path}" in its manifest '
            f"(its files: {listed}); an unlisted file is never read.",
            404,
        )
    if file.size > MAX_FILE_BYTES:
        raise _oversized(server, entry, file)
    entry, file, data, mime = await _verified(connection, catalog, entry, file)
    text = _as_text(data)
    name = _relative_name(entry, file.uri)
    if file.uri == entry.skill.uri:
        if text is None:
            raise SkillError(
                f"{_where(server, entry, file)}: it is not UTF-8 text; the skill was not loaded.", 409
            )
        problem = _frontmatter_problem(entry, text)
        if problem:
            raise SkillError(
                f'MCP server "{server}": skill "{entry.skill.label}", file {SKILL_FILE}: {problem}; '
                "the skill was refused, not loaded.",
                409,
            )
    others = tuple(_relative_name(entry, f.uri) for f in entry.files if f.uri != entry.skill.uri)
    return SkillText(
        server=server,
        uri=entry.skill.uri,
        name=entry.skill.name,
        label=entry.skill.label,
        path=name,
        file_uri=file.uri,
        mime_type=mime,
        size=len(data),
        text=text,
        note="" if text is not None else f"binary content ({mime or 'unknown type'}, {len(data):,} bytes)",
        others=others[:MAX_OTHERS] if file.uri == entry.skill.uri else (),
    )

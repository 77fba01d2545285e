"""Write admin changes back to mcp.json atomically.

Every change is a read-modify-write of the whole file under two locks: a module-level
``threading.Lock`` for threads of this process and ``fcntl.flock`` on a ``<file>.lock``
sidecar for other processes (``flock`` locks belong to an open file description, so the
same process taking it twice from two threads would deadlock without the thread lock).

The new content goes to a temporary file in the same folder, is flushed and fsynced, then
``os.replace``-d over the old file and the folder is fsynced: readers see either the old or
the new file, never a mix. On any failure before the replace the temporary file is removed,
the old file is untouched and ``WritebackError`` is raised. A process killed between the two
leaves its temporary file: :func:`remove_stale_temp_files` deletes it at the next start.

Entries are written as given, so placeholders such as ``${TOKEN}`` and keys BooCode does not
know survive; every other top-level key keeps its value and position, and the server map stays
under the key of the file's shape (``mcpServers``, VS Code's ``servers``, opencode's ``mcp``,
Zed's ``context_servers``: see :mod:`mcpclient.config.shapes`). The file is always
re-read under the lock, so a change made by hand between two admin edits is not lost.
"""

from __future__ import annotations

import contextlib
import copy
import fcntl
import json
import logging
import os
import stat
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from mcpclient.config.document import parse_json_document
from mcpclient.config.model import SERVER_NAME_RE, ConfigError
from mcpclient.config.shapes import MCP_SERVERS, Shape, ShapeError, find_servers

logger = logging.getLogger(__name__)

_thread_lock = threading.Lock()


class WritebackError(Exception):
    """mcp.json could not be updated; the file on disk is unchanged."""


@contextlib.contextmanager
def _locked(target: Path) -> Iterator[None]:
    lock_path = target.with_name(target.name + ".lock")
    with _thread_lock:
        try:
            lock_file = open(lock_path, "a")  # closed below, after unlocking
        except OSError as exc:
            raise WritebackError(f"{target.name}: cannot open the lock file {lock_path}: {exc}") from None
        try:
            fcntl.flock(lock_file.fileno(), fcntl.LOCK_EX)
            yield
        finally:
            # Closing releases the flock too; unlocking first is explicit.
            with contextlib.suppress(OSError):
                fcntl.flock(lock_file.fileno(), fcntl.LOCK_UN)
            lock_file.close()


def _target(path: Path) -> Path:
    """The file to replace: a symlinked mcp.json is updated where it points, not replaced."""
    return Path(os.path.realpath(path))


class _Document:
    """The whole file as an ordered dict, its shape and its server map (the same objects)."""

    def __init__(self, top: dict[str, Any], shape: Shape, servers: dict[str, Any]) -> None:
        self.top = top
        self.shape = shape
        self.servers = servers

    def replace_servers(self, servers: dict[str, Any]) -> None:
        """Put a new server map where the old one was (same key, same position)."""
        holder: dict[str, Any] = self.top
        for key in self.shape.path[:-1]:
            holder = holder[key]
        holder[self.shape.path[-1]] = servers
        self.servers = servers


def _fresh() -> _Document:
    top: dict[str, Any] = {"mcpServers": {}}
    return _Document(top, MCP_SERVERS, top["mcpServers"])


def _read_document(target: Path) -> _Document:
    """The file, or a fresh ``{"mcpServers": {}}`` if it is missing or empty."""
    source = target.name
    try:
        text = target.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        return _fresh()
    except (OSError, UnicodeDecodeError) as exc:
        raise WritebackError(f"{source}: cannot read {target}: {exc}") from None
    if not text.strip():
        return _fresh()
    try:
        document = parse_json_document(text, source=source)
    except ConfigError as exc:
        raise WritebackError(f"{exc}; fix the file by hand before changing servers here") from None
    top = document.value
    if not isinstance(top, dict):
        raise WritebackError(f"{source}: the top level is not a JSON object; fix the file by hand first")
    duplicate = document.first_duplicate_within(top)
    if duplicate is not None:
        # Rewriting would silently drop one of the two values.
        raise WritebackError(f'{source}: duplicate key "{duplicate}"; fix the file by hand first')
    try:
        shape, servers = find_servers(top, empty_shape=MCP_SERVERS)
    except ShapeError as exc:
        raise WritebackError(f"{source}: {exc}; fix the file by hand first") from None
    if not isinstance(servers, dict):
        raise WritebackError(f'{source}: "{shape.key}" is not an object; fix the file by hand first')
    return _Document(top, shape, servers)


def _new_file_mode() -> int:
    """0o666 minus the process umask, read without changing it (os.umask is process-wide)."""
    with contextlib.suppress(OSError, ValueError):
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return 0o666 & ~int(line.split()[1], 8)
    return 0o644


def _fsync_directory(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_document(target: Path, document: _Document | dict[str, Any]) -> None:
    """Atomically replace ``target`` with ``document`` (caller holds the locks)."""
    source = target.name
    if isinstance(document, _Document):
        document = document.top
    try:
        data = (json.dumps(document, indent=2, ensure_ascii=False) + "\n").encode("utf-8")
    except (TypeError, ValueError) as exc:
        raise WritebackError(f"{source}: the new content is not JSON-serialisable: {exc}") from None
    try:
        mode = stat.S_IMODE(os.stat(target).st_mode)
    except FileNotFoundError:
        mode = _new_file_mode()
    except OSError as exc:
        raise WritebackError(f"{source}: cannot stat {target}: {exc}") from None

    try:
        fd, temp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    except OSError as exc:
        raise WritebackError(f"{source}: cannot create a temporary file in {target.parent}: {exc}") from None
    replaced = False
    try:
        with os.fdopen(fd, "wb") as temp:
            os.fchmod(temp.fileno(), mode)
            temp.write(data)
            temp.flush()
            os.fsync(temp.fileno())
        os.replace(temp_name, target)
        replaced = True
    except OSError as exc:
        raise WritebackError(f"{source}: could not write {target}: {exc}; the file is unchanged") from None
    finally:
        if not replaced:
            with contextlib.suppress(OSError):
                os.unlink(temp_name)
    try:
        _fsync_directory(target.parent)
    except OSError as exc:
        # The new file is already in place; only its durability across a crash is in doubt.
        logger.warning("%s: written, but syncing %s failed: %s", source, target.parent, exc)


def remove_stale_temp_files(path: Path) -> list[Path]:
    """Delete temporary files a write-back left behind when its process died mid-write.

    They may hold a copy of the file's secrets. Run at start (``mcp_sync`` and the hub's first
    start); the write lock is taken first, so a write in progress in another process keeps its
    file. Returns what was removed.
    """
    target = _target(Path(path))
    if not target.parent.is_dir():
        return []
    removed: list[Path] = []
    with _locked(target):
        for temp in target.parent.glob(f".{target.name}.*.tmp"):
            try:
                temp.unlink()
            except FileNotFoundError:
                continue
            except OSError as exc:
                logger.warning("%s: cannot remove the stale temporary file %s: %s", target.name, temp, exc)
                continue
            removed.append(temp)
    for temp in removed:
        logger.info("%s: removed %s, left by an interrupted write", target.name, temp.name)
    return removed


def _check_name(source: str, name: object) -> None:
    if not isinstance(name, str) or not SERVER_NAME_RE.match(name):
        raise WritebackError(f"{source}: invalid server name {name!r}: use only letters, digits, '_' and '-'")


def write_servers(path: Path, servers: dict[str, dict]) -> None:
    """Replace the server map with ``servers`` (in the given order), atomically.

    The map stays where the file's shape keeps it (``mcpServers``, ``servers``, ``mcp``...);
    other top-level keys keep their values and order. A missing file is created as
    ``{"mcpServers": {...}}``; an existing file keeps its permission bits.
    """
    target = _target(Path(path))
    for name in servers:
        _check_name(target.name, name)
    with _locked(target):
        document = _read_document(target)
        document.replace_servers(copy.deepcopy(dict(servers)))
        _write_document(target, document)


def file_shape(path: Path) -> Shape:
    """The shape of the file at ``path`` (``mcpServers`` for a missing or empty one)."""
    return _read_document(_target(Path(path))).shape


def _merge(
    document: _Document,
    entries: dict[str, dict[str, Any]],
    *,
    replace: bool,
    inputs: list[dict[str, Any]] | None,
    source: str,
) -> None:
    taken = [name for name in entries if name in document.servers]
    if taken and not replace:
        raise WritebackError(f'{source}: server "{taken[0]}" already exists; use --replace to overwrite it')
    for name, entry in entries.items():
        document.servers[name] = copy.deepcopy(entry)
    if inputs:
        holder = document.top.get("mcp") if document.shape.key == "mcp.servers" else document.top
        if isinstance(holder, dict):
            declared = holder.setdefault("inputs", [])
            if isinstance(declared, list):
                known = {item.get("id") for item in declared if isinstance(item, dict)}
                declared.extend(item for item in inputs if item.get("id") not in known)


def preview_merge(
    path: Path,
    entries: dict[str, dict[str, Any]],
    *,
    replace: bool,
    inputs: list[dict[str, Any]] | None = None,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(before, after)``: the whole file as it is and as :func:`merge_servers` would write it."""
    target = _target(Path(path))
    document = _read_document(target)
    before = copy.deepcopy(document.top)
    _merge(document, entries, replace=replace, inputs=inputs, source=target.name)
    return before, document.top


def merge_servers(
    path: Path,
    entries: dict[str, dict[str, Any]],
    *,
    replace: bool,
    inputs: list[dict[str, Any]] | None = None,
) -> None:
    """Add ``entries`` (already in the file's dialect) after the others; replace only with ``replace``.

    VS Code ``inputs`` declarations the entries need go into the file's own ``inputs`` (by id).
    """
    target = _target(Path(path))
    for name in entries:
        _check_name(target.name, name)
    with _locked(target):
        document = _read_document(target)
        _merge(document, entries, replace=replace, inputs=inputs, source=target.name)
        _write_document(target, document)


def update_server(
    path: Path, name: str, entry: dict[str, Any] | None, *, rename_from: str | None = None
) -> None:
    """Insert, replace, rename or delete one entry, keeping the others and their order.

    * ``entry`` given: replaces ``name`` in place, or appends it when new.
    * ``rename_from`` given: the entry ``rename_from`` becomes ``name`` with ``entry``, at the
      same position; ``rename_from`` must exist and ``name`` must not already be taken.
    * ``entry`` None: removes ``name`` (nothing to do if it is already gone).
    """
    target = _target(Path(path))
    source = target.name
    _check_name(source, name)
    if entry is None and rename_from is not None:
        raise ValueError("rename_from needs an entry")
    if entry is not None and not isinstance(entry, dict):
        raise WritebackError(f'{source}: server "{name}": the entry must be an object')
    with _locked(target):
        document = _read_document(target)
        servers: dict[str, Any] = document.servers
        if entry is None:
            if name not in servers:
                return
            del servers[name]
        elif rename_from is not None and rename_from != name:
            if rename_from not in servers:
                raise WritebackError(f'{source}: server "{rename_from}" not found, cannot rename it')
            if name in servers:
                raise WritebackError(f'{source}: server "{name}" already exists')
            renamed = {
                (name if key == rename_from else key): (copy.deepcopy(entry) if key == rename_from else value)
                for key, value in servers.items()
            }
            document.replace_servers(renamed)
        else:
            servers[name] = copy.deepcopy(entry)
        _write_document(target, document)


def set_enabled(path: Path, name: str, enabled: bool) -> None:
    """Set only the ``enabled`` (or, where the entry uses it, ``disabled``) key of one entry.

    Disabling writes ``"enabled": false`` (``"disabled": true`` in an entry written the Cline /
    Windsurf way). Enabling removes ``"enabled": false`` (an entry without the key is enabled,
    so a server disabled and enabled again reads as it did) or writes ``"disabled": false``;
    an entry without either key is already enabled and stays as written. The file is not
    rewritten when nothing changes.
    """
    target = _target(Path(path))
    source = target.name
    with _locked(target):
        document = _read_document(target)
        entry = document.servers.get(name)
        if not isinstance(entry, dict):
            problem = "not found" if entry is None else "is not an object"
            raise WritebackError(f'{source}: server "{name}" {problem}')
        key, value = ("disabled", not enabled) if "disabled" in entry else ("enabled", enabled)
        if enabled and key not in entry:
            return
        if entry.get(key) is value:
            return
        if key == "enabled" and enabled:
            del entry["enabled"]
        else:
            entry[key] = value
        _write_document(target, document)

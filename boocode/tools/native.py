"""Native read-only tools over the workspace: ``view_file``, ``list_dir`` and ``grep``.

Each tool is a plain blocking function returning the text the model reads; the registry runs
it in a worker thread (``asyncio.to_thread``) so file I/O never blocks the event loop. Refusals
(paths outside the workspace, secrets, binary files) raise :class:`WorkspaceError`, which the
registry turns into an error result the model can act on. Arguments arrive already validated
against each tool's JSON schema.
"""

from __future__ import annotations

import fnmatch
import os
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import IO, Any

from boocode.tools.workspace import (
    WorkspaceError,
    display_path,
    is_denied,
    resolve_path,
    workspace_root,
)
from mcpclient.results import MAX_OUTPUT_BYTES

__all__ = ["NATIVE_TOOLS", "NativeTool", "grep", "list_dir", "view_file"]

SNIFF_BYTES = 8192  # a NUL byte (or invalid UTF-8) in the first 8 KB means binary, like git and grep
LIST_MAX_DEPTH = 5
LIST_MAX_ENTRIES = 2000
GREP_DEFAULT_RESULTS = 100
GREP_MAX_RESULTS = 1000
GREP_MAX_LINE_CHARS = 500
GREP_TIME_BUDGET = 20.0  # seconds; checked between lines, so one pathological line can still overrun


@dataclass(frozen=True)
class NativeTool:
    """A native tool as declared: name, description, JSON schema and the blocking function."""

    name: str
    description: str
    parameters: dict[str, Any]
    function: Callable[..., str]


def _relative(path: Path, root: Path) -> PurePosixPath:
    return PurePosixPath(path.relative_to(root).as_posix())


def _sniff_text(head: bytes) -> bool:
    """Whether the first bytes of a file look like UTF-8 text."""
    if b"\0" in head:
        return False
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as exc:
        # A multi-byte character cut by the sniff window is fine; anything earlier is not UTF-8.
        return exc.start >= len(head) - 3 and len(head) == SNIFF_BYTES
    return True


def _open_text_file(requested: str) -> tuple[Path, Path, IO[bytes]]:
    """Resolve ``requested`` to a regular UTF-8 text file and open it (binary mode)."""
    root = workspace_root()
    path = resolve_path(requested, root)
    if not path.exists():
        raise WorkspaceError(f"{requested}: no such file in the workspace")
    if path.is_dir():
        raise WorkspaceError(f"{requested}: is a directory; use list_dir to see its contents")
    if not path.is_file():
        raise WorkspaceError(f"{requested}: not a regular file")
    handle = path.open("rb")
    try:
        if not _sniff_text(handle.read(SNIFF_BYTES)):
            raise WorkspaceError(f"{requested}: binary file (not UTF-8 text); refused")
        handle.seek(0)
    except BaseException:
        handle.close()
        raise
    return root, path, handle


def _read_lines(handle: IO[bytes], limit: int) -> Iterator[tuple[bytes, bool]]:
    """Yield ``(line without its newline, cut)``; a line longer than ``limit`` bytes is cut there.

    Reading in bounded chunks keeps a multi-gigabyte single-line file from filling memory.
    """
    while True:
        chunk = handle.readline(limit + 1)
        if not chunk:
            return
        if chunk.endswith(b"\n") or len(chunk) <= limit:
            yield chunk.rstrip(b"\n").rstrip(b"\r"), False
            continue
        while True:  # skip the rest of an over-long line
            rest = handle.readline(1 << 20)
            if not rest or rest.endswith(b"\n"):
                break
        yield chunk[:limit], True


def _cut_utf8(data: bytes, limit: int) -> str:
    """At most ``limit`` bytes of ``data`` decoded, never splitting a character."""
    return data[:limit].decode("utf-8", errors="ignore") if len(data) > limit else data.decode(
        "utf-8", errors="replace"
    )


def view_file(path: str, start_line: int | None = None, end_line: int | None = None) -> str:
    """The file's lines, numbered, optionally limited to ``start_line``..``end_line`` (1-based)."""
    if start_line is not None and end_line is not None and end_line < start_line:
        raise WorkspaceError(f"end_line ({end_line}) is before start_line ({start_line})")
    first = start_line or 1
    try:
        root, resolved, handle = _open_text_file(path)
        with handle:
            size = os.fstat(handle.fileno()).st_size
            out: list[str] = []
            used = 0
            number = 0
            for number, (raw, _cut) in enumerate(_read_lines(handle, MAX_OUTPUT_BYTES), start=1):
                if number < first:
                    continue
                if end_line is not None and number > end_line:
                    break
                entry = f"{number:>6}\t{raw.decode('utf-8', errors='replace')}\n"
                encoded = len(entry.encode("utf-8"))
                if used + encoded > MAX_OUTPUT_BYTES:
                    out.append(_cut_utf8(entry.encode("utf-8"), MAX_OUTPUT_BYTES - used).rstrip("\n"))
                    out.append(
                        f"\n[truncated at line {number}: view_file output is capped at {MAX_OUTPUT_BYTES} "
                        f"bytes and the file has {size} bytes; read on with start_line={number}]"
                    )
                    return "".join(out)
                out.append(entry)
                used += encoded
    except OSError as exc:
        raise WorkspaceError(f"{path}: {exc.strerror or exc}") from exc
    if not out:
        if number == 0:
            return f"({display_path(resolved, root)} is empty)"
        raise WorkspaceError(f"start_line {first} is past the end of {path}, which has {number} lines")
    return "".join(out).rstrip("\n")


def list_dir(path: str = ".", depth: int = 1) -> str:
    """Paths under ``path`` (relative to the workspace root), directories ending in ``/``.

    Descends ``depth`` levels; symbolic links are shown with ``@`` and not followed; entries the
    deny list hides are left out.
    """
    root = workspace_root()
    base = resolve_path(path, root)
    if not base.exists():
        raise WorkspaceError(f"{path}: no such directory in the workspace")
    if not base.is_dir():
        raise WorkspaceError(f"{path}: not a directory; use view_file to read a file")
    lines: list[str] = []

    def walk(directory: Path, level: int) -> bool:
        """Append entries of ``directory``; False once the entry cap is reached."""
        try:
            entries = sorted(os.scandir(directory), key=lambda entry: entry.name)
        except OSError as exc:
            lines.append(f"{display_path(directory, root)}/ [unreadable: {exc.strerror}]")
            return True
        for entry in entries:
            entry_path = directory / entry.name
            if is_denied(_relative(entry_path, root)):
                continue
            if len(lines) >= LIST_MAX_ENTRIES:
                lines.append(
                    f"[stopped after {LIST_MAX_ENTRIES} entries; list a subdirectory or use a smaller depth]"
                )
                return False
            shown = display_path(entry_path, root)
            if entry.is_symlink():
                lines.append(f"{shown}@")
            elif entry.is_dir():
                lines.append(f"{shown}/")
                if level < depth and not walk(entry_path, level + 1):
                    return False
            else:
                lines.append(shown)
        return True

    try:
        walk(base, 1)
    except OSError as exc:
        raise WorkspaceError(f"{path}: {exc.strerror or exc}") from exc
    if not lines:
        return f"({display_path(base, root)} is empty)"
    return "\n".join(lines)


def _glob_matches(glob: str, relative: PurePosixPath) -> bool:
    """A ``glob`` without ``/`` matches the file name; with ``/``, the path from the root."""
    if "/" in glob:
        return fnmatch.fnmatchcase(relative.as_posix(), glob.strip("/"))
    return fnmatch.fnmatchcase(relative.name, glob)


def _grep_files(base: Path, root: Path, glob: str | None) -> Iterator[Path]:
    """Readable candidate files under ``base`` in a stable order, deny list and symlinks applied."""
    if base.is_file():
        yield base
        return
    for directory, dirnames, filenames in os.walk(base, followlinks=False):
        current = Path(directory)
        dirnames[:] = sorted(d for d in dirnames if not is_denied(_relative(current / d, root)))
        for name in sorted(filenames):
            candidate = current / name
            relative = _relative(candidate, root)
            if is_denied(relative) or (glob and not _glob_matches(glob, relative)):
                continue
            if candidate.is_symlink():
                target = candidate.resolve()
                if not target.is_relative_to(root) or is_denied(_relative(target, root)):
                    continue
            if candidate.is_file():
                yield candidate


def grep(
    pattern: str,
    path: str = ".",
    glob: str | None = None,
    max_results: int = GREP_DEFAULT_RESULTS,
    ignore_case: bool = False,
) -> str:
    """Lines matching the regular expression ``pattern`` as ``path:line: text``."""
    try:
        regex = re.compile(pattern, re.IGNORECASE if ignore_case else 0)
    except re.error as exc:
        raise WorkspaceError(f"invalid regular expression {pattern!r}: {exc}") from exc
    root = workspace_root()
    base = resolve_path(path, root)
    if not base.exists():
        raise WorkspaceError(f"{path}: no such file or directory in the workspace")
    deadline = time.monotonic() + GREP_TIME_BUDGET
    results: list[str] = []
    used = 0
    stopped = ""
    for file in _grep_files(base, root, glob):
        if time.monotonic() > deadline:
            stopped = f"[stopped after {GREP_TIME_BUDGET:g} s; narrow the path or glob]"
            break
        try:
            with file.open("rb") as handle:
                if not _sniff_text(handle.read(SNIFF_BYTES)):
                    continue
                handle.seek(0)
                shown = display_path(file, root)
                for number, (raw, _cut) in enumerate(_read_lines(handle, MAX_OUTPUT_BYTES), start=1):
                    text = raw.decode("utf-8", errors="replace")
                    if not regex.search(text):
                        if number % 1000 == 0 and time.monotonic() > deadline:
                            break
                        continue
                    if len(text) > GREP_MAX_LINE_CHARS:
                        text = text[:GREP_MAX_LINE_CHARS] + " [line cut]"
                    entry = f"{shown}:{number}: {text}"
                    used += len(entry.encode("utf-8")) + 1
                    if len(results) >= max_results or used > MAX_OUTPUT_BYTES:
                        stopped = (
                            f"[stopped after {len(results)} matches; narrow the pattern, path or glob, "
                            "or raise max_results]"
                        )
                        break
                    results.append(entry)
        except OSError:
            continue  # unreadable or vanished mid-walk: grep skips it, like grep -s
        if stopped:
            break
    if not results:
        where = display_path(base, root)
        return f"No matches for {pattern!r} in {where}" + (f" ({glob})" if glob else "") + (
            f"\n{stopped}" if stopped else ""
        )
    if stopped:
        results.append(stopped)
    return "\n".join(results)


_PATH_DESCRIPTION = "A path relative to the workspace root (\".\" is the root)."

NATIVE_TOOLS: tuple[NativeTool, ...] = (
    NativeTool(
        name="view_file",
        description=(
            "Read a UTF-8 text file from the workspace. Lines are numbered (number, tab, text). "
            "Use start_line/end_line to read part of a large file; output is capped at 5 MB."
        ),
        parameters={
            "type": "object",
            "properties": {
                "path": {"type": "string", "minLength": 1, "description": _PATH_DESCRIPTION},
                "start_line": {"type": "integer", "minimum": 1, "description": "First line (1-based)."},
                "end_line": {"type": "integer", "minimum": 1, "description": "Last line (inclusive)."},
            },
            "required": ["path"],
            "additionalProperties": False,
        },
        function=view_file,
    ),
    NativeTool(
        name="list_dir",
        description=(
            "List files and directories in the workspace (directories end with '/', symbolic links "
            "with '@'). Paths are relative to the workspace root and can be passed to view_file."
        ),
        parameters={
            "type": "object",
            "properties": {
                "path": {"type": "string", "default": ".", "description": _PATH_DESCRIPTION},
                "depth": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": LIST_MAX_DEPTH,
                    "default": 1,
                    "description": "How many levels to descend (1: only the entries of path itself).",
                },
            },
            "additionalProperties": False,
        },
        function=list_dir,
    ),
    NativeTool(
        name="grep",
        description=(
            "Search workspace text files for a regular expression (Python syntax). Returns "
            "'path:line: text' for each matching line."
        ),
        parameters={
            "type": "object",
            "properties": {
                "pattern": {"type": "string", "minLength": 1, "description": "Regular expression."},
                "path": {
                    "type": "string",
                    "default": ".",
                    "description": "File or directory to search, relative to the workspace root.",
                },
                "glob": {
                    "type": "string",
                    "description": (
                        "Only search files whose name matches this glob (e.g. '*.py'); a glob "
                        "containing '/' matches the path from the workspace root (e.g. 'src/*.py')."
                    ),
                },
                "max_results": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": GREP_MAX_RESULTS,
                    "default": GREP_DEFAULT_RESULTS,
                    "description": "Stop after this many matching lines.",
                },
                "ignore_case": {"type": "boolean", "default": False},
            },
            "required": ["pattern"],
            "additionalProperties": False,
        },
        function=grep,
    ),
)

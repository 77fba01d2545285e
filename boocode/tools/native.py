"""Native read-only tools over the workspace: ``view_file``, ``list_dir`` and ``grep``.

Each tool is a plain blocking function returning the text the model reads; the registry runs
it in a thread of its own so file I/O never blocks the event loop. Refusals (paths outside the
workspace, secrets, binary files) raise :class:`WorkspaceError`, which the registry turns into
an error result the model can act on. Arguments arrive already validated against each tool's
JSON schema.

Time limit: every call gets a :class:`Deadline` (``BOOCODE_TOOL_TIMEOUT``, 30 s by default).
A thread cannot be stopped from outside, so the tools check it themselves, inside their line
and entry loops and while skipping the rest of an over-long line, and raise
:class:`ToolTimeoutError` with what they found so far once it has passed: a thread never
outlives its call by more than one step. The registry stops waiting shortly after the
deadline in any case.

``grep`` uses RE2 (``google-re2``), not Python's ``re``: RE2 never backtracks, so a pattern
such as ``(a+)+$`` cannot take exponential time, and it releases the GIL while it matches, so
a long match never stalls the event loop or other threads. Its cost is linear in the text's
length times the size of the compiled pattern: to keep one search near a second at worst, a
complex pattern searches only the start of very long lines (:data:`GREP_LINE_WORK`), and the
output says so. Lines are searched in batches (see :class:`_Matcher`), each line still
matched on its own. RE2 has no backreferences or lookaround; such patterns get an error that
says what is unsupported and that grep uses RE2 syntax.
"""

from __future__ import annotations

import fnmatch
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import IO, Any

import re2
from django.conf import settings

from boocode.tools.workspace import (
    WorkspaceError,
    display_path,
    is_denied,
    resolve_path,
    workspace_root,
)
from mcpclient.core.results import MAX_OUTPUT_BYTES

__all__ = [
    "NATIVE_TOOLS",
    "Deadline",
    "NativeTool",
    "ToolTimeoutError",
    "grep",
    "list_dir",
    "page_text",
    "time_limit_message",
    "view_file",
]

SNIFF_BYTES = 8192  # a NUL byte (or invalid UTF-8) in the first 8 KB means binary, like git and grep
LIST_MAX_DEPTH = 5
LIST_MAX_ENTRIES = 2000
GREP_DEFAULT_RESULTS = 100
GREP_MAX_RESULTS = 1000
GREP_MAX_LINE_CHARS = 500
# RE2 simulates at most one thread per instruction of the compiled pattern for each byte, and
# the slowest path measured about 5 ns per instruction and byte; this budget (instructions x
# bytes searched in one line) keeps a single line's match near one second even at worst.
GREP_LINE_WORK = 200_000_000
GREP_MIN_LINE_BYTES = 1024
GREP_BATCH_BYTES = 128 * 1024  # lines searched in one call into RE2 (see _Matcher)
RE2_SYNTAX_URL = "https://github.com/google/re2/wiki/Syntax"


class ToolTimeoutError(Exception):
    """A native tool reached its time limit; ``str()`` is for the model, ``partial`` is what it had."""

    def __init__(self, message: str, partial: str = "") -> None:
        super().__init__(message)
        self.partial = partial


def time_limit_message(seconds: float) -> str:
    """How a call stopped by the time limit is described to the model."""
    return f"stopped at the time limit of {seconds:g} s per tool call (BOOCODE_TOOL_TIMEOUT)"


@dataclass(frozen=True)
class Deadline:
    """When a native tool must stop: a ``time.monotonic()`` instant and the limit it came from."""

    at: float
    seconds: float

    @classmethod
    def after(cls, seconds: float) -> Deadline:
        """A deadline ``seconds`` from now."""
        return cls(time.monotonic() + seconds, seconds)

    @classmethod
    def from_settings(cls) -> Deadline:
        """A deadline ``BOOCODE_TOOL_TIMEOUT`` seconds from now."""
        return cls.after(float(settings.TOOL_TIMEOUT))

    def check(self) -> None:
        """Raise :class:`ToolTimeoutError` once the deadline has passed."""
        if time.monotonic() >= self.at:
            raise ToolTimeoutError(time_limit_message(self.seconds))


def _stopped(exc: ToolTimeoutError, hint: str, partial: str = "") -> ToolTimeoutError:
    """``exc`` with advice for the model and what the tool found before the limit."""
    return ToolTimeoutError(f"{exc}; {hint}", partial)


@dataclass(frozen=True)
class NativeTool:
    """A native tool as declared: name, description, JSON schema and the blocking function.

    The function takes the model's arguments plus a keyword ``deadline`` (a :class:`Deadline`).
    """

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


def _read_lines(handle: IO[bytes], limit: int, deadline: Deadline) -> Iterator[tuple[bytes, bool]]:
    """Yield ``(line without its newline, cut)``; a line longer than ``limit`` bytes is cut there.

    Reading in bounded chunks keeps a multi-gigabyte single-line file from filling memory; the
    deadline is checked for every line and every chunk skipped, so such a file cannot hold the
    thread past the time limit either.
    """
    readline, clock, at = handle.readline, time.monotonic, deadline.at  # the hot loop of grep
    while True:
        if clock() >= at:
            deadline.check()
        chunk = readline(limit + 1)
        if not chunk:
            return
        if chunk.endswith(b"\n") or len(chunk) <= limit:
            yield chunk.rstrip(b"\n").rstrip(b"\r"), False
            continue
        while True:  # skip the rest of an over-long line
            deadline.check()
            rest = readline(1 << 20)
            if not rest or rest.endswith(b"\n"):
                break
        yield chunk[:limit], True


def _cut_utf8(data: bytes, limit: int) -> str:
    """At most ``limit`` bytes of ``data`` decoded, never splitting a character."""
    return (
        data[:limit].decode("utf-8", errors="ignore")
        if len(data) > limit
        else data.decode("utf-8", errors="replace")
    )


def view_file(
    path: str,
    start_line: int | None = None,
    end_line: int | None = None,
    *,
    deadline: Deadline | None = None,
) -> str:
    """The file's lines, numbered, optionally limited to ``start_line``..``end_line`` (1-based).

    Stops with :class:`ToolTimeoutError` at ``deadline`` (default: ``BOOCODE_TOOL_TIMEOUT`` from now).
    """
    if start_line is not None and end_line is not None and end_line < start_line:
        raise WorkspaceError(f"end_line ({end_line}) is before start_line ({start_line})")
    deadline = deadline or Deadline.from_settings()
    first = start_line or 1
    out: list[str] = []
    number = 0
    try:
        root, resolved, handle = _open_text_file(path)
        with handle:
            size = os.fstat(handle.fileno()).st_size
            used = 0
            lines = _read_lines(handle, MAX_OUTPUT_BYTES, deadline)
            for number, (raw, _cut) in enumerate(lines, start=1):
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
    except ToolTimeoutError as exc:
        if out:
            hint = f"lines {first} to {number} follow; read on with start_line={number + 1}"
        else:
            hint = f"skipped to line {number} of {path}; use grep to find the line you want"
        raise _stopped(exc, hint, "".join(out).rstrip("\n")) from None
    if not out:
        if number == 0:
            return f"({display_path(resolved, root)} is empty)"
        raise WorkspaceError(f"start_line {first} is past the end of {path}, which has {number} lines")
    return "".join(out).rstrip("\n")


def _scan(directory: Path, deadline: Deadline) -> list[os.DirEntry[str]]:
    """The entries of ``directory`` sorted by name; a huge directory is read against the deadline."""
    entries = []
    with os.scandir(directory) as iterator:
        for entry in iterator:
            deadline.check()
            entries.append(entry)
    return sorted(entries, key=lambda entry: entry.name)


def list_dir(path: str = ".", depth: int = 1, *, deadline: Deadline | None = None) -> str:
    """Paths under ``path`` (relative to the workspace root), directories ending in ``/``.

    Descends ``depth`` levels; symbolic links are shown with ``@`` and not followed; entries the
    deny list hides are left out. Stops with :class:`ToolTimeoutError` at ``deadline`` (default:
    ``BOOCODE_TOOL_TIMEOUT`` from now).
    """
    deadline = deadline or Deadline.from_settings()
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
            entries = _scan(directory, deadline)
        except OSError as exc:
            lines.append(f"{display_path(directory, root)}/ [unreadable: {exc.strerror}]")
            return True
        for entry in entries:
            deadline.check()
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
    except ToolTimeoutError as exc:
        hint = f"{len(lines)} entries were listed; list a subdirectory or use a smaller depth"
        raise _stopped(exc, hint, "\n".join(lines)) from None
    if not lines:
        return f"({display_path(base, root)} is empty)"
    return "\n".join(lines)


def _glob_matches(glob: str, relative: PurePosixPath) -> bool:
    """A ``glob`` without ``/`` matches the file name; with ``/``, the path from the root."""
    if "/" in glob:
        return fnmatch.fnmatchcase(relative.as_posix(), glob.strip("/"))
    return fnmatch.fnmatchcase(relative.name, glob)


def _grep_files(base: Path, root: Path, glob: str | None, deadline: Deadline) -> Iterator[Path]:
    """Readable candidate files under ``base`` in a stable order, deny list and symlinks applied."""
    if base.is_file():
        yield base
        return
    for directory, dirnames, filenames in os.walk(base, followlinks=False):
        deadline.check()
        current = Path(directory)
        dirnames[:] = sorted(d for d in dirnames if not is_denied(_relative(current / d, root)))
        for name in sorted(filenames):
            deadline.check()
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


# What RE2 refuses that Python's re (and PCRE) accept, by the start of RE2's error message.
_UNSUPPORTED: tuple[tuple[str, str], ...] = (
    ("invalid perl operator: (?=", "lookahead (?=...)"),
    ("invalid perl operator: (?!", "negative lookahead (?!...)"),
    ("invalid perl operator: (?<=", "lookbehind (?<=...)"),
    ("invalid perl operator: (?<!", "negative lookbehind (?<!...)"),
    ("invalid perl operator: (?>", "atomic groups (?>...)"),
    ("invalid perl operator: (?(", "conditionals (?(1)...|...)"),
    ("invalid perl operator: (?P", "backreferences (?P=name)"),  # (?P<name>...) itself is fine
    ("invalid perl operator: (?#", "inline comments (?#...)"),
    ("invalid escape sequence: \\k", "backreferences \\k<name>"),
    ("invalid escape sequence: \\g", "backreferences \\g<1>"),
    ("invalid escape sequence: \\Z", "\\Z (use \\z or $)"),
    ("bad repetition operator: *+", "possessive quantifiers (*+, ++, ?+)"),
    ("bad repetition operator: ++", "possessive quantifiers (*+, ++, ?+)"),
    ("bad repetition operator: ?+", "possessive quantifiers (*+, ++, ?+)"),
)


def _pattern_error(pattern: str, error: str) -> str:
    """The message for a pattern RE2 refuses: what is unsupported, or the syntax error."""
    feature = next((name for prefix, name in _UNSUPPORTED if error.startswith(prefix)), None)
    if feature is None and error.startswith("invalid escape sequence: \\") and error[-1:].isdigit():
        feature = f"backreferences ({error.rsplit(' ', 1)[-1]})"
    if feature is not None:
        return (
            f"invalid regular expression {pattern!r}: unsupported feature: {feature}. grep uses RE2 syntax, "
            "which has no backreferences, lookahead or lookbehind (it never backtracks, so no pattern "
            f"can hang); match the surrounding text instead or search twice. Syntax: {RE2_SYNTAX_URL}"
        )
    if error.startswith("pattern too large"):
        return (
            f"invalid regular expression {pattern!r}: too large once compiled; use smaller repetition "
            "counts or fewer Unicode classes (grep uses RE2 syntax)"
        )
    return f"invalid regular expression {pattern!r}: {error} (grep uses RE2 syntax: {RE2_SYNTAX_URL})"


def _compile(pattern: str, ignore_case: bool) -> re2._Regexp:
    """``pattern`` compiled by RE2, or :class:`WorkspaceError` saying what is wrong with it."""
    options = re2.Options()
    options.log_errors = False  # absl would print every refused pattern to the server's stderr
    options.case_sensitive = not ignore_case
    options.never_capture = True  # grep only asks whether a line matches: groups are wasted work
    try:
        return re2.compile(pattern, options)
    except re2.error as exc:
        detail = exc.args[0] if exc.args else ""
        if isinstance(detail, bytes):
            detail = detail.decode("utf-8", errors="replace")
        raise WorkspaceError(_pattern_error(pattern, str(detail))) from None


# Patterns whose meaning changes once lines are joined with "\n": \A and \z (start and end of
# the text) and a group turning multi-line mode off. They are searched line by line only.
_JOIN_UNSAFE = re2.compile(r"\\[Az]|\(\?[a-zA-Z]*-[a-zA-Z]*m")


class _Matcher:
    """How grep tests lines: one RE2 search per batch of lines, then per line on a hit.

    Each call into RE2 costs about 1.5 us whatever the text, so searching lines one by one
    would be slower than Python's ``re``. Lines are joined with newlines into batches of at most
    :data:`GREP_BATCH_BYTES` and searched in multi-line mode (``^`` and ``$`` at line ends):
    a line that matches on its own matches there too, so a batch without a match is skipped
    whole; a hit may come from a match across lines, so each line of that batch is searched
    on its own to report only real matches.
    """

    def __init__(self, pattern: str, ignore_case: bool) -> None:
        self.line = _compile(pattern, ignore_case)
        self.batch = None if _JOIN_UNSAFE.search(pattern) else _compile("(?m)" + pattern, ignore_case)
        # One search costs at most (instructions x bytes) steps, forward to find a match and
        # backward to find where it starts; cap the bytes so that one search stays within budget.
        self.steps = max(self.line.programsize, self.line.reverseprogramsize, 1)
        self.line_bytes = min(MAX_OUTPUT_BYTES, max(GREP_MIN_LINE_BYTES, GREP_LINE_WORK // self.steps))
        self.batch_bytes = min(GREP_BATCH_BYTES, self.line_bytes)
        self.partly = 0  # lines searched only in their first line_bytes bytes

    def _search_line(self, raw: bytes) -> bool:
        end = len(raw)
        if end > self.line_bytes:
            end = self.line_bytes
            self.partly += 1
        # Up to ``end`` rather than a slice: the rest of the line stays context, so ``$`` and
        # ``\b`` do not match at the artificial end of a partly searched line.
        return self.line.search(raw, 0, end) is not None

    def _hits(self, first: int, batch: list[bytes]) -> Iterator[tuple[int, bytes]]:
        """The matching lines of ``batch``, whose first line has number ``first``."""
        if len(batch) > 1 and self.batch is not None and self.batch.search(b"\n".join(batch)) is None:
            return
        for offset, raw in enumerate(batch):
            if self._search_line(raw):
                yield first + offset, raw

    def matching_lines(self, lines: Iterator[tuple[bytes, bool]]) -> Iterator[tuple[int, bytes]]:
        """``(line number, line)`` for each line of ``lines`` that matches, in order."""
        batch: list[bytes] = []
        first = 1  # the number of batch[0]
        size = 0
        for number, (raw, _cut) in enumerate(lines, start=1):
            if self.batch is None or size + len(raw) >= self.batch_bytes:
                yield from self._hits(first, batch)
                batch, size, first = [], 0, number
                if self.batch is None or len(raw) >= self.batch_bytes:  # a line searched alone
                    if self._search_line(raw):
                        yield number, raw
                    first = number + 1
                    continue
            batch.append(raw)
            size += len(raw) + 1
        yield from self._hits(first, batch)


def _line_text(raw: bytes) -> str:
    """A matching line as shown to the model: decoded, at most ``GREP_MAX_LINE_CHARS`` characters."""
    # Decode only what can be shown: a character is at most 4 bytes, so the first
    # GREP_MAX_LINE_CHARS characters are whole within this many bytes.
    head = raw[: GREP_MAX_LINE_CHARS * 4]
    text = head.decode("utf-8", errors="replace")
    if len(text) > GREP_MAX_LINE_CHARS or len(raw) > len(head):
        return text[:GREP_MAX_LINE_CHARS] + " [line cut]"
    return text


def grep(
    pattern: str,
    path: str = ".",
    glob: str | None = None,
    max_results: int = GREP_DEFAULT_RESULTS,
    ignore_case: bool = False,
    *,
    deadline: Deadline | None = None,
) -> str:
    """Lines matching the RE2 regular expression ``pattern`` as ``path:line: text``.

    Stops with :class:`ToolTimeoutError`, carrying the matches found so far, at ``deadline``
    (default: ``BOOCODE_TOOL_TIMEOUT`` from now).
    """
    matcher = _Matcher(pattern, ignore_case)
    deadline = deadline or Deadline.from_settings()
    root = workspace_root()
    base = resolve_path(path, root)
    if not base.exists():
        raise WorkspaceError(f"{path}: no such file or directory in the workspace")
    results: list[str] = []
    used = 0
    stopped = ""
    searched = 0
    try:
        for file in _grep_files(base, root, glob, deadline):
            try:
                with file.open("rb") as handle:
                    if not _sniff_text(handle.read(SNIFF_BYTES)):
                        continue
                    handle.seek(0)
                    searched += 1
                    shown = display_path(file, root)
                    lines = _read_lines(handle, MAX_OUTPUT_BYTES, deadline)
                    for number, raw in matcher.matching_lines(lines):
                        entry = f"{shown}:{number}: {_line_text(raw)}"
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
    except ToolTimeoutError as exc:
        hint = f"{searched} files searched, {len(results)} matches so far; narrow the path, glob or pattern"
        raise _stopped(exc, hint, "\n".join(results)) from None
    notes = [stopped] if stopped else []
    if matcher.partly:
        notes.append(
            f"[{matcher.partly} lines longer than {matcher.line_bytes} bytes were searched only in their "
            f"first {matcher.line_bytes} bytes: this pattern compiles to {matcher.steps} RE2 instructions, "
            "too costly for whole long lines; a simpler pattern searches them whole]"
        )
    if not results:
        where = display_path(base, root)
        return "\n".join([f"No matches for {pattern!r} in {where}" + (f" ({glob})" if glob else ""), *notes])
    return "\n".join(results + notes)


PAGE_DEFAULT_CHARS = 8000
PAGE_MAX_CHARS = 16_000  # one page of a stored result; the model reads on with the next offset
PAGE_MAX_MATCHES = 200


def page_text(
    text: str,
    offset: int = 0,
    length: int = PAGE_DEFAULT_CHARS,
    pattern: str | None = None,
    ignore_case: bool = False,
    *,
    deadline: Deadline | None = None,
) -> str:
    """A page of ``text`` (characters ``offset`` to ``offset + length``, at most
    :data:`PAGE_MAX_CHARS`), or with ``pattern`` its lines that match (RE2, at most
    :data:`PAGE_MAX_MATCHES`) as ``line:offset: text``, each line at most
    ``GREP_MAX_LINE_CHARS`` characters; the output is bounded either way.

    ``read_result`` (:mod:`boocode.chat.llm.result_pages`) serves stored tool results through it.
    """
    deadline = deadline or Deadline.from_settings()
    if pattern is not None:
        return _grep_text(text, pattern, ignore_case, deadline)
    if offset < 0 or offset > len(text):
        raise WorkspaceError(f"offset {offset} is outside the result, which has {len(text):,} characters")
    length = max(1, min(length, PAGE_MAX_CHARS))
    page = text[offset : offset + length]
    end = offset + len(page)
    if end < len(text):
        after = f"[characters {offset:,} to {end:,} of {len(text):,}; read on with offset {end}]"
    else:
        after = f"[characters {offset:,} to {end:,} of {len(text):,}: the end of the result]"
    return f"{page}\n{after}"


def _grep_text(text: str, pattern: str, ignore_case: bool, deadline: Deadline) -> str:
    matcher = _Matcher(pattern, ignore_case)
    data = text.encode("utf-8", "surrogatepass")
    starts: list[int] = []  # character offsets of the lines met so far (for the model's next read)

    def lines() -> Iterator[tuple[bytes, bool]]:
        position = 0  # in characters
        for raw in data.split(b"\n"):
            deadline.check()
            starts.append(position)
            position += len(raw.decode("utf-8", "surrogatepass")) + 1
            yield raw, False

    results: list[str] = []
    used, stopped = 0, ""
    try:
        for number, raw in matcher.matching_lines(lines()):
            entry = f"line {number} (offset {starts[number - 1]}): {_line_text(raw)}"
            used += len(entry) + 1
            if len(results) >= PAGE_MAX_MATCHES or used > PAGE_MAX_CHARS:
                stopped = f"[stopped after {len(results)} matching lines; narrow the pattern]"
                break
            results.append(entry)
    except ToolTimeoutError as exc:
        raise _stopped(exc, "narrow the pattern", "\n".join(results)) from None
    if not results:
        return f"No line of the result matches {pattern!r}"
    return "\n".join([*results, stopped] if stopped else results)


_PATH_DESCRIPTION = 'A path relative to the workspace root ("." is the root).'

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
            "Search workspace text files for a regular expression in RE2 syntax (as in Go or "
            "ripgrep: no backreferences, lookahead or lookbehind). Returns 'path:line: text' for "
            "each matching line."
        ),
        parameters={
            "type": "object",
            "properties": {
                "pattern": {
                    "type": "string",
                    "minLength": 1,
                    "description": "Regular expression, RE2 syntax (e.g. 'def \\w+\\(', '(?i)todo').",
                },
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

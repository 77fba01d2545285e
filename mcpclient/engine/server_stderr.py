"""What a stdio server's last stderr lines say: the line that tells what failed, and whether it lasts.

A server started through a launcher (``npx``, ``uvx``) that cannot fetch its package never runs:
what stderr holds is the launcher's own report, which ends with advice ("Note that you can also
install from a | tarball, folder, http url, or git url.", "A complete log of this run can be
found in: ...") below the line that names what failed. Every npm line starts with ``npm error``,
so the word "error" tells nothing there: a line is judged by what follows the launcher's prefix
and its status code (:func:`telling_stderr`).

A package the registry says does not exist (npm's ``E404`` / "is not in this registry", uv's "was
not found in the package registry") will not exist a few seconds later either: such a failure is
not retried (:func:`missing_package`), until the entry changes or an administrator reconnects.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

# What a launcher puts before each line it writes: npm's "npm error", "npm ERR!", "npm warn" and
# the HTTP status npm repeats on every line of a failed request ("npm error 404 ...").
_LAUNCHER = re.compile(r"^npm (?:error|ERR!|warn|WARN|notice)\b:?\s*(?:\d{3}\b\s*)?")

# What says what went wrong: an exception's name ("ModuleNotFoundError:", "Error:"), an error code
# (E404, ENOENT, EAI_AGAIN, ERR_MODULE_NOT_FOUND), or words programs use for it.
_TELLING = re.compile(
    r"\b\w*(?:Error|Exception)\b|\bE(?:\d{3}|[A-Z]{2}[A-Z_]+)\b|\bERR_[A-Z_]+\b"
    r"|(?i:\b(?:error|fatal|panic|cannot|can't|could not|not found|no such|denied|refused|failed|missing"
    r"|does not exist|not in (?:this|the) registry|unsatisfiable|no solution)\b)"
)
# What never says it: stack frames, carets, braces, version banners (a crashed Node.js ends with
# "Node.js v20…" and a stack, the reason stands above them), where a launcher's log is.
_NOISE = re.compile(
    r"^(?:at\s|File\s\"|\^+$|[{}\[\]]+,?$|Node\.js v\d|requireStack:|code:\s|A complete log of this run)"
)

# A package the launcher's registry does not have (npm's code and wording, uv's).
_MISSING_PACKAGE = re.compile(
    r"\bcode E404\b|is not in (?:this|the) registry|was not found in the package registry",
    re.IGNORECASE,
)


def _content(line: str) -> str:
    """``line`` without a launcher's prefix (what the launcher says, not that it is the one saying it)."""
    return _LAUNCHER.sub("", line, count=1)


# A launcher's warning or notice: not what failed ("npm warn exec The following package was not
# found and will be installed" precedes every first start).
_ASIDE = re.compile(r"^npm (?:warn|WARN|notice)\b")


def _telling(line: str) -> bool:
    content = _content(line)
    return bool(_TELLING.search(content)) and not _NOISE.match(content) and not _ASIDE.match(line)


def _noise(line: str) -> bool:
    """A line no summary ends with: noise, or a launcher's line that says nothing of a failure
    (its advice, a line it left blank but for its prefix)."""
    content = _content(line)
    return bool(_NOISE.match(content)) or (content != line and not _telling(line))


def telling_stderr(tail: Iterable[str]) -> str:
    """What a server's last stderr lines say went wrong, in a line or two for the "last error".

    The last line that names an error (not a stack frame, a banner or a launcher's advice), with
    the one right above it when that one names an error too ("error: Failed to spawn" | "Caused by:
    No such file"), and the last line when it comes later and is not noise; with no such line,
    the last three.
    """
    lines = [line.strip() for line in tail if line.strip()]
    if not lines:
        return ""
    telling = [index for index, line in enumerate(lines) if _telling(line)]
    if not telling:
        return " | ".join(lines[-3:])
    chosen = [telling[-1]]
    if len(telling) > 1 and telling[-2] == telling[-1] - 1:
        chosen.insert(0, telling[-2])
    if chosen[-1] < len(lines) - 1 and not _noise(lines[-1]):
        chosen.append(len(lines) - 1)
    return " | ".join(lines[index] for index in chosen)


def missing_package(tail: Iterable[str]) -> bool:
    """True when the launcher said the server's package does not exist in its registry."""
    return any(_MISSING_PACKAGE.search(line) for line in tail)

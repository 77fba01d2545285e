"""Why a sandboxed stdio server stopped, when the sandbox is why: the sentence that names the
sandbox's rule and the fix, for the server's "last error".

Read from what the server left: the exit status of its ``bwrap`` (the status of the process it
ran, or 128 + the signal that ended it) and its last stderr lines. The shapes are narrow: a
pattern counts only with the sandbox rule it names (no network, a limit set, a home folder
hidden), and the words are those of the programs people run (uv and npm, CPython, Node.js, glibc,
Rust and Go), so a server that failed for a reason of its own keeps its own message alone:

* the network: a name lookup or a connection that has no network to go to, or ``uvx --offline``
  / ``npx --offline`` without the package in its cache; for ``uvx`` and ``npx`` the package is
  named, with the command that starts it offline;
* the memory limit: an allocation refused ("MemoryError", "out of memory", ``std::bad_alloc``),
  but not Node.js's own heap limit ("JavaScript heap out of memory");
* the CPU time limit: the process ended by ``SIGXCPU``;
* writing outside the ``write`` folders: "Read-only file system" (``EROFS``), the path when given;
* the home folder: a file or folder that is not found inside a hidden home folder.
"""

from __future__ import annotations

import json
import re
import signal
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from mcpclient.config.model import SandboxPlan

# How many of the last stderr lines are read.
TAIL_LINES = 30

_NO_NETWORK = re.compile(
    r"dns error|Temporary failure in name resolution|failed to lookup address|Name or service not known"
    r"|getaddrinfo\s+(?:EAI_AGAIN|ENOTFOUND)|\bEAI_AGAIN\b|Could not resolve host|Network is unreachable"
    r"|\bENETUNREACH\b|No address associated with hostname",
    re.IGNORECASE,
)
_NOT_CACHED = re.compile(r"not found in the cache|\bENOTCACHED\b|because the network was disabled")
_OUT_OF_MEMORY = re.compile(
    r"\bMemoryError\b|out of memory|Cannot allocate memory|\bENOMEM\b|std::bad_alloc"
    r"|memory allocation of \d+ bytes failed|Failed to reserve virtual memory|Allocation failed"
)
# V8's own heap limit (--max-old-space-size), reached whatever the sandbox allows.
_V8_HEAP_LIMIT = re.compile(r"Reached heap limit|JavaScript heap out of memory")
_READ_ONLY = re.compile(r"Read-only file system|\bEROFS\b")
_READ_ONLY_PATH = re.compile(
    r"""at path "(?P<uv>/[^"]+)"|EROFS: read-only file system, \w+ '(?P<node>/[^']+)'"""
    r"""|Read-only file system: '(?P<python>/[^']+)'"""
)
_NOT_FOUND = re.compile(r"No such file or directory|\bENOENT\b|not found", re.IGNORECASE)
_PATH = re.compile(r"""(?<![\w.])(/[^\s'"`:,;()<>]+)""")

# Options of uvx and npx followed by a value (the package is the first argument that is neither).
_UVX_VALUED = frozenset(
    "--from --with --with-editable --with-requirements -w --python -p --index --index-url --default-index "
    "--extra-index-url --find-links -f --cache-dir --directory --project --config-file -c --constraints "
    "--overrides --build-constraints".split()
)
_NPX_VALUED = frozenset("--package -p --call -c --cache --registry --userconfig --prefix".split())
_TRUE = ("1", "true", "yes", "on")


def explain(
    plan: SandboxPlan,
    command: str,
    args: Sequence[str],
    env: Mapping[str, str],
    *,
    exit_status: int | None,
    stderr: Iterable[str],
    timed_out: bool = False,
) -> str:
    """What the sandbox did to the server that ran ``command`` with ``args`` and ``env`` in
    ``plan`` and what to change, or "" when nothing the server left points at the sandbox.

    ``exit_status`` is its ``bwrap``'s (None: still running or unknown); ``timed_out``: it never
    answered within its ``initTimeout``.
    """
    lines = [line.strip() for line in stderr if line.strip()][-TAIL_LINES:]
    said = "\n".join(lines)
    if plan.cpu_seconds is not None and exit_status in (128 + signal.SIGXCPU, -signal.SIGXCPU):
        return (
            f"the sandbox's CPU time limit ended the server: a process of it used {plan.cpu_seconds} s of "
            f'CPU ("sandbox": {{"cpuSeconds": {plan.cpu_seconds}}}); raise the limit, or set it to false for '
            "none"
        )
    if plan.memory_mb is not None and _OUT_OF_MEMORY.search(said) and not _V8_HEAP_LIMIT.search(said):
        return (
            f"the server ran out of memory under the sandbox's limit of {plan.memory_mb} MiB of address "
            f'space per process ("sandbox": {{"memoryMB": {plan.memory_mb}}}); raise the limit, or set it to '
            "false for none"
        )
    if not plan.network:
        launcher = Path(command).name
        package = _package(launcher, args)
        offline = _offline(launcher, args, env)
        if _NOT_CACHED.search(said) or _NO_NETWORK.search(said) or (timed_out and package and not offline):
            return _network_advice(launcher, package, args, cached=bool(_NOT_CACHED.search(said)))
    if _READ_ONLY.search(said):
        found = _READ_ONLY_PATH.search(said)
        where = next((path for path in found.groups() if path), "") if found else ""
        tried = f" ({where})" if where else ""
        return (
            'the sandbox lets the server write only in its "write" folders and its own /tmp, and it tried '
            f'to write elsewhere{tried}: list the folder in "sandbox": {{"write": [...]}}'
        )
    for line in reversed(lines):
        if not _NOT_FOUND.search(line):
            continue
        for path in _PATH.findall(line):
            home = next((home for home in plan.homes if path.startswith(home.rstrip("/") + "/")), None)
            if home is not None:
                return (
                    f"the sandbox hides the home folder {home}, and the server looked for {path} there: list "
                    f'what it needs in "sandbox": {{"read": [...]}} (or "write")'
                )
    return ""


def _network_advice(launcher: str, package: str, args: Sequence[str], *, cached: bool) -> str:
    fix = 'or allow this server the network with "sandbox": {"network": true}'
    if launcher in ("uvx", "npx") and package:
        offline = ["--offline", *(arg for arg in args if arg != "--offline")]
        if launcher == "npx" and "-y" not in offline and "--yes" not in offline:
            offline.insert(1, "-y")
        start = f'"args": {json.dumps(offline)}'
        cause = (
            f"{launcher} found no {package} in its cache, and the sandbox blocks the network to fetch it"
            if cached
            else f"the sandbox blocks the network, and {launcher} needs it to fetch {package}"
        )
        return (
            f"{cause}: fetch it once (start the server without the sandbox, or with the network), then start "
            f"it from the cache with {start}, {fix}"
        )
    return f"the sandbox blocks the network, which the server tried to reach: {fix.removeprefix('or ')}"


def _package(launcher: str, args: Sequence[str]) -> str:
    """The package ``uvx`` or ``npx`` runs, from its arguments; "" for other commands."""
    if launcher == "uvx":
        valued, named = _UVX_VALUED, ("--from", "--from")
    elif launcher == "npx":
        valued, named = _NPX_VALUED, ("--package", "-p")
    else:
        return ""
    skip = False
    for index, arg in enumerate(args):
        if skip:
            skip = False
            continue
        option, _, value = arg.partition("=")
        if option in named:
            return value or (args[index + 1] if index + 1 < len(args) else "")
        if arg.startswith("-"):
            skip = arg in valued
            continue
        return arg
    return ""


def _offline(launcher: str, args: Sequence[str], env: Mapping[str, str]) -> bool:
    """Whether the launcher was told to use only its cache."""
    if "--offline" in args:
        return True
    variable = {"uvx": "UV_OFFLINE", "npx": "npm_config_offline"}.get(launcher)
    if variable is None:
        return False
    value = env.get(variable) or env.get(variable.upper()) or ""
    return value.lower() in _TRUE

"""Planning a sandboxed stdio server: its ``sandbox`` paths expanded and checked, the caches its
launcher needs, what BooCode hides from it (its own files, the home folders), its limits, and
bubblewrap (and ``prlimit``, for the limits) found.

A plan (:class:`~mcpclient.config.model.SandboxPlan`) is made when the server is about to
connect, with the rest of :func:`mcpclient.config.resolve.resolve_server`;
:mod:`mcpclient.engine.sandbox` turns it into bubblewrap's arguments. Errors name the file, the
server and the key, like every other configuration error, and stop that server only.

Paths are absolute once planned (a relative one is relative to the folder of mcp.json, ``~`` is
the home folder) with their symbolic links resolved, since bubblewrap mounts what the kernel
finds there. A ``write`` folder that does not exist is made (with its parents); a ``read`` path
must exist. No listed path may be one BooCode hides, nor may ``write`` be ``/``.

The home folders (the server's ``HOME`` and BooCode's) are empty folders in the sandbox: keys,
tokens and other programs' files live there. What the server is made of that lives there (its
command's installation, the folders of the files its arguments name, its ``cwd``: a Python of
pyenv, a Node.js of nvm) and what its launcher needs (``npx``'s and ``uvx``'s caches, writable;
their configuration and uv's Pythons, read-only) are mounted back; so are the entry's own paths.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path

from mcpclient.config.document import shown_value
from mcpclient.config.entries import EntryChecker
from mcpclient.config.model import STDIO, SandboxConfig, SandboxPlan, ServerConfig

BWRAP = "bwrap"
MISSING_BWRAP = (
    "sandbox needs bubblewrap (bwrap), which is not on BooCode's PATH; install Debian's bubblewrap "
    "package (apt-get install bubblewrap)"
)
PRLIMIT = "prlimit"
MISSING_PRLIMIT = (
    'the sandbox\'s limits ("memoryMB", "cpuSeconds") need prlimit, which is not on BooCode\'s PATH; '
    "install Debian's util-linux package, or set both to false"
)
# Where other services' Unix sockets live (D-Bus, Docker...): out of reach without the network.
RUN_DIR = "/run"


def sandboxed(config: ServerConfig, *, required: bool) -> SandboxConfig | None:
    """The sandbox ``config`` runs in: its own, the defaults when ``required`` (every stdio
    server runs sandboxed, ``"sandbox": false`` too), or None."""
    if config.transport != STDIO:
        return None
    if config.sandbox is None and required:
        return SandboxConfig()
    return config.sandbox


def find_bwrap(search_path: str | None) -> str | None:
    """bubblewrap's executable on ``search_path`` (BooCode's PATH), or None."""
    return shutil.which(BWRAP, path=search_path)


def launcher_caches(command: str, env: Mapping[str, str], home: str) -> list[Path]:
    """The folders ``npx`` or ``uvx`` (``command``, resolved) write to whatever they run: npm's
    cache, uv's cache and uv's tool folder, where the server's environment ``env`` puts them."""
    launcher = Path(command).name
    if launcher in ("npx", "npm"):
        return [Path(env.get("npm_config_cache") or env.get("NPM_CONFIG_CACHE") or Path(home) / ".npm")]
    if launcher in ("uvx", "uv"):
        cache = env.get("UV_CACHE_DIR") or Path(env.get("XDG_CACHE_HOME") or Path(home) / ".cache") / "uv"
        data = Path(env.get("XDG_DATA_HOME") or Path(home) / ".local" / "share")
        return [Path(cache), Path(env.get("UV_TOOL_DIR") or data / "uv" / "tools")]
    return []


def launcher_reads(command: str, env: Mapping[str, str], home: str) -> list[Path]:
    """What ``npx`` or ``uvx`` (``command``) reads that may live in a hidden home folder: npm's
    configuration file, uv's configuration folder and the Pythons uv installed."""
    launcher = Path(command).name
    if launcher in ("npx", "npm"):
        userconfig = env.get("npm_config_userconfig") or env.get("NPM_CONFIG_USERCONFIG")
        return [Path(userconfig or Path(home) / ".npmrc")]
    if launcher in ("uvx", "uv"):
        config = Path(env.get("XDG_CONFIG_HOME") or Path(home) / ".config") / "uv"
        data = Path(env.get("XDG_DATA_HOME") or Path(home) / ".local" / "share")
        return [config, Path(env.get("UV_PYTHON_INSTALL_DIR") or data / "uv" / "python")]
    return []


def hidden_homes(*homes: str | None) -> list[str]:
    """The home folders a sandbox hides: each one given that is a folder, resolved, but never ``/``."""
    found: list[str] = []
    for home in homes:
        if not home:
            continue
        real = _real(Path(home))
        if real != "/" and os.path.isdir(real) and real not in found:
            found.append(real)
    return found


def plan_sandbox(
    check: EntryChecker,
    sandbox: SandboxConfig,
    *,
    expand: Callable[[str, str], str],
    base_dir: Path,
    command: str,
    env: Mapping[str, str],
    home: str,
    cwd: str | None,
    hidden: Iterable[Path],
    search_path: str | None,
    args: Sequence[str] = (),
    own_home: str | None = None,
) -> SandboxPlan:
    """How ``command`` runs in ``sandbox``; raises ``ConfigError`` naming the server and the key.

    ``expand`` is the entry's placeholder expander: ``${workspaceFolder}``, ``${userHome}`` and
    ``${VAR}`` work in paths as in ``args``, and per-person placeholders (``${user.id}``) come in
    through it once a stdio session can belong to a person. Until then a path still holding
    ``${...}`` after expansion is refused, so no folder is ever made under a literal name.
    ``env`` and ``home`` are the server's environment and home folder (where its launcher keeps
    its caches); ``hidden`` is what BooCode keeps from every sandboxed server; ``own_home`` is
    BooCode's home folder, hidden as the server's is.
    """
    bwrap = find_bwrap(search_path)
    if bwrap is None:
        raise check.fail(MISSING_BWRAP)
    prlimit = None
    if sandbox.memory_mb is not None or sandbox.cpu_seconds is not None:
        prlimit = shutil.which(PRLIMIT, path=search_path)
        if prlimit is None:
            raise check.fail(MISSING_PRLIMIT)
    kept = {_real(Path(path)) for path in hidden}
    homes = hidden_homes(home, own_home)

    def listed(key: str, values: Sequence[str]) -> list[str]:
        paths = []
        for index, value in enumerate(values):
            where = f"sandbox.{key}[{index}]"
            text = expand(value, where)
            if "${" in text:
                raise check.fail(f'"{where}" holds a placeholder BooCode cannot expand: {shown_value(value)}')
            path = Path(text).expanduser()
            real = _real(path if path.is_absolute() else base_dir / path)
            if real in kept:
                raise check.fail(
                    f'"{where}" is {real}, which BooCode keeps from sandboxed servers (its data folder, '
                    "database, secret keys, mcp.json, .env file)"
                )
            if key == "write" and real == "/":
                raise check.fail(f'"{where}" cannot be "/": list the folders the server may change')
            if key == "read" and not os.path.lexists(real):
                raise check.fail(f'"{where}": {real} does not exist')
            paths.append(real)
        return paths

    # Without a cwd the server works in BooCode's own working folder, a checkout in a home folder say.
    needed = made_of(command, args, cwd if cwd is not None else os.getcwd(), hidden=(PRIVATE_TMP, *homes))
    needed += [real for real in map(_real, launcher_reads(command, env, home)) if os.path.exists(real)]
    read = listed("read", sandbox.read) + [path for path in needed if path not in kept]
    write = listed("write", sandbox.write)
    caches = [real for real in map(_real, launcher_caches(command, env, home)) if real not in kept]
    for index, path in enumerate([*write, *caches]):
        if os.path.lexists(path):
            continue
        where = f"sandbox.write[{index}]" if index < len(write) else "sandbox"
        try:
            Path(path).mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise check.fail(f'"{where}": cannot make the folder {path}: {exc.strerror or exc}') from None
    hidden_dirs = sorted({*homes, *(path for path in kept if os.path.isdir(path))})
    hidden_files = sorted(path for path in kept if os.path.lexists(path) and not os.path.isdir(path))
    if not sandbox.network and os.path.isdir(RUN_DIR):
        hidden_dirs.append(RUN_DIR)
    return SandboxPlan(
        bwrap=bwrap,
        write=tuple(dict.fromkeys([*write, *caches])),
        read=tuple(dict.fromkeys(read)),
        hidden_dirs=tuple(hidden_dirs),
        hidden_files=tuple(hidden_files),
        network=sandbox.network,
        chdir=cwd,
        homes=tuple(homes),
        prlimit=prlimit,
        memory_mb=sandbox.memory_mb,
        cpu_seconds=sandbox.cpu_seconds,
    )


PRIVATE_TMP = "/tmp"


def made_of(
    command: str, args: Sequence[str], cwd: str | None, *, hidden: Sequence[str] = (PRIVATE_TMP,)
) -> list[str]:
    """What the server is made of that the sandbox would hide (its private ``/tmp``, the home
    folders: ``hidden``): the command's installation (a virtualenv's ``bin/..``; the command alone
    when that is a home folder or its ``.local``), the folders of the files its arguments name,
    and its ``cwd``, when they live inside one of ``hidden``; they are then mounted read-only."""
    found: list[str] = []
    candidates = []
    roots = [_real(Path(root)) for root in hidden]
    # As run (a virtualenv's python is a link out of it) and as resolved.
    for binary in (Path(command), Path(_real(Path(command)))):
        installation = binary.parent.parent if binary.parent.name == "bin" else binary.parent
        if _real(installation) in roots or installation.name == ".local":
            installation = binary  # ~/.local/bin/uvx: not the whole of ~/.local
        candidates.append(installation)
    for arg in args:
        if os.path.isabs(arg) and os.path.exists(arg):
            candidates.append(Path(arg) if os.path.isdir(arg) else Path(arg).parent)
    if cwd is not None:
        candidates.append(Path(cwd))
    for candidate in candidates:
        real = _real(candidate)
        inside = any(real.startswith(root.rstrip("/") + "/") for root in roots)
        if inside and os.path.exists(real) and real not in found:
            found.append(real)
    return found


def _real(path: Path) -> str:
    return os.path.realpath(path)

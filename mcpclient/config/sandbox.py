"""Planning a sandboxed stdio server: its ``sandbox`` paths expanded and checked, the caches its
launcher needs, what BooCode hides from it, and bubblewrap found.

A plan (:class:`~mcpclient.config.model.SandboxPlan`) is made when the server is about to
connect, with the rest of :func:`mcpclient.config.resolve.resolve_server`;
:mod:`mcpclient.engine.sandbox` turns it into bubblewrap's arguments. Errors name the file, the
server and the key, like every other configuration error, and stop that server only.

Paths are absolute once planned (a relative one is relative to the folder of mcp.json, ``~`` is
the home folder) with their symbolic links resolved, since bubblewrap mounts what the kernel
finds there. A ``write`` folder that does not exist is made (with its parents); a ``read`` path
must exist. No listed path may be one BooCode hides, nor may ``write`` be ``/``.
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
) -> SandboxPlan:
    """How ``command`` runs in ``sandbox``; raises ``ConfigError`` naming the server and the key.

    ``expand`` is the entry's placeholder expander: ``${workspaceFolder}``, ``${userHome}`` and
    ``${VAR}`` work in paths as in ``args``, and per-person placeholders (``${user.id}``) come in
    through it once a stdio session can belong to a person. Until then a path still holding
    ``${...}`` after expansion is refused, so no folder is ever made under a literal name.
    ``env`` and ``home`` are the server's environment and home folder (where its launcher keeps
    its caches); ``hidden`` is what BooCode keeps from every sandboxed server.
    """
    bwrap = find_bwrap(search_path)
    if bwrap is None:
        raise check.fail(MISSING_BWRAP)
    kept = {_real(Path(path)) for path in hidden}

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

    read = listed("read", sandbox.read) + [path for path in made_of(command, args, cwd) if path not in kept]
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
    hidden_dirs = sorted(path for path in kept if os.path.isdir(path))
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
    )


PRIVATE_TMP = "/tmp"


def made_of(command: str, args: Sequence[str], cwd: str | None) -> list[str]:
    """What the server is made of that the sandbox's private ``/tmp`` would hide: the command's
    installation (a virtualenv's ``bin/..``), the folders of the files its arguments name, and
    its ``cwd``, when they live under ``/tmp``; they are then mounted read-only in their place."""
    found: list[str] = []
    candidates = []
    # As run (a virtualenv's python is a link out of it) and as resolved.
    for binary in (Path(command), Path(_real(Path(command)))):
        candidates.append(binary.parent.parent if binary.parent.name == "bin" else binary.parent)
    for arg in args:
        if os.path.isabs(arg) and os.path.exists(arg):
            candidates.append(Path(arg) if os.path.isdir(arg) else Path(arg).parent)
    if cwd is not None:
        candidates.append(Path(cwd))
    for candidate in candidates:
        real = _real(candidate)
        if real.startswith(PRIVATE_TMP + "/") and os.path.isdir(real) and real not in found:
            found.append(real)
    return found


def _real(path: Path) -> str:
    return os.path.realpath(path)

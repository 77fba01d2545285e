"""The workspace: the one directory native tools may read, and the rules that confine them.

- The root is ``settings.WORKSPACE`` (``BOOCODE_WORKSPACE``, default ``<data dir>/workspace``),
  created empty on first use. A root that is, or contains, the project or the data directory is
  refused: the database, the secret key and the config files must never be readable.
- A requested path is resolved against the root (relative) or taken as is (absolute), symlinks
  included; anything that ends up outside the root is refused.
- The deny list (``settings.WORKSPACE_DENY``, ``BOOCODE_WORKSPACE_DENY``) hides secrets even
  inside the root. Patterns are shell globs (``*``, ``?``, ``[...]``), matched without regard to
  case; a pattern without ``/`` matches any single path component (``.git`` hides the directory
  and all it contains, ``*.pem`` any such file at any depth); a pattern with ``/`` matches the
  whole path relative to the root. Both the path as written and the path with symlinks
  resolved are checked, so a link cannot lend a secret an innocent name.

Checks happen when a path is resolved; a file swapped for a symlink between the check and the
read could slip through, which needs write access to the workspace that these read-only tools
never give.
"""

from __future__ import annotations

import fnmatch
import os
from collections.abc import Sequence
from pathlib import Path, PurePosixPath

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

__all__ = [
    "WorkspaceConfigError",
    "WorkspaceError",
    "deny_match",
    "display_path",
    "is_denied",
    "resolve_path",
    "workspace_root",
]


class WorkspaceError(ValueError):
    """A request the workspace refuses; ``str()`` is a message for the model."""


class WorkspaceConfigError(ImproperlyConfigured):
    """``BOOCODE_WORKSPACE`` points somewhere unsafe or unusable."""


def workspace_root() -> Path:
    """The resolved workspace root, created if missing; refuses unsafe locations."""
    root = Path(settings.WORKSPACE).resolve()
    for label, other in (("project directory", settings.BASE_DIR), ("data directory", settings.DATA_DIR)):
        other = Path(other).resolve()
        if root == other or other.is_relative_to(root):
            relation = "is" if root == other else "contains"
            raise WorkspaceConfigError(
                f"BOOCODE_WORKSPACE={root} {relation} the {label} ({other}); native tools would serve "
                "the database and secrets. Point it at a dedicated folder, e.g. "
                f"{settings.DATA_DIR}/workspace"
            )
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise WorkspaceConfigError(f"BOOCODE_WORKSPACE={root} cannot be created: {exc.strerror}") from exc
    if not root.is_dir():
        raise WorkspaceConfigError(f"BOOCODE_WORKSPACE={root} is not a directory")
    return root


def deny_match(relative: PurePosixPath, patterns: Sequence[str] | None = None) -> str | None:
    """The first deny-list pattern that hides ``relative`` (a path relative to the root), if any."""
    if patterns is None:
        patterns = settings.WORKSPACE_DENY
    parts = [part.lower() for part in relative.parts]
    whole = "/".join(parts)
    for pattern in patterns:
        glob = pattern.strip().strip("/").lower()
        if not glob:
            continue
        if "/" in glob:
            if fnmatch.fnmatchcase(whole, glob):
                return pattern
        elif any(fnmatch.fnmatchcase(part, glob) for part in parts):
            return pattern
    return None


def is_denied(relative: PurePosixPath, patterns: Sequence[str] | None = None) -> bool:
    """Whether the deny list hides ``relative``."""
    return deny_match(relative, patterns) is not None


def display_path(path: Path, root: Path) -> str:
    """``path`` relative to the root, as the model should write it (``.`` for the root)."""
    relative = path.relative_to(root).as_posix()
    return relative or "."


def resolve_path(requested: str, root: Path) -> Path:
    """The absolute, symlink-free path for ``requested``, or :class:`WorkspaceError`.

    Refuses paths that leave the root (``..``, absolute paths elsewhere, symlinks pointing out)
    and paths the deny list hides. The path need not exist.
    """
    if "\0" in requested:
        raise WorkspaceError("path contains a NUL character")
    raw = Path(requested or ".")
    candidate = raw if raw.is_absolute() else root / raw
    lexical = Path(os.path.normpath(candidate))
    if not lexical.is_relative_to(root):
        raise WorkspaceError(f"{requested}: outside the workspace; use a path relative to the workspace root")
    resolved = candidate.resolve()
    if not resolved.is_relative_to(root):
        raise WorkspaceError(f"{requested}: refused, a symbolic link leads outside the workspace")
    for checked in (lexical, resolved):
        pattern = deny_match(PurePosixPath(checked.relative_to(root).as_posix()))
        if pattern is not None:
            raise WorkspaceError(
                f"{requested}: refused, it matches the workspace deny list ({pattern!r}); "
                "secrets are never served"
            )
    return resolved

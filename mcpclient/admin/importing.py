"""``mcp_import``: merge another host's MCP config into data/mcp.json.

The source may be any shape :mod:`mcpclient.config.shapes` knows (Claude Desktop's
``claude_desktop_config.json``, Claude Code's ``.mcp.json``, Cursor's and Windsurf's
``mcp.json``, Gemini CLI's ``settings.json``, VS Code's ``.vscode/mcp.json`` or user
``settings.json``, ``opencode.json``, Zed's ``settings.json``), comments included. Every entry
is validated like the loader does; one invalid selected entry stops the import with its error
and nothing is written. The entries are then written in the target file's own dialect
(:func:`mcpclient.config.shapes.entry_for`), with values as written: placeholders stay placeholders
and nothing is expanded. The write goes through the same write-through as the admin (one lock,
an atomic replace, the database mirrored in the same transaction, the running hub told).
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.conf import settings

from mcpclient.admin.changes import ServerChangeError, write_through
from mcpclient.config.document import parse_json_document, read_config_text
from mcpclient.config.entries import inputs_used
from mcpclient.config.loading import load_config_text
from mcpclient.config.model import ConfigError, LoadedConfig, ServerConfig
from mcpclient.config.shapes import (
    VSCODE,
    VSCODE_SETTINGS,
    Shape,
    entry_for,
    find_servers,
    input_declarations,
)
from mcpclient.config.writeback import WritebackError, file_shape, merge_servers, preview_merge
from mcpclient.core.redaction import masked_entry

__all__ = ["ImportError_", "ImportPlan", "import_servers"]


class ImportError_(Exception):
    """The import cannot be done; ``str()`` (and ``errors``) say why. Nothing was written."""

    def __init__(self, message: str, errors: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.errors = list(errors)


@dataclass
class ImportPlan:
    """What an import does (or did)."""

    source: Path
    source_shape: Shape
    target: Path
    target_shape: Shape
    names: list[str]
    replaced: list[str] = field(default_factory=list)
    diff: str = ""
    written: bool = False
    configs: dict[str, ServerConfig] = field(default_factory=dict)  # the imported entries, parsed


def _masked_document(top: dict[str, Any], shape: Shape) -> dict[str, Any]:
    """``top`` with each server entry masked, for a diff that is safe to print."""
    copy_ = json.loads(json.dumps(top))
    try:
        _, servers = find_servers(copy_)
    except ValueError:
        return copy_
    if isinstance(servers, dict):
        for name, entry in servers.items():
            servers[name] = masked_entry(entry)
    return copy_


def _render(top: dict[str, Any] | None) -> list[str]:
    if not top:
        return []
    return (json.dumps(top, indent=2, ensure_ascii=False) + "\n").splitlines(keepends=True)


def _load_source(path: Path) -> LoadedConfig:
    try:
        text = read_config_text(path)
    except FileNotFoundError:
        raise ImportError_(f"{path}: no such file") from None
    return load_config_text(text, path=path)


def import_servers(
    path: Path, *, names: Sequence[str] = (), replace: bool = False, dry_run: bool = False
) -> ImportPlan:
    """Merge the servers of the config file at ``path`` (all, or ``names``) into mcp.json.

    Raises :class:`ImportError_` (nothing written) for an unreadable source, unknown or invalid
    entries, or a name mcp.json already has (unless ``replace``).
    """
    path = Path(path)
    try:
        loaded = _load_source(path)
    except ConfigError as exc:
        raise ImportError_(str(exc)) from None
    wanted = list(names) or list(loaded.raw_servers)
    unknown = [name for name in wanted if name not in loaded.raw_servers]
    if unknown:
        available = ", ".join(loaded.raw_servers) or "none"
        raise ImportError_(f'{path.name}: no server named "{unknown[0]}" (servers in the file: {available})')
    errors = [loaded.errors[name] for name in wanted if name in loaded.errors]
    if errors:
        count = f"{len(errors)} invalid entr{'y' if len(errors) == 1 else 'ies'}"
        raise ImportError_(f"{path.name}: {count}; nothing was imported", errors)
    if not wanted:
        raise ImportError_(f"{path.name}: the file has no servers to import")

    target = Path(settings.MCP_CONFIG)
    try:
        shape = file_shape(target)
    except WritebackError as exc:
        raise ImportError_(str(exc)) from None
    entries = {name: entry_for(shape, loaded.servers[name]) for name in wanted}
    inputs = None
    if loaded.shape in (VSCODE, VSCODE_SETTINGS) and shape in (VSCODE, VSCODE_SETTINGS):
        used = [input_id for name in wanted for input_id in inputs_used(loaded.raw_servers[name])]
        inputs = input_declarations(_source_top(path), loaded.shape, used)
    plan = ImportPlan(source=path, source_shape=loaded.shape, target=target, target_shape=shape, names=wanted)
    plan.configs = {name: loaded.servers[name] for name in wanted}
    try:
        before, after = preview_merge(target, entries, replace=replace, inputs=inputs)
    except WritebackError as exc:
        raise ImportError_(str(exc)) from None
    _, existing = find_servers(json.loads(json.dumps(before)), empty_shape=shape)
    plan.replaced = [name for name in wanted if isinstance(existing, dict) and name in existing]
    plan.diff = "".join(
        difflib.unified_diff(
            _render(_masked_document(before, shape) if target.exists() else None),
            _render(_masked_document(after, shape)),
            fromfile=f"{target.name} (before)",
            tofile=f"{target.name} (after)",
        )
    )
    if dry_run:
        return plan

    try:
        write_through(lambda file: merge_servers(file, entries, replace=replace, inputs=inputs))
    except ServerChangeError as exc:
        raise ImportError_(str(exc)) from None
    plan.written = True
    return plan


def _source_top(path: Path) -> dict[str, Any]:
    value = parse_json_document(read_config_text(path), source=path.name).value
    return value if isinstance(value, dict) else {}

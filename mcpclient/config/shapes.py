"""The shapes of MCP config files other hosts write, so their files paste in as they are.

A file holds its servers under one top-level key, which names its shape:

=================  ============================================================================
``mcpServers``     Claude Desktop (``claude_desktop_config.json``), Claude Code (``.mcp.json``),
                   Cursor, Windsurf, Gemini CLI (``settings.json``, beside its other settings)
``servers``        VS Code (``.vscode/mcp.json``), with its ``inputs``
``mcp``            opencode (``opencode.json``)
``mcp.servers``    VS Code user ``settings.json`` (``"mcp": {"servers": ..., "inputs": ...}``)
``context_servers``  Zed (``settings.json``)
=================  ============================================================================

One file uses one shape: :func:`find_servers` detects it (a file with two is an error that
says so) and the entries are parsed in any host's dialect by
:func:`mcpclient.config.entries.parse_server`. Writing goes the other way: :func:`entry_for` turns a
parsed server into an entry in a shape's own dialect (opencode's ``"type": "local"`` with a
command array, VS Code's ``"type": "http"``, Zed's bare ``command``...), so a file written back
by the admin or ``mcp_import`` stays in its shape.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

__all__ = ["SHAPES", "Shape", "ShapeError", "entry_for", "find_servers", "input_ids", "shape_named"]


class ShapeError(ValueError):
    """The file has no known shape, or two; ``str()`` says which keys were found."""


@dataclass(frozen=True)
class Shape:
    """One host's way of writing its server map."""

    key: str  # where the servers are: a top-level key, or "mcp.servers"
    label: str  # named in mcp_discover's output and in errors
    hosts: str

    @property
    def path(self) -> tuple[str, ...]:
        """The keys leading to the server map."""
        return tuple(self.key.split("."))

    @property
    def named(self) -> str:
        """The shape in a few words: its label, and its key when the label is not the key
        (``mcpServers``, ``VS Code (servers)``)."""
        return self.label if self.label == self.key else f"{self.label} ({self.key})"


MCP_SERVERS = Shape("mcpServers", "mcpServers", "Claude Desktop, Claude Code, Cursor, Windsurf, Gemini CLI")
VSCODE = Shape("servers", "VS Code", "VS Code (.vscode/mcp.json)")
VSCODE_SETTINGS = Shape("mcp.servers", "VS Code settings", "VS Code (user settings.json)")
OPENCODE = Shape("mcp", "opencode", "opencode (opencode.json)")
ZED = Shape("context_servers", "Zed", "Zed (settings.json)")
SHAPES: tuple[Shape, ...] = (MCP_SERVERS, VSCODE, VSCODE_SETTINGS, OPENCODE, ZED)

# Gemini CLI's settings.json has an "mcp" object of its own beside "mcpServers".
_GEMINI_MCP_KEYS = frozenset({"allowed", "excluded", "serverCommand"})


def shape_named(key: str) -> Shape:
    """The shape whose key is ``key``."""
    return next(shape for shape in SHAPES if shape.key == key)


def _present(top: dict[str, Any]) -> list[Shape]:
    found: list[Shape] = []
    for shape in (MCP_SERVERS, VSCODE, ZED):
        if shape.key in top:
            found.append(shape)
    mcp = top.get("mcp")
    if isinstance(mcp, dict) and "mcp" in top:
        if set(mcp) and set(mcp) <= _GEMINI_MCP_KEYS and MCP_SERVERS in found:
            pass  # Gemini CLI's own "mcp" settings, not opencode's servers
        elif "servers" in mcp and set(mcp) <= {"servers", "inputs"}:
            found.append(VSCODE_SETTINGS)
        else:
            found.append(OPENCODE)
    elif "mcp" in top:
        found.append(OPENCODE)  # wrong type: the loader names it
    return found


def find_servers(top: object, *, empty_shape: Shape | None = None) -> tuple[Shape, Any]:
    """The file's shape and its server map as written (not yet checked to be an object).

    ``empty_shape`` is used when the top level holds no server map at all (a new file);
    without it that is a :class:`ShapeError`.
    """
    if not isinstance(top, dict):
        raise ShapeError("the top level must be a JSON object")
    found = _present(top)
    if len(found) > 1:
        keys = " and ".join(
            f'"{shape.key}"' + ("" if shape.label == shape.key else f" ({shape.label})") for shape in found
        )
        raise ShapeError(f"the file has both {keys}; one file may use one shape")
    if not found:
        if empty_shape is not None:
            return empty_shape, top.setdefault(empty_shape.key, {})
        expected = ", ".join(f'"{shape.key}" ({shape.hosts})' for shape in SHAPES)
        raise ShapeError(f"no server map found; expected one of {expected}")
    shape = found[0]
    value: Any = top
    for key in shape.path:
        value = value[key]
    return shape, value


def input_ids(top: dict[str, Any], shape: Shape) -> tuple[list[str], str | None]:
    """The ids VS Code's ``inputs`` declares, and a problem with the block (``None`` if fine)."""
    holder = top.get("mcp") if shape is VSCODE_SETTINGS else top
    inputs = holder.get("inputs", []) if isinstance(holder, dict) else []
    if not isinstance(inputs, list):
        return [], '"inputs" must be an array'
    ids: list[str] = []
    for index, item in enumerate(inputs):
        if not isinstance(item, dict) or not isinstance(item.get("id"), str) or not item["id"]:
            return ids, f'"inputs[{index}]" must be an object with a string "id"'
        ids.append(item["id"])
    return ids, None


def input_declarations(top: dict[str, Any], shape: Shape, wanted: Iterable[str]) -> list[dict[str, Any]]:
    """The ``inputs`` items of ``top`` whose id is in ``wanted`` (for carrying them along)."""
    holder = top.get("mcp") if shape is VSCODE_SETTINGS else top
    inputs = holder.get("inputs", []) if isinstance(holder, dict) else []
    wanted = set(wanted)
    return [copy.deepcopy(item) for item in inputs if isinstance(item, dict) and item.get("id") in wanted]


# --- writing in a shape's dialect ------------------------------------------------------------

# Every key some host's dialect gives a meaning BooCode reads (mcpclient.config parses them);
# other keys of an entry are carried over as written.
ENTRY_KEYS = frozenset(
    {
        "type",
        "command",
        "args",
        "env",
        "environment",
        "envFile",
        "cwd",
        "url",
        "serverUrl",
        "httpUrl",
        "headers",
        "enabled",
        "disabled",
        "timeout",
        "initTimeout",
        "requestTimeout",
        "includeTools",
        "excludeTools",
        "oauth",
        "writeTools",
        "trusted",
        "readOnly",
        "apps",
        "pinTools",
        "acceptNewTools",
        "scope",
        "sandbox",
        "groups",
    }
)
DEFAULT_TIMEOUT = 60.0
DEFAULT_INIT_TIMEOUT = 30.0


def _ms(seconds: float) -> int:
    return round(seconds * 1000)


def entry_for(shape: Shape, config: Any) -> dict[str, Any]:
    """``config`` (a parsed :class:`~mcpclient.config.model.ServerConfig`) as an entry of ``shape``.

    Values stay as written (placeholders are never expanded); keys BooCode does not know are
    carried over as they are; limits equal to the defaults are left out.
    """
    stdio = config.transport == "stdio"
    entry: dict[str, Any] = {}
    if shape is OPENCODE:
        entry["type"] = "local" if stdio else "remote"
        if stdio:
            entry["command"] = [config.command, *config.args]
    elif shape is ZED:
        if stdio:
            entry["command"] = config.command
    elif shape in (VSCODE, VSCODE_SETTINGS):
        entry["type"] = "stdio" if stdio else ("sse" if config.transport == "sse" else "http")
    elif not stdio and (config.transport == "sse" or not config.sse_fallback):
        entry["type"] = "sse" if config.transport == "sse" else "http"
    if stdio and shape is not OPENCODE:
        entry["command"] = config.command
        if config.args:
            entry["args"] = list(config.args)
    if config.env:
        entry["environment" if shape is OPENCODE else "env"] = dict(config.env)
    if config.env_file:
        entry["envFile"] = config.env_file
    if config.cwd:
        entry["cwd"] = config.cwd
    if not stdio:
        entry["url"] = config.url
        if config.headers:
            entry["headers"] = dict(config.headers)
    if not config.enabled:
        entry["enabled"] = False
    if shape is OPENCODE:
        if config.init_timeout != DEFAULT_INIT_TIMEOUT:
            entry["timeout"] = _ms(config.init_timeout)
        if config.timeout != DEFAULT_TIMEOUT:
            entry["requestTimeout"] = _ms(config.timeout)
    else:
        if config.timeout != DEFAULT_TIMEOUT:
            entry["timeout"] = _ms(config.timeout)
        if config.init_timeout != DEFAULT_INIT_TIMEOUT:
            entry["initTimeout"] = _ms(config.init_timeout)
    if config.include_tools is not None:
        entry["includeTools"] = list(config.include_tools)
    if config.exclude_tools:
        entry["excludeTools"] = list(config.exclude_tools)
    if config.write_tools != "reject":
        entry["writeTools"] = config.write_tools
    if not config.trusted:
        entry["trusted"] = False
    if config.read_only:
        entry["readOnly"] = list(config.read_only)
    if not config.apps:
        entry["apps"] = False
    if config.scope != "shared":
        entry["scope"] = config.scope
    if config.pin_tools != "block":
        entry["pinTools"] = config.pin_tools
    if config.accept_new_tools:
        entry["acceptNewTools"] = True
    if config.groups:
        entry["groups"] = list(config.groups)
    if "oauth" in config.raw:  # as written: its clientSecret may be a placeholder
        entry["oauth"] = copy.deepcopy(config.raw["oauth"])
    if "sandbox" in config.raw:  # as written: its paths may hold placeholders
        entry["sandbox"] = copy.deepcopy(config.raw["sandbox"])
    for key, value in config.raw.items():
        if key not in ENTRY_KEYS and key not in entry:
            entry[key] = copy.deepcopy(value)
    return entry

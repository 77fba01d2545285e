"""Admin changes to MCP servers: validated, written through to mcp.json, applied live.

Every change follows the same path (``write_through``, also used by ``mcp_import``):

1. the new entry is validated like the file loader does (``parse_server``), plus the stdio
   command allowlist, and a ``ServerChangeError`` names the form field at fault;
2. inside one database transaction, mcp.json is rewritten atomically by
   :mod:`mcpclient.config.writeback` (other entries, key order, unknown keys and placeholders kept),
   then ``sync_servers`` mirrors the file into the rows, records the file's modification
   time and bumps ``McpState.version``. A failed write raises before any row changed, and
   any later failure rolls the rows back, so the file and the database never disagree and
   ``manage.py mcp_sync`` afterwards has nothing to do;
3. after the commit (``transaction.on_commit``), the hub of this process, if one runs, applies
   the change at once: a disabled server's session is closed and its child stopped, an
   enabled or edited one is (re)connected, and the tool registry follows. Other processes see
   the new version stamp before their next turn.

Secrets: values of ``env`` and ``headers``, secret-looking ``args`` and a ``url``'s userinfo and
query values are shown masked (``MASK``, see :mod:`mcpclient.core.redaction`) unless they are only
placeholders such as ``${TOKEN}`` (optionally after an auth scheme: ``Bearer ${TOKEN}``). A
masked value submitted back unchanged keeps the stored value (:func:`unmask_values`,
:func:`unmask_args`, :func:`unmask_url`).
"""

from __future__ import annotations

import asyncio
import copy
import json
import logging
import os
import re
from collections.abc import Callable, Collection, Mapping, Sequence
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils.crypto import salted_hmac

from mcpclient.config.entries import OPENCODE_TYPES, PLACEHOLDER_RE, URL_KEYS, parse_server
from mcpclient.config.loading import load_config
from mcpclient.config.model import STDIO, ConfigError, ServerConfig
from mcpclient.config.resolve import command_allowed, command_refused, lookup_path
from mcpclient.config.shapes import entry_for
from mcpclient.config.writeback import WritebackError, file_shape, set_enabled, update_server
from mcpclient.core.pinning import PIN_BLOCK, PIN_MODES
from mcpclient.core.redaction import MASK, mask_args, redact_url
from mcpclient.engine.api import HubApi
from mcpclient.engine.authorization import signed_in_servers
from mcpclient.models import LOG_LEVELS, McpServer, McpState, McpTool
from mcpclient.runtime import composition
from mcpclient.runtime.commands import discover_servers
from mcpclient.runtime.sync import SyncReport, config_mtime_ns, current_state, server_configs, sync_servers
from mcpclient.secrets.inputs import input_ids
from mcpclient.worker.client import WorkerUnavailable

logger = logging.getLogger(__name__)

# Keys of an entry that the structured form edits -> the form field that edits them.
KEY_FIELDS: dict[str, str] = {
    "type": "transport",
    "command": "command",
    "args": "args",
    "env": "env",
    "environment": "env",
    "envFile": "env_file",
    "cwd": "cwd",
    "url": "url",
    "headers": "headers",
    "enabled": "enabled",
    "timeout": "timeout",
    "initTimeout": "init_timeout",
    "writeTools": "write_tools",
    "trusted": "trusted",
    "readOnly": "read_only",
    "apps": "apps",
    "pinTools": "pin_tools",
    "acceptNewTools": "accept_new_tools",
    "includeTools": "include_tools",
    "excludeTools": "exclude_tools",
    "groups": "groups",
}
_TRANSPORTS = {
    "stdio": "stdio",
    "local": "stdio",
    "streamableHttp": "streamableHttp",
    "streamable-http": "streamableHttp",
    "http": "streamableHttp",
    "remote": "streamableHttp",
    "sse": "sse",
}
_ERROR_KEY_RE = re.compile(r'^(?:conflicting )?"([A-Za-z]+)')


class ServerChangeError(Exception):
    """A change could not be made; nothing was changed. ``field`` names the form field at fault."""

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


# --- Secrets -------------------------------------------------------------------------------


def unmask_values(new: Mapping[str, str], original: object, *, field: str) -> dict[str, str]:
    """Replace each masked value in ``new`` by the stored value of the same key.

    Raises ``ServerChangeError`` when a masked value has no stored value to keep (a new or
    renamed key): the mask is not a value.
    """
    stored = original if isinstance(original, dict) else {}
    result: dict[str, str] = {}
    for key, value in new.items():
        if value == MASK:
            if key not in stored:
                raise ServerChangeError(
                    f'{key}: enter a value ("{MASK}" only stands for a value that is already stored)', field
                )
            result[key] = stored[key]
        else:
            result[key] = value
    return result


def unmask_args(new: Sequence[str], original: Sequence[object], *, field: str) -> list[str]:
    """Put back each stored argument the form showed masked and got back unchanged.

    The k-th masked line is matched with the first stored argument, not yet taken, whose masked
    form it equals, so arguments may be added, removed or moved around masked ones. A masked
    line that matches none raises ``ServerChangeError``: the mask is not a value.
    """
    stored = [str(arg) for arg in original]
    shown = mask_args(stored)
    taken: set[int] = set()
    result: list[str] = []
    for line in new:
        if MASK not in line:
            result.append(line)
            continue
        index = next((i for i, text in enumerate(shown) if text == line and i not in taken), None)
        if index is None:
            raise ServerChangeError(
                f'{line}: enter the whole argument ("{MASK}" only stands for a value that is already stored)',
                field,
            )
        taken.add(index)
        result.append(stored[index])
    return result


def unmask_url(new: str, original: str) -> str:
    """The stored URL when the form got back the masked form it showed, else ``new``."""
    if original and new == redact_url(original):
        return original
    if MASK in new:
        raise ServerChangeError(
            f'enter the whole URL ("{MASK}" only stands for the stored one, unchanged)', "url"
        )
    return new


# --- Entry <-> form values -------------------------------------------------------------------


def _as_dict(entry: object) -> dict[str, Any]:
    return entry if isinstance(entry, dict) else {}


def infer_transport(entry: Mapping[str, Any]) -> str:
    """The canonical transport of an entry as the loader would read it, or "" if unclear."""
    kind = entry.get("type")
    if kind is not None:
        return _TRANSPORTS.get(kind, "") if isinstance(kind, str) else ""
    has_url = _url_key(entry) in entry
    if "command" in entry and not has_url:
        return "stdio"
    if has_url and "command" not in entry:
        return "streamableHttp"
    return ""


def _env_key(entry: Mapping[str, Any]) -> str:
    return "environment" if "environment" in entry else "env"


def _url_key(entry: Mapping[str, Any]) -> str:
    """Where the entry keeps its URL: ``url``, Windsurf's ``serverUrl`` or Gemini's ``httpUrl``."""
    return next((key for key in URL_KEYS if key in entry), "url")


def _opencode(entry: Mapping[str, Any]) -> bool:
    return entry.get("type") in OPENCODE_TYPES


def _timeout_keys(entry: Mapping[str, Any]) -> tuple[str, str]:
    """``(per-call key, start-up key)``: opencode's ``timeout`` is its start-up limit."""
    return ("requestTimeout", "timeout") if _opencode(entry) else ("timeout", "initTimeout")


def _milliseconds(value: object) -> int | None:
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _command_and_args(entry: Mapping[str, Any]) -> tuple[str, list[str]]:
    command, args = entry.get("command"), entry.get("args")
    extra = [str(arg) for arg in args] if isinstance(args, list) else []
    if isinstance(command, list):  # opencode: "command": ["npx", "-y", "pkg"]
        parts = [str(part) for part in command]
        return (parts[0] if parts else ""), parts[1:] + extra
    if isinstance(command, dict):  # older Zed: "command": {"path": ..., "args": [...], "env": {...}}
        path, inner = command.get("path"), command.get("args")
        inner_args = [str(arg) for arg in inner] if isinstance(inner, list) else []
        return (path if isinstance(path, str) else ""), inner_args + extra
    return (command if isinstance(command, str) else ""), extra


def _env_of(entry: Mapping[str, Any]) -> Any:
    command = entry.get("command")
    if isinstance(command, dict) and "env" in command and _env_key(entry) not in entry:
        return command.get("env")
    return entry.get(_env_key(entry))


def entry_values(entry: object) -> dict[str, Any]:
    """The form's initial values for an entry (env/headers as stored: mask them to display)."""
    raw = _as_dict(entry)
    command, args = _command_and_args(raw)
    env = _env_of(raw)
    headers = raw.get("headers")
    enabled = raw.get("enabled", True)
    if isinstance(raw.get("disabled"), bool):
        enabled = not raw["disabled"]
    timeout_key, init_key = _timeout_keys(raw)

    def text(key: str) -> str:
        value = raw.get(key)
        return value if isinstance(value, str) else ""

    def patterns(key: str) -> list[str]:
        value = raw.get(key)
        return [item for item in value if isinstance(item, str)] if isinstance(value, list) else []

    return {
        "transport": infer_transport(raw),
        "command": command,
        "args": args,
        "env": dict(env) if isinstance(env, dict) else {},
        "env_file": text("envFile"),
        "cwd": text("cwd"),
        "url": text(_url_key(raw)),
        "headers": dict(headers) if isinstance(headers, dict) else {},
        "enabled": enabled if isinstance(enabled, bool) else True,
        "timeout": _milliseconds(raw.get(timeout_key)),
        "init_timeout": _milliseconds(raw.get(init_key)),
        "write_tools": "approve" if raw.get("writeTools") == "approve" else "reject",
        "trusted": raw.get("trusted") is not False,
        "apps": raw.get("apps") is not False,
        "pin_tools": raw.get("pinTools") if raw.get("pinTools") in PIN_MODES else PIN_BLOCK,
        "accept_new_tools": raw.get("acceptNewTools") is True,
        "include_tools": patterns("includeTools"),
        "exclude_tools": patterns("excludeTools"),
        "read_only": patterns("readOnly"),
        "groups": patterns("groups"),
        "extra": {key: value for key, value in raw.items() if key not in KEY_FIELDS},
    }


def build_entry(original: object, changes: Mapping[str, Any]) -> dict[str, Any]:
    """Apply the form fields that changed to a copy of the original entry.

    ``changes`` maps field names (see :func:`entry_values`) to new values; a field that is
    absent was not touched and its key stays exactly as written (an alias such as
    ``"type": "http"``, opencode's command array, an invalid value still to be fixed). A
    cleared field removes its key; a new key is appended, except ``type``, which goes first.
    Unknown keys come from ``changes["extra"]`` when given and otherwise stay as they are.
    """
    base = _as_dict(original)
    entry = copy.deepcopy(base)

    def put(key: str, value: Any, empty: bool) -> None:
        if empty:
            entry.pop(key, None)
        else:
            entry[key] = value

    if "command" in changes or "args" in changes:
        command, args = _command_and_args(base)
        command = changes.get("command", command)
        args = list(changes.get("args", args))
        written = base.get("command")
        if isinstance(written, list):  # opencode keeps the whole argv in "command"
            put("command", [command, *args], not command)
            entry.pop("args", None)
        elif isinstance(written, dict):  # older Zed
            entry["command"] = {**written, "path": command, "args": args}
        else:
            put("command", command, not command)
            # Keep an explicit (even empty) "args" when the entry had one.
            put("args", args, not args and "args" not in base)
    if "env" in changes:
        written = base.get("command")
        if isinstance(written, dict) and "env" in written and _env_key(base) not in base:
            entry["command"] = {**entry["command"], "env": dict(changes["env"])}
        else:
            put(_env_key(base), dict(changes["env"]), not changes["env"])
    for field, key in (("env_file", "envFile"), ("cwd", "cwd"), ("url", _url_key(base))):
        if field in changes:
            put(key, changes[field], not changes[field])
    if "headers" in changes:
        put("headers", dict(changes["headers"]), not changes["headers"])
    if "enabled" in changes:
        if "disabled" in base:
            entry["disabled"] = not changes["enabled"]
        elif changes["enabled"]:
            if entry.get("enabled") is not True:  # (an "enabled": true as written stays)
                entry.pop("enabled", None)  # absent is enabled: nothing written for it
        else:
            entry["enabled"] = False
    timeout_key, init_key = _timeout_keys(base)
    for field, key in (("timeout", timeout_key), ("init_timeout", init_key)):
        if field in changes:
            put(key, changes[field], changes[field] is None)
    # The safety keys: their defaults ("reject", trusted, every tool, none left out) are written as
    # no key at all, like "enabled".
    if "write_tools" in changes:
        put("writeTools", changes["write_tools"], changes["write_tools"] == "reject")
    if "trusted" in changes:
        put("trusted", False, changes["trusted"])
    if "apps" in changes:
        put("apps", False, changes["apps"])
    if "pin_tools" in changes:
        put("pinTools", changes["pin_tools"], changes["pin_tools"] == PIN_BLOCK)
    if "accept_new_tools" in changes:
        put("acceptNewTools", True, not changes["accept_new_tools"])
    lists = (
        ("include_tools", "includeTools"),
        ("exclude_tools", "excludeTools"),
        ("read_only", "readOnly"),
        ("groups", "groups"),
    )
    for field, key in lists:
        if field in changes:
            put(key, list(changes[field]), not changes[field])
    if "extra" in changes:
        extra = changes["extra"]
        for key in [key for key in entry if key not in KEY_FIELDS and key not in extra]:
            del entry[key]
        for key, value in extra.items():
            entry[key] = copy.deepcopy(value)
    if "transport" in changes:
        transport = changes["transport"]
        if _opencode(base):
            entry["type"] = "local" if transport == "stdio" else "remote"
        elif "type" in entry:
            entry["type"] = transport
        elif infer_transport(entry) != transport or (not base and transport != "stdio"):
            # A new URL entry says which transport it is: without "type", a url is Streamable
            # HTTP that falls back to SSE, which is not what the person chose.
            entry = {"type": transport, **entry}
    return entry


# --- Validation ----------------------------------------------------------------------------


def _field_of(message: str, name: str) -> str | None:
    """The form field a loader error is about, read from the quoted key it names."""
    prefix = f'server "{name}": '
    if prefix not in message:
        return "name" if "the name may only contain" in message else None
    rest = message.split(prefix, 1)[1]
    if rest.startswith("the name may only contain"):
        return "name"
    match = _ERROR_KEY_RE.match(rest)
    return KEY_FIELDS.get(match.group(1)) if match else None


def validate_entry(name: str, entry: object, *, check_command: bool = True) -> ServerConfig:
    """Validate like the file loader; with ``check_command``, the stdio allowlist too.

    Raises ``ServerChangeError`` whose ``field`` names the form field at fault.
    """
    source = Path(settings.MCP_CONFIG).name
    try:
        config = parse_server(name, entry, source=source)
    except ConfigError as exc:
        raise ServerChangeError(str(exc), _field_of(str(exc), name)) from None
    if check_command and config.transport == STDIO and config.command is not None:
        # A placeholder may stand for the command: that one is checked when connecting.
        if not PLACEHOLDER_RE.search(config.command):
            base_dir = Path(settings.MCP_CONFIG).parent
            search_path = lookup_path(os.environ.get("PATH"))
            allowed, _ = command_allowed(
                config.command, settings.MCP_STDIO_COMMANDS, base_dir=base_dir, search_path=search_path
            )
            if not allowed:
                why = command_refused(config.command, base_dir=base_dir, search_path=search_path)
                raise ServerChangeError(f'{source}: server "{name}": {why}', "command")
    return config


# --- Write-through -------------------------------------------------------------------------


def _apply_live() -> None:
    """Let this process's hub (if any) apply the new version now and persist its state."""

    async def apply(hub: HubApi) -> None:
        await composition.ensure_hub()
        await hub.drain_listeners()

    try:
        composition.run_on_hub_loop(apply)
    except WorkerUnavailable as exc:  # saved: the worker applies it when it next reads McpState
        logger.warning("%s; the change is saved and the hub worker applies it when it reads it", exc)


def write_through(write: Callable[[Path], None]) -> SyncReport:
    """Run ``write(path)`` on mcp.json and mirror the file into the rows, in one transaction."""
    path = Path(settings.MCP_CONFIG)
    try:
        with transaction.atomic():
            current_state()
            # One admin change at a time across processes (the file has its own lock too).
            McpState.objects.select_for_update().get(pk=1)
            before = {row.name: (row.config, row.enabled) for row in McpServer.objects.all()}
            write(path)
            report = sync_servers(path)
            _settle_rows(report, before)
    except WritebackError as exc:
        raise ServerChangeError(str(exc)) from None
    except ConfigError as exc:  # the file was written but cannot be read back: rows unchanged
        raise ServerChangeError(str(exc)) from None
    if report.changed:
        transaction.on_commit(_apply_live)
    return report


def _settle_rows(report: SyncReport, before: Mapping[str, tuple[Any, bool]]) -> None:
    """Show the state the hub is about to reach: changed enabled servers connect, disabled have no tools."""
    after = {
        name: (config, enabled)
        for name, config, enabled in McpServer.objects.values_list("name", "config", "enabled")
    }
    touched = [name for name in report.created + report.updated if before.get(name) != after.get(name)]
    McpServer.objects.filter(name__in=touched, enabled=True, config_error="").update(
        status=McpServer.Status.CONNECTING, last_error=""
    )
    disabled = McpServer.objects.filter(name__in=touched, enabled=False)
    McpTool.objects.filter(server__in=disabled).delete()
    disabled.update(tool_count=0, rejected_count=0, connected_at=None)


def _file_entries(path: Path) -> dict[str, Any] | None:
    """The entries of mcp.json as written, or None when the file cannot be read."""
    try:
        return load_config(path).raw_servers
    except ConfigError:
        return None  # the write-back refuses such a file with its own message


def current_entry(server: McpServer) -> Any:
    """The server's entry as written in mcp.json, else as stored in its row.

    Edits start from the file: it is the source of truth, and it keeps the key order, which a
    PostgreSQL ``jsonb`` column does not.
    """
    entries = _file_entries(Path(settings.MCP_CONFIG))
    if entries is not None and server.name in entries:
        return entries[server.name]
    return server.config


def entry_digest(entry: object) -> str:
    """A keyed digest of an entry, to tell whether it changed since a page was rendered.

    Keyed with SECRET_KEY so that it reveals nothing about the (masked) secrets it covers.
    """
    canonical = json.dumps(entry, sort_keys=True, ensure_ascii=False)
    return salted_hmac("mcpclient.admin.entry", canonical, algorithm="sha256").hexdigest()


def stale_message(name: str) -> str:
    """The error for an edit that started from an entry that has changed since."""
    source = Path(settings.MCP_CONFIG).name
    return (
        f'{source}: server "{name}" was changed in the file since this page was loaded; '
        "reload the page and make the change again"
    )


def save_server(
    *, name: str, entry: dict[str, Any], original_name: str | None = None, expected: object = None
) -> McpServer:
    """Add a server (``original_name`` None) or replace/rename one, and return its row.

    ``expected`` is the entry the edit started from: if mcp.json holds something else for the
    server (edited by hand meanwhile), nothing is written.
    """
    check_command = original_name is None or _command_and_args(_as_dict(expected)) != _command_and_args(entry)
    validate_entry(name, entry, check_command=check_command)
    source = Path(settings.MCP_CONFIG).name

    def write(path: Path) -> None:
        entries = _file_entries(path)
        if original_name is None:
            if entries is not None and name in entries:
                raise ServerChangeError(f'{source}: server "{name}" already exists', "name")
            # A new entry is written in the file's own dialect (opencode's, VS Code's, Zed's...).
            update_server(path, name, entry_for(file_shape(path), parse_server(name, entry, source=source)))
            return
        if entries is not None and original_name in entries and entries[original_name] != expected:
            raise ServerChangeError(stale_message(original_name))
        if name != original_name and entries is not None and name in entries:
            raise ServerChangeError(f'{source}: server "{name}" already exists', "name")
        update_server(path, name, entry, rename_from=original_name if name != original_name else None)

    write_through(write)
    return McpServer.objects.get(name=name)


def delete_servers(*, names: Sequence[str]) -> None:
    """Remove servers from mcp.json and the database; their sessions close."""

    def write(path: Path) -> None:
        for name in names:
            update_server(path, name, None)

    write_through(write)


def set_servers_enabled(*, names: Sequence[str], enabled: bool) -> list[str]:
    """Enable or disable servers (only the ``enabled`` key is written); the names that changed."""
    before = dict(McpServer.objects.filter(name__in=names).values_list("name", "enabled"))

    def write(path: Path) -> None:
        for name in names:
            set_enabled(path, name, enabled)

    write_through(write)
    return [name for name in names if before.get(name) is not enabled]


def refresh_from_file() -> str | None:
    """Mirror mcp.json if it changed on disk since the last sync; the file's error, if any.

    Cheap (one ``stat``) when nothing changed. A change is applied to this process's hub.
    """
    if config_mtime_ns() == current_state().config_mtime_ns:
        return None
    try:
        report = sync_servers()
    except ConfigError as exc:
        return str(exc)
    if report.changed:
        transaction.on_commit(_apply_live)
    return None


# --- Live actions --------------------------------------------------------------------------


def reconnect_servers(*, names: Sequence[str]) -> bool:
    """Close and reopen the servers' sessions in this process's hub; False if none runs here.

    Waits for the hub and for its database writes: call it outside a transaction.
    """

    async def reconnect(hub: HubApi) -> None:
        await asyncio.gather(*(hub.reconnect(name) for name in names))
        await hub.drain_listeners()

    return composition.run_on_hub_loop(reconnect)


def rediscover_servers(*, names: Sequence[str]) -> None:
    """List the servers' tools again and store them.

    With a hub in this process its live sessions list again (the registry follows); without
    one, the servers are started briefly as ``manage.py mcp_discover`` does and the version
    stamp tells the process that runs the hub. Call it outside a transaction (see
    :func:`reconnect_servers`).
    """

    async def rediscover(hub: HubApi) -> None:
        await asyncio.gather(*(hub.rediscover(name) for name in names))
        await hub.drain_listeners()

    if not composition.run_on_hub_loop(rediscover):
        try:
            discover_servers(list(names))
        except ValueError as exc:
            raise ServerChangeError(str(exc)) from None


def oauth_mode(server: McpServer) -> str | None:
    """``"shared"`` or ``"perUser"`` for a valid entry that signs in with OAuth, else None."""
    try:
        config = parse_server(server.name, server.config)
    except ConfigError:
        return None
    return config.oauth.mode if config.oauth is not None else None


def has_shared_credential(name: str) -> bool:
    """Whether the shared sign-in of server ``name`` is stored (the value is never read)."""
    return name in signed_in_servers(None)


# --- Server logs ---------------------------------------------------------------------------


def set_log_level(*, name: str, level: str) -> str:
    """Store the log level asked of server ``name`` ("" = its default) and apply it at once.

    The level is not part of mcp.json (it is the admin's choice, kept on the row); this
    process's hub sends it to the live session (see :mod:`mcpclient.engine.server_logs`). Returns what
    became of it, in words. Call it outside a transaction (the hub's loop is waited for).
    """
    if level and level not in LOG_LEVELS:
        raise ServerChangeError(f'"{level}" is not a log level; expected one of {", ".join(LOG_LEVELS)}')
    if not McpServer.objects.filter(name=name).update(log_level=level):
        raise ServerChangeError(f'no MCP server "{name}"')
    outcome: list[str] = []

    async def apply(hub: HubApi) -> None:
        outcome.append(await hub.set_log_level(name, level))

    if not composition.run_on_hub_loop(apply):
        return "no MCP hub runs in this process: the level is used when the web server next starts"
    return outcome[0] if outcome else "the MCP hub did not answer in time; the level is stored"


def servers_using(changed: Collection[str]) -> list[str]:
    """The enabled, valid servers whose entry uses any of the inputs ``changed``."""
    wanted = set(changed)
    return [
        config.name for config in server_configs() if config.enabled and wanted & set(input_ids(config.raw))
    ]


def reconnect_servers_using(changed: Collection[str]) -> tuple[list[str], bool]:
    """Reconnect the servers that use the inputs ``changed`` so they read the new values.

    Returns ``(server names, whether a hub runs in this process)``. Waits for the hub and its
    database writes: call it outside a transaction.
    """
    names = servers_using(changed)
    if not names:
        return [], composition.get_hub() is not None

    async def reconnect(hub: HubApi) -> None:
        await asyncio.gather(*(hub.reconnect(name) for name in names))
        await hub.drain_listeners()

    return names, composition.run_on_hub_loop(reconnect)

"""Loading mcp.json: the file read, its shape recognised, every entry validated.

One invalid entry is reported in ``LoadedConfig.errors`` while the others load; only whole-file
problems (unreadable, invalid JSON, wrong top-level shape) raise ``ConfigError``. A missing file
means "no servers" (logged once per path). Nothing here reads the environment or expands a
placeholder.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path

from mcpclient.config.document import parse_json_document, read_config_text, servers_object
from mcpclient.config.entries import inputs_used, parse_server
from mcpclient.config.model import ConfigError, LoadedConfig
from mcpclient.config.shapes import VSCODE, VSCODE_SETTINGS, input_ids

logger = logging.getLogger("mcpclient.config")

_reported_missing: set[Path] = set()
_reported_lock = threading.Lock()


def load_config(path: Path) -> LoadedConfig:
    """Read and validate mcp.json.

    A missing file means "no servers" (logged once per path). An invalid entry lands in
    ``errors`` (name -> message) and the others still load. Raises ``ConfigError`` when the
    file cannot be read, is not valid JSON, or is in no known shape (or two).
    """
    path = Path(path)
    try:
        text = read_config_text(path)
    except FileNotFoundError:
        with _reported_lock:
            first_time = path not in _reported_missing
            _reported_missing.add(path)
        if first_time:
            logger.info("%s not found: no MCP servers are configured", path)
        return LoadedConfig(path=path, exists=False, servers={}, errors={}, raw_servers={})
    return load_config_text(text, path=path)


def load_config_text(text: str, *, path: Path) -> LoadedConfig:
    """Validate the text of a config file in any host's shape (see :mod:`mcpclient.config.shapes`)."""
    source = path.name
    document = parse_json_document(text, source=source)
    shape, entries = servers_object(document, source=source)
    declared: list[str] | None = None
    if shape in (VSCODE, VSCODE_SETTINGS):
        declared, problem = input_ids(document.value, shape)
        if problem is not None:
            raise ConfigError(f"{source}: {problem}")
    loaded = LoadedConfig(
        path=path, exists=True, servers={}, errors={}, raw_servers=dict(entries), shape=shape
    )
    for name, entry in entries.items():
        try:
            server = parse_server(name, entry, source=source)
            duplicate = document.first_duplicate_within(entry)
            if duplicate is not None:
                raise ConfigError(f'{source}: server "{name}": duplicate key "{duplicate}"')
            if declared is not None:
                for input_id in inputs_used(entry):
                    if input_id not in declared:
                        raise ConfigError(
                            f'{source}: server "{name}": "${{input:{input_id}}}" is not declared in "inputs"'
                        )
            loaded.servers[name] = server
        except ConfigError as exc:
            loaded.errors[name] = str(exc)
    return loaded

"""Reading a JSON-with-comments document, bounded before it is parsed.

A file over :data:`MAX_CONFIG_BYTES`, or JSON nested deeper than :data:`MAX_JSON_DEPTH` levels, is
a ``ConfigError`` naming the file: nothing of it is parsed and the caller keeps what it had.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from mcpclient.config.model import ConfigError
from mcpclient.config.shapes import (
    Shape,
    ShapeError,
    find_servers,
)

MAX_CONFIG_BYTES = 1024 * 1024
MAX_JSON_DEPTH = 64  # an entry needs four levels; the rest is room for other hosts' keys
_JSON_STRING_RE = re.compile(r'"(?:[^"\\]|\\.)*"', re.S)
_JSON_BRACKET_RE = re.compile(r"[\[\]{}]")


class JsonDocument:
    """Parsed JSON plus the duplicate keys of each object (json.loads would keep the last)."""

    def __init__(self, value: Any, duplicates: dict[int, list[str]]) -> None:
        self.value = value
        self._duplicates = duplicates

    def duplicates_of(self, obj: object) -> list[str]:
        """Duplicate keys of ``obj`` itself."""
        return self._duplicates.get(id(obj), [])

    def first_duplicate_within(self, obj: object) -> str | None:
        """A duplicate key anywhere inside ``obj`` (including ``obj``), or None."""
        stack = [obj]
        while stack:
            current = stack.pop()
            dups = self.duplicates_of(current)
            if dups:
                return dups[0]
            if isinstance(current, dict):
                stack.extend(current.values())
            elif isinstance(current, list):
                stack.extend(current)
        return None


def json_depth(text: str) -> int:
    """How deeply the arrays and objects of JSON ``text`` nest, counted without parsing.

    Linear in the text: strings are skipped (a bracket inside one does not count), then the
    brackets are counted. Broken JSON gets some number; the parser then reports the error.
    """
    depth = deepest = 0
    for bracket in _JSON_BRACKET_RE.findall(_JSON_STRING_RE.sub("", text)):
        if bracket in "[{":
            depth += 1
            deepest = max(deepest, depth)
        else:
            depth -= 1
    return deepest


_JSONC_TOKEN_RE = re.compile(r'"(?:[^"\\\n]|\\.)*"|//[^\n]*|/\*.*?\*/|,(?=\s*[\]}])', re.S)


def without_comments(text: str) -> str:
    """JSON with comments (VS Code, Zed and opencode's ``.jsonc`` files) as plain JSON.

    ``//`` and ``/* */`` comments outside strings, and a comma before a closing bracket, become
    spaces (newlines kept), so error positions still point at the right line and column.
    """
    if "/" not in text and "," not in text:
        return text

    def blank(match: re.Match[str]) -> str:
        token = match.group(0)
        if token.startswith('"'):
            return token
        return re.sub(r"[^\n]", " ", token)

    return _JSONC_TOKEN_RE.sub(blank, text)


def parse_json_document(text: str, *, source: str) -> JsonDocument:
    """Parse ``text`` strictly: NaN/Infinity refused, duplicate keys recorded.

    Raises ``ConfigError`` naming ``source`` and, for syntax errors, the line and column; also
    for text over :data:`MAX_CONFIG_BYTES` or nested deeper than :data:`MAX_JSON_DEPTH` (the
    parser recurses per level: deep enough JSON would exhaust the stack).
    """
    size = len(text.encode("utf-8", errors="surrogatepass"))
    if size > MAX_CONFIG_BYTES:
        raise ConfigError(f"{source}: the file is {size} bytes; the limit is {MAX_CONFIG_BYTES} bytes")
    depth = json_depth(text)
    if depth > MAX_JSON_DEPTH:
        raise ConfigError(f"{source}: JSON nested {depth} levels deep; the limit is {MAX_JSON_DEPTH} levels")
    duplicates: dict[int, list[str]] = {}

    def pairs_hook(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        obj: dict[str, Any] = {}
        seen_twice: list[str] = []
        for key, value in pairs:
            if key in obj and key not in seen_twice:
                seen_twice.append(key)
            obj[key] = value
        if seen_twice:
            duplicates[id(obj)] = seen_twice
        return obj

    def refuse_constant(name: str) -> Any:
        raise ConfigError(f"{source}: invalid JSON: {name} is not allowed")

    if not text.strip():
        raise ConfigError(f'{source}: the file is empty; expected a JSON object like {{"mcpServers": {{}}}}')
    try:
        value = json.loads(
            without_comments(text), object_pairs_hook=pairs_hook, parse_constant=refuse_constant
        )
    except json.JSONDecodeError as exc:
        raise ConfigError(
            f"{source}: invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}"
        ) from None
    return JsonDocument(value, duplicates)


def json_type(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def shown_value(value: object, limit: int = 60) -> str:
    """A short JSON rendering of a bad value for an error message."""
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def servers_object(document: JsonDocument, *, source: str) -> tuple[Shape, dict[str, Any]]:
    """The file's shape and its server map, or ``ConfigError`` for an unknown or mixed shape."""
    top = document.value
    if not isinstance(top, dict):
        raise ConfigError(
            f'{source}: the top level must be a JSON object with a "mcpServers" key, got {json_type(top)}'
        )
    for key in document.duplicates_of(top):
        raise ConfigError(f'{source}: duplicate top-level key "{key}"')
    try:
        shape, servers = find_servers(top)
    except ShapeError as exc:
        raise ConfigError(f"{source}: {exc}") from None
    if not isinstance(servers, dict):
        raise ConfigError(f'{source}: "{shape.key}" must be an object, got {json_type(servers)}')
    for name in document.duplicates_of(servers):
        raise ConfigError(f'{source}: server "{name}" is defined more than once in "{shape.key}"')
    return shape, servers


def read_bounded(path: Path, source: str) -> bytes:
    """The file's bytes; ``ConfigError`` past :data:`MAX_CONFIG_BYTES` (never read whole)."""
    with path.open("rb") as handle:
        data = handle.read(MAX_CONFIG_BYTES + 1)
    if len(data) > MAX_CONFIG_BYTES:
        raise ConfigError(f"{source}: the file is larger than the limit of {MAX_CONFIG_BYTES} bytes")
    return data


def read_config_text(path: Path) -> str:
    """The text of a config file; ``ConfigError`` when it is too large, unreadable or not UTF-8.

    ``FileNotFoundError`` passes through: a missing file means different things to callers.
    """
    source = path.name
    try:
        data = read_bounded(path, source)
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise ConfigError(f"{source}: cannot read {path}: {exc.strerror or exc}") from None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{source}: not valid UTF-8 (byte {exc.start})") from None

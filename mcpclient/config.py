"""Parse, validate and resolve ``data/mcp.json``.

The file uses the ``{"mcpServers": {"<name>": {...}}}`` shape shared by Claude Desktop,
Cursor and opencode, so entries can be copied between them. Two stages keep secrets out
of the database and the logs:

* ``load_config`` / ``parse_server`` validate the file and return ``ServerConfig`` values
  that hold the entry *as written*: ``${VAR}`` placeholders stay unexpanded, and nothing
  reads the environment. One invalid entry is reported in ``LoadedConfig.errors`` while the
  others load; only whole-file problems (unreadable file, invalid JSON, wrong top-level
  shape) raise ``ConfigError``.
* ``resolve_server`` runs only when a server is about to be connected: it loads the
  entry's ``envFile``, expands placeholders, checks the stdio command against the allowlist
  and returns a ``ResolvedServer``. Its errors name the server, the key and the variable,
  never a value.

Every ``ConfigError`` message starts with the file's name and the server, e.g.
``mcp.json: server "git": "command" is required for stdio``.

Hostile but valid input is bounded before it is parsed: a file (mcp.json or an envFile) over
:data:`MAX_CONFIG_BYTES`, or JSON nested deeper than :data:`MAX_JSON_DEPTH` levels, is a
``ConfigError`` naming the file; the caller keeps the configuration it had.
"""

from __future__ import annotations

import copy
import json
import logging
import os
import re
import shutil
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from mcpclient.redaction import redact_url
from mcpclient.shapes import (
    ENTRY_KEYS,
    MCP_SERVERS,
    VSCODE,
    VSCODE_SETTINGS,
    Shape,
    ShapeError,
    find_servers,
    input_ids,
)

logger = logging.getLogger(__name__)

STDIO = "stdio"
STREAMABLE_HTTP = "streamableHttp"
SSE = "sse"
HTTP_TRANSPORTS = frozenset({STREAMABLE_HTTP, SSE})

# Accepted spellings of "type" -> canonical transport. "local"/"remote" are opencode's.
_TRANSPORT_ALIASES: dict[str, str] = {
    "stdio": STDIO,
    "local": STDIO,
    "streamableHttp": STREAMABLE_HTTP,
    "streamable-http": STREAMABLE_HTTP,
    "http": STREAMABLE_HTTP,
    "remote": STREAMABLE_HTTP,
    "sse": SSE,
}

SERVER_NAME_RE = re.compile(r"^[A-Za-z0-9_-]+$")
_ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# RFC 9110 token characters.
_HEADER_NAME_RE = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")
# ${VAR}, ${env:VAR}, {env:VAR}, ${VAR:-default} and ${input:ID}; anything else (e.g.
# "${not a name}") stays literal.
_PLACEHOLDER_RE = re.compile(
    r"\$\{input:(?P<input>[A-Za-z0-9_.-]+)\}"
    r"|\$\{(?P<prefix>env:)?(?P<var>[A-Za-z_][A-Za-z0-9_]*)(?::-(?P<default>[^}]*))?\}"
    r"|\{env:(?P<bare>[A-Za-z_][A-Za-z0-9_]*)\}"
)
_INPUT_RE = re.compile(r"\$\{input:([A-Za-z0-9_.-]+)\}")
# VS Code's and Cursor's predefined variables, written without "env:".
_PREDEFINED = ("userHome", "workspaceFolder")

MAX_CONFIG_BYTES = 1024 * 1024
MAX_JSON_DEPTH = 64  # an entry needs four levels; the rest is room for other hosts' keys
_JSON_STRING_RE = re.compile(r'"(?:[^"\\]|\\.)*"', re.S)
_JSON_BRACKET_RE = re.compile(r"[\[\]{}]")

DEFAULT_TIMEOUT_MS = 60_000
DEFAULT_INIT_TIMEOUT_MS = 30_000
# "writeTools": what the hub does with tools whose readOnlyHint is false.
WRITE_TOOLS_REJECT = "reject"
WRITE_TOOLS_APPROVE = "approve"
WRITE_TOOLS = (WRITE_TOOLS_REJECT, WRITE_TOOLS_APPROVE)

# Passed to stdio servers when set in the process environment and not given explicitly:
# behind a corporate CA, npx/uvx cannot download anything without them.
PASSTHROUGH_ENV = ("SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE", "NODE_EXTRA_CA_CERTS", "PATH")

# The keys one entry may give its URL under: Cursor/Claude/VS Code/Zed/opencode, Windsurf, Gemini CLI.
URL_KEYS = ("url", "serverUrl", "httpUrl")
OPENCODE_TYPES = frozenset({"local", "remote"})


class ConfigError(ValueError):
    """An invalid mcp.json; ``str()`` is the full message, naming the file, server and key."""


@dataclass(frozen=True)
class ServerConfig:
    """One validated ``mcpServers`` entry, as written (placeholders unexpanded)."""

    name: str
    transport: str
    command: str | None = None
    args: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    env_file: str | None = None
    cwd: str | None = None
    url: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    enabled: bool = True
    timeout: float = DEFAULT_TIMEOUT_MS / 1000
    init_timeout: float = DEFAULT_INIT_TIMEOUT_MS / 1000
    # Gemini CLI's per-server tool filters (globs in the agent pattern syntax, original names).
    include_tools: tuple[str, ...] | None = None
    exclude_tools: tuple[str, ...] = ()
    # A "url" without an explicit transport: try Streamable HTTP, then legacy SSE.
    sse_fallback: bool = False
    # How the hub signs in to an http/sse server (None for stdio, or when "oauth": false).
    oauth: OAuthConfig | None = None
    # Tools with readOnlyHint false: "reject" (the read-only guard) or "approve" (offered, each
    # call approved by the person). trusted false: every tool of the server needs approval.
    write_tools: str = WRITE_TOOLS_REJECT
    trusted: bool = True
    raw: dict[str, Any] = field(default_factory=dict)
    # The config file's name, for error messages raised when resolving.
    source: str = "mcp.json"


SHARED = "shared"
PER_USER = "perUser"
# Grants: a person consents in a browser; the client's own credentials (machine to machine);
# an identity provider's ID token exchanged for an ID-JAG (SEP-990, enterprise-managed).
AUTHORIZATION_CODE = "authorization_code"
CLIENT_CREDENTIALS = "client_credentials"
IDENTITY_ASSERTION = "identity_assertion"
GRANTS = (AUTHORIZATION_CODE, CLIENT_CREDENTIALS, IDENTITY_ASSERTION)
TOKEN_ENDPOINT_AUTH_METHODS = ("client_secret_basic", "client_secret_post", "none")
PRIVATE_KEY_JWT = "private_key_jwt"
# What PyJWT signs with (asymmetric only: the key is the client's private key).
SIGNING_ALGORITHMS = (
    "RS256",
    "RS384",
    "RS512",
    "PS256",
    "PS384",
    "PS512",
    "ES256",
    "ES384",
    "ES512",
    "EdDSA",
)
_OAUTH_KEYS = frozenset(
    {
        "enabled",
        "mode",
        "grant",
        "issuer",
        "clientId",
        "clientSecret",
        "privateKey",
        "signingAlgorithm",
        "scopes",
        "tokenEndpointAuthMethod",
        "identityProvider",
    }
)
_IDP_KEYS = frozenset({"tokenEndpoint", "clientId", "clientSecret", "idToken"})


@dataclass(frozen=True)
class IdentityProviderConfig:
    """``oauth.identityProvider`` of an ``identity_assertion`` entry: where the ID token is
    exchanged for an ID-JAG (RFC 8693), as whom, and the ID token itself (a placeholder)."""

    token_endpoint: str
    client_id: str
    id_token: str = field(repr=False)
    client_secret: str | None = field(default=None, repr=False)


@dataclass(frozen=True)
class OAuthConfig:
    """An http/sse entry's ``oauth`` object, as written (``clientSecret`` may be a placeholder).

    Every http/sse entry gets one unless it says ``"oauth": false`` or ``"oauth": {"enabled":
    false}`` or sends its own ``Authorization`` header: the hub then signs in when the server
    answers 401 (the MCP authorization spec). ``mode`` is ``"shared"`` (one sign-in, by an
    administrator, for everybody) or ``"perUser"`` (each person signs in to their own account).
    ``client_id`` / ``client_secret``: a client registered with the provider beforehand (else the
    hub uses its Client ID Metadata Document or dynamic registration). ``scopes``: what to ask
    for on top of what the server asks for. ``grant``: ``authorization_code`` (a person
    consents), or one of the two machine grants, always shared: ``client_credentials`` (the
    client's secret, or its ``private_key`` signing a ``private_key_jwt`` assertion) and
    ``identity_assertion`` (SEP-990: ``identity_provider``'s ID token for an ID-JAG, then the
    JWT-bearer grant). ``issuer``: the authorization server the credentials belong to (they are
    sent nowhere else). ``client_secret``, ``private_key`` and the identity provider's secrets
    are placeholders here; :class:`OAuthSecrets` holds them expanded.
    """

    mode: str = SHARED
    grant: str = AUTHORIZATION_CODE
    issuer: str | None = None
    client_id: str | None = None
    client_secret: str | None = field(default=None, repr=False)
    private_key: str | None = field(default=None, repr=False)
    signing_algorithm: str = "RS256"
    scopes: tuple[str, ...] | None = None
    token_endpoint_auth_method: str | None = None
    identity_provider: IdentityProviderConfig | None = None

    @property
    def per_user(self) -> bool:
        """True when each person signs in with their own account."""
        return self.mode == PER_USER


@dataclass(frozen=True)
class OAuthSecrets:
    """An ``oauth`` entry's secrets, expanded: never logged, never stored (repr shows none)."""

    client_secret: str | None = field(default=None, repr=False)
    private_key: str | None = field(default=None, repr=False)
    id_token: str | None = field(default=None, repr=False)
    idp_client_secret: str | None = field(default=None, repr=False)


@dataclass(frozen=True)
class ResolvedServer:
    """A server ready to connect: placeholders expanded, envFile merged, allowlist checked.

    Holds secrets: build it right before connecting and never log or store it. Its repr
    leaves out every field that may contain an expanded value.
    """

    config: ServerConfig
    command: str | None
    args: list[str] = field(repr=False)
    env: dict[str, str] = field(repr=False)
    cwd: str | None
    url: str | None = field(repr=False)
    headers: dict[str, str] = field(repr=False)
    # The entry's OAuth secrets, placeholders expanded.
    oauth_secrets: OAuthSecrets = field(default_factory=OAuthSecrets, repr=False)


@dataclass
class LoadedConfig:
    """The result of reading mcp.json."""

    path: Path
    exists: bool
    servers: dict[str, ServerConfig]
    errors: dict[str, str]
    # Every entry exactly as written, in file order, valid or not (an invalid entry may not
    # even be an object).
    raw_servers: dict[str, Any]
    shape: Shape = MCP_SERVERS  # the host shape the file is written in


# --- JSON ----------------------------------------------------------------------------------


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


def _json_type(value: object) -> str:
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


def _shown(value: object, limit: int = 60) -> str:
    """A short JSON rendering of a bad value for an error message."""
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def servers_object(document: JsonDocument, *, source: str) -> tuple[Shape, dict[str, Any]]:
    """The file's shape and its server map, or ``ConfigError`` for an unknown or mixed shape."""
    top = document.value
    if not isinstance(top, dict):
        raise ConfigError(
            f'{source}: the top level must be a JSON object with a "mcpServers" key, got {_json_type(top)}'
        )
    for key in document.duplicates_of(top):
        raise ConfigError(f'{source}: duplicate top-level key "{key}"')
    try:
        shape, servers = find_servers(top)
    except ShapeError as exc:
        raise ConfigError(f"{source}: {exc}") from None
    if not isinstance(servers, dict):
        raise ConfigError(f'{source}: "{shape.key}" must be an object, got {_json_type(servers)}')
    for name in document.duplicates_of(servers):
        raise ConfigError(f'{source}: server "{name}" is defined more than once in "{shape.key}"')
    return shape, servers


# --- Validation ----------------------------------------------------------------------------


class _EntryChecker:
    """Typed accessors for one entry that raise ConfigError naming file, server and key."""

    def __init__(self, source: str, name: str, entry: dict[str, Any]) -> None:
        self.prefix = f'{source}: server "{name}"'
        self.entry = entry

    def fail(self, message: str) -> ConfigError:
        return ConfigError(f"{self.prefix}: {message}")

    def string(self, key: str) -> str | None:
        value = self.entry.get(key)
        if value is None and key not in self.entry:
            return None
        if not isinstance(value, str):
            raise self.fail(f'"{key}" must be a string, got {_json_type(value)}')
        if not value.strip():
            raise self.fail(f'"{key}" must not be empty')
        return value

    def boolean(self, key: str, default: bool) -> bool:
        if key not in self.entry:
            return default
        value = self.entry[key]
        if not isinstance(value, bool):
            raise self.fail(f'"{key}" must be true or false, got {_shown(value)}')
        return value

    def milliseconds(self, key: str, default: int) -> float:
        if key not in self.entry:
            return default / 1000
        value = self.entry[key]
        # JSON has one number type: accept 1500.0 but not 1.5 (or true, which is an int in Python).
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise self.fail(f'"{key}" must be a positive integer (milliseconds), got {_shown(value)}')
        return value / 1000

    def string_list(self, key: str) -> tuple[str, ...]:
        if key not in self.entry:
            return ()
        value = self.entry[key]
        if not isinstance(value, list):
            raise self.fail(f'"{key}" must be an array of strings, got {_json_type(value)}')
        for index, item in enumerate(value):
            if not isinstance(item, str):
                raise self.fail(f'"{key}[{index}]" must be a string, got {_json_type(item)}')
        return tuple(value)

    def string_map(self, key: str, *, key_re: re.Pattern[str], key_kind: str) -> dict[str, str]:
        if key not in self.entry:
            return {}
        value = self.entry[key]
        if not isinstance(value, dict):
            raise self.fail(f'"{key}" must be an object of strings, got {_json_type(value)}')
        for item_key, item in value.items():
            if not key_re.match(item_key):
                raise self.fail(f'"{key}" has an invalid {key_kind} {_shown(item_key)}')
            if not isinstance(item, str):
                raise self.fail(f'"{key}.{item_key}" must be a string, got {_json_type(item)}')
        return dict(value)


def _url_key(check: _EntryChecker) -> str | None:
    """The key the entry gives its URL under (``url``, Windsurf's ``serverUrl``, Gemini's ``httpUrl``)."""
    present = [key for key in URL_KEYS if key in check.entry]
    if len(present) > 1:
        raise check.fail(f'conflicting "{present[0]}" and "{present[1]}": keep only one of them')
    return present[0] if present else None


def _transport_of(check: _EntryChecker, url_key: str | None) -> tuple[str, bool]:
    """``(transport, sse_fallback)`` of an entry, from ``type`` or from its keys.

    Without a ``type``, a ``command`` means stdio, Gemini's ``httpUrl`` Streamable HTTP, and a
    ``url`` or ``serverUrl`` Streamable HTTP with a fallback to legacy SSE (Gemini CLI's ``url``
    is SSE, everybody else's Streamable HTTP). opencode's ``"type": "remote"`` falls back too.
    """
    entry = check.entry
    if "type" in entry:
        kind = entry["type"]
        if not isinstance(kind, str):
            raise check.fail(f'"type" must be a string, got {_json_type(kind)}')
        if kind not in _TRANSPORT_ALIASES:
            raise check.fail(
                '"type" must be "stdio", "streamableHttp", "http", "sse", "local" or "remote", '
                f"got {_shown(kind)}"
            )
        return _TRANSPORT_ALIASES[kind], kind == "remote"
    has_command = "command" in entry
    if has_command and url_key is not None:
        raise check.fail(f'conflicting "command" and "{url_key}": set "type" or keep only one of them')
    if has_command:
        return STDIO, False
    if url_key is not None:
        return STREAMABLE_HTTP, url_key != "httpUrl"
    raise check.fail('"command" (for stdio) or "url" (for streamableHttp/sse) is required')


def _check_url(check: _EntryChecker, url: str, *, expanded: bool, key: str = "url") -> None:
    """http(s) with a host. Before expansion, a placeholder may stand for the scheme or host."""
    if not expanded:
        scheme_and_host = url
        if "://" in url:
            host_start = url.index("://") + 3
            host_end = min((i for i in (url.find(c, host_start) for c in "/?#") if i != -1), default=len(url))
            scheme_and_host = url[:host_end]
        if _PLACEHOLDER_RE.search(scheme_and_host):
            return
    try:
        parts = urlsplit(url)
        has_host = bool(parts.hostname)
    except ValueError:
        parts, has_host = None, False
    if parts is None or parts.scheme.lower() not in ("http", "https") or not has_host:
        url_value = check.entry.get(key)
        shown = _shown(redact_url(url_value) if isinstance(url_value, str) else url_value)
        after = " after expansion" if expanded else ""
        raise check.fail(f'"{key}" must be an http:// or https:// URL with a host{after}, got {shown}')


def parse_server(name: str, entry: object, *, source: str = "mcp.json") -> ServerConfig:
    """Validate one server entry, in any host's dialect. Raises ``ConfigError``.

    Accepted as written: Claude Desktop / Claude Code / Cursor (``command``, ``args``, ``env``,
    ``url``, ``headers``, ``type``), VS Code (``type`` stdio/http/sse, ``envFile``), opencode
    (``type`` local/remote, ``command`` as an array, ``environment``, ``enabled``, ``timeout``
    for start-up), Windsurf (``serverUrl``), Gemini CLI (``httpUrl``, ``url`` for SSE,
    ``timeout``, ``includeTools``/``excludeTools``, ``trust``), Zed (``command`` as a string
    or as ``{"path", "args", "env"}``, ``source``). Cline-style ``disabled`` is read too.
    Unknown keys are ignored but kept in ``ServerConfig.raw``. The environment is not read.
    """
    if not isinstance(name, str) or not SERVER_NAME_RE.match(name):
        raise ConfigError(
            f"{source}: server {_shown(name)}: the name may only contain letters, digits, '_' and '-'"
        )
    if not isinstance(entry, dict):
        raise ConfigError(f'{source}: server "{name}": the entry must be an object, got {_json_type(entry)}')
    check = _EntryChecker(source, name, entry)
    if entry.get("source") == "extension":
        raise check.fail(
            '"source": "extension": this server comes with a Zed extension and cannot run outside Zed; '
            'give its "command" or "url" instead'
        )
    url_key = _url_key(check)
    transport, sse_fallback = _transport_of(check, url_key)

    if "env" in entry and "environment" in entry:
        raise check.fail('conflicting "env" and "environment": use only "env"')
    env_key = "environment" if "environment" in entry else "env"
    env = check.string_map(env_key, key_re=_ENV_NAME_RE, key_kind="variable name")

    command: str | None
    args: tuple[str, ...]
    raw_command = entry.get("command")
    if transport == STDIO and isinstance(raw_command, list):
        # opencode: {"type": "local", "command": ["npx", "-y", "pkg"]}.
        if entry.get("type") != "local":
            raise check.fail('"command" must be a string (an array is only accepted with "type": "local")')
        argv = check.string_list("command")
        if not argv or not argv[0].strip():
            raise check.fail('"command" must not be empty')
        command, args = argv[0], argv[1:] + check.string_list("args")
    elif transport == STDIO and isinstance(raw_command, dict):
        # Zed before 0.19x: "command": {"path": "npx", "args": [...], "env": {...}}.
        inner = _EntryChecker(source, name, raw_command)
        inner.prefix = f'{check.prefix}: "command"'
        command, args = inner.string("path"), inner.string_list("args")
        if command is None:
            raise inner.fail('"path" is required')
        if "args" in entry or (inner.entry.get("env") and env):
            raise check.fail('give "args" and "env" either inside "command" or beside it, not both')
        env = env or inner.string_map("env", key_re=_ENV_NAME_RE, key_kind="variable name")
    else:
        command, args = check.string("command"), check.string_list("args")

    headers = check.string_map("headers", key_re=_HEADER_NAME_RE, key_kind="header name")
    for header, value in headers.items():
        if "\r" in value or "\n" in value:
            raise check.fail(f'"headers.{header}" must not contain a line break')
    url = check.string(url_key) if url_key is not None else None
    cwd = check.string("cwd")
    env_file = check.string("envFile")

    if transport == STDIO:
        if command is None:
            raise check.fail('"command" is required for stdio')
        for key in (*URL_KEYS, "headers"):
            if entry.get(key):
                raise check.fail(f'conflicting "{key}": it only applies to http/sse servers, not stdio')
    else:
        if url is None:
            raise check.fail(f'"url" is required for {transport}')
        for key in ("command", "args", "cwd", env_key):
            if entry.get(key):
                raise check.fail(f'conflicting "{key}": it only applies to stdio servers, not {transport}')
        _check_url(check, url, expanded=False, key=url_key or "url")

    enabled = check.boolean("enabled", True)
    if "disabled" in entry:  # Cline, Roo Code, Windsurf
        disabled = check.boolean("disabled", False)
        if "enabled" in entry and enabled == disabled:
            raise check.fail('conflicting "enabled" and "disabled": keep only one of them')
        enabled = not disabled

    if entry.get("type") in OPENCODE_TYPES:
        # opencode's "timeout" bounds start-up (fetching the tools), not each call.
        if "initTimeout" in entry and "timeout" in entry:
            raise check.fail(
                'conflicting "timeout" and "initTimeout": opencode\'s "timeout" is the start-up limit'
            )
        start_key = "timeout" if "timeout" in entry else "initTimeout"
        init_timeout = check.milliseconds(start_key, DEFAULT_INIT_TIMEOUT_MS)
        timeout = check.milliseconds("requestTimeout", DEFAULT_TIMEOUT_MS)
    else:
        timeout = check.milliseconds("timeout", DEFAULT_TIMEOUT_MS)
        init_timeout = check.milliseconds("initTimeout", DEFAULT_INIT_TIMEOUT_MS)

    include_tools = check.string_list("includeTools") if "includeTools" in entry else None
    exclude_tools = check.string_list("excludeTools")
    for key, patterns in (("includeTools", include_tools or ()), ("excludeTools", exclude_tools)):
        for index, pattern in enumerate(patterns):
            if not pattern.strip():
                raise check.fail(f'"{key}[{index}]" must not be empty')

    oauth = _oauth_of(check, transport, headers)
    write_tools = entry.get("writeTools", WRITE_TOOLS_REJECT)
    if write_tools not in WRITE_TOOLS:
        raise check.fail(f'"writeTools" must be "reject" or "approve", got {_shown(write_tools)}')
    trusted = check.boolean("trusted", True)

    return ServerConfig(
        name=name,
        transport=transport,
        command=command,
        args=args,
        env=env,
        env_file=env_file,
        cwd=cwd,
        url=url,
        headers=headers,
        enabled=enabled,
        timeout=timeout,
        init_timeout=init_timeout,
        include_tools=include_tools,
        exclude_tools=exclude_tools,
        sse_fallback=sse_fallback,
        oauth=oauth,
        write_tools=write_tools,
        trusted=trusted,
        raw=copy.deepcopy(entry),
        source=source,
    )


def unknown_keys(config: ServerConfig) -> list[str]:
    """Keys of the raw entry that BooCode ignores (kept in the file and in ``raw``)."""
    return [key for key in config.raw if key not in ENTRY_KEYS]


# --- Loading -------------------------------------------------------------------------------


def _read_bounded(path: Path, source: str) -> bytes:
    """The file's bytes; ``ConfigError`` past :data:`MAX_CONFIG_BYTES` (never read whole)."""
    with path.open("rb") as handle:
        data = handle.read(MAX_CONFIG_BYTES + 1)
    if len(data) > MAX_CONFIG_BYTES:
        raise ConfigError(f"{source}: the file is larger than the limit of {MAX_CONFIG_BYTES} bytes")
    return data


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


def read_config_text(path: Path) -> str:
    """The text of a config file; ``ConfigError`` when it is too large, unreadable or not UTF-8.

    ``FileNotFoundError`` passes through: a missing file means different things to callers.
    """
    source = path.name
    try:
        data = _read_bounded(path, source)
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise ConfigError(f"{source}: cannot read {path}: {exc.strerror or exc}") from None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{source}: not valid UTF-8 (byte {exc.start})") from None


def load_config_text(text: str, *, path: Path) -> LoadedConfig:
    """Validate the text of a config file in any host's shape (see :mod:`mcpclient.shapes`)."""
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


def inputs_used(value: object) -> list[str]:
    """The ids of every ``${input:ID}`` inside ``value`` (an entry), in order, without repeats."""
    found: list[str] = []
    stack = [value]
    while stack:
        current = stack.pop()
        if isinstance(current, str):
            found.extend(match for match in _INPUT_RE.findall(current) if match not in found)
        elif isinstance(current, dict):
            stack.extend(reversed(list(current.values())))
        elif isinstance(current, list):
            stack.extend(reversed(current))
    return found


# --- Resolution ----------------------------------------------------------------------------


def parse_env_file(text: str) -> dict[str, str]:
    """Parse dotenv ``KEY=VALUE`` lines strictly.

    Supported: blank lines, ``#`` comments, an ``export `` prefix, unquoted values (trimmed,
    `` #`` starts a comment), single quotes (literal) and double quotes (``\\n``, ``\\t``,
    ``\\"``, ``\\\\`` escapes; may span lines). Values are never interpolated. Raises
    ``ValueError("line N: ...")`` without repeating the line, which may hold a secret.
    """
    values: dict[str, str] = {}
    lines = text.splitlines()
    index = 0
    while index < len(lines):
        number = index + 1
        line = lines[index].strip()
        index += 1
        if not line or line.startswith("#"):
            continue
        if line.startswith("export ") or line.startswith("export\t"):
            line = line[len("export") :].lstrip()
        key, sep, rest = line.partition("=")
        key = key.rstrip()
        if not sep:
            raise ValueError(f"line {number}: expected KEY=VALUE")
        if not _ENV_NAME_RE.match(key):
            raise ValueError(f"line {number}: invalid variable name")
        rest = rest.lstrip()
        if rest[:1] in ("'", '"'):
            quote = rest[0]
            body = rest[1:]
            # A double-quoted value may continue on the next lines until its closing quote.
            while True:
                end = _closing_quote(body, quote)
                if end is not None or quote == "'" or index >= len(lines):
                    break
                body += "\n" + lines[index]
                index += 1
            if end is None:
                raise ValueError(f"line {number}: unterminated {quote} quote")
            trailing = body[end + 1 :].strip()
            if trailing and not trailing.startswith("#"):
                raise ValueError(f"line {number}: unexpected text after the closing quote")
            value = body[:end]
            if quote == '"':
                value = _unescape_double_quoted(value)
        else:
            value = re.split(r"\s#", rest, maxsplit=1)[0].strip()
        values[key] = value
    return values


def _closing_quote(body: str, quote: str) -> int | None:
    position = 0
    while position < len(body):
        char = body[position]
        if char == "\\" and quote == '"':
            position += 2
            continue
        if char == quote:
            return position
        position += 1
    return None


_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", '"': '"', "\\": "\\", "$": "$"}


def _unescape_double_quoted(value: str) -> str:
    return re.sub(r"\\(.)", lambda m: _ESCAPES.get(m.group(1), "\\" + m.group(1)), value, flags=re.S)


class _Expander:
    """Expands placeholders of one server, naming the key of any unset variable or input.

    ``${VAR}``, ``${env:VAR}`` and ``{env:VAR}`` read ``scope``; ``${VAR:-default}`` (Claude
    Code) gives ``default`` when VAR is unset or empty; ``${userHome}`` and
    ``${workspaceFolder}`` (VS Code, Cursor) are the home folder and the folder of mcp.json;
    ``${input:ID}`` (VS Code) is the value entered in the admin or ``BOOCODE_INPUT_<ID>``.
    """

    def __init__(self, check: _EntryChecker, scope: Mapping[str, str], base_dir: Path | None = None) -> None:
        self.check = check
        self.scope = scope
        self.base_dir = base_dir

    def _predefined(self, name: str) -> str | None:
        if name == "userHome":
            return self.scope.get("HOME") or str(Path.home())
        if name == "workspaceFolder" and self.base_dir is not None:
            return str(self.base_dir)
        return None

    def __call__(self, value: str, where: str) -> str:
        def replace(match: re.Match[str]) -> str:
            if match.group("input"):
                return self._input(match.group("input"), where)
            variable = match.group("var") or match.group("bare")
            if match.group("var") and not match.group("prefix") and variable in _PREDEFINED:
                predefined = self._predefined(variable)
                if predefined is not None:
                    return predefined
            default = match.group("default")
            found = self.scope.get(variable)
            if found is not None and (default is None or found != ""):
                return found
            if default is not None:
                return default
            raise self.check.fail(f'environment variable "{variable}" is not set (used in "{where}")')

        return _PLACEHOLDER_RE.sub(replace, value)

    def _input(self, input_id: str, where: str) -> str:
        from mcpclient.inputs import env_name, input_value

        value = input_value(input_id)
        if value is None:
            raise self.check.fail(
                f'input "{input_id}" has no value (used in "{where}"): enter it on this server\'s admin page '
                f"or set {env_name(input_id)}"
            )
        return value


def _load_env_file(check: _EntryChecker, env_file: str, base_dir: Path, expand: _Expander) -> dict[str, str]:
    path = Path(expand(env_file, "envFile")).expanduser()
    if not path.is_absolute():
        path = base_dir / path
    try:
        text = _read_bounded(path, f'envFile "{env_file}"').decode("utf-8-sig")
    except ConfigError as exc:
        raise check.fail(str(exc)) from None
    except FileNotFoundError:
        raise check.fail(f'envFile "{env_file}" not found (looked for {path})') from None
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise check.fail(f'envFile "{env_file}" cannot be read ({path}): {reason}') from None
    try:
        return parse_env_file(text)
    except ValueError as exc:
        raise check.fail(f'envFile "{env_file}" {exc}') from None


def _same_file(path: str, candidates: Sequence[str]) -> bool:
    real = os.path.realpath(path)
    return any(os.path.realpath(candidate) == real for candidate in candidates)


def command_allowed(
    command: str, allowed: Sequence[str], *, base_dir: Path, search_path: str | None
) -> tuple[bool, str | None]:
    """``(allowed, executable to run)`` for a stdio ``command`` under the allowlist ``allowed``.

    The allowlist holds bare names (looked up on ``search_path``, BooCode's own PATH) and
    absolute paths. A bare command must be listed by name; it runs as the file that name
    resolves to (``None`` when it resolves to nothing), so a PATH given to the child cannot
    swap it. A command with a ``/`` is allowed only when it is, after following symlinks, the
    same file as a listed path or as what a listed name resolves to: ``/any/dir/npx`` is not
    ``npx`` unless it is that very program.
    """
    if "/" not in command:
        if command not in allowed:
            return False, None
        return True, shutil.which(command, path=search_path)
    path = Path(command).expanduser()
    if not path.is_absolute():
        path = base_dir / path
    targets = [entry for entry in allowed if "/" in entry]
    for entry in allowed:
        found = shutil.which(entry, path=search_path) if "/" not in entry else None
        if found:
            targets.append(found)
    if str(path) in allowed or _same_file(str(path), targets):
        return True, str(path)
    return False, None


def allowed_executable(
    check: _EntryChecker, command: str, allowed: Sequence[str], *, base_dir: Path, environ: Mapping[str, str]
) -> str:
    """The executable to spawn for ``command``, or ``ConfigError`` naming why it may not run."""
    ok, executable = command_allowed(command, allowed, base_dir=base_dir, search_path=environ.get("PATH"))
    if not ok:
        hint = (
            "add its name to BOOCODE_MCP_STDIO_COMMANDS to allow it"
            if "/" not in command
            else "a path must be listed in BOOCODE_MCP_STDIO_COMMANDS as it is, or be the very file a listed "
            "name resolves to"
        )
        raise check.fail(f"command {_shown(command)} is not allowed; {hint}")
    if executable is None:
        raise check.fail(f"command not found: {command} (looked up on BooCode's PATH)")
    return executable


def _oauth_of(check: _EntryChecker, transport: str, headers: Mapping[str, str]) -> OAuthConfig | None:
    """The entry's ``oauth`` settings (see :class:`OAuthConfig`); None when it signs in by itself."""
    value = check.entry.get("oauth")
    if transport == STDIO:
        if value not in (None, False):
            raise check.fail('"oauth" only applies to http/sse servers, not stdio')
        return None
    if value is False:
        return None
    has_authorization = any(header.lower() == "authorization" for header in headers)
    if value is None or value is True:
        return None if has_authorization else OAuthConfig()
    if not isinstance(value, dict):
        raise check.fail(f'"oauth" must be an object or false, got {_json_type(value)}')
    oauth = _EntryChecker("", "", value)
    oauth.prefix = f'{check.prefix}: "oauth"'
    unknown = sorted(set(value) - _OAUTH_KEYS)
    if unknown:
        known = ", ".join(f'"{key}"' for key in sorted(_OAUTH_KEYS))
        raise oauth.fail(f'unknown key "{unknown[0]}" (known: {known})')
    if not oauth.boolean("enabled", True):
        return None
    if has_authorization:
        raise check.fail('conflicting "oauth" and an "Authorization" header: keep only one of them')
    mode = oauth.string("mode") or SHARED
    if mode not in (SHARED, PER_USER):
        raise oauth.fail(f'"mode" must be "{SHARED}" or "{PER_USER}", got {_shown(mode)}')
    grant = oauth.string("grant") or AUTHORIZATION_CODE
    if grant not in GRANTS:
        raise oauth.fail(f'"grant" must be one of {", ".join(GRANTS)}, got {_shown(grant)}')
    if grant != AUTHORIZATION_CODE and mode == PER_USER:
        raise oauth.fail(f'"grant": "{grant}" signs BooCode itself in, so it cannot be "{PER_USER}"')
    issuer = oauth.string("issuer")
    if issuer is not None:
        _check_url(oauth, issuer, expanded=True, key="issuer")
    scopes_value = value.get("scopes")
    scopes: tuple[str, ...] | None
    if scopes_value is None:
        scopes = None
    elif isinstance(scopes_value, str):
        scopes = tuple(scopes_value.split())
    else:
        scopes = oauth.string_list("scopes")
        if any(not scope.strip() or " " in scope for scope in scopes):
            raise oauth.fail('"scopes" must be scope names without spaces')
    client_id, client_secret = oauth.string("clientId"), oauth.string("clientSecret")
    private_key = oauth.string("privateKey")
    method = oauth.string("tokenEndpointAuthMethod")
    methods = TOKEN_ENDPOINT_AUTH_METHODS
    if grant == CLIENT_CREDENTIALS:
        methods = ("client_secret_basic", "client_secret_post", PRIVATE_KEY_JWT)
    elif grant == IDENTITY_ASSERTION:
        methods = ("client_secret_basic", "client_secret_post")
    if method is not None and method not in methods:
        raise oauth.fail(
            f'"tokenEndpointAuthMethod" must be one of {", ".join(methods)} for "{grant}", '
            f"got {_shown(method)}"
        )
    if (client_secret is not None or private_key is not None) and client_id is None:
        raise oauth.fail(
            f'"{"clientSecret" if client_secret is not None else "privateKey"}" needs "clientId"'
        )
    if method == "none" and client_secret is not None:
        raise oauth.fail('"tokenEndpointAuthMethod": "none" is for clients without a "clientSecret"')
    algorithm = oauth.string("signingAlgorithm") or "RS256"
    if algorithm not in SIGNING_ALGORITHMS:
        raise oauth.fail(
            f'"signingAlgorithm" must be one of {", ".join(SIGNING_ALGORITHMS)}, got {_shown(algorithm)}'
        )
    identity_provider = None
    if grant == AUTHORIZATION_CODE:
        for key in ("privateKey", "signingAlgorithm", "identityProvider"):
            if key in value:
                raise oauth.fail(
                    f'"{key}" is for the machine grants '
                    f'("grant": "{CLIENT_CREDENTIALS}" or "{IDENTITY_ASSERTION}")'
                )
    else:
        if client_id is None:
            raise oauth.fail(f'"grant": "{grant}" needs "clientId"')
        if grant == CLIENT_CREDENTIALS:
            if "identityProvider" in value:
                raise oauth.fail(f'"identityProvider" is for "grant": "{IDENTITY_ASSERTION}"')
            if (client_secret is None) == (private_key is None):
                raise oauth.fail(
                    f'"grant": "{CLIENT_CREDENTIALS}" needs either "clientSecret" or "privateKey"'
                )
            if private_key is not None and method not in (None, PRIVATE_KEY_JWT):
                raise oauth.fail(f'"privateKey" signs "{PRIVATE_KEY_JWT}" assertions, not "{method}"')
            if client_secret is not None and method == PRIVATE_KEY_JWT:
                raise oauth.fail(f'"{PRIVATE_KEY_JWT}" needs "privateKey" instead of "clientSecret"')
            method = method or (PRIVATE_KEY_JWT if private_key is not None else "client_secret_basic")
        else:
            if client_secret is None or private_key is not None:
                raise oauth.fail(
                    f'"grant": "{IDENTITY_ASSERTION}" needs "clientSecret" (and no "privateKey")'
                )
            method = method or "client_secret_basic"
            identity_provider = _identity_provider_of(oauth)
    return OAuthConfig(
        mode=mode,
        grant=grant,
        issuer=issuer,
        client_id=client_id,
        client_secret=client_secret,
        private_key=private_key,
        signing_algorithm=algorithm,
        scopes=scopes,
        token_endpoint_auth_method=method,
        identity_provider=identity_provider,
    )


def _identity_provider_of(oauth: _EntryChecker) -> IdentityProviderConfig:
    value = oauth.entry.get("identityProvider")
    if not isinstance(value, dict):
        raise oauth.fail(
            f'"grant": "{IDENTITY_ASSERTION}" needs "identityProvider": '
            '{"tokenEndpoint", "clientId", "idToken"} (got ' + _json_type(value) + ")"
        )
    idp = _EntryChecker("", "", value)
    idp.prefix = f"{oauth.prefix}.identityProvider"
    unknown = sorted(set(value) - _IDP_KEYS)
    if unknown:
        raise idp.fail(f'unknown key "{unknown[0]}" (known: {", ".join(sorted(_IDP_KEYS))})')
    token_endpoint, client_id, id_token = (
        idp.string("tokenEndpoint"),
        idp.string("clientId"),
        idp.string("idToken"),
    )
    for key, found in (("tokenEndpoint", token_endpoint), ("clientId", client_id), ("idToken", id_token)):
        if found is None:
            raise idp.fail(f'"{key}" is required')
    assert token_endpoint is not None and client_id is not None and id_token is not None
    _check_url(idp, token_endpoint, expanded=True, key="tokenEndpoint")
    return IdentityProviderConfig(
        token_endpoint=token_endpoint,
        client_id=client_id,
        id_token=id_token,
        client_secret=idp.string("clientSecret"),
    )


def resolve_server(
    config: ServerConfig,
    *,
    base_dir: Path,
    environ: Mapping[str, str] | None = None,
    allowed_commands: Sequence[str] | None = None,
) -> ResolvedServer:
    """Prepare ``config`` for connecting. Raises ``ConfigError``.

    * ``envFile`` (relative to ``base_dir``, the mcp.json folder) is read first.
    * Placeholders ``${VAR}``, ``${env:VAR}`` and ``{env:VAR}`` in command, args, env values,
      cwd, url and header values are looked up in the envFile's values, then in ``environ``
      (default ``os.environ``). Expansion is a single pass: a value is never re-expanded.
    * stdio: the command must pass the allowlist ``allowed_commands`` (default
      ``settings.MCP_STDIO_COMMANDS``; see :func:`command_allowed`) and runs as the file it was
      checked as, without a shell: args are passed as a list, never joined. A relative ``cwd``
      is taken relative to ``base_dir``.
    * stdio ``env`` = envFile values, overridden by the expanded explicit ``env``, plus
      SSL_CERT_FILE, SSL_CERT_DIR, REQUESTS_CA_BUNDLE, NODE_EXTRA_CA_CERTS and PATH copied
      from ``environ`` when set there and not given. The SDK's ``stdio_client`` itself only
      passes HOME, LOGNAME, PATH, SHELL, TERM and USER on top of ``env=``, so TLS settings
      for npx/uvx behind a custom CA must come from here.
    * http/sse: ``env`` is empty; envFile values only feed the url/header placeholders.
    """
    if environ is None:
        environ = os.environ
    check = _EntryChecker(config.source, config.name, config.raw)
    base_dir = Path(base_dir)
    file_values: dict[str, str] = {}
    if config.env_file:
        file_values = _load_env_file(check, config.env_file, base_dir, _Expander(check, environ, base_dir))
    expand = _Expander(check, {**environ, **file_values}, base_dir)
    env_key = "environment" if "environment" in config.raw else "env"

    if config.transport == STDIO:
        if config.command is None:
            raise check.fail('"command" is required for stdio')
        if allowed_commands is None:
            from django.conf import settings

            allowed_commands = settings.MCP_STDIO_COMMANDS
        command = allowed_executable(
            check, expand(config.command, "command"), allowed_commands, base_dir=base_dir, environ=environ
        )
        args = [expand(arg, f"args[{index}]") for index, arg in enumerate(config.args)]
        env = dict(file_values)
        env.update({key: expand(value, f"{env_key}.{key}") for key, value in config.env.items()})
        for variable in PASSTHROUGH_ENV:
            if variable not in env and variable in environ:
                env[variable] = environ[variable]
        cwd = None
        if config.cwd is not None:
            cwd_path = Path(expand(config.cwd, "cwd")).expanduser()
            cwd = str(cwd_path if cwd_path.is_absolute() else base_dir / cwd_path)
        return ResolvedServer(
            config=config, command=command, args=args, env=env, cwd=cwd, url=None, headers={}
        )

    if config.url is None:
        raise check.fail(f'"url" is required for {config.transport}')
    url_key = next((key for key in URL_KEYS if key in config.raw), "url")
    url = expand(config.url, url_key)
    _check_url(check, url, expanded=True, key=url_key)
    headers: dict[str, str] = {}
    for name, value in config.headers.items():
        expanded = expand(value, f"headers.{name}")
        if "\r" in expanded or "\n" in expanded:
            raise check.fail(f'"headers.{name}" contains a line break after expansion')
        headers[name] = expanded
    return ResolvedServer(
        config=config,
        command=None,
        args=[],
        env={},
        cwd=None,
        url=url,
        headers=headers,
        oauth_secrets=_oauth_secrets(config.oauth, expand),
    )


def _oauth_secrets(oauth: OAuthConfig | None, expand: _Expander) -> OAuthSecrets:
    if oauth is None:
        return OAuthSecrets()

    def expanded(value: str | None, key: str) -> str | None:
        return None if value is None else expand(value, f"oauth.{key}")

    idp = oauth.identity_provider
    return OAuthSecrets(
        client_secret=expanded(oauth.client_secret, "clientSecret"),
        private_key=expanded(oauth.private_key, "privateKey"),
        id_token=expanded(idp.id_token, "identityProvider.idToken") if idp else None,
        idp_client_secret=expanded(idp.client_secret, "identityProvider.clientSecret") if idp else None,
    )

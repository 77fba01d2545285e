"""Validating one mcp.json entry in every host's dialect: ``parse_server``.

An invalid entry raises ``ConfigError`` (:mod:`mcpclient.config.loading` reports it while the
others load). Every message starts with the file's name and the server, e.g. ``mcp.json: server
"git": "command" is required for stdio``. Nothing here reads the environment or expands a
placeholder.
"""

from __future__ import annotations

import copy
import json
import logging
import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from mcpclient.config.document import json_type, shown_value
from mcpclient.config.dotenv import ENV_NAME_RE
from mcpclient.config.model import (
    AUTHORIZATION_CODE,
    CLIENT_CREDENTIALS,
    DEFAULT_CPU_SECONDS,
    DEFAULT_INIT_TIMEOUT_MS,
    DEFAULT_MEMORY_MB,
    DEFAULT_TIMEOUT_MS,
    GRANTS,
    IDENTITY_ASSERTION,
    MIN_MEMORY_MB,
    PER_USER,
    PRIVATE_KEY_JWT,
    SERVER_NAME_RE,
    SHARED,
    SIGNING_ALGORITHMS,
    SSE,
    STDIO,
    STREAMABLE_HTTP,
    TOKEN_ENDPOINT_AUTH_METHODS,
    ConfigError,
    IdentityProviderConfig,
    OAuthConfig,
    SandboxConfig,
    ServerConfig,
)
from mcpclient.core.access import MAX_GROUP_NAME
from mcpclient.core.approval import WRITE_TOOLS, WRITE_TOOLS_REJECT
from mcpclient.core.headers import HEADER_NAME_RE
from mcpclient.core.pinning import PIN_BLOCK, PIN_MODES
from mcpclient.core.redaction import redact_url

logger = logging.getLogger("mcpclient.config")


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


# ${VAR}, ${env:VAR}, {env:VAR}, ${VAR:-default} and ${input:ID}; anything else (e.g.
# "${not a name}") stays literal.
PLACEHOLDER_RE = re.compile(
    r"\$\{input:(?P<input>[A-Za-z0-9_.-]+)\}"
    r"|\$\{user\.(?P<user>id|name)\}"
    r"|\$\{(?P<prefix>env:)?(?P<var>[A-Za-z_][A-Za-z0-9_]*)(?::-(?P<default>[^}]*))?\}"
    r"|\{env:(?P<bare>[A-Za-z_][A-Za-z0-9_]*)\}"
)
INPUT_RE = re.compile(r"\$\{input:([A-Za-z0-9_.-]+)\}")


# The keys one entry may give its URL under: Cursor/Claude/VS Code/Zed/opencode, Windsurf, Gemini CLI.
URL_KEYS = ("url", "serverUrl", "httpUrl")
OPENCODE_TYPES = frozenset({"local", "remote"})


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
_SANDBOX_KEYS = ("write", "read", "network", "memoryMB", "cpuSeconds")


class EntryChecker:
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
            raise self.fail(f'"{key}" must be a string, got {json_type(value)}')
        if not value.strip():
            raise self.fail(f'"{key}" must not be empty')
        return value

    def boolean(self, key: str, default: bool) -> bool:
        if key not in self.entry:
            return default
        value = self.entry[key]
        if not isinstance(value, bool):
            raise self.fail(f'"{key}" must be true or false, got {shown_value(value)}')
        return value

    def milliseconds(self, key: str, default: int) -> float:
        if key not in self.entry:
            return default / 1000
        value = self.entry[key]
        # JSON has one number type: accept 1500.0 but not 1.5 (or true, which is an int in Python).
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise self.fail(f'"{key}" must be a positive integer (milliseconds), got {shown_value(value)}')
        return value / 1000

    def string_list(self, key: str) -> tuple[str, ...]:
        if key not in self.entry:
            return ()
        value = self.entry[key]
        if not isinstance(value, list):
            raise self.fail(f'"{key}" must be an array of strings, got {json_type(value)}')
        for index, item in enumerate(value):
            if not isinstance(item, str):
                raise self.fail(f'"{key}[{index}]" must be a string, got {json_type(item)}')
        return tuple(value)

    def string_map(self, key: str, *, key_re: re.Pattern[str], key_kind: str) -> dict[str, str]:
        if key not in self.entry:
            return {}
        value = self.entry[key]
        if not isinstance(value, dict):
            raise self.fail(f'"{key}" must be an object of strings, got {json_type(value)}')
        for item_key, item in value.items():
            if not key_re.match(item_key):
                raise self.fail(f'"{key}" has an invalid {key_kind} {shown_value(item_key)}')
            if not isinstance(item, str):
                raise self.fail(f'"{key}.{item_key}" must be a string, got {json_type(item)}')
        return dict(value)


def _url_key(check: EntryChecker) -> str | None:
    """The key the entry gives its URL under (``url``, Windsurf's ``serverUrl``, Gemini's ``httpUrl``)."""
    present = [key for key in URL_KEYS if key in check.entry]
    if len(present) > 1:
        raise check.fail(f'conflicting "{present[0]}" and "{present[1]}": keep only one of them')
    return present[0] if present else None


def _transport_of(check: EntryChecker, url_key: str | None) -> tuple[str, bool]:
    """``(transport, sse_fallback)`` of an entry, from ``type`` or from its keys.

    Without a ``type``, a ``command`` means stdio, Gemini's ``httpUrl`` Streamable HTTP, and a
    ``url`` or ``serverUrl`` Streamable HTTP with a fallback to legacy SSE (Gemini CLI's ``url``
    is SSE, everybody else's Streamable HTTP). opencode's ``"type": "remote"`` falls back too.
    """
    entry = check.entry
    if "type" in entry:
        kind = entry["type"]
        if not isinstance(kind, str):
            raise check.fail(f'"type" must be a string, got {json_type(kind)}')
        if kind not in _TRANSPORT_ALIASES:
            raise check.fail(
                '"type" must be "stdio", "streamableHttp", "http", "sse", "local" or "remote", '
                f"got {shown_value(kind)}"
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


def check_url(check: EntryChecker, url: str, *, expanded: bool, key: str = "url") -> None:
    """http(s) with a host. Before expansion, a placeholder may stand for the scheme or host."""
    if not expanded:
        scheme_and_host = url
        if "://" in url:
            host_start = url.index("://") + 3
            host_end = min((i for i in (url.find(c, host_start) for c in "/?#") if i != -1), default=len(url))
            scheme_and_host = url[:host_end]
        if PLACEHOLDER_RE.search(scheme_and_host):
            return
    try:
        parts = urlsplit(url)
        has_host = bool(parts.hostname)
    except ValueError:
        parts, has_host = None, False
    if parts is None or parts.scheme.lower() not in ("http", "https") or not has_host:
        url_value = check.entry.get(key)
        shown = shown_value(redact_url(url_value) if isinstance(url_value, str) else url_value)
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
            f"{source}: server {shown_value(name)}: the name may only contain letters, digits, '_' and '-'"
        )
    if not isinstance(entry, dict):
        raise ConfigError(f'{source}: server "{name}": the entry must be an object, got {json_type(entry)}')
    check = EntryChecker(source, name, entry)
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
    env = check.string_map(env_key, key_re=ENV_NAME_RE, key_kind="variable name")

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
        inner = EntryChecker(source, name, raw_command)
        inner.prefix = f'{check.prefix}: "command"'
        command, args = inner.string("path"), inner.string_list("args")
        if command is None:
            raise inner.fail('"path" is required')
        if "args" in entry or (inner.entry.get("env") and env):
            raise check.fail('give "args" and "env" either inside "command" or beside it, not both')
        env = env or inner.string_map("env", key_re=ENV_NAME_RE, key_kind="variable name")
    else:
        command, args = check.string("command"), check.string_list("args")

    headers = check.string_map("headers", key_re=HEADER_NAME_RE, key_kind="header name")
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
        check_url(check, url, expanded=False, key=url_key or "url")

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
        raise check.fail(f'"writeTools" must be "reject" or "approve", got {shown_value(write_tools)}')
    trusted = check.boolean("trusted", True)
    read_only = check.string_list("readOnly")
    for index, pattern in enumerate(read_only):
        if not pattern.strip():
            raise check.fail(f'"readOnly[{index}]" must not be empty')
    if "readOnly" in entry and not trusted:
        raise check.fail(
            'conflicting "readOnly" and "trusted": false: an untrusted server\'s tools all ask, '
            "so there is nothing to vouch for (keep one of them)"
        )
    apps = check.boolean("apps", True)
    pin_tools = entry.get("pinTools", PIN_BLOCK)
    if pin_tools not in PIN_MODES:
        raise check.fail(f'"pinTools" must be one of "block", "warn" or "off", got {shown_value(pin_tools)}')
    accept_new_tools = check.boolean("acceptNewTools", False)
    sandbox = _sandbox_of(check, transport)
    scope = _scope_of(check, transport)
    groups = _groups_of(check)

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
        read_only=read_only,
        apps=apps,
        pin_tools=pin_tools,
        accept_new_tools=accept_new_tools,
        sandbox=sandbox,
        scope=scope,
        groups=groups,
        raw=copy.deepcopy(entry),
        source=source,
    )


def inputs_used(value: object) -> list[str]:
    """The ids of every ``${input:ID}`` inside ``value`` (an entry), in order, without repeats."""
    found: list[str] = []
    stack = [value]
    while stack:
        current = stack.pop()
        if isinstance(current, str):
            found.extend(match for match in INPUT_RE.findall(current) if match not in found)
        elif isinstance(current, dict):
            stack.extend(reversed(list(current.values())))
        elif isinstance(current, list):
            stack.extend(reversed(current))
    return found


USER_PLACEHOLDER_RE = re.compile(r"\$\{user\.(id|name)\}")


def _groups_of(check: EntryChecker) -> tuple[str, ...]:
    """``groups``: the group names whose people may use the server (BooCode's key; none: everybody)."""
    groups = check.string_list("groups")
    for index, group in enumerate(groups):
        if not group.strip() or len(group) > MAX_GROUP_NAME:
            raise check.fail(f'"groups[{index}]" must be a group\'s name (1 to {MAX_GROUP_NAME} characters)')
    if "groups" in check.entry and not groups:
        raise check.fail('"groups" is empty, so nobody could use the server: name a group, or leave it out')
    return tuple(dict.fromkeys(groups))


def _scope_of(check: EntryChecker, transport: str) -> str:
    """``scope``: ``"shared"`` (one process for everybody, the default) or ``"perUser"`` (stdio).

    ``${user.id}`` and ``${user.name}`` are only for ``"perUser"``: a shared process has no person.
    """
    entry = check.entry
    scope = entry.get("scope", SHARED)
    if scope not in (SHARED, PER_USER):
        raise check.fail(f'"scope" must be "shared" or "perUser", got {shown_value(scope)}')
    if scope == PER_USER and transport != STDIO:
        raise check.fail(
            '"scope": "perUser" is for stdio servers; a remote server is per person with '
            '"oauth": {"mode": "perUser"}'
        )
    if scope == SHARED:
        for key in ("command", "args", "env", "environment", "cwd", "sandbox"):
            if key in entry and USER_PLACEHOLDER_RE.search(json.dumps(entry[key])):
                raise check.fail(
                    f'"{key}" uses ${{user.id}} or ${{user.name}}, which only a server with '
                    '"scope": "perUser" has'
                )
    return str(scope)


def _sandbox_of(check: EntryChecker, transport: str) -> SandboxConfig | None:
    """The entry's ``sandbox`` (see :class:`SandboxConfig`); None without one or with ``false``."""
    value = check.entry.get("sandbox")
    if "sandbox" not in check.entry or value is False:
        return None
    if transport != STDIO:
        raise check.fail(f'"sandbox" only applies to stdio servers, not {transport}')
    if value is True:
        return SandboxConfig()
    if not isinstance(value, dict):
        raise check.fail(
            '"sandbox" must be true, false or an object such as {"write": [...], "read": [...], '
            f'"network": false}}, got {json_type(value)}'
        )
    sandbox = EntryChecker("", "", value)
    sandbox.prefix = f'{check.prefix}: "sandbox"'
    unknown = sorted(set(value) - set(_SANDBOX_KEYS))
    if unknown:
        known = ", ".join(f'"{key}"' for key in _SANDBOX_KEYS)
        raise sandbox.fail(f'unknown key "{unknown[0]}" (known: {known})')
    paths = {key: sandbox.string_list(key) for key in ("write", "read")}
    for key, listed in paths.items():
        for index, path in enumerate(listed):
            if not path.strip():
                raise sandbox.fail(f'"{key}[{index}]" must not be empty')
    return SandboxConfig(
        write=paths["write"],
        read=paths["read"],
        network=sandbox.boolean("network", False),
        memory_mb=_limit(sandbox, "memoryMB", DEFAULT_MEMORY_MB, MIN_MEMORY_MB, "MiB"),
        cpu_seconds=_limit(sandbox, "cpuSeconds", DEFAULT_CPU_SECONDS, 1, "seconds"),
    )


# Above these a limit means nothing (1 TiB of address space, a year of CPU time): a slip of a unit.
_LIMIT_MAX = {"memoryMB": 1 << 20, "cpuSeconds": 366 * 24 * 3600}


def _limit(sandbox: EntryChecker, key: str, default: int, minimum: int, unit: str) -> int | None:
    """The sandbox's ``key``: a whole number from ``minimum`` up, ``false`` for none, else ``default``."""
    if key not in sandbox.entry:
        return default
    value = sandbox.entry[key]
    if value is False:
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not minimum <= value <= _LIMIT_MAX[key]:
        raise sandbox.fail(
            f'"{key}" must be a whole number of {unit} from {minimum} to {_LIMIT_MAX[key]}, or false for '
            f"no limit, got {shown_value(value)}"
        )
    return value


def _oauth_of(check: EntryChecker, transport: str, headers: Mapping[str, str]) -> OAuthConfig | None:
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
        raise check.fail(f'"oauth" must be an object or false, got {json_type(value)}')
    oauth = EntryChecker("", "", value)
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
        raise oauth.fail(f'"mode" must be "{SHARED}" or "{PER_USER}", got {shown_value(mode)}')
    grant = oauth.string("grant") or AUTHORIZATION_CODE
    if grant not in GRANTS:
        raise oauth.fail(f'"grant" must be one of {", ".join(GRANTS)}, got {shown_value(grant)}')
    if grant == CLIENT_CREDENTIALS and mode == PER_USER:
        raise oauth.fail(f'"grant": "{grant}" signs BooCode itself in, so it cannot be "{PER_USER}"')
    issuer = oauth.string("issuer")
    if issuer is not None:
        check_url(oauth, issuer, expanded=True, key="issuer")
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
    methods: tuple[str, ...] = TOKEN_ENDPOINT_AUTH_METHODS
    if grant == CLIENT_CREDENTIALS:
        methods = ("client_secret_basic", "client_secret_post", PRIVATE_KEY_JWT)
    elif grant == IDENTITY_ASSERTION:
        methods = ("client_secret_basic", "client_secret_post")
    if method is not None and method not in methods:
        raise oauth.fail(
            f'"tokenEndpointAuthMethod" must be one of {", ".join(methods)} for "{grant}", '
            f"got {shown_value(method)}"
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
            f'"signingAlgorithm" must be one of {", ".join(SIGNING_ALGORITHMS)}, got {shown_value(algorithm)}'
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
            identity_provider = _identity_provider_of(oauth, per_person=mode == PER_USER)
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


def _identity_provider_of(oauth: EntryChecker, *, per_person: bool) -> IdentityProviderConfig:
    """``identityProvider``; with ``per_person`` ("mode": "perUser") its ``idToken`` is each person's
    own, from their single sign-on to BooCode, and the entry may not name one."""
    value = oauth.entry.get("identityProvider")
    if not isinstance(value, dict):
        raise oauth.fail(
            f'"grant": "{IDENTITY_ASSERTION}" needs "identityProvider": '
            '{"tokenEndpoint", "clientId", "idToken"} (got ' + json_type(value) + ")"
        )
    idp = EntryChecker("", "", value)
    idp.prefix = f"{oauth.prefix}.identityProvider"
    unknown = sorted(set(value) - _IDP_KEYS)
    if unknown:
        raise idp.fail(f'unknown key "{unknown[0]}" (known: {", ".join(sorted(_IDP_KEYS))})')
    token_endpoint, client_id, id_token = (
        idp.string("tokenEndpoint"),
        idp.string("clientId"),
        idp.string("idToken"),
    )
    required = [("tokenEndpoint", token_endpoint), ("clientId", client_id)]
    if per_person and id_token is not None:
        raise idp.fail(
            f'"idToken" is each person\'s own with "mode": "{PER_USER}" (from their sign-in to BooCode): '
            "leave it out"
        )
    if not per_person:
        required.append(("idToken", id_token))
    for key, found in required:
        if found is None:
            raise idp.fail(f'"{key}" is required')
    assert token_endpoint is not None and client_id is not None
    check_url(idp, token_endpoint, expanded=True, key="tokenEndpoint")
    return IdentityProviderConfig(
        token_endpoint=token_endpoint,
        client_id=client_id,
        id_token=id_token,
        client_secret=idp.string("clientSecret"),
    )

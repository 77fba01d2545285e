"""What mcp.json says, as values: a server's entry as written, and as resolved for connecting.

``ServerConfig`` holds the entry *as written* (placeholders unexpanded, nothing read from the
environment), so it can be stored and shown. ``ResolvedServer`` holds the expanded values and
lives only while a server connects.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from mcpclient.config.shapes import (
    MCP_SERVERS,
    Shape,
)
from mcpclient.core.approval import WRITE_TOOLS_REJECT

STDIO = "stdio"
STREAMABLE_HTTP = "streamableHttp"
SSE = "sse"


SERVER_NAME_RE = re.compile(r"^[A-Za-z0-9_-]+$")


DEFAULT_TIMEOUT_MS = 60_000
DEFAULT_INIT_TIMEOUT_MS = 30_000


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
    # "readOnly": globs of the tools the administrator vouches for (they run without asking
    # although they do not declare readOnlyHint: true); never a tool that declares it false.
    read_only: tuple[str, ...] = ()
    # MCP Apps: false keeps this server's views from being rendered (its tools give text only).
    apps: bool = True
    # Pinned tool definitions (mcpclient.core.pinning): "block", "warn" or "off"; whether a known
    # server's new tools are accepted without a review.
    pin_tools: str = "block"
    accept_new_tools: bool = False
    # stdio only: "shared" (one process for everybody) or "perUser" (one process per person, with
    # ${user.id} and ${user.name} in its args, env and cwd).
    scope: str = "shared"
    # stdio only: run the server under bubblewrap (None: not asked, or "sandbox": false).
    sandbox: SandboxConfig | None = None
    # Who may use it: the names of the groups whose people get its tools, prompts, resources and
    # skills (mcpclient.core.access); empty: everybody.
    groups: tuple[str, ...] = ()
    # A person's own server (mcpclient.runtime.personal): whose it is; None for mcp.json's.
    owner_id: int | None = None
    raw: dict[str, Any] = field(default_factory=dict)
    # The config file's name, for error messages raised when resolving.
    source: str = "mcp.json"


# The limits of a sandboxed server's processes when its entry names none (docs/configuration.md).
# Address space, not resident memory: Node.js reserves about 1 GiB of it at start, and 10 GiB
# more for each WebAssembly memory; 16 GiB lets such a server start and still stops a runaway.
DEFAULT_MEMORY_MB = 16384
# CPU time each process may use in its life (a server that reaches it is ended and started again).
DEFAULT_CPU_SECONDS = 3600
MIN_MEMORY_MB = 64


@dataclass(frozen=True)
class SandboxConfig:
    """A stdio entry's ``sandbox``, as written (its paths may hold placeholders).

    ``"sandbox": true`` is every default: the system read-only, a private ``/tmp``, nothing
    writable, no network. ``write`` lists what the server may change, ``read`` what it may read
    of what the sandbox otherwise hides (inside ``/tmp``, say), ``network`` lets it reach the
    network; ``memoryMB`` and ``cpuSeconds`` limit each of its processes.
    :mod:`mcpclient.config.sandbox` turns it into a :class:`SandboxPlan`.
    """

    write: tuple[str, ...] = ()
    read: tuple[str, ...] = ()
    network: bool = False
    # Per process of the server (None: no limit): its address space in MiB, its CPU time in seconds.
    memory_mb: int | None = DEFAULT_MEMORY_MB
    cpu_seconds: int | None = DEFAULT_CPU_SECONDS


@dataclass(frozen=True)
class SandboxPlan:
    """How one sandboxed stdio server runs: absolute paths, symbolic links resolved, checked.

    ``hidden_dirs`` and ``hidden_files`` are BooCode's own (its data folder, secret keys, database,
    mcp.json, the .env file) and, without the network, ``/run``: the server finds an empty folder
    in place of each folder and a file it cannot open in place of each file. ``write`` holds the entry's
    ``write`` paths and the caches its launcher (``npx``, ``uvx``) needs; ``read`` the entry's
    ``read`` paths. ``chdir`` is the entry's ``cwd``, if it has one.

    ``homes`` are the home folders hidden (in ``hidden_dirs`` too): the server's and BooCode's.
    ``prlimit`` runs the sandbox with ``memory_mb`` (address space, MiB) and ``cpu_seconds`` (CPU
    time) as every process's limits; None when neither is set.
    """

    bwrap: str
    write: tuple[str, ...] = ()
    read: tuple[str, ...] = ()
    hidden_dirs: tuple[str, ...] = ()
    hidden_files: tuple[str, ...] = ()
    network: bool = False
    chdir: str | None = None
    homes: tuple[str, ...] = ()
    prlimit: str | None = None
    memory_mb: int | None = None
    cpu_seconds: int | None = None


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


@dataclass(frozen=True)
class IdentityProviderConfig:
    """``oauth.identityProvider`` of an ``identity_assertion`` entry: where the ID token is
    exchanged for an ID-JAG (RFC 8693), as whom, and the ID token itself (a placeholder)."""

    token_endpoint: str
    client_id: str
    id_token: str | None = field(default=None, repr=False)  # None: each person's own ("perUser")
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
    # stdio: how bubblewrap runs the server (None: it runs as it is).
    sandbox: SandboxPlan | None = None


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


@dataclass(frozen=True)
class Person:
    """Whose process a ``"scope": "perUser"`` stdio server is: ``${user.id}`` and ``${user.name}``.

    ``name`` is made safe for a path or an argument, and kept one person's, by :func:`person_slug`.
    """

    id: int
    name: str


# A username kept as it is: it starts with a letter, a digit or "_" (never ".", so never "." or
# "..", and never "-", which a program would read as an option) and holds only letters, digits,
# ".", "_" and "-", at most PERSON_SLUG_MAX characters, and does not end the way a changed name
# ends ("-" and PERSON_DIGEST hex digits), so no kept name can equal a changed one.
PERSON_SLUG_MAX = 64
PERSON_DIGEST = 16  # hex digits of the SHA-256 of the exact username (64 bits)
_KEPT_SLUG = re.compile(rf"[A-Za-z0-9_][A-Za-z0-9._-]{{0,{PERSON_SLUG_MAX - 1}}}")
_CHANGED_END = re.compile(rf"-[0-9a-f]{{{PERSON_DIGEST}}}")
_NOT_IN_SLUGS = re.compile(r"[^A-Za-z0-9._-]")
_READABLE_MAX = PERSON_SLUG_MAX - 1 - PERSON_DIGEST


def person_slug(username: str, user_id: int) -> str:
    """``username`` as ``${user.name}`` gives it: one person's, safe in a path or an argument.

    A name that is already safe (see ``_KEPT_SLUG``) is kept as it is, so folders named after it
    stay valid. Any other name becomes a readable part (unsafe characters as ``_``, leading dots
    and dashes dropped, cut short; ``user<user_id>`` when nothing is left), ``-`` and the first
    :data:`PERSON_DIGEST` hex digits of the SHA-256 of the exact username: ``.alice``,
    ``..alice``, ``al+ice`` and ``al@ice`` each get a value of their own, none of them
    ``alice``'s or ``al_ice``'s. Kept names never end like a changed one (such a name is changed
    too), so two usernames never share a value (up to a 64-bit digest's collision). The value is
    never empty, never ``.`` or ``..``, at most :data:`PERSON_SLUG_MAX` characters. Names that
    differ only in case stay apart, which a case-insensitive file system does not keep: paths
    there should use ``${user.id}``.
    """
    if _KEPT_SLUG.fullmatch(username) and not _CHANGED_END.search(username):
        return username
    readable = _NOT_IN_SLUGS.sub("_", username).lstrip(".-")[:_READABLE_MAX] or f"user{user_id}"
    digest = hashlib.sha256(username.encode("utf-8", "surrogatepass")).hexdigest()[:PERSON_DIGEST]
    return f"{readable}-{digest}"


def same_session(config: ServerConfig, other: ServerConfig) -> bool:
    """Whether a session opened for ``other`` serves ``config`` as well: they differ at most in
    who may use the server (``groups``), which the hub asks at every use, not at connecting."""
    if config == other:
        return True
    return _session_part(config) == _session_part(other)


def _session_part(config: ServerConfig) -> ServerConfig:
    raw = {key: value for key, value in config.raw.items() if key != "groups"}
    return replace(config, groups=(), raw=raw)


def per_user(config: ServerConfig) -> bool:
    """True for a server each person has a session of their own with: they sign in to it with their
    own account (``"oauth": {"mode": "perUser"}``), or it is a stdio server run once per person
    (``"scope": "perUser"``)."""
    return (
        config.owner_id is not None
        or config.scope == PER_USER
        or (config.oauth is not None and config.oauth.per_user)
    )


OWN_SESSION_SUFFIX = "@own"


def session_name(config: ServerConfig) -> str:
    """The name a person's session with ``config`` is kept under in the hub: the server's name, or
    for a server of a person's own (``owner_id`` set) ``<name>@own``. A server's name has no "@"
    (:data:`SERVER_NAME_RE`), so a person's own server never shares a session key with a shared
    server of the same name that is hidden from them (docs/security.md, *Servers of one's own*)."""
    return config.name if config.owner_id is None else config.name + OWN_SESSION_SUFFIX


def opens_by_itself(config: ServerConfig) -> bool:
    """True for a "perUser" server whose sessions open for each person without a Connect: a stdio
    server run once per person, or an ``identity_assertion`` server (their SSO ID token, SEP-990)."""
    if config.scope == PER_USER:
        return True
    if config.owner_id is not None:  # a person's own server: open unless it signs in with OAuth
        return config.oauth is None
    return config.oauth is not None and config.oauth.per_user and config.oauth.grant == IDENTITY_ASSERTION


def per_user_process(config: ServerConfig) -> bool:
    """True for a stdio server run once per person (``"scope": "perUser"``): no sign-in, a process each."""
    return config.scope == PER_USER

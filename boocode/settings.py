"""BooCode settings: one module, driven by BOOCODE_* environment variables.

Embedded defaults need no external service: SQLite in BOOCODE_DATA_DIR and the in-memory
channel layer. Set BOOCODE_DATABASE_URL (PostgreSQL) and BOOCODE_REDIS_URL to scale out.
Every variable is listed in .env.example and docs/configuration.md.
"""

from __future__ import annotations

import os
import secrets
from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import dj_database_url
from django.core.exceptions import ImproperlyConfigured
from dotenv import load_dotenv

from boocode import __version__
from boocode.env import (
    env_bool,
    env_choice,
    env_egress_allow,
    env_float,
    env_int,
    env_issuer,
    env_list,
    env_log_level,
    env_origins,
    env_path,
    env_str,
    env_url,
)
from boocode.extras import require as require_extra
from mcpclient.telemetry.tracing import endpoint_setting as otlp_endpoint_setting

BASE_DIR = Path(__file__).resolve().parent.parent

# The checkout's .env (or BOOCODE_ENV_FILE; empty: none) sets what the environment does not:
# a variable exported in the shell or the service manager wins over the file.
_env_file = os.environ.get("BOOCODE_ENV_FILE", str(BASE_DIR / ".env")).strip()
if _env_file:
    load_dotenv(_env_file, override=False, encoding="utf-8")

DATA_DIR = env_path("BOOCODE_DATA_DIR", BASE_DIR / "data", kind="folder")
try:
    DATA_DIR.mkdir(parents=True, exist_ok=True)
except OSError as exc:
    raise ImproperlyConfigured(
        f"BOOCODE_DATA_DIR={DATA_DIR}: cannot create it: {exc.strerror or exc}"
    ) from None

DEBUG = env_bool("BOOCODE_DEBUG", False)


def _secret_key() -> str:
    """BOOCODE_SECRET_KEY, else a key generated once and kept in DATA_DIR/secret_key (0600)."""
    key = env_str("BOOCODE_SECRET_KEY")
    if key:
        return key
    path = DATA_DIR / "secret_key"
    try:
        try:
            return path.read_text().strip()
        except FileNotFoundError:
            key = secrets.token_urlsafe(50)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as handle:
                handle.write(key)
            return key
    except OSError as exc:
        raise ImproperlyConfigured(
            f"BOOCODE_SECRET_KEY is unset and {path} (in BOOCODE_DATA_DIR) cannot be read or created: "
            f"{exc.strerror or exc}"
        ) from None


SECRET_KEY = _secret_key()
ALLOWED_HOSTS = env_list("BOOCODE_ALLOWED_HOSTS", ["127.0.0.1", "localhost"])
CSRF_TRUSTED_ORIGINS = env_list("BOOCODE_CSRF_TRUSTED_ORIGINS", [])

INSTALLED_APPS = [
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "channels",
    "mcpclient",
    "agents",
    "boocode.chat",
    "boocode.security",
    "axes",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.middleware.csp.ContentSecurityPolicyMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    # Last, as Axes requires: turns a locked-out login into the 429 page.
    "axes.middleware.AxesMiddleware",
]

ROOT_URLCONF = "boocode.urls"
ASGI_APPLICATION = "boocode.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                # local_login and sso_name: which ways of signing in the pages offer
                "boocode.security.signin.sign_in_options",
            ],
        },
    },
]

_database_variable = "BOOCODE_DATABASE_URL" if env_str("BOOCODE_DATABASE_URL") else "DATABASE_URL"
_database_url = env_str(_database_variable)
if _database_url:
    try:
        DATABASES: dict[str, dict[str, Any]] = {
            # A plain dict (parse's is a TypedDict): the test settings add "TEST" below.
            "default": dict(
                dj_database_url.parse(
                    _database_url, conn_max_age=env_int("BOOCODE_DB_CONN_MAX_AGE", 60, minimum=0)
                )
            )
        }
    except ValueError as exc:
        raise ImproperlyConfigured(f"{_database_variable}: {exc}") from None
    if DATABASES["default"]["ENGINE"].endswith(("postgresql", "postgis")):
        require_extra("postgres", _database_variable)
else:
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": DATA_DIR / "boocode.sqlite3",
            # Kept open: reopening (and re-running the PRAGMAs) cost ~1 ms per chat write unit.
            "CONN_MAX_AGE": env_int("BOOCODE_DB_CONN_MAX_AGE", 60, minimum=0),
            # WAL lets the chat write while the admin and commands read; the timeout rides out
            # short write locks from another process (mcp_discover in a second shell).
            "OPTIONS": {
                "timeout": 20,
                "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
                "transaction_mode": "IMMEDIATE",
            },
        }
    }
# Set by tests/boocode_test_env.py: SQLite's test database is a file instead of memory, so a
# second process started by a test (manage.py mcp_discover) can open the same database.
_test_db_file = env_str("BOOCODE_TEST_DB_FILE")
if _test_db_file and DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    DATABASES["default"]["TEST"] = {"NAME": _test_db_file}
# Also set there, one name per test run, so two checkouts testing on one PostgreSQL server at
# once do not create, use and drop the same test database.
_test_db_name = env_str("BOOCODE_TEST_DB_NAME")
if _test_db_name and DATABASES["default"]["ENGINE"] != "django.db.backends.sqlite3":
    DATABASES["default"]["TEST"] = {"NAME": _test_db_name}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

_redis_url = env_str("BOOCODE_REDIS_URL")
if _redis_url:
    # Redis pub/sub for both aliases: a message goes to whoever listens now, in one PUBLISH
    # per group whatever its size, and arrives without a blocking pop per message. The core
    # layer (sorted sets, BZPOPMIN, a Lua script per group send) relayed 100 streaming tabs per
    # process with seconds of delay (docs/benchmarks.md, chat under load with several web
    # processes). Pub/sub keeps nothing: every listener (a tab, a process's control channel, a
    # reply channel) subscribes before anything is sent to it, and each call and request has
    # its own time limit. The read may wait longer than redis-py's 5 s default socket timeout.
    # Pub/sub channels belong to the Redis server, not to one of its databases: the database's
    # number is part of every channel's name, so deployments on one server stay apart as they
    # do with keys (and a tab never hears another deployment's conversation of the same id).
    require_extra("redis", "BOOCODE_REDIS_URL")
    _redis_parts = urlsplit(_redis_url)
    _redis_db = _redis_parts.path.strip("/") or "0"
    if _redis_parts.scheme not in ("redis", "rediss", "unix") or not (
        _redis_parts.scheme == "unix" or (_redis_parts.hostname and _redis_db.isdigit())
    ):
        # (the value itself is not shown: it may hold a password)
        raise ImproperlyConfigured(
            "BOOCODE_REDIS_URL: expected redis://[:password@]host[:port][/db number] (rediss:// for TLS, "
            "unix:///path for a socket)"
        )
    from redis.asyncio.retry import Retry
    from redis.backoff import NoBackoff
    from redis.exceptions import ConnectionError as RedisConnectionError

    # Every message is signed with a key derived from SECRET_KEY (which every process of a
    # deployment shares) and refused unsigned, altered, misaddressed or stale: whoever can
    # publish to this Redis cannot speak for a process (mcpclient/worker/signing.py). Redis must
    # still be private and authenticated: docs/deployment.md, "Redis is a trust boundary".
    from mcpclient.worker.signing import layer_key

    _layer: dict[str, Any] = {
        "BACKEND": "mcpclient.worker.signing.SignedRedisPubSubChannelLayer",
        "CONFIG": {
            "signing_key": layer_key(SECRET_KEY),
            # A pooled connection broken by a Redis restart is opened again and the command sent
            # once more (as boocode.chat.turn.locks._reconnect_once does for the turn locks).
            "hosts": [
                {
                    "address": _redis_url,
                    "socket_timeout": 30,
                    "retry": Retry(NoBackoff(), 1, supported_errors=(RedisConnectionError,)),
                }
            ],
            "prefix": f"boocode-db{_redis_db}",
        },
    }
    # "hub": the hop between web processes and the hub worker (BOOCODE_HUB=worker), a layer of
    # its own so that its traffic never queues behind the chat's.
    # its own so that its traffic never queues behind the chat's. Its messages (tool calls,
    # answers, sign-ins) are refused when replayed; the chat's frames are only checked for age.
    _hub_layer = {**_layer, "CONFIG": {**_layer["CONFIG"], "replay_window": True}}
    CHANNEL_LAYERS = {"default": _layer, "hub": _hub_layer}
else:
    # Capacity: a tab that falls behind a fast stream must not lose frames (the default is 100).
    # ChatChannelLayer is Channels' in-memory layer without its per-message expiry sweep.
    CHANNEL_LAYERS = {
        "default": {"BACKEND": "boocode.chat.layers.ChatChannelLayer", "CONFIG": {"capacity": 1000}}
    }
# With the Redis layer, one turn per conversation across processes is a Redis lock with this TTL
# (renewed every third of it): how long a process killed mid-turn blocks its conversations.
TURN_LOCK_TTL = env_float("BOOCODE_TURN_LOCK_TTL", 15.0, minimum=1.0)

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]
LOGIN_URL = "login"
# Password reset links (templates/registration/) go out by email: SMTP when BOOCODE_EMAIL_HOST is
# set, otherwise printed on the server's output, decoded (a link on one line), where an administrator
# can pass one on.
_email_host = env_str("BOOCODE_EMAIL_HOST")
# Read whether or not a host is set: a malformed value stops start-up before it is needed.
_smtp_options = {
    "host": _email_host,
    "port": env_int("BOOCODE_EMAIL_PORT", 587, minimum=1, maximum=65535),
    "username": env_str("BOOCODE_EMAIL_USER"),
    "password": env_str("BOOCODE_EMAIL_PASSWORD"),
    "use_tls": env_bool("BOOCODE_EMAIL_STARTTLS", True),
    "timeout": 20,
}
MAILERS = {
    "default": (
        {"BACKEND": "django.core.mail.backends.smtp.EmailBackend", "OPTIONS": _smtp_options}
        if _email_host
        else {"BACKEND": "boocode.security.console_mail.EmailBackend"}
    )
}
DEFAULT_FROM_EMAIL = env_str("BOOCODE_EMAIL_FROM", "BooCode <boocode@localhost>")
PASSWORD_RESET_TIMEOUT = env_int("BOOCODE_PASSWORD_RESET_HOURS", 24, minimum=1, maximum=24 * 30) * 3600
LOGIN_REDIRECT_URL = "chat:index"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = DATA_DIR / "static"

SESSION_COOKIE_HTTPONLY = True
SESSION_COOKIE_SAMESITE = "Lax"
SESSION_COOKIE_SECURE = env_bool("BOOCODE_SECURE_COOKIES", False)
CSRF_COOKIE_SECURE = SESSION_COOKIE_SECURE
X_FRAME_OPTIONS = "DENY"
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"

# --- Security ------------------------------------------------------------------------------
# boocode/security/ implements these; docs/configuration.md lists the variables.


# Pages at these origins may open chat websockets, besides the origin the socket is opened at.
ALLOWED_ORIGINS = env_origins("BOOCODE_ALLOWED_ORIGINS")
# Reverse proxies in front of Daphne: with n > 0 the client address is the n-th from the right
# of X-Forwarded-For and the scheme is X-Forwarded-Proto (the proxy must set both).
TRUSTED_PROXY_COUNT = env_int("BOOCODE_TRUSTED_PROXY_COUNT", 0, minimum=0, maximum=10)
if TRUSTED_PROXY_COUNT:
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
# Sent on HTTPS responses only; 0 (the default) sends none. Set it once TLS works for good.
SECURE_HSTS_SECONDS = env_int("BOOCODE_HSTS_SECONDS", 0, minimum=0)
# The policy of every response that sets none itself (the chat page adds its websocket).
SECURE_CSP = {
    "default-src": ["'self'"],
    "script-src": ["'self'"],
    "style-src": ["'self'"],
    "img-src": ["'self'", "data:"],
    "connect-src": ["'self'"],
    "object-src": ["'none'"],
    "base-uri": ["'none'"],
    "frame-ancestors": ["'none'"],
    "form-action": ["'self'"],
}

# Login throttling (django-axes): failures counted per username and per client address apart.
LOGIN_FAILURE_LIMIT = env_int("BOOCODE_LOGIN_FAILURE_LIMIT", 5, minimum=1)
LOGIN_COOLOFF_MINUTES = env_int("BOOCODE_LOGIN_COOLOFF_MINUTES", 15, minimum=1)
AUTHENTICATION_BACKENDS = [
    "boocode.security.logins.LoginThrottleBackend",
    "django.contrib.auth.backends.ModelBackend",
]
AXES_FAILURE_LIMIT = LOGIN_FAILURE_LIMIT
AXES_COOLOFF_TIME = timedelta(minutes=LOGIN_COOLOFF_MINUTES)
AXES_LOCKOUT_PARAMETERS = ["username", "ip_address"]
AXES_CLIENT_IP_CALLABLE = "boocode.security.logins.client_ip"
AXES_LOCKOUT_CALLABLE = "boocode.security.logins.lockout_response"
AXES_RESET_ON_SUCCESS = False  # see boocode/security/logins.py: a login must not clear an address
AXES_VERBOSE = False

# Single sign-on with OpenID Connect (boocode/security/oidc.py, docs/teams.md). With no issuer
# nothing changes: local accounts only, as before.
OIDC_ISSUER = env_issuer("BOOCODE_OIDC_ISSUER")
OIDC_CLIENT_ID = env_str("BOOCODE_OIDC_CLIENT_ID")
# Empty: a public client (PKCE alone), for a provider that registers BooCode so.
OIDC_CLIENT_SECRET = env_str("BOOCODE_OIDC_CLIENT_SECRET")
OIDC_SCOPES = env_str("BOOCODE_OIDC_SCOPES", "openid email profile").split()
# The ID-token claim whose values are the person's groups (empty: groups are left alone).
OIDC_GROUPS_CLAIM = env_str("BOOCODE_OIDC_GROUPS_CLAIM", "groups", when_empty="")
# The login page's button: "Sign in with <OIDC_NAME>".
OIDC_NAME = env_str("BOOCODE_OIDC_NAME") or "single sign-on"
# Which existing account a new identity joins: by verified email, by subject (the account named
# after it), or none (always a new account). docs/teams.md, *Account linking*.
OIDC_LINK = env_choice("BOOCODE_OIDC_LINK", ("email", "subject", "none"), "email")
# Linking by email may reach a staff or superuser account (off: such a sign-in is refused).
OIDC_LINK_STAFF_BY_EMAIL = env_bool("BOOCODE_OIDC_LINK_STAFF_BY_EMAIL", False)
# A person the provider signs in who matches no account gets one (false: refused).
OIDC_CREATE_ACCOUNTS = env_bool("BOOCODE_OIDC_CREATE_ACCOUNTS", True)
# Local accounts' passwords: the login form, the password pages and the admin's login.
LOCAL_LOGIN = env_bool("BOOCODE_LOCAL_LOGIN", True)
if OIDC_ISSUER and not OIDC_CLIENT_ID:
    raise ImproperlyConfigured(
        "BOOCODE_OIDC_ISSUER needs BOOCODE_OIDC_CLIENT_ID: BooCode's client id at the provider"
    )
if OIDC_CLIENT_ID and not OIDC_ISSUER:
    raise ImproperlyConfigured(
        "BOOCODE_OIDC_CLIENT_ID is set but BOOCODE_OIDC_ISSUER is not: set the provider's issuer"
    )
if OIDC_ISSUER and "openid" not in OIDC_SCOPES:
    raise ImproperlyConfigured(f"BOOCODE_OIDC_SCOPES={' '.join(OIDC_SCOPES)!r}: must include openid")
if not LOCAL_LOGIN and not OIDC_ISSUER:
    raise ImproperlyConfigured(
        "BOOCODE_LOCAL_LOGIN=false needs BOOCODE_OIDC_ISSUER: without single sign-on nobody could log in"
    )
if OIDC_ISSUER:
    require_extra("sso", "BOOCODE_OIDC_ISSUER")
    # Restores the people signed in by the provider; it checks no password itself.
    AUTHENTICATION_BACKENDS = [*AUTHENTICATION_BACKENDS, "boocode.security.signin.SignedInBackend"]
if not LOCAL_LOGIN:
    # No backend checks a password: the throttle (which never logs anyone in) and the provider's.
    AUTHENTICATION_BACKENDS = [
        "boocode.security.logins.LoginThrottleBackend",
        "boocode.security.signin.SignedInBackend",
    ]

# --- MCP -----------------------------------------------------------------------------------
MCP_CONFIG = env_path("BOOCODE_MCP_CONFIG", DATA_DIR / "mcp.json", kind="file")
# What a first start copies to MCP_CONFIG and AGENTS_FILE when they do not exist (boocode_prepare):
# the live files are the administrator's, untracked, so editing them never dirties the checkout.
MCP_CONFIG_EXAMPLE = BASE_DIR / "data" / "mcp.example.json"
AGENTS_FILE_EXAMPLE = BASE_DIR / "data" / "AGENTS.example.md"
# Empty: none (no stdio server may start); an empty value must never widen what may run.
MCP_STDIO_COMMANDS = env_list("BOOCODE_MCP_STDIO_COMMANDS", ["npx", "uvx", "node", "docker"], when_empty=[])
# stdio servers under bubblewrap (docs/security.md, *Sandboxed stdio servers*): "off" runs those
# whose entry has a "sandbox" key sandboxed, "required" every stdio server (with the defaults
# when its entry has none).
MCP_STDIO_SANDBOX = env_str("BOOCODE_STDIO_SANDBOX", "off").lower()
if MCP_STDIO_SANDBOX not in ("off", "required"):
    raise ImproperlyConfigured(f"BOOCODE_STDIO_SANDBOX={MCP_STDIO_SANDBOX!r}: expected off or required")
# Servers of one's own (docs/teams.md): people add remote MCP servers for themselves on the chat
# page; the operator switches it off, lists the hosts allowed (empty: any the egress policy lets
# through) and bounds the servers per person.
PERSONAL_SERVERS = env_bool("BOOCODE_PERSONAL_SERVERS", True)
PERSONAL_SERVER_DOMAINS = env_egress_allow("BOOCODE_PERSONAL_SERVER_DOMAINS")
PERSONAL_SERVERS_MAX = env_int("BOOCODE_PERSONAL_SERVERS_MAX", 10, minimum=1, maximum=100)
# "scope": "perUser" stdio servers: how many people's processes one such server runs at once.
STDIO_PER_USER_MAX = env_int("BOOCODE_STDIO_PER_USER_MAX", 20, minimum=1)
# Start the hub (connect the enabled servers) lazily in the ASGI process. Tests turn it off.
MCP_AUTOSTART = env_bool("BOOCODE_MCP_AUTOSTART", True)
# MCP Apps (docs/apps.md): servers' views in the conversation. Off: no session advertises the
# extension, so servers give their tools' text results only.
MCP_APPS = env_bool("BOOCODE_APPS", True)
# Tool search (docs/tools.md): an agent with toolSearch "auto" defers its tools behind a search
# tool once their definitions would pass this many tokens (about 4 characters each) or tools.
TOOL_SEARCH_TOKENS = env_int("BOOCODE_TOOL_SEARCH_TOKENS", 8000, minimum=0)
TOOL_SEARCH_TOOLS = env_int("BOOCODE_TOOL_SEARCH_TOOLS", 40, minimum=0)
# The semantic half of the ranker (an embedding model run on the CPU), when installed.
TOOL_SEARCH_SEMANTIC = env_bool("BOOCODE_TOOL_SEARCH_SEMANTIC", True)
# The audit log of tool calls (docs/security.md): rows older than this many days are deleted;
# 0 keeps every row.
AUDIT_DAYS = env_int("BOOCODE_AUDIT_DAYS", 365, minimum=0)
# Tokens a day (UTC) each person may spend before their turns are refused (docs/teams.md); a
# person's or a group's budget in the admin comes first. 0: no budget.
DAILY_TOKEN_BUDGET = env_int("BOOCODE_DAILY_TOKEN_BUDGET", 0, minimum=0)
# Where the MCP sessions live: "inprocess" (each web process holds its own hub, the embedded
# default) or "worker" (one `manage.py hub_worker` process holds them all and the web processes
# reach it over the Redis channel layer; see docs/deployment.md).
MCP_HUB = env_str("BOOCODE_HUB", "inprocess").lower()
if MCP_HUB not in ("inprocess", "worker"):
    raise ImproperlyConfigured(f"BOOCODE_HUB={MCP_HUB!r}: expected inprocess or worker")
if MCP_HUB == "worker" and not _redis_url:
    raise ImproperlyConfigured(
        "BOOCODE_HUB=worker needs BOOCODE_REDIS_URL: the web processes reach the hub worker over Redis"
    )
# The channel the hub worker listens on (one worker per channel name).
MCP_HUB_CHANNEL = env_str("BOOCODE_HUB_CHANNEL", "mcp-hub")
# Servers heal themselves (mcpclient/engine/healing.py): each session is pinged every PING_INTERVAL
# seconds (0: never) and is dead when a ping fails or gets no answer within PING_TIMEOUT; a dead
# or failed server is reconnected after RECONNECT_BASE * 2**(n-1) seconds (capped at
# RECONNECT_CAP, half of it random), RECONNECT_ATTEMPTS times in a row (0: never), then the
# circuit opens and the next try waits RECONNECT_CIRCUIT_SECONDS; at most RECONNECT_CONCURRENCY
# servers connect again at the same time.
MCP_PING_INTERVAL = env_float("BOOCODE_MCP_PING_INTERVAL", 30.0, minimum=0.0)
MCP_PING_TIMEOUT = env_float("BOOCODE_MCP_PING_TIMEOUT", 10.0, minimum=0.1)
MCP_RECONNECT_BASE = env_float("BOOCODE_MCP_RECONNECT_BASE", 1.0, minimum=0.1)
MCP_RECONNECT_CAP = env_float("BOOCODE_MCP_RECONNECT_CAP", 60.0, minimum=0.1)
if MCP_RECONNECT_CAP < MCP_RECONNECT_BASE:
    raise ImproperlyConfigured(
        f"BOOCODE_MCP_RECONNECT_CAP={MCP_RECONNECT_CAP:g}: must be at least "
        f"BOOCODE_MCP_RECONNECT_BASE ({MCP_RECONNECT_BASE:g})"
    )
MCP_RECONNECT_ATTEMPTS = env_int("BOOCODE_MCP_RECONNECT_ATTEMPTS", 8, minimum=0)
MCP_RECONNECT_CIRCUIT_SECONDS = env_float("BOOCODE_MCP_RECONNECT_CIRCUIT_SECONDS", 300.0, minimum=1.0)
MCP_RECONNECT_CONCURRENCY = env_int("BOOCODE_MCP_RECONNECT_CONCURRENCY", 4, minimum=1)
# The secret store's Fernet keys (mcpclient/secrets/store.py), kept apart from the database:
# comma-separated, the first encrypts and all decrypt (rotation). Unset: one key generated
# into SECRETS_KEY_FILE (0600) the first time a secret is stored.
SECRETS_KEYS = env_list("BOOCODE_SECRETS_KEY", [])
SECRETS_KEY_FILE = DATA_DIR / "secrets.key"
# What a sandboxed stdio server never sees, wherever the settings put it: the data folder, the
# secret keys, the database, mcp.json and the .env file (a folder is emptied, a file made
# unreadable; mcpclient/config/sandbox.py).
_sqlite_files: list[Path] = []
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    for _db in (DATABASES["default"]["NAME"], DATABASES["default"].get("TEST", {}).get("NAME")):
        if _db:
            _sqlite_files += [Path(f"{_db}{suffix}").resolve() for suffix in ("", "-wal", "-shm", "-journal")]
MCP_SANDBOX_HIDDEN = [
    DATA_DIR,
    DATA_DIR / "secret_key",
    SECRETS_KEY_FILE,
    MCP_CONFIG,
    *_sqlite_files,
    *([Path(_env_file).resolve()] if _env_file else []),
]
# OAuth sign-in to remote servers (mcpclient/engine/authorization/). PUBLIC_URL is where browsers and
# authorization servers reach BooCode: the redirect URI (<PUBLIC_URL>/oauth/callback/) and, over
# https, the Client ID Metadata Document (<PUBLIC_URL>/oauth/client-metadata.json) derive from it.
PUBLIC_URL = env_url("BOOCODE_PUBLIC_URL", "http://127.0.0.1:8000")
# Where the Client ID Metadata Document is published, when not at <PUBLIC_URL>/oauth/client-metadata.json
# (e.g. a static HTTPS host serving a copy of that document).
CLIENT_METADATA_URL = env_str("BOOCODE_CLIENT_METADATA_URL")
OAUTH_CONSENT_TIMEOUT = env_float("BOOCODE_OAUTH_CONSENT_TIMEOUT", 600.0, minimum=10.0)
# What BooCode may connect to on a server's word (OAuth metadata and endpoints, redirects, views'
# declared domains) beyond public addresses: networks and host names (mcpclient/core/egress.py).
EGRESS_ALLOW = env_egress_allow("BOOCODE_EGRESS_ALLOW")


def _apps_origin(value: str) -> str:
    """BOOCODE_APPS_ORIGIN checked: an http(s) origin (no path) other than PUBLIC_URL's, or ""."""
    if not value:
        return ""
    parts = urlsplit(value.rstrip("/"))
    extra = parts.path or parts.query or parts.fragment
    if parts.scheme not in ("http", "https") or not parts.hostname or extra:
        raise ImproperlyConfigured(
            f"BOOCODE_APPS_ORIGIN={value!r}: expected an origin such as https://views.example.com (no path)"
        )
    origin = f"{parts.scheme}://{parts.netloc}".lower()
    public = urlsplit(PUBLIC_URL)
    if origin == f"{public.scheme}://{public.netloc}".lower():
        raise ImproperlyConfigured("BOOCODE_APPS_ORIGIN must differ from BooCode's own (BOOCODE_PUBLIC_URL)")
    return origin


# MCP Apps views served from an origin of their own (docs/apps.md): a second host name of this
# BooCode, never its own origin. Its host is allowed as a Host header.
MCP_APPS_ORIGIN = _apps_origin(env_str("BOOCODE_APPS_ORIGIN"))
if MCP_APPS_ORIGIN and (_apps_host := urlsplit(MCP_APPS_ORIGIN).hostname) and _apps_host not in ALLOWED_HOSTS:
    ALLOWED_HOSTS = [*ALLOWED_HOSTS, _apps_host]
# A person's session with a "perUser" server closes after this long without a call.
OAUTH_IDLE_SECONDS = env_float("BOOCODE_OAUTH_IDLE_SECONDS", 900.0, minimum=10.0)
# Seconds a form an MCP server asks for (elicitation) waits for the person before it is declined.
ELICITATION_TIMEOUT = env_float("BOOCODE_ELICITATION_TIMEOUT", 600.0, minimum=1.0)
# Seconds a tool call that needs approval (writeTools/trusted in mcp.json) waits for the person; then denied.
APPROVAL_TIMEOUT = env_float("BOOCODE_APPROVAL_TIMEOUT", 600.0, minimum=1.0)

# --- Agents and native tools ----------------------------------------------------------------
AGENTS_FILE = env_path("BOOCODE_AGENTS_FILE", DATA_DIR / "AGENTS.md", kind="file")
WORKSPACE = env_path("BOOCODE_WORKSPACE", DATA_DIR / "workspace", kind="folder")
TOOL_TIMEOUT = env_float("BOOCODE_TOOL_TIMEOUT", 30.0, minimum=1.0)  # seconds per native tool call
WORKSPACE_DENY = env_list(
    "BOOCODE_WORKSPACE_DENY",
    [
        ".env*",
        "*.pem",
        "*.key",
        "*.p12",
        "*.pfx",
        "id_rsa*",
        "id_ed25519*",
        "*.sqlite",
        "*.sqlite3",
        "*.db",
        ".git",
        ".git/*",
        "secret_key",
    ],
)

# --- LLM (OpenAI-compatible Chat Completions) -----------------------------------------------
LLM_BASE_URL = env_str("BOOCODE_LLM_BASE_URL").rstrip("/")
LLM_API_KEY = env_str("BOOCODE_LLM_API_KEY")
LLM_MODEL = env_str("BOOCODE_LLM_MODEL")
LLM_TIMEOUT = env_float("BOOCODE_LLM_TIMEOUT", 120.0, minimum=1.0)
LLM_MAX_RETRIES = env_int("BOOCODE_LLM_MAX_RETRIES", 3, minimum=0, maximum=10)
# Ask for token usage in every streamed answer (stream_options.include_usage); turn off for a
# server that rejects the option.
LLM_STREAM_USAGE = env_bool("BOOCODE_LLM_STREAM_USAGE", True)
# Seconds between background checks of the model server (GET /models) while chat pages are
# open; each websocket connect checks too. 0 turns the periodic check off.
LLM_CHECK_INTERVAL = env_float("BOOCODE_LLM_CHECK_INTERVAL", 30.0, minimum=0.0)
if 0 < LLM_CHECK_INTERVAL < 5:
    raise ImproperlyConfigured(
        f"BOOCODE_LLM_CHECK_INTERVAL={LLM_CHECK_INTERVAL:g}: must be 0 (off) or at least 5"
    )
# Ollama (found at the base URL's /api/version) is asked over its own /api/chat with num_ctx
# sized to each request, never above this many tokens nor above the model's own window: the
# memory the model server gives a conversation grows with it (docs/models.md).
OLLAMA_MAX_CTX = env_int("BOOCODE_OLLAMA_MAX_CTX", 32768, minimum=2048, maximum=2_097_152)
# The model's context window in tokens when its server does not say (docs/models.md): an agent's
# ``context:`` comes first, then this, then DEFAULT_CONTEXT_TOKENS (boocode.chat.llm.windows). 0: unset.
LLM_CONTEXT_TOKENS = env_int("BOOCODE_LLM_CONTEXT_TOKENS", 0, minimum=0, maximum=100_000_000)
if 0 < LLM_CONTEXT_TOKENS < 1024:
    raise ImproperlyConfigured(
        f"BOOCODE_LLM_CONTEXT_TOKENS={LLM_CONTEXT_TOKENS}: must be 0 (unset) or at least 1024 tokens"
    )
# Tokens of the window kept free for the answer (at most a quarter of the window is kept).
LLM_ANSWER_TOKENS = env_int("BOOCODE_LLM_ANSWER_TOKENS", 4096, minimum=256, maximum=1_000_000)
# Percent of the window past which the earlier turns are summarised (compaction, docs/models.md).
LLM_COMPACT_PERCENT = env_int("BOOCODE_LLM_COMPACT_PERCENT", 80, minimum=10, maximum=95)
# After a conversation's first answer, ask the model for its title (else: the first message's words).
TITLE_FROM_MODEL = env_bool("BOOCODE_TITLE_FROM_MODEL", False)

ADMIN_PASSWORD = env_str("BOOCODE_ADMIN_PASSWORD")

# --- Metrics (docs/operations.md; traces: the standard OTEL_* variables, mcpclient/telemetry) --
# GET /metrics answers a staff session or "Authorization: Bearer <METRICS_TOKEN>" (empty: staff only).
METRICS_TOKEN = env_str("BOOCODE_METRICS_TOKEN")
# The hub worker has no web pages: with a port it serves its own /metrics there (the token only).
HUB_WORKER_METRICS_PORT = env_int("BOOCODE_HUB_WORKER_METRICS_PORT", 0, minimum=0, maximum=65535)
HUB_WORKER_METRICS_HOST = env_str("BOOCODE_HUB_WORKER_METRICS_HOST", "127.0.0.1")
if HUB_WORKER_METRICS_PORT and not METRICS_TOKEN:
    raise ImproperlyConfigured(
        "BOOCODE_HUB_WORKER_METRICS_PORT needs BOOCODE_METRICS_TOKEN: the hub worker's /metrics answers "
        "the token only"
    )
# Spans are exported (mcpclient/telemetry/otlp.py) only with the tracing extra installed.
_otlp_setting = otlp_endpoint_setting()
if _otlp_setting:
    require_extra("tracing", _otlp_setting)

# What BooCode calls itself to MCP servers (clientInfo) and to OAuth servers (software_version).
VERSION = __version__

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    # Redacting: a URL's userinfo and query values and bearer tokens never reach a log line.
    "formatters": {
        "plain": {
            "()": "mcpclient.core.redaction.RedactingFormatter",
            "format": "%(asctime)s %(levelname)s %(name)s: %(message)s",
        }
    },
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": env_log_level("BOOCODE_LOG_LEVEL")},
    "loggers": {
        "daphne": {"level": "WARNING"},
        "httpx2": {"level": "WARNING"},
        # The SDK logs every session id and reconnect at INFO; the hub reports what matters.
        "mcp": {"level": "WARNING"},
        # The SDK logs each failed sign-in with a traceback ("OAuth flow error"), a sign-in that
        # simply waits for someone to connect included; mcpclient.engine.authorization reports the
        # failure with its step instead. Turned on, its lines are redacted (client secrets, tokens,
        # codes: mcpclient.core.redaction.OAuthLogFilter, installed by mcpclient.engine.authorization).
        "mcp.client.auth.oauth2": {"level": "CRITICAL"},
        # Axes logs every login at INFO; failures and lockouts are WARNING.
        "axes": {"level": "WARNING"},
    },
}

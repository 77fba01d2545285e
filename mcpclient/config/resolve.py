"""Resolving an entry when its server is about to connect: envFile, placeholders, the stdio allowlist.

Errors name the server, the key and the variable, never a value. Expansion is a single pass (a
value is never expanded again). A stdio command must pass the allowlist and runs as the file it
was checked as, without a shell. ``${input:ID}`` values come from the lookup the caller passes in
(the secret store's, in the hub); without one, only ``BOOCODE_INPUT_<ID>`` is read.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from django.conf import settings

from mcpclient.config.document import read_bounded, shown_value
from mcpclient.config.dotenv import parse_env_file
from mcpclient.config.entries import PLACEHOLDER_RE, URL_KEYS, EntryChecker, check_url
from mcpclient.config.model import (
    STDIO,
    ConfigError,
    OAuthConfig,
    OAuthSecrets,
    Person,
    ResolvedServer,
    ServerConfig,
)
from mcpclient.config.sandbox import plan_sandbox, sandboxed

# VS Code's and Cursor's predefined variables, written without "env:".
_PREDEFINED = ("userHome", "workspaceFolder")


# Passed to stdio servers when set in the process environment and not given explicitly:
# behind a corporate CA, npx/uvx cannot download anything without them.
PASSTHROUGH_ENV = ("SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE", "NODE_EXTRA_CA_CERTS", "PATH")


# The value of ``${input:ID}``, or None when it has none: the hub passes the secret store's
# (mcpclient.secrets.inputs.input_value); without one only the environment is read.
InputLookup = Callable[[str], str | None]
INPUT_ENV_PREFIX = "BOOCODE_INPUT_"


def env_name(input_id: str) -> str:
    """The variable that gives ``input_id`` a value: ``github-token`` -> ``BOOCODE_INPUT_GITHUB_TOKEN``."""
    return INPUT_ENV_PREFIX + re.sub(r"[^A-Z0-9]", "_", input_id.upper())


def env_input(input_id: str) -> str | None:
    """``${input:ID}`` from the environment alone (``BOOCODE_INPUT_<ID>``, empty counts as unset)."""
    return os.environ.get(env_name(input_id)) or None


class _Expander:
    """Expands placeholders of one server, naming the key of any unset variable or input.

    ``${VAR}``, ``${env:VAR}`` and ``{env:VAR}`` read ``scope``; ``${VAR:-default}`` (Claude
    Code) gives ``default`` when VAR is unset or empty; ``${userHome}`` and
    ``${workspaceFolder}`` (VS Code, Cursor) are the home folder and the folder of mcp.json;
    ``${input:ID}`` (VS Code) is the value entered in the admin or ``BOOCODE_INPUT_<ID>``.
    """

    def __init__(
        self,
        check: EntryChecker,
        scope: Mapping[str, str],
        base_dir: Path | None = None,
        input_value: InputLookup | None = None,
        person: Person | None = None,
    ) -> None:
        self.check = check
        self.scope = scope
        self.base_dir = base_dir
        self.input_value = input_value or env_input
        self.person = person

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
            if match.group("user"):
                if self.person is None:
                    shown = f"${{user.{match.group('user')}}}"
                    raise self.check.fail(f'"{shown}" has no person here (used in "{where}")')
                return str(self.person.id) if match.group("user") == "id" else self.person.name
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

        return PLACEHOLDER_RE.sub(replace, value)

    def _input(self, input_id: str, where: str) -> str:
        value = self.input_value(input_id)
        if value is None:
            raise self.check.fail(
                f'input "{input_id}" has no value (used in "{where}"): enter it on this server\'s admin page '
                f"or set {env_name(input_id)}"
            )
        return value


def _load_env_file(check: EntryChecker, env_file: str, base_dir: Path, expand: _Expander) -> dict[str, str]:
    path = Path(expand(env_file, "envFile")).expanduser()
    if not path.is_absolute():
        path = base_dir / path
    try:
        text = read_bounded(path, f'envFile "{env_file}"').decode("utf-8-sig")
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


def lookup_path(path: str | None, *, prefix: str = sys.prefix, base_prefix: str = sys.base_prefix) -> str:
    """The PATH bare stdio commands are looked up on: BooCode's ``path`` after the ``bin``
    folder of the virtualenv BooCode runs in (``prefix``, when it is not ``base_prefix``), so
    what the project installed there (``uvx``) is found however BooCode was started (``make
    run`` puts that folder on PATH; ``.venv/bin/python manage.py ...`` does not)."""
    if path is None:  # (as shutil.which reads it)
        path = os.environ.get("PATH", os.defpath)
    parts = [part for part in path.split(os.pathsep) if part]
    if prefix != base_prefix:
        own = str(Path(prefix) / "bin")
        parts = [own, *(part for part in parts if part != own)]
    return os.pathsep.join(parts)


def allowed_executable(
    check: EntryChecker, command: str, allowed: Sequence[str], *, base_dir: Path, environ: Mapping[str, str]
) -> str:
    """The executable to spawn for ``command``, or ``ConfigError`` naming why it may not run."""
    search_path = lookup_path(environ.get("PATH"))
    ok, executable = command_allowed(command, allowed, base_dir=base_dir, search_path=search_path)
    if not ok:
        raise check.fail(command_refused(command, base_dir=base_dir, search_path=search_path))
    if executable is None:
        raise check.fail(_not_found(command))
    return executable


def _not_found(command: str) -> str:
    return f"command not found: {command} (looked up on BooCode's PATH and its virtualenv)"


def command_refused(command: str, *, base_dir: Path, search_path: str) -> str:
    """Why the allowlist keeps ``command`` from running, and what would let it run.

    A program that is not there at all is said to be missing: allowing it would not make it run
    (a mistyped name, a tool not installed). One that is there is named as not allowed, with
    how to allow it.
    """
    if "/" not in command:
        if shutil.which(command, path=search_path) is None:
            return _not_found(command)
        return (
            f"command {shown_value(command)} is not allowed; add its name to BOOCODE_MCP_STDIO_COMMANDS "
            "to allow it"
        )
    path = Path(command).expanduser()
    if not (path if path.is_absolute() else base_dir / path).is_file():
        return f"command not found: {command}"
    return (
        f"command {shown_value(command)} is not allowed; a path must be listed in BOOCODE_MCP_STDIO_COMMANDS "
        "as it is, or be the very file a listed name resolves to"
    )


def resolve_server(
    config: ServerConfig,
    *,
    base_dir: Path,
    environ: Mapping[str, str] | None = None,
    allowed_commands: Sequence[str] | None = None,
    input_value: InputLookup | None = None,
    sandbox_required: bool | None = None,
    sandbox_hidden: Sequence[Path] | None = None,
    person: Person | None = None,
) -> ResolvedServer:
    """Prepare ``config`` for connecting. Raises ``ConfigError``.

    * ``envFile`` (relative to ``base_dir``, the mcp.json folder) is read first.
    * Placeholders ``${VAR}``, ``${env:VAR}`` and ``{env:VAR}`` in command, args, env values,
      cwd, url and header values are looked up in the envFile's values, then in ``environ``
      (default ``os.environ``). Expansion is a single pass: a value is never re-expanded.
    * stdio: the command must pass the allowlist ``allowed_commands`` (default
      ``settings.MCP_STDIO_COMMANDS``; see :func:`command_allowed`) and runs as the file it was
      checked as, without a shell: args are passed as a list, never joined. A relative ``cwd``
      is taken relative to ``base_dir``. ``${user.id}`` and ``${user.name}`` are ``person``'s (a
      ``"scope": "perUser"`` server's session of that person; :func:`person_slug`).
    * stdio ``env`` = envFile values, overridden by the expanded explicit ``env``, plus
      SSL_CERT_FILE, SSL_CERT_DIR, REQUESTS_CA_BUNDLE, NODE_EXTRA_CA_CERTS and PATH copied
      from ``environ`` when set there and not given. The SDK's ``stdio_client`` itself only
      passes HOME, LOGNAME, PATH, SHELL, TERM and USER on top of ``env=``, so TLS settings
      for npx/uvx behind a custom CA must come from here.
    * stdio ``sandbox`` (or every stdio server with ``sandbox_required``, default
      ``settings.MCP_STDIO_SANDBOX == "required"``): its paths are expanded like ``args`` and
      checked, bubblewrap must be on BooCode's PATH, and ``sandbox_hidden`` (default
      ``settings.MCP_SANDBOX_HIDDEN``) is kept from the server (see
      :func:`mcpclient.config.sandbox.plan_sandbox`).
    * http/sse: ``env`` is empty; envFile values only feed the url/header placeholders.
    """
    if environ is None:
        environ = os.environ
    check = EntryChecker(config.source, config.name, config.raw)
    base_dir = Path(base_dir)
    file_values: dict[str, str] = {}
    if config.env_file:
        file_values = _load_env_file(
            check, config.env_file, base_dir, _Expander(check, environ, base_dir, input_value, person)
        )
    expand = _Expander(check, {**environ, **file_values}, base_dir, input_value, person)
    env_key = "environment" if "environment" in config.raw else "env"

    if config.transport == STDIO:
        if config.command is None:
            raise check.fail('"command" is required for stdio')
        if allowed_commands is None:
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
        if sandbox_required is None:
            sandbox_required = settings.MCP_STDIO_SANDBOX == "required"
        sandbox = sandboxed(config, required=sandbox_required)
        plan = None
        if sandbox is not None:
            plan = plan_sandbox(
                check,
                sandbox,
                expand=expand,
                base_dir=base_dir,
                command=command,
                env=env,
                # The SDK's default environment gives the server BooCode's HOME unless env sets one.
                home=env.get("HOME") or environ.get("HOME") or str(Path.home()),
                cwd=cwd,
                args=args,
                hidden=settings.MCP_SANDBOX_HIDDEN if sandbox_hidden is None else sandbox_hidden,
                search_path=lookup_path(environ.get("PATH")),
                own_home=str(Path.home()),
            )
        return ResolvedServer(
            config=config, command=command, args=args, env=env, cwd=cwd, url=None, headers={}, sandbox=plan
        )

    if config.url is None:
        raise check.fail(f'"url" is required for {config.transport}')
    url_key = next((key for key in URL_KEYS if key in config.raw), "url")
    url = expand(config.url, url_key)
    check_url(check, url, expanded=True, key=url_key)
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
        id_token=expanded(idp.id_token, "identityProvider.idToken") if idp and idp.id_token else None,
        idp_client_secret=expanded(idp.client_secret, "identityProvider.clientSecret") if idp else None,
    )

"""Live servers: Daphne in a subprocess, the accounts in its database, a PostgreSQL database of its own.

The one way tests (and ``bench/chat_load.py``) start a real web process: :func:`live_daphne`.
:func:`seed_migrated` puts a migrated SQLite database in a new data folder (a copy: migrating
costs seconds). :func:`make_accounts` creates users in the database a live process uses, each with a
conversation and logged-in sessions; :func:`create_accounts` is its short form (``count``
users with one session each) and :func:`live_server` both at once (a data folder of its own,
named accounts with :data:`PASSWORD`, Daphne).

Lifecycle: :func:`live_daphne` yields once Daphne accepts connections and kills it on exit
(``graceful``: SIGTERM first, so its hub stops its MCP servers, and SIGKILL after 10 s).
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import subprocess
import tempfile
import uuid
import weakref
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import psycopg

from tests.support.processes import PYTHON, REAL_PYTHON, ROOT, free_port, wait_for_port

POSTGRES = "postgresql://postgres@127.0.0.1:5432"  # this machine's and CI's server (trust auth)
PASSWORD = "correct horse battery staple"  # of the accounts live_server() creates

# A background job (``nohup make test &``) starts with SIGINT ignored, and an ignored signal
# stays ignored across fork and exec (Popen's restore_signals covers SIGPIPE and SIGXFSZ only):
# Daphne would then shrug off the Ctrl-C the shutdown tests send. This prefix gives the
# command the default SIGINT disposition and then execs it, so its pid and argv stay its own.
# (A preexec_fn could do the same, but is unsafe once the test runs threads, as the scripted
# LLM server does.)
_DEFAULT_SIGINT = [
    REAL_PYTHON,  # not the zygote's launcher: the exec'd command must be the started process
    "-c",
    "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); "
    "os.execv(sys.argv[1], sys.argv[1:])",
]


def with_default_sigint(argv: list[str]) -> list[str]:
    """``argv`` (an absolute program path first) run with SIGINT at its default disposition."""
    return [*_DEFAULT_SIGINT, *argv]


# argv: the accounts as JSON ({name: {"sessions": n, "admin": bool}}), the password ("": none).
_ACCOUNTS = """
import json, sys
import django
django.setup()
from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY, get_user_model
from django.contrib.sessions.backends.db import SessionStore
from django.core.management import call_command
from boocode.chat.models import Conversation

call_command("migrate", interactive=False, verbosity=0)
out = {}
for name, spec in json.loads(sys.argv[1]).items():
    admin = spec.get("admin", False)
    user = get_user_model().objects.create_user(
        name, password=sys.argv[2] or None, is_staff=admin, is_superuser=admin
    )
    keys = []
    for _ in range(spec.get("sessions", 0)):
        session = SessionStore()
        session[SESSION_KEY] = str(user.pk)
        session[BACKEND_SESSION_KEY] = "django.contrib.auth.backends.ModelBackend"
        session[HASH_SESSION_KEY] = user.get_session_auth_hash()
        session.create()
        keys.append(session.session_key)
    conversation = Conversation.objects.create(owner=user)
    out[name] = {"id": user.pk, "sessions": keys, "conversation": conversation.pk}
print(json.dumps(out))
"""


_migrated_template: Path | None = None


def seed_migrated(data: Path, env: Mapping[str, str] | None = None) -> None:
    """Put a migrated SQLite database in the data folder ``data``, unless it has one.

    A copy of one migrated once per test process: migrating a new database costs seconds of
    CPU, and nearly every live process a test starts would do it. The process started on
    ``data`` still runs ``migrate``, which then finds nothing to do. Nothing is done when
    ``env`` (default: this process's) points at a database server instead.
    """
    global _migrated_template
    if (env if env is not None else os.environ).get("BOOCODE_DATABASE_URL"):
        return
    if _migrated_template is None:
        template = Path(tempfile.mkdtemp(prefix="migrated-", dir=os.environ.get("BOOCODE_DATA_DIR")))
        template_env = {**os.environ, "BOOCODE_DATA_DIR": str(template)}
        template_env.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")
        template_env.pop("BOOCODE_DATABASE_URL", None)
        migrate = [PYTHON, "manage.py", "migrate", "-v0"]
        subprocess.run(migrate, cwd=ROOT, env=template_env, check=True, capture_output=True)
        atexit.register(shutil.rmtree, template, True)
        _migrated_template = template / "boocode.sqlite3"
    target = data / _migrated_template.name
    if not target.exists():
        data.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(_migrated_template, target)


@contextmanager
def fresh_database(prefix: str) -> Iterator[str]:
    """A PostgreSQL database of its own (``prefix`` and a name per run), dropped afterwards: its URL."""
    name = f"{prefix}_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(f"{POSTGRES}/postgres", autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {name}")
    try:
        yield f"{POSTGRES}/{name}"
    finally:
        with psycopg.connect(f"{POSTGRES}/postgres", autocommit=True) as admin:
            admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def make_accounts(
    env: dict[str, str], accounts: dict[str, dict[str, Any]], password: str | None = None
) -> dict[str, dict[str, Any]]:
    """Migrate the database ``env`` points at and create ``accounts``: what was made, by name.

    ``accounts`` is ``{username: {"sessions": n, "admin": bool}}`` (both optional: no session,
    not staff); each user gets ``password`` (``None``: none usable) and one conversation.
    Returns ``{username: {"id": pk, "sessions": [session key, ...], "conversation": id}}``.
    """
    if "BOOCODE_DATA_DIR" in env:
        seed_migrated(Path(env["BOOCODE_DATA_DIR"]), env)
    done = subprocess.run(
        [PYTHON, "-c", _ACCOUNTS, json.dumps(accounts), password or ""],
        cwd=ROOT,
        env=env,
        check=True,
        capture_output=True,
    )
    return json.loads(done.stdout)


def create_accounts(env: dict[str, str], count: int, *, staff: bool = False) -> list[dict[str, Any]]:
    """Migrate the database ``env`` points at; ``count`` users, each logged in with a conversation.

    ``staff``: the users are administrators (staff and superuser). Returns
    ``[{"cookie": session key, "conversation": id}, ...]``.
    """
    made = make_accounts(env, {f"live{index}": {"sessions": 1, "admin": staff} for index in range(count)})
    return [{"cookie": user["sessions"][0], "conversation": user["conversation"]} for user in made.values()]


@contextmanager
def live_daphne(
    env: dict[str, str],
    port: int = 0,
    *,
    args: Sequence[str] = (),
    log: Path | None = None,
    graceful: bool = False,
) -> Iterator[tuple[subprocess.Popen[bytes], int]]:
    """Daphne serving the project on ``port`` (or a free one) of 127.0.0.1: ``(process, port)``.

    ``args`` go to Daphne before the application (``--proxy-headers``). Its stderr goes to
    ``log``, or to a temporary file (a pipe nobody reads while the test runs would stop Daphne
    once it logged 64 KB): :func:`server_log` reads it, also after the block.

    Ctrl-C (SIGINT) reaches it even when the tests themselves run with SIGINT ignored.

    Yields once it accepts connections. On exit, if it is still running: killed, or with
    ``graceful`` stopped with SIGTERM (its hub closes its MCP servers) and killed after 10 s.
    """
    port = port or free_port()
    sink = log.open("w+b") if log is not None else tempfile.TemporaryFile()  # closed with the process
    process = subprocess.Popen(
        with_default_sigint([str(ROOT / "scripts" / "serve"), *args]),  # as deployments serve it
        cwd=ROOT,
        env={**env, "HOST": "127.0.0.1", "PORT": str(port), "PYTHON": PYTHON},
        stdout=subprocess.DEVNULL,
        stderr=sink,
    )
    _logs[process] = sink
    try:
        # A deadline, not a wait: Daphne's start (Django, the SDK, the hub) took over 30 s on
        # 2 cores running a whole make test beside a browser loop.
        wait_for_port(port, process, timeout=120)
        yield process, port
    finally:
        if process.poll() is None and graceful:
            process.terminate()
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                pass
        if process.poll() is None:
            process.kill()
            process.wait()


_logs: weakref.WeakKeyDictionary[subprocess.Popen[bytes], IO[bytes]] = weakref.WeakKeyDictionary()


def server_log(process: subprocess.Popen[bytes]) -> str:
    """What a :func:`live_daphne` process has written to stderr so far."""
    log = _logs[process]
    log.seek(0)
    return log.read().decode(errors="replace")


@dataclass
class Live:
    """A running Daphne and the accounts in its database (as :func:`make_accounts` returns them)."""

    port: int
    accounts: dict[str, dict[str, Any]]
    log: Path
    env: dict[str, str]

    def ws_url(self, conversation: int) -> str:
        return f"ws://127.0.0.1:{self.port}/ws/conversations/{conversation}/"

    def django(self, code: str) -> None:
        """Run ``code`` after ``django.setup()`` in another process on the server's database."""
        subprocess.run(
            [PYTHON, "-c", f"import django; django.setup()\n{code}"],
            cwd=ROOT,
            env=self.env,
            check=True,
            capture_output=True,
        )


@contextmanager
def live_server(
    tmp: Path,
    accounts: dict[str, dict[str, Any]],
    env: dict[str, str] | None = None,
    *args: str,
    port: int | None = None,
    mcp_json: str = '{"mcpServers": {}}',
) -> Iterator[Live]:
    """Daphne on ``port`` (default: a free one) with ``accounts`` (password :data:`PASSWORD`)
    created and ``mcp_json`` as its mcp.json, all in ``tmp/data``; its log is ``tmp/daphne.log``."""
    data = tmp / "data"
    data.mkdir()
    full_env = {
        **os.environ,
        "BOOCODE_DATA_DIR": str(data),
        "BOOCODE_MCP_CONFIG": str(data / "mcp.json"),
        "BOOCODE_MCP_AUTOSTART": "0",
        "BOOCODE_ALLOWED_HOSTS": "127.0.0.1,localhost",
        "DJANGO_SETTINGS_MODULE": "tests.settings",
        **(env or {}),
    }
    (data / "mcp.json").write_text(mcp_json)
    made = make_accounts(full_env, accounts, PASSWORD)
    log = tmp / "daphne.log"
    with live_daphne(full_env, port or 0, args=args, log=log) as (_process, bound):
        yield Live(bound, made, log, full_env)

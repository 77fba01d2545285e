"""A live server for tests and benchmarks: Daphne in a subprocess, and accounts in its database.

Shared by tests that run a real Daphne and by ``bench/chat_load.py``.
"""

from __future__ import annotations

import json
import subprocess
import tempfile
import uuid
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from typing import IO, Any

import psycopg

from tests.conftest import PYTHON, ROOT, free_port, wait_for_port

POSTGRES = "postgresql://postgres@127.0.0.1:5432"  # this machine's and CI's server (trust auth)

# A background job (``nohup make test &``) starts with SIGINT ignored, and an ignored signal
# stays ignored across fork and exec (Popen's restore_signals covers SIGPIPE and SIGXFSZ only):
# Daphne would then shrug off the Ctrl-C the shutdown tests send. This prefix gives the
# command the default SIGINT disposition and then execs it, so its pid and argv stay its own.
# (A preexec_fn could do the same, but is unsafe once the test runs threads, as the scripted
# LLM server does.)
_DEFAULT_SIGINT = [
    PYTHON,
    "-c",
    "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); "
    "os.execv(sys.argv[1], sys.argv[1:])",
]


def with_default_sigint(argv: list[str]) -> list[str]:
    """``argv`` (an absolute program path first) run with SIGINT at its default disposition."""
    return [*_DEFAULT_SIGINT, *argv]


_SETUP = """
import json, sys
import django
django.setup()
from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY, get_user_model
from django.contrib.sessions.backends.db import SessionStore
from django.core.management import call_command
from boocode.chat.models import Conversation

call_command("migrate", interactive=False, verbosity=0)
out = []
staff = sys.argv[2] == "staff"
for index in range(int(sys.argv[1])):
    user = get_user_model().objects.create_user(f"live{index}", is_staff=staff, is_superuser=staff)
    session = SessionStore()
    session[SESSION_KEY] = str(user.pk)
    session[BACKEND_SESSION_KEY] = "django.contrib.auth.backends.ModelBackend"
    session[HASH_SESSION_KEY] = user.get_session_auth_hash()
    session.create()
    conversation = Conversation.objects.create(owner=user)
    out.append({"cookie": session.session_key, "conversation": conversation.pk})
print(json.dumps(out))
"""


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


def create_accounts(env: dict[str, str], count: int, *, staff: bool = False) -> list[dict[str, Any]]:
    """Migrate the database ``env`` points at; ``count`` users, each logged in with a conversation.

    ``staff``: the users are administrators (staff and superuser). Returns
    ``[{"cookie": session key, "conversation": id}, ...]``.
    """
    done = subprocess.run(
        [PYTHON, "-c", _SETUP, str(count), "staff" if staff else "user"],
        cwd=ROOT,
        env=env,
        check=True,
        capture_output=True,
    )
    return json.loads(done.stdout)


@contextmanager
def live_daphne(env: dict[str, str], port: int = 0) -> Iterator[tuple[subprocess.Popen[bytes], int]]:
    """Daphne serving the project on ``port`` (or a free one) of 127.0.0.1: ``(process, port)``.

    Its stderr goes to a temporary file (a pipe nobody reads while the test runs would stop
    Daphne once it logged 64 KB): :func:`server_log` reads it, also after the block.

    Ctrl-C (SIGINT) reaches it even when the tests themselves run with SIGINT ignored.

    Yields once it accepts connections; killed on exit if it is still running.
    """
    port = port or free_port()
    log = tempfile.TemporaryFile()  # removed when the process object is collected
    process = subprocess.Popen(
        with_default_sigint(
            [PYTHON, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port), "boocode.asgi:application"]
        ),
        cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=log,
    )
    _logs[process] = log
    try:
        wait_for_port(port, process)
        yield process, port
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


_logs: weakref.WeakKeyDictionary[subprocess.Popen[bytes], IO[bytes]] = weakref.WeakKeyDictionary()


def server_log(process: subprocess.Popen[bytes]) -> str:
    """What a :func:`live_daphne` process has written to stderr so far."""
    log = _logs[process]
    log.seek(0)
    return log.read().decode(errors="replace")

"""A live server for tests and benchmarks: Daphne in a subprocess, and accounts in its database.

Shared by tests that run a real Daphne and by ``bench/chat_load.py``.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from tests.conftest import PYTHON, ROOT, free_port, wait_for_port

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
for index in range(int(sys.argv[1])):
    user = get_user_model().objects.create_user(f"live{index}")
    session = SessionStore()
    session[SESSION_KEY] = str(user.pk)
    session[BACKEND_SESSION_KEY] = "django.contrib.auth.backends.ModelBackend"
    session[HASH_SESSION_KEY] = user.get_session_auth_hash()
    session.create()
    conversation = Conversation.objects.create(owner=user)
    out.append({"cookie": session.session_key, "conversation": conversation.pk})
print(json.dumps(out))
"""


def create_accounts(env: dict[str, str], count: int) -> list[dict[str, Any]]:
    """Migrate the database ``env`` points at; ``count`` users, each logged in with a conversation.

    Returns ``[{"cookie": session key, "conversation": id}, ...]``.
    """
    done = subprocess.run(
        [PYTHON, "-c", _SETUP, str(count)], cwd=ROOT, env=env, check=True, capture_output=True
    )
    return json.loads(done.stdout)


@contextmanager
def live_daphne(env: dict[str, str], port: int = 0) -> Iterator[tuple[subprocess.Popen[bytes], int]]:
    """Daphne serving the project on ``port`` (or a free one) of 127.0.0.1: ``(process, port)``.

    Its stderr is piped.

    Ctrl-C (SIGINT) reaches it even when the tests themselves run with SIGINT ignored.

    Yields once it accepts connections; killed on exit if it is still running.
    """
    port = port or free_port()
    process = subprocess.Popen(
        with_default_sigint(
            [PYTHON, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port), "boocode.asgi:application"]
        ),
        cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )
    try:
        wait_for_port(port, process)
        yield process, port
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()

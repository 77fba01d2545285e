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
def live_daphne(env: dict[str, str]) -> Iterator[tuple[subprocess.Popen[bytes], int]]:
    """Daphne serving the project on a free port of 127.0.0.1, stderr piped: ``(process, port)``.

    Yields once it accepts connections; killed on exit if it is still running.
    """
    port = free_port()
    process = subprocess.Popen(
        [PYTHON, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port), "boocode.asgi:application"],
        cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )
    try:
        wait_for_port(port, process)
        yield process, port
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()

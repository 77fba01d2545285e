"""The first ``make run``, as a newcomer meets it: a copied ``.env.example``, the output up to the
admin's password, a second ``make run`` on a taken port.

Each test runs ``manage.py`` as ``make run`` does, in its own process on a data folder of its
own. What is asserted is what the person reads: the exit status and the lines printed.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import socket
import subprocess
from pathlib import Path

import pytest

from tests.support.processes import PYTHON, ROOT, free_port

pytestmark = pytest.mark.processes

FRAME_RULE = re.compile(r"^\+-+\+$")


def without_settings() -> dict[str, str]:
    """This environment without any BooCode setting: only what a file gives them counts."""
    env = {name: value for name, value in os.environ.items() if not name.startswith("BOOCODE_")}
    env["DJANGO_SETTINGS_MODULE"] = "boocode.settings"
    return env


def manage(cwd: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """``manage.py <args>`` started in ``cwd``."""
    command = [PYTHON, str(ROOT / "manage.py"), *args]
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def prepare(cwd: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """``manage.py boocode_prepare <args>`` started in ``cwd``, as ``make run`` runs it."""
    return manage(cwd, env, "boocode_prepare", *args)


def test_a_copy_of_env_example_prepares_as_the_defaults_do(tmp_path: Path) -> None:
    # `cp .env.example .env`, as the README says: the file verbatim, every empty line the default.
    shutil.copyfile(ROOT / ".env.example", tmp_path / ".env")
    env = {**without_settings(), "BOOCODE_ENV_FILE": str(tmp_path / ".env")}
    done = prepare(tmp_path, env)  # BOOCODE_DATA_DIR=data: the data folder of the working folder
    assert done.returncode == 0, done.stderr
    data = tmp_path / "data"
    assert f"Created {data / 'mcp.json'} from mcp.example.json" in done.stdout
    assert f"Created {data / 'AGENTS.md'} from AGENTS.example.md" in done.stdout
    assert (data / "boocode.sqlite3").is_file() and "Password: " in done.stdout
    # a setting the file leaves empty is its default, not the working folder
    code = (
        "from django.conf import settings as s; "
        "print(s.MCP_CONFIG, s.AGENTS_FILE, s.WORKSPACE, s.ALLOWED_HOSTS)"
    )
    shell = manage(tmp_path, env, "shell", "-c", code)
    assert shell.stdout.split()[-5:] == [
        str(data / "mcp.json"),
        str(data / "AGENTS.md"),
        str(data / "workspace"),
        "['127.0.0.1',",
        "'localhost']",
    ], shell.stderr


@pytest.mark.parametrize(
    ("variable", "value", "message"),
    [
        ("BOOCODE_MCP_CONFIG", ".", "BOOCODE_MCP_CONFIG={cwd}: is a folder; expected a file's path"),
        ("BOOCODE_AGENTS_FILE", ".", "BOOCODE_AGENTS_FILE={cwd}: is a folder; expected a file's path"),
        ("BOOCODE_WORKSPACE", ".env", "BOOCODE_WORKSPACE={cwd}/.env: is a file; expected a folder"),
        ("BOOCODE_LOG_LEVEL", "loud", "BOOCODE_LOG_LEVEL='LOUD': expected one of DEBUG, INFO, WARNING"),
        (
            "BOOCODE_PUBLIC_URL",
            "chat.example.org",
            "BOOCODE_PUBLIC_URL='chat.example.org': expected an http(s) URL",
        ),
        ("BOOCODE_EMAIL_STARTTLS", "maybe", "BOOCODE_EMAIL_STARTTLS='maybe': expected one of"),
        ("BOOCODE_REDIS_URL", "localhost:6379", "BOOCODE_REDIS_URL: expected redis://"),
        ("BOOCODE_DATA_DIR", ".env", "BOOCODE_DATA_DIR={cwd}/.env: is a file; expected a folder"),
    ],
)
def test_a_bad_setting_in_the_file_is_named_in_one_line(
    tmp_path: Path, variable: str, value: str, message: str
) -> None:
    data = "" if variable == "BOOCODE_DATA_DIR" else "BOOCODE_DATA_DIR=data\n"
    (tmp_path / ".env").write_text(f"{data}{variable}={value}\n")
    env = {**without_settings(), "BOOCODE_ENV_FILE": str(tmp_path / ".env")}
    done = prepare(tmp_path, env)
    assert done.returncode == 1
    [line] = done.stderr.strip().splitlines()  # one line, no traceback
    assert line.startswith(f"ImproperlyConfigured: {message.format(cwd=tmp_path)}"), done.stderr
    assert not (tmp_path / "data" / "boocode.sqlite3").exists()


def test_the_first_start_says_little_and_ends_with_the_framed_password(tmp_path: Path) -> None:
    env = {**without_settings(), "BOOCODE_ENV_FILE": "", "BOOCODE_DATA_DIR": str(tmp_path)}
    port = free_port()
    first = prepare(ROOT, env, "--host", "127.0.0.1", "--port", str(port))
    assert first.returncode == 0, first.stderr
    lines = first.stdout.splitlines()
    assert not any("Applying" in line for line in lines)  # one line for the migrations
    [migrated] = [line for line in lines if line.startswith("Database ")]
    assert re.fullmatch(rf"Database {tmp_path}/boocode\.sqlite3: \d+ migrations applied\.", migrated)
    # the frame comes last and holds the password, where to log in and what to do next
    assert FRAME_RULE.match(lines[-1])
    top = max(i for i, line in enumerate(lines[:-1]) if FRAME_RULE.match(line))
    frame = [line.strip("| ").rstrip() for line in lines[top + 1 : -1]]
    assert lines[top:] == [
        lines[top],
        *(f"| {text.ljust(len(lines[top]) - 4)} |" for text in frame),
        lines[-1],
    ]
    password = next(line for line in frame if line.startswith("Password: ")).split()[1]
    text = "\n".join(frame)
    assert f"Log in at http://127.0.0.1:{port}/ and change it with the sidebar's Password link." in text
    assert "manage.py changepassword admin" in text and "/admin/" not in text.split("Password link")[0]
    assert f"Give it one on its page in the admin: http://127.0.0.1:{port}/admin/auth/user/" in text
    check = (
        "from django.contrib.auth import authenticate; "
        f"user = authenticate(username='admin', password={password!r}); "
        "print(user is not None and user.email == '')"
    )
    shell = manage(ROOT, env, "shell", "-c", check)
    assert shell.stdout.strip().splitlines()[-1] == "True", shell.stderr
    again = prepare(ROOT, env, "--port", str(port))  # a restart: nothing applied, nobody created, no frame
    assert again.returncode == 0, again.stderr
    assert "Database " not in again.stdout and "Password" not in again.stdout and "+--" not in again.stdout


def test_a_taken_port_stops_make_run_before_anything_is_prepared(tmp_path: Path) -> None:
    env = {**without_settings(), "BOOCODE_ENV_FILE": "", "BOOCODE_DATA_DIR": str(tmp_path)}
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = prepare(ROOT, env, "--host", "127.0.0.1", "--port", str(port))
    assert done.returncode == 1 and done.stdout == ""
    [line] = done.stderr.strip().splitlines()
    assert line.startswith(
        f"CommandError: port {port} on 127.0.0.1 is already in use (is BooCode already running?)."
    )
    assert re.search(r"Stop what listens there, or serve on another port: make run PORT=\d+$", line)
    suggested = int(line.rsplit("=", 1)[1])
    assert suggested > port
    assert sorted(p.name for p in tmp_path.iterdir()) == ["secret_key"]  # no database, no data files


def test_make_run_checks_its_host_and_port_before_serving() -> None:
    plan = subprocess.run(
        ["make", "-n", "run", "HOST=127.0.0.2", "PORT=8765"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    prepare_line = next(i for i, line in enumerate(plan) if "boocode_prepare" in line)
    serve_line = next(i for i, line in enumerate(plan) if "scripts/serve" in line)
    assert plan[prepare_line].endswith("manage.py boocode_prepare --host 127.0.0.2 --port 8765")
    assert prepare_line < serve_line and "HOST=127.0.0.2 PORT=8765" in plan[serve_line]


def test_without_the_semantic_extra_tool_search_says_so_without_a_warning(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from boocode.tools import embedding

    # `make run` installs requirements.txt only: as if numpy were missing (the suite installs it)
    monkeypatch.setattr(embedding, "_MISSING", "numpy")
    embedding._cached.cache_clear()
    try:
        with caplog.at_level(logging.INFO, logger="boocode.tools.embedding"):
            assert embedding._cached() is None
    finally:
        embedding._cached.cache_clear()
    [record] = caplog.records
    assert record.levelno == logging.INFO
    assert (
        record.getMessage() == "tool search is lexical only: numpy is not installed (make install-semantic)"
    )


@pytest.mark.parametrize("variable", ["PORT", "BOOCODE_LISTEN_BACKLOG", "BOOCODE_WS_CONNECT_TIMEOUT"])
def test_the_serve_script_names_a_setting_that_is_not_a_number(variable: str) -> None:
    env = {**without_settings(), variable: "lots", "PYTHON": PYTHON}
    done = subprocess.run(
        [str(ROOT / "scripts" / "serve")], env=env, capture_output=True, text=True, timeout=60
    )
    assert (done.returncode, done.stderr) == (
        2,
        f"scripts/serve: {variable}='lots': expected a whole number\n",
    )

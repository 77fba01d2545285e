"""Settings come from BOOCODE_* variables, parsed strictly."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from boocode.env import env_bool, env_float, env_int, env_list, env_log_level, env_path, env_str, env_url
from tests.support.processes import PYTHON, ROOT


def test_tests_use_their_own_data_dir():
    assert "boocode-test-" in str(settings.DATA_DIR)
    assert settings.DATABASES["default"]["ENGINE"] in (
        "django.db.backends.sqlite3",
        "django.db.backends.postgresql",
    )


@pytest.mark.parametrize(("value", "expected"), [("1", True), ("Yes", True), ("off", False), ("", False)])
def test_env_bool(monkeypatch, value, expected):
    monkeypatch.setenv("BOOCODE_X", value)
    assert env_bool("BOOCODE_X") is expected


def test_an_empty_value_is_the_default(monkeypatch):
    # .env.example's empty lines (`BOOCODE_MCP_CONFIG=`): as if unset, whatever the kind
    monkeypatch.setenv("BOOCODE_X", "  ")
    assert env_bool("BOOCODE_X", True) is True
    assert env_str("BOOCODE_X", "default") == "default"
    assert env_str("BOOCODE_X", "groups", when_empty="") == ""  # a documented meaning of its own
    assert env_list("BOOCODE_X", ["a", "b"]) == ["a", "b"]
    assert env_list("BOOCODE_X", ["npx"], when_empty=[]) == []  # set empty: none, never the default
    monkeypatch.delenv("BOOCODE_X")
    assert env_list("BOOCODE_X", ["npx"], when_empty=[]) == ["npx"]  # unset: the default
    monkeypatch.setenv("BOOCODE_X", "  ")
    assert env_int("BOOCODE_X", 7) == 7 and env_float("BOOCODE_X", 1.5) == 1.5
    assert env_path("BOOCODE_X", Path("/srv/boo/mcp.json"), kind="file") == Path("/srv/boo/mcp.json")
    assert env_log_level("BOOCODE_X") == "INFO"
    assert env_url("BOOCODE_X", "http://127.0.0.1:8000") == "http://127.0.0.1:8000"


def test_bad_values_name_the_variable(monkeypatch):
    monkeypatch.setenv("BOOCODE_X", "maybe")
    with pytest.raises(ImproperlyConfigured, match=r"BOOCODE_X='maybe': expected one of"):
        env_bool("BOOCODE_X")
    with pytest.raises(ImproperlyConfigured, match=r"BOOCODE_X='maybe': expected an integer"):
        env_int("BOOCODE_X", 1)
    with pytest.raises(ImproperlyConfigured, match=r"BOOCODE_X='maybe': expected a number"):
        env_float("BOOCODE_X", 1.0)
    for endless in ("nan", "inf", "-inf"):
        monkeypatch.setenv("BOOCODE_X", endless)
        with pytest.raises(ImproperlyConfigured, match=rf"BOOCODE_X='{endless}': expected a finite number"):
            env_float("BOOCODE_X", 1.0, minimum=1.0)
    monkeypatch.setenv("BOOCODE_X", "500")
    with pytest.raises(ImproperlyConfigured, match=r"BOOCODE_X=500: must be at most 100"):
        env_int("BOOCODE_X", 1, maximum=100)
    monkeypatch.setenv("BOOCODE_X", " a, ,b ")
    assert env_list("BOOCODE_X", []) == ["a", "b"]


@pytest.mark.processes
def test_a_bad_variable_stops_the_process_with_a_clear_message(tmp_path):
    env = {**os.environ, "BOOCODE_DATA_DIR": str(tmp_path), "BOOCODE_LLM_TIMEOUT": "soon"}
    result = subprocess.run([PYTHON, "manage.py", "check"], cwd=ROOT, env=env, capture_output=True, text=True)
    assert result.returncode != 0
    assert "BOOCODE_LLM_TIMEOUT='soon': expected a number" in result.stderr


@pytest.mark.processes
def test_a_window_for_ollama_too_small_for_any_model_is_refused(tmp_path):
    env = {**os.environ, "BOOCODE_DATA_DIR": str(tmp_path), "BOOCODE_OLLAMA_MAX_CTX": "1024"}
    result = subprocess.run([PYTHON, "manage.py", "check"], cwd=ROOT, env=env, capture_output=True, text=True)
    assert result.returncode != 0
    assert "BOOCODE_OLLAMA_MAX_CTX=1024: must be at least 2048" in result.stderr


@pytest.mark.processes
def test_secret_key_is_generated_once_and_private(tmp_path):
    env = {**os.environ, "BOOCODE_DATA_DIR": str(tmp_path)}
    env.pop("BOOCODE_SECRET_KEY", None)
    env["DJANGO_SETTINGS_MODULE"] = "boocode.settings"
    code = "import django; django.setup(); from django.conf import settings; print(settings.SECRET_KEY)"

    def secret_key() -> subprocess.CompletedProcess[str]:
        return subprocess.run([PYTHON, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True)

    first, second = secret_key(), secret_key()
    assert first.stdout == second.stdout and len(first.stdout.strip()) > 40
    assert (tmp_path / "secret_key").stat().st_mode & 0o777 == 0o600


@pytest.mark.processes
def test_the_env_file_fills_in_what_the_environment_does_not_set(tmp_path):
    env_file = tmp_path / "boocode.env"
    env_file.write_text(
        "# a comment\nBOOCODE_LLM_MODEL=from-the-file\nexport BOOCODE_LLM_TIMEOUT=42\nBOOCODE_PUBLIC_URL=http://file\n"
    )
    env = {
        **os.environ,
        "BOOCODE_DATA_DIR": str(tmp_path),
        "BOOCODE_ENV_FILE": str(env_file),
        "BOOCODE_PUBLIC_URL": "http://shell",  # exported: wins over the file
        "DJANGO_SETTINGS_MODULE": "boocode.settings",
    }
    for name in ("BOOCODE_LLM_MODEL", "BOOCODE_LLM_TIMEOUT"):
        env.pop(name, None)
    code = (
        "import django; django.setup(); from django.conf import settings as s; "
        "print(s.LLM_MODEL, s.LLM_TIMEOUT, s.PUBLIC_URL)"
    )
    read = subprocess.run([PYTHON, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True)
    assert read.stdout.split() == ["from-the-file", "42.0", "http://shell"], read.stderr
    # A malformed value from the file stops start-up like one from the environment.
    env_file.write_text("BOOCODE_LLM_TIMEOUT=soon\n")
    bad = subprocess.run([PYTHON, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True)
    assert bad.returncode != 0 and "BOOCODE_LLM_TIMEOUT='soon': expected a number" in bad.stderr
    # `cp .env.example .env` as the README says: every line of it is a valid setting.
    env["BOOCODE_ENV_FILE"] = str(ROOT / ".env.example")
    example = subprocess.run([PYTHON, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True)
    assert example.returncode == 0 and example.stdout.split()[-1] == "http://shell", example.stderr


def test_every_variable_the_settings_read_is_in_env_example_and_the_docs():
    read = set(re.findall(r'env_\w+\(\s*"(BOOCODE_\w+)"', (ROOT / "boocode" / "settings.py").read_text()))
    read -= {"BOOCODE_TEST_DB_FILE", "BOOCODE_TEST_DB_NAME"}  # the tests' own
    assert len(read) > 80
    example = set(re.findall(r"^(BOOCODE_\w+)=", (ROOT / ".env.example").read_text(), re.MULTILINE))
    documented = set(re.findall(r"`(BOOCODE_\w+)`", (ROOT / "docs" / "configuration.md").read_text()))
    assert sorted(read - example) == [] and sorted(read - documented) == []


def test_the_tests_read_no_env_file():
    assert os.environ["BOOCODE_ENV_FILE"] == ""


@pytest.mark.processes
def test_the_live_data_files_are_the_administrators_not_the_checkouts():
    tracked = subprocess.run(
        ["git", "ls-files", "data"], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert sorted(tracked.stdout.split()) == ["data/AGENTS.example.md", "data/mcp.example.json"]
    ignored = subprocess.run(
        ["git", "check-ignore", "data/mcp.json", "data/AGENTS.md"], cwd=ROOT, capture_output=True, text=True
    )
    assert ignored.stdout.split() == ["data/mcp.json", "data/AGENTS.md"]


def test_a_first_start_copies_each_missing_data_file_from_its_example(tmp_path, settings):
    from boocode.data_files import create_from_examples

    settings.MCP_CONFIG = tmp_path / "new" / "mcp.json"
    settings.AGENTS_FILE = tmp_path / "AGENTS.md"
    settings.AGENTS_FILE.write_text("## Mine\n")
    assert create_from_examples() == [(settings.MCP_CONFIG_EXAMPLE, settings.MCP_CONFIG)]
    assert settings.MCP_CONFIG.read_bytes() == settings.MCP_CONFIG_EXAMPLE.read_bytes()
    assert settings.AGENTS_FILE.read_text() == "## Mine\n"
    assert create_from_examples() == [] and sorted(p.name for p in tmp_path.rglob("*")) == [
        "AGENTS.md",
        "mcp.json",
        "new",
    ]

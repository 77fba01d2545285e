"""Settings come from BOOCODE_* variables, parsed strictly."""

from __future__ import annotations

import os
import subprocess

import pytest
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from boocode.env import env_bool, env_float, env_int, env_list
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

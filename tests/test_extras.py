"""A setting that needs an optional extra stops the start with the line that installs it.

The test install carries every extra (``make test``), so an absent one is simulated in the child
process only: its ``sys.modules`` maps the extra's module to ``None``, which Python's import
machinery (and ``importlib.util.find_spec``) treats as not installed. Nothing is uninstalled.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from boocode import extras
from tests.support.processes import PYTHON, ROOT

# `manage.py check` with the named modules made absent first.
CHECK = (
    "import runpy, sys\n"
    "for name in sys.argv[1:]:\n"
    "    sys.modules[name] = None\n"
    "sys.argv = ['manage.py', 'check']\n"
    "runpy.run_path('manage.py', run_name='__main__')\n"
)


# What the test run itself may set (the PostgreSQL run sets the database): only ``settings`` count.
NEEDING_EXTRAS = (
    "BOOCODE_DATABASE_URL",
    "DATABASE_URL",
    "BOOCODE_REDIS_URL",
    "BOOCODE_HUB",
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    "BOOCODE_OIDC_ISSUER",
    "BOOCODE_OIDC_CLIENT_ID",
)


def check(tmp_path: Path, settings: dict[str, str], *absent: str) -> subprocess.CompletedProcess[str]:
    env = {name: value for name, value in os.environ.items() if name not in NEEDING_EXTRAS}
    env.update({"BOOCODE_DATA_DIR": str(tmp_path), **settings})
    return subprocess.run(
        [PYTHON, "-c", CHECK, *absent], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )


CASES = [
    (
        {"BOOCODE_DATABASE_URL": "postgres://boocode@127.0.0.1:1/search"},
        ("psycopg",),
        "BOOCODE_DATABASE_URL needs the postgres extra (PostgreSQL as the database), which is not "
        "installed (no module psycopg): install it with `make install-postgres` (or `pip install -r "
        "requirements-postgres.txt`), or unset BOOCODE_DATABASE_URL",
    ),
    (
        {"BOOCODE_REDIS_URL": "redis://127.0.0.1:1/0", "BOOCODE_HUB": "worker"},
        ("channels_redis",),
        "BOOCODE_REDIS_URL needs the redis extra (Redis for several processes and the hub worker), "
        "which is not installed (no module channels_redis): install it with `make install-redis`",
    ),
    (
        {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:1/v1/traces"},
        ("opentelemetry.sdk", "opentelemetry.exporter.otlp.proto.http"),
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT needs the tracing extra (traces exported over OTLP), which "
        "is not installed (no module opentelemetry.sdk, opentelemetry.exporter.otlp.proto.http): "
        "install it with `make install-tracing`",
    ),
    (
        {"BOOCODE_OIDC_ISSUER": "https://id.example", "BOOCODE_OIDC_CLIENT_ID": "boocode"},
        ("authlib",),
        "BOOCODE_OIDC_ISSUER needs the sso extra (single sign-on with OpenID Connect), which is not "
        "installed (no module authlib): install it with `make install-sso`",
    ),
]


@pytest.mark.processes
@pytest.mark.parametrize(
    ("settings", "absent", "message"), CASES, ids=["postgres", "redis", "tracing", "sso"]
)
def test_a_setting_whose_extra_is_missing_names_it_and_how_to_install_it(
    tmp_path: Path, settings: dict[str, str], absent: tuple[str, ...], message: str
) -> None:
    result = check(tmp_path, settings, *absent)
    assert result.returncode != 0
    assert f"ImproperlyConfigured: {message}" in result.stderr, result.stderr[-2000:]


@pytest.mark.processes
def test_without_those_settings_the_start_needs_no_extra(tmp_path: Path) -> None:
    every_extra = [module for extra in extras.EXTRAS.values() for module in extra.modules]
    result = check(tmp_path, {}, *every_extra)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "System check identified no issues" in result.stdout


def test_the_extras_are_found_installed_here() -> None:
    """The test install carries every extra (``make test`` installs them): none is missing."""
    assert {name: extras.missing(name) for name in extras.EXTRAS} == {name: [] for name in extras.EXTRAS}

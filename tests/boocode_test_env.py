"""Root pytest configuration: every test process gets its own data directory and databases.

This runs before pytest-django loads the settings, so BOOCODE_DATA_DIR (SQLite file, secret
key, workspace) never points at the developer's data/ folder, and a PostgreSQL test database
gets a name of its own (BOOCODE_TEST_DB_NAME): two checkouts, or two runs, testing on one
server at once would otherwise share "test_boocode", one dropping it under the other.
pytest-django drops it at the end (unless --reuse-db; set BOOCODE_TEST_DB_NAME yourself then).

Under pytest-xdist each worker is a process of its own that inherits the controller's
environment, so a worker replaces what the controller set: its own data folder (and with it
its own SQLite file) and its own PostgreSQL database name (pytest-django adds the worker's id).
"""

import os
import secrets
import tempfile

_worker = os.environ.get("PYTEST_XDIST_WORKER", "")
_set = os.environ.__setitem__ if _worker else os.environ.setdefault
_set("BOOCODE_DATA_DIR", tempfile.mkdtemp(prefix=f"boocode-test-{_worker}-" if _worker else "boocode-test-"))
os.environ.setdefault("BOOCODE_MCP_AUTOSTART", "0")
# The checkout's .env is the developer's running instance's, not the tests'.
os.environ.setdefault("BOOCODE_ENV_FILE", "")
os.environ.setdefault("BOOCODE_DB_CONN_MAX_AGE", "0")
# A file rather than SQLite's in-memory test database, so a subprocess started by a test
# (tests/mcpclient/runtime/test_second_process.py) can open it.
_set("BOOCODE_TEST_DB_FILE", os.path.join(os.environ["BOOCODE_DATA_DIR"], "test.sqlite3"))
os.environ.setdefault("BOOCODE_TEST_DB_NAME", f"test_boocode_{os.getpid()}_{secrets.token_hex(4)}")


_zygote = None


def pytest_configure(config: object) -> None:
    """Start the test process's zygote (tests/support/zygote.py): its Python processes start warm.

    Every test process but pytest-xdist's controller, which runs no test.
    """
    global _zygote
    controller = not hasattr(config, "workerinput") and getattr(config.option, "numprocesses", None)
    if controller or os.environ.get("BOOCODE_TEST_ZYGOTE", "1") == "0":
        return
    from tests.support import zygote
    from tests.support.processes import PYTHON

    _zygote = zygote.start(PYTHON)


def pytest_unconfigure(config: object) -> None:
    global _zygote
    if _zygote is not None:
        from tests.support import zygote

        zygote.stop(_zygote)
        _zygote = None

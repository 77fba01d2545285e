"""Root pytest configuration: every test run gets its own data directory.

This runs before pytest-django loads the settings, so BOOCODE_DATA_DIR (SQLite file,
secret key, workspace) never points at the developer's data/ folder, and a PostgreSQL test
database gets a name of its own (BOOCODE_TEST_DB_NAME): two checkouts, or two runs, testing on
one server at once would otherwise share "test_boocode", one dropping it under the other.
pytest-django drops it at the end (unless --reuse-db; set BOOCODE_TEST_DB_NAME yourself then).
"""

import os
import secrets
import tempfile

os.environ.setdefault("BOOCODE_DATA_DIR", tempfile.mkdtemp(prefix="boocode-test-"))
os.environ.setdefault("BOOCODE_MCP_AUTOSTART", "0")
os.environ.setdefault("BOOCODE_DB_CONN_MAX_AGE", "0")
# A file rather than SQLite's in-memory test database, so a subprocess started by a test
# (tests/mcpclient/test_second_process.py) can open it.
os.environ.setdefault("BOOCODE_TEST_DB_FILE", os.path.join(os.environ["BOOCODE_DATA_DIR"], "test.sqlite3"))
os.environ.setdefault("BOOCODE_TEST_DB_NAME", f"test_boocode_{os.getpid()}_{secrets.token_hex(4)}")

"""Root pytest configuration: every test run gets its own data directory.

This runs before pytest-django loads the settings, so BOOCODE_DATA_DIR (SQLite file,
secret key, workspace) never points at the developer's data/ folder.
"""

import os
import tempfile

os.environ.setdefault("BOOCODE_DATA_DIR", tempfile.mkdtemp(prefix="boocode-test-"))
os.environ.setdefault("BOOCODE_MCP_AUTOSTART", "0")
os.environ.setdefault("BOOCODE_DB_CONN_MAX_AGE", "0")

"""What the BooCode management commands share: a clear stop when the database is not ready.

A command run on a database that was never migrated (a fresh ``BOOCODE_DATA_DIR``, a new
PostgreSQL database) would otherwise die on its first query with a traceback ending in
"no such table". The commands ask :func:`database_problem` first and stop with one line that
says what to run. It lives in ``mcpclient`` because ``agents`` uses it too and may import
``mcpclient`` but nothing of ``boocode``.
"""

from __future__ import annotations

from django.core.management.base import CommandError
from django.db import DEFAULT_DB_ALIAS, DatabaseError, connections
from django.db.migrations.executor import MigrationExecutor

FIX = "run `.venv/bin/python manage.py migrate` (or `make run`, which migrates) first"


def _one_line(text: str) -> str:
    return " ".join(text.split())


def database_problem(using: str = DEFAULT_DB_ALIAS) -> str | None:
    """Why the commands cannot use the database (one line naming the fix), or None when they can.

    The database is usable when every migration the code ships is applied. Reading the applied
    ones costs a few milliseconds, far less than one failing MCP server start.
    """
    connection = connections[using]
    name = connection.settings_dict.get("NAME")
    try:
        executor = MigrationExecutor(connection)
        plan = executor.migration_plan(executor.loader.graph.leaf_nodes())
    except DatabaseError as exc:  # unreachable server, wrong credentials, unreadable file
        return f"cannot open the database {name}: {_one_line(str(exc))}"
    if not plan:
        return None
    if not executor.loader.applied_migrations:
        return f"the database {name} is not set up yet: {FIX}"
    pending = [f"{migration.app_label}.{migration.name}" for migration, _ in plan]
    shown = ", ".join(pending[:3]) + (", ..." if len(pending) > 3 else "")
    return f"the database {name} lacks {len(pending)} migration(s) ({shown}): {FIX}"


def require_migrated_database(using: str = DEFAULT_DB_ALIAS) -> None:
    """Raise ``CommandError`` (exit status 1, one line on stderr) unless the database is usable."""
    problem = database_problem(using)
    if problem is not None:
        raise CommandError(problem)

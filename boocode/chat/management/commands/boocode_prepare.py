"""``manage.py boocode_prepare``: everything ``make run`` does before Daphne serves, in one process.

With ``--port`` (``make run`` passes its HOST and PORT), first check that Daphne can listen
there (:mod:`boocode.ports`), so that a second ``make run`` stops at once with what to do rather
than after preparing. Then create ``data/mcp.json`` and ``data/AGENTS.md`` from the shipped
examples where they do not exist yet (:mod:`boocode.data_files`), migrate the database (one line
for it; ``-v 2`` shows each migration), mirror both files into it (``boocode_sync``), and on a
fresh install create the first account (:mod:`boocode.security.first_admin`), whose password is
printed last, framed. One Python start-up instead of several: a restart reaches the first page
sooner.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import DEFAULT_DB_ALIAS, connections
from django.db.migrations.executor import MigrationExecutor

from boocode.data_files import create_from_examples
from boocode.ports import listen_problem
from boocode.security.first_admin import create_first_admin, first_start_notice


def _pending_migrations() -> int:
    """How many migrations ``migrate`` would apply now."""
    executor = MigrationExecutor(connections[DEFAULT_DB_ALIAS])
    return len(executor.migration_plan(executor.loader.graph.leaf_nodes()))


def _site(host: str, port: int) -> str:
    """The address Daphne serves, as a browser takes it."""
    host = host.replace("\\", "")
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


class Command(BaseCommand):
    help = (
        "Check the port (with --port), create mcp.json and AGENTS.md from their examples if missing, "
        "migrate, sync both into the database, and create 'admin' on a fresh install."
    )

    requires_system_checks: list[str] = []  # run after the port check (the checks open the database)

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--host", default="127.0.0.1", help="the address Daphne will listen on")
        parser.add_argument("--port", type=int, help="the port Daphne will listen on: checked first")

    def handle(self, *args: Any, **options: Any) -> None:
        """Run the steps in order; the first that fails stops the others."""
        host, port, verbosity = options["host"], options["port"], options["verbosity"]
        if port is not None and (problem := listen_problem(host, port)):
            raise CommandError(problem)
        self.check()
        for example, live in create_from_examples():
            self.stdout.write(
                f"Created {live} from {example.name} (yours to edit: updates of the checkout leave it alone)."
            )
        output = {"stdout": self.stdout, "stderr": self.stderr}
        pending = _pending_migrations()
        call_command("migrate", interactive=False, verbosity=verbosity if verbosity > 1 else 0, **output)
        if pending and verbosity:
            plural = "" if pending == 1 else "s"
            self.stdout.write(
                f"Database {settings.DATABASES['default']['NAME']}: {pending} migration{plural} applied."
            )
        call_command("boocode_sync", verbosity=verbosity, **output)
        admin = create_first_admin(settings.ADMIN_PASSWORD)
        if admin is not None:
            site = _site(host, port) if port is not None else ""
            self.stdout.write(first_start_notice(admin, site=site))

"""``manage.py boocode_prepare``: everything ``make run`` does before Daphne serves, in one process.

Create ``data/mcp.json`` and ``data/AGENTS.md`` from the shipped examples where they do not exist
yet (:mod:`boocode.data_files`), migrate the database, mirror both files into it
(``boocode_sync``), then create the first account on a fresh install (``ensure_admin``). One
Python start-up instead of three: a restart of an installed tree reaches the first page sooner.
"""

from __future__ import annotations

from typing import Any

from django.core.management import call_command
from django.core.management.base import BaseCommand

from boocode.data_files import create_from_examples


class Command(BaseCommand):
    help = (
        "Create mcp.json and AGENTS.md from their examples if missing, migrate, sync both into the "
        "database, and create 'admin' on a fresh install."
    )

    def handle(self, *args: Any, **options: Any) -> None:
        """Run the steps in order; the first that fails stops the others."""
        for example, live in create_from_examples():
            self.stdout.write(
                f"Created {live} from {example.name} (yours to edit: updates of the checkout leave it alone)."
            )
        output = {"verbosity": options["verbosity"], "stdout": self.stdout, "stderr": self.stderr}
        call_command("migrate", interactive=False, **output)
        call_command("boocode_sync", **output)
        call_command("ensure_admin", **output)

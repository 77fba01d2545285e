"""``manage.py agents_sync``: mirror AGENTS.md into the database and print what changed."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError, CommandParser

from agents.roster import sync_agents
from mcpclient.management.base import require_migrated_database


class Command(BaseCommand):
    help = (
        "Parse AGENTS.md (BOOCODE_AGENTS_FILE) and sync the Agent rows; report errors per agent. "
        "Exits 1 when the file cannot be used at all (or, with --strict, has any error)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--strict", action="store_true", help="Exit with status 1 when the file has errors."
        )

    def handle(self, *args: object, **options: object) -> None:
        require_migrated_database()
        report = sync_agents()
        for error in report.errors:
            self.stderr.write(self.style.WARNING(str(error)))
        self.stdout.write(report.summary())
        for label, names in (
            ("created", report.created),
            ("updated", report.updated),
            ("deleted", report.deleted),
        ):
            if names:
                self.stdout.write(f"  {label}: {', '.join(names)}")
        if report.unusable:
            raise CommandError(f"{report.path} cannot be used; the agents loaded before are kept")
        if options["strict"] and report.errors:
            raise CommandError(f"{len(report.errors)} error(s) in {report.path}")

"""``manage.py mcp_import PATH [--dry-run] [--server NAME ...] [--replace]``: merge another host's config."""

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError, CommandParser

from mcpclient.admin.importing import ImportError_, import_servers
from mcpclient.management.base import require_migrated_database


class Command(BaseCommand):
    help = (
        "Merge the MCP servers of another host's config file (Claude Desktop, Claude Code, Cursor, "
        "Windsurf, Gemini CLI, VS Code, opencode, Zed) into mcp.json, in mcp.json's own shape. "
        "Prints a diff (secrets masked); placeholders stay placeholders. Exits 1 when nothing was imported."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("path", help="the config file to import from")
        parser.add_argument("--server", action="append", default=[], metavar="NAME", help="only this server")
        parser.add_argument("--replace", action="store_true", help="overwrite servers mcp.json already has")
        parser.add_argument("--dry-run", action="store_true", help="print the diff, write nothing")

    def handle(
        self, *args: object, path: str, server: list[str], replace: bool, dry_run: bool, **options: object
    ) -> None:
        require_migrated_database()
        try:
            plan = import_servers(Path(path), names=server, replace=replace, dry_run=dry_run)
        except ImportError_ as exc:
            for error in exc.errors:
                self.stderr.write(error)
            raise CommandError(str(exc)) from None
        self.stdout.write(plan.diff or "(no change)\n", ending="")
        verb = "would import" if dry_run else "imported"
        replaced = f" ({len(plan.replaced)} replaced)" if plan.replaced else ""
        self.stdout.write(
            f"{verb} {len(plan.names)} server{'s' if len(plan.names) != 1 else ''}{replaced} from "
            f"{plan.source.name} ({plan.source_shape.label}) into {plan.target.name} "
            f"({plan.target_shape.label}): " + ", ".join(plan.names)
        )

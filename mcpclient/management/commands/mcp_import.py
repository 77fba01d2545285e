"""``manage.py mcp_import PATH [--dry-run] [--server NAME ...] [--replace] [--list-tools]``: merge
another host's config.

After the diff, one line per imported server says which of its tools will ask before each call
and why; with ``--list-tools`` the servers are started (nothing is stored) and the tools counted.
Without it nothing is started: an imported entry's command is not run before an administrator
asks for it.
"""

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError, CommandParser

from mcpclient.admin.importing import ImportError_, ImportPlan, import_servers
from mcpclient.core.approval import policy_summary
from mcpclient.core.words import counted
from mcpclient.management.base import require_migrated_database
from mcpclient.runtime.commands import DiscoveryOutcome, list_without_storing


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
        parser.add_argument(
            "--list-tools",
            action="store_true",
            help="start the imported servers (nothing stored) and count the tools that will ask",
        )

    def handle(
        self,
        *args: object,
        path: str,
        server: list[str],
        replace: bool,
        dry_run: bool,
        list_tools: bool = False,
        **options: object,
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
        self._write_approvals(plan, list_tools=list_tools)

    def _write_approvals(self, plan: ImportPlan, *, list_tools: bool) -> None:
        """One line per imported server: which tools will ask before each call, and why."""
        listed: dict[str, DiscoveryOutcome] = {}
        if list_tools:
            enabled = [config for config in plan.configs.values() if config.enabled]
            listed = {outcome.snapshot.name: outcome for outcome in list_without_storing(enabled)}
        for name, config in plan.configs.items():
            outcome = listed.get(name)
            if outcome is None:
                hint = "" if list_tools else " (--list-tools counts them)"
                if list_tools and not config.enabled:
                    hint = " (disabled: not started)"
                line = policy_summary(trusted=config.trusted, read_only=config.read_only) + hint
            elif outcome.failed:
                error = " ".join(outcome.snapshot.last_error.split())
                line = (
                    f"{policy_summary(trusted=config.trusted, read_only=config.read_only)}; its tools could "
                    f"not be listed ({outcome.snapshot.status.value}{': ' + error if error else ''})"
                )
            else:
                count = sum(tool.offered for tool in outcome.snapshot.tools)
                line = outcome.asking or (
                    "its one tool does not ask before each call"
                    if count == 1
                    else f"none of its {counted(count, 'tool')} asks before each call"
                )
            self.stdout.write(f"{name}: {line}")

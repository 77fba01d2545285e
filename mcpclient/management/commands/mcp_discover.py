"""``manage.py mcp_discover [server ...] [--json]``: connect servers and store their tools.

One line per server (its tools, how many the read-only guard rejected, how many ask before each
call and why); with ``-v 2`` also one line per tool (its title when it differs from the name, why
a rejected or filtered tool is not offered, why an offered one asks).

Exit status 0 only when every server asked about (the named ones, or every enabled one)
became ready; otherwise 1, with one line per problem on stderr. ``--json`` prints a JSON
document on stdout whatever happened, so scripts can always parse it.
"""

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from mcpclient.management.base import database_problem
from mcpclient.runtime.commands import DiscoveryReport, EntryError, discovery_report


class Command(BaseCommand):
    help = (
        "Connect the enabled MCP servers (or the named ones), list their tools and store them. "
        "Exits 1 when any of them failed."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("servers", nargs="*", help="server names (default: every enabled server)")
        parser.add_argument("--json", action="store_true", help="print JSON with every tool")

    def handle(self, *args: Any, servers: list[str], **options: Any) -> None:
        self.verbosity = options["verbosity"]
        # Checked here rather than with require_migrated_database: --json must still print JSON.
        problem = database_problem()
        if problem is not None:
            report = DiscoveryReport(errors=[EntryError(None, problem)])
        else:
            report = discovery_report(servers)
        if options["json"]:
            self.stdout.write(json.dumps(report.as_dict(), indent=2))
        elif not any(error.server is None for error in report.errors):
            self._write_lines(report)
        self._fail_unless_ok(report)

    def _write_lines(self, report: DiscoveryReport) -> None:
        if report.shape:
            self.stdout.write(f"mcp.json shape: {report.shape}")
        if not report.outcomes and not report.errors:
            self.stdout.write("no enabled MCP servers")
        for outcome in report.outcomes:
            data = outcome.as_dict()
            line = (
                f"{data['name']}: {data['status']}, {data['tool_count']} tools, "
                f"{data['rejected_count']} rejected"
            )
            if data["error"]:
                line += f" ({data['error']})"
            if outcome.asking:
                line += f"; {outcome.asking}"
            self.stdout.write(line)
            if self.verbosity >= 2:
                for tool in data["tools"]:
                    self.stdout.write(self._tool_line(tool))

    @staticmethod
    def _tool_line(tool: dict[str, Any]) -> str:
        """``  <prefixed name>``, its title when it says more than the name, and why it is not offered."""
        line = f"  {tool['prefixed_name'] or tool['name']}"
        if tool["title"] and tool["title"] not in (tool["name"], tool["prefixed_name"]):
            line += f' "{tool["title"]}"'
        state = "filtered" if tool["filtered"] else "rejected" if tool["rejected"] else ""
        if state:
            line += f" ({state}: {' '.join(tool['reason'].split())})"
        elif tool["approval"]:
            line += f" (asks before each call: {tool['approval']})"
        return line

    def _fail_unless_ok(self, report: DiscoveryReport) -> None:
        """Say on stderr what went wrong (stdout may be JSON for a script) and exit 1."""
        if report.ok:
            return
        whole_run = [error.error for error in report.errors if error.server is None]
        if whole_run:
            raise CommandError(whole_run[0])
        for error in report.errors:
            self.stderr.write(error.error)
        for outcome in report.outcomes:
            if outcome.failed:
                snapshot = outcome.snapshot
                reason = f": {snapshot.last_error}" if snapshot.last_error else ""
                self.stderr.write(f'MCP server "{snapshot.name}" {snapshot.status.value}{reason}')
        raise CommandError(f"failed: {', '.join(report.failures)}")

"""``manage.py mcp_discover [server ...] [--json] [--accept]``: connect servers and store their tools.

One line per server (``ready, 3 tools, 1 held for review, 0 rejected``, then how many ask before
each call and why); with ``-v 2`` also one line per tool (its title when it differs from the name,
why a rejected, filtered or held tool is not offered, why an offered one asks, and what the
poisoning check found).

What it lists is reviewed against the pinned definitions and recorded (docs/security.md,
*Pinned tool definitions*): a server seen for the first time has the definitions this run shows
pinned, but those the poisoning check flags, which are held for review like a changed one.
``--accept`` first accepts the held definitions the last review of the named servers recorded
(what an earlier run, or the admin's *Tool definitions*, showed), then lists again.

Exit status 0 only when every server asked about (the named ones, or every enabled one)
became ready; otherwise 1, with one line per problem on stderr. ``--json`` prints a JSON
document on stdout whatever happened, so scripts can always parse it.
"""

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from mcpclient.core.words import counted
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
        parser.add_argument(
            "--accept",
            action="store_true",
            help="accept the held definitions the last listing of these servers recorded (shown held "
            "by the previous run), then list again",
        )

    def handle(self, *args: Any, servers: list[str], **options: Any) -> None:
        self.verbosity = options["verbosity"]
        # Checked here rather than with require_migrated_database: --json must still print JSON.
        problem = database_problem()
        if problem is not None:
            report = DiscoveryReport(errors=[EntryError(None, problem)])
        else:
            report = discovery_report(servers, accept=options["accept"])
        if options["json"]:
            self.stdout.write(json.dumps(report.as_dict(), indent=2))
        elif not any(error.server is None for error in report.errors):
            self._write_lines(report)
        self._fail_unless_ok(report)

    def _write_lines(self, report: DiscoveryReport) -> None:
        if report.shape:
            self.stdout.write(f"mcp.json shape: {report.shape}")
        for server, tool, digest in report.accepted:
            self.stdout.write(f"accepted: {server} / {tool} (sha256 {digest[:12]})")
        if not report.outcomes and not report.errors:
            self.stdout.write("no enabled MCP servers")
        held = []
        for outcome in report.outcomes:
            data = outcome.as_dict()
            line = f"{data['name']}: {data['status']}, {counted(data['tool_count'], 'tool')}, "
            if data["held_count"]:
                line += f"{data['held_count']} held for review, "
                held.append(data["name"])
            line += f"{data['rejected_count']} rejected"
            if data["error"]:
                line += f" ({data['error']})"
            if outcome.asking:
                line += f"; {outcome.asking}"
            self.stdout.write(line)
            if self.verbosity >= 2:
                for tool in data["tools"]:
                    self.stdout.write(self._tool_line(tool))
                    if tool["held"]:  # what is to be reviewed, as JSON text (no terminal escapes)
                        self.stdout.write(f"    description: {json.dumps(tool['description'])}")
        if held:
            self.stdout.write(
                "held tools are not offered until accepted: read them with -v 2 (or in the admin, "
                f"Tool definitions), then: manage.py mcp_discover --accept {' '.join(held)}"
            )

    @staticmethod
    def _tool_line(tool: dict[str, Any]) -> str:
        """``  <prefixed name>``, its title when it says more than the name, and why it is not offered."""
        line = f"  {tool['prefixed_name'] or tool['name']}"
        if tool["title"] and tool["title"] not in (tool["name"], tool["prefixed_name"]):
            line += f' "{tool["title"]}"'
        state = "filtered" if tool["filtered"] else "rejected" if tool["rejected"] else ""
        if state:
            line += f" ({state}: {' '.join(tool['reason'].split())})"
        elif tool["held"]:
            line += f" (held for review: {' '.join(tool['pin_note'].split())}; sha256 {tool['digest'][:12]})"
        elif tool["approval"]:
            line += f" (asks before each call: {tool['approval']})"
        if tool["findings"] and not tool["held"]:
            line += f" (flagged: {'; '.join(tool['findings'])})"
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

"""``manage.py mcp_conformance_client URL``: the client the MCP conformance suite runs.

The suite starts a mock server per scenario and runs this command with the server's URL as
the last argument, the scenario's name in ``MCP_CONFORMANCE_SCENARIO`` and, for some
scenarios, JSON in ``MCP_CONFORMANCE_CONTEXT`` (see docs/conformance.md). The hub connects the
URL like any Streamable HTTP entry and makes the calls the scenario expects
(:mod:`mcpclient.runtime.conformance`). mcp.json is not used; the database is migrated first, since
OAuth tokens and registrations go to the product's encrypted store as they would for any
server.

Exit status 0 when the server became ready and every call returned a non-error result;
1 with one line on stderr naming every problem otherwise. One line per call goes to stdout.
"""

import os
from typing import Any

from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError, CommandParser

from mcpclient.config.model import ConfigError
from mcpclient.runtime.conformance import (
    CONTEXT_ENV,
    SCENARIO_ENV,
    ConformanceError,
    parse_context,
    run_scenario_sync,
)


class Command(BaseCommand):
    help = (
        "Connect one Streamable HTTP MCP server through the hub and play a conformance-suite "
        f"scenario (${SCENARIO_ENV}, ${CONTEXT_ENV}). Exits 1 when the server or a call failed."
    )
    # The system checks are for a served site; this command only needs the secret store.
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("url", help="the server's Streamable HTTP URL (the suite passes it last)")
        parser.add_argument(
            "--scenario",
            default=os.environ.get(SCENARIO_ENV, ""),
            help=f"scenario to play (default: ${SCENARIO_ENV}; none: connect and list the tools only)",
        )

    def handle(self, *args: Any, url: str, scenario: str, **options: Any) -> None:
        # Tokens and registrations go to the product's own encrypted store, in the database
        # of the suite's throw-away data folder.
        call_command("migrate", verbosity=0, interactive=False)
        try:
            context = parse_context(os.environ.get(CONTEXT_ENV))
            report = run_scenario_sync(url, scenario=scenario, context=context)
        except (ConfigError, ConformanceError) as exc:
            raise CommandError(" ".join(str(exc).split())) from None
        for line in report.lines():
            self.stdout.write(line)
        problems = report.problems()
        if problems:
            raise CommandError("; ".join(problems))

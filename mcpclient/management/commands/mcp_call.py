"""``manage.py mcp_call <prefixed_tool> '<json arguments>' [--json]``: call one tool.

Exit status 0 when the tool answered; 1 with one line on stderr otherwise (an error result,
a tool no ready server offers, arguments that are not a JSON object, a database that is not
migrated). The tool's own output, error results included, goes to stdout.
"""

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from mcpclient.config.model import ConfigError
from mcpclient.management.base import require_migrated_database
from mcpclient.runtime.commands import call_tool_once


class Command(BaseCommand):
    help = "Start the MCP server that offers a tool, call it by its prefixed name and print the result."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("tool", help="prefixed tool name, e.g. time_get_current_time")
        parser.add_argument("arguments", nargs="?", default="{}", help="JSON object of arguments")
        parser.add_argument("--json", action="store_true", help="print is_error, output and parts as JSON")

    def handle(self, *args: Any, tool: str, arguments: str, **options: Any) -> None:
        try:
            parsed = json.loads(arguments)
        except json.JSONDecodeError as exc:
            raise CommandError(f"arguments are not valid JSON: {exc}") from None
        if not isinstance(parsed, dict):
            raise CommandError('arguments must be a JSON object, e.g. \'{"timezone": "UTC"}\'')
        require_migrated_database()
        try:
            result = call_tool_once(tool, parsed)
        except (ConfigError, ValueError) as exc:
            raise CommandError(" ".join(str(exc).split())) from None
        if options["json"]:
            self.stdout.write(json.dumps(result.to_dict(), ensure_ascii=False))
        else:
            self.stdout.write(result.output)
        if result.is_error:
            first_line = next((line.strip() for line in result.output.splitlines() if line.strip()), "")
            raise CommandError(
                f"the tool call returned an error: {first_line[:200]}"
                if first_line
                else "the tool call returned an error"
            )

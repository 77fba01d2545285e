"""``manage.py mcp_call <prefixed_tool> '<json arguments>' [--json]``: call one tool."""

import json

from django.core.management.base import BaseCommand, CommandError

from mcpclient.config import ConfigError
from mcpclient.services import call_tool_once


class Command(BaseCommand):
    help = "Start the enabled MCP servers, call one tool by its prefixed name and print the result."

    def add_arguments(self, parser) -> None:
        parser.add_argument("tool", help="prefixed tool name, e.g. time_get_current_time")
        parser.add_argument("arguments", nargs="?", default="{}", help="JSON object of arguments")
        parser.add_argument("--json", action="store_true", help="print is_error, output and parts as JSON")

    def handle(self, *args, tool: str, arguments: str, **options) -> None:
        try:
            parsed = json.loads(arguments)
        except json.JSONDecodeError as exc:
            raise CommandError(f"arguments are not valid JSON: {exc}") from None
        if not isinstance(parsed, dict):
            raise CommandError('arguments must be a JSON object, e.g. \'{"timezone": "UTC"}\'')
        try:
            result = call_tool_once(tool, parsed)
        except (ConfigError, ValueError) as exc:
            raise CommandError(str(exc)) from None
        if options["json"]:
            self.stdout.write(json.dumps(result.to_dict(), ensure_ascii=False))
        else:
            self.stdout.write(result.output)
        if result.is_error:
            raise CommandError("the tool call returned an error")

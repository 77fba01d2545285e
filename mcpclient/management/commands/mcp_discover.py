"""``manage.py mcp_discover [server ...] [--json]``: connect servers and store their tools."""

import json

from django.core.management.base import BaseCommand, CommandError

from mcpclient.config import ConfigError
from mcpclient.services import discover_servers


class Command(BaseCommand):
    help = "Connect the enabled MCP servers (or the named ones), list their tools and store them."

    def add_arguments(self, parser) -> None:
        parser.add_argument("servers", nargs="*", help="server names (default: every enabled server)")
        parser.add_argument("--json", action="store_true", help="print JSON with every tool")

    def handle(self, *args, servers: list[str], **options) -> None:
        try:
            outcomes = discover_servers(servers)
        except (ConfigError, ValueError) as exc:
            raise CommandError(str(exc)) from None
        if options["json"]:
            self.stdout.write(json.dumps({"servers": [o.as_dict() for o in outcomes]}, indent=2))
        else:
            if not outcomes:
                self.stdout.write("no enabled MCP servers")
            for outcome in outcomes:
                data = outcome.as_dict()
                line = (
                    f"{data['name']}: {data['status']}, {data['tool_count']} tools, "
                    f"{data['rejected_count']} rejected"
                )
                if data["error"]:
                    line += f" ({data['error']})"
                self.stdout.write(line)
        failed = [o.snapshot.name for o in outcomes if o.failed and o.snapshot.name in servers]
        if failed:
            raise CommandError(f"failed: {', '.join(failed)}")

"""``manage.py mcp_sync``: mirror data/mcp.json into the database."""

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from mcpclient.config.model import ConfigError
from mcpclient.config.writeback import WritebackError, remove_stale_temp_files
from mcpclient.management.base import require_migrated_database
from mcpclient.runtime.sync import sync_servers


class Command(BaseCommand):
    help = "Mirror mcp.json into the McpServer rows (create new, update changed, delete removed)."

    def handle(self, *args, **options) -> None:
        require_migrated_database()
        try:
            remove_stale_temp_files(settings.MCP_CONFIG)
        except WritebackError as exc:
            self.stderr.write(str(exc))
        try:
            report = sync_servers()
        except ConfigError as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(f"{settings.MCP_CONFIG}: {report.summary()}")
        for name, message in report.errors.items():
            self.stderr.write(f"  {name}: {message}")

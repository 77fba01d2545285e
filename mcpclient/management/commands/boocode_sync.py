"""``manage.py boocode_sync``: mirror both data files (mcp.json and AGENTS.md) into the database."""

from django.core.management import call_command
from django.core.management.base import BaseCommand

from mcpclient.management.base import require_migrated_database


class Command(BaseCommand):
    help = "Sync mcp.json (MCP servers) and AGENTS.md (agents) into the database."

    def handle(self, *args, **options) -> None:
        require_migrated_database()
        call_command("mcp_sync", stdout=self.stdout, stderr=self.stderr)
        call_command("agents_sync", stdout=self.stdout, stderr=self.stderr)

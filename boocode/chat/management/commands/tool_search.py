"""``manage.py tool_search``: rank tools for requests, as the model's tool search does.

    manage.py tool_search --catalog FILE --queries FILE [--limit K] [--json]
    manage.py tool_search --agent NAME --queries FILE [--limit K] [--json]

``--catalog``: a file ``{"servers": {"<name>": {"tools": [<tools/list entries>], "description":
"<optional>"}}}``. Without it, the live tools of the agent ``--agent`` (the enabled servers of
mcp.json are started for it and stopped after). ``--queries``: one request per line (blank lines
are skipped). Each request's answer is printed on one line, in order: with ``--json`` a JSON array
of ``{"server", "tool", "score"}`` (``[]``: no tool fits), else a readable list. Bad input (a file
that cannot be read, is too large, or has the wrong shape) stops the command with one line naming
the file and what is wrong, before anything is ranked.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from agents.models import Agent
from agents.roster import refresh_agents_if_changed
from boocode.tools import ranking
from boocode.tools.agent_rules import agent_tools
from boocode.tools.deferred import candidates
from mcpclient.management.base import require_migrated_database
from mcpclient.runtime.commands import with_live_tools

MAX_FILE_BYTES = 64 * 1024 * 1024
MAX_QUERIES = 100_000
MAX_LIMIT = 100


def _read(path: str, what: str) -> str:
    file = Path(path)
    try:
        size = file.stat().st_size
        if size > MAX_FILE_BYTES:
            raise CommandError(f"{path}: the {what} is {size:,} bytes; at most {MAX_FILE_BYTES:,}")
        return file.read_text(encoding="utf-8")
    except OSError as exc:
        raise CommandError(f"{path}: the {what} cannot be read: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise CommandError(f"{path}: the {what} is not UTF-8 text") from None


def catalog_candidates(path: str) -> list[ranking.Candidate]:
    """The tools of a catalog file as candidates (:class:`CommandError` naming what is wrong)."""
    try:
        catalog = json.loads(_read(path, "catalog"))
    except ValueError as exc:
        raise CommandError(f"{path}: the catalog is not JSON: {exc}") from None
    servers = catalog.get("servers") if isinstance(catalog, dict) else None
    if not isinstance(servers, dict) or not servers:
        raise CommandError(f'{path}: expected {{"servers": {{"<name>": {{"tools": [...]}}}}}}')
    found: list[ranking.Candidate] = []
    for server, entry in servers.items():
        tools = entry.get("tools") if isinstance(entry, dict) else None
        if not isinstance(tools, list):
            raise CommandError(f'{path}: server "{server}" has no "tools" list')
        about = entry.get("description") if isinstance(entry.get("description"), str) else ""
        for number, tool in enumerate(tools):
            if not isinstance(tool, dict) or not isinstance(tool.get("name"), str) or not tool["name"]:
                where = f'{path}: server "{server}", tool {number}'
                raise CommandError(f'{where}: expected an object with a "name"')
            key = f"{server}\x00{tool['name']}"
            found.append(ranking.Candidate.from_listing(server, tool, about, key=key))
    return found


def queries(path: str) -> list[str]:
    """The requests of a queries file, one per non-blank line."""
    lines = [line.strip() for line in _read(path, "queries file").splitlines()]
    found = [line for line in lines if line]
    if len(found) > MAX_QUERIES:
        raise CommandError(f"{path}: {len(found):,} queries; at most {MAX_QUERIES:,}")
    return found


def live_candidates(agent_name: str) -> list[ranking.Candidate]:
    """The agent's tools as they are now (the enabled servers started for the command)."""
    refresh_agents_if_changed()
    agent = Agent.objects.filter(name=agent_name).first()
    if agent is None:
        names = ", ".join(Agent.objects.values_list("name", flat=True)) or "none"
        raise CommandError(f'no agent named "{agent_name}" in AGENTS.md (agents: {names})')
    return with_live_tools(lambda: candidates(agent_tools(agent)))


class Command(BaseCommand):
    help = "Rank tools for requests as the model's tool search does (a catalog, or an agent's live tools)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--catalog", help='a JSON file {"servers": {"<name>": {"tools": [...]}}}')
        parser.add_argument("--agent", help="rank the live tools of this agent (without --catalog)")
        parser.add_argument("--queries", required=True, help="a text file, one request per line")
        parser.add_argument("--limit", type=int, default=ranking.DEFAULT_LIMIT, help="tools per request")
        parser.add_argument("--json", action="store_true", help="one JSON array per request")

    def handle(self, *args: Any, **options: Any) -> None:
        limit = options["limit"]
        if not 1 <= limit <= MAX_LIMIT:
            raise CommandError(f"--limit must be from 1 to {MAX_LIMIT}, got {limit}")
        requests = queries(options["queries"])
        if options["catalog"]:
            found = catalog_candidates(options["catalog"])
        elif options["agent"]:
            require_migrated_database()
            found = live_candidates(options["agent"])
        else:
            raise CommandError("give --catalog FILE, or --agent NAME to search an agent's live tools")
        index = ranking.index_for(found)
        for request in requests:
            hits = index.rank(request, limit=limit)
            if options["json"]:
                self.stdout.write(json.dumps([hit.to_dict() for hit in hits], ensure_ascii=False))
                continue
            self.stdout.write(request)
            if not hits:
                self.stdout.write("  (no tool fits)")
            for place, hit in enumerate(hits, start=1):
                self.stdout.write(f"  {place}. {hit.server} / {hit.name}  {hit.score:.3f}")

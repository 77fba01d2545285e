"""What a server's tool listing becomes: each tool discovered under its entry's policy, its pinned
digest, and the pin review's verdict (:mod:`mcpclient.core.pinning`).

A listing's identity (its tools' names and digests, its notes, the pin settings) tells a relist
whether anything changed; an unchanged listing costs no review. A review that cannot be made (the
database is down) holds back every tool: fail closed.
"""

from __future__ import annotations

import dataclasses
import logging

import anyio
import mcp.types as types
from mcp import Client, MCPError
from mcp_types import REQUEST_TIMEOUT

from mcpclient.config.model import ServerConfig
from mcpclient.core import pinning
from mcpclient.core.approval import UNDECLARED_REASON, asking_summary
from mcpclient.core.pinning import PinBook
from mcpclient.core.state import DiscoveredTool, discover_tool
from mcpclient.engine import listing, protocol

logger = logging.getLogger("mcpclient.hub")

# The servers whose tools that declare nothing were said to ask (once per server and process: the
# start-up log tells an existing configuration what changed, not every reconnect or person).
_told_undeclared: set[str] = set()


def notes(tools: list[types.Tool], client: Client) -> str:
    """The tools note of a listing: what was repaired, held for size or left out."""
    said = [protocol.listing_note(client), protocol.tools_over_limit(tools)]
    return " ".join(note for note in said if note)


def identity(
    config: ServerConfig, tools: list[types.Tool], seen: list[pinning.Seen], client: Client
) -> tuple[object, ...]:
    """What a listing is, as far as a relist must tell: its tools' names and digests, its notes
    (a held tool's size is in them) and what its pins are checked under."""
    return (
        tuple((item.name, item.digest) for item in seen),
        notes(tools, client),
        (config.pin_tools, config.accept_new_tools),
    )


def discover(
    config: ServerConfig, tools: list[types.Tool], client: Client
) -> tuple[list[DiscoveredTool], str]:
    """The listed tools under the entry's policy, and the listing's tools note (logged)."""
    name = config.name
    tools_note = notes(tools, client)
    if tools_note:
        logger.warning('MCP server "%s": %s', name, tools_note)
    oversized = protocol.oversized_tools(client)
    parameters_unknown = protocol.parameters_unknown(client)
    discovered = []
    for tool in tools[: protocol.MAX_TOOLS]:
        found = discover_tool(
            tool,
            include=config.include_tools,
            exclude=config.exclude_tools,
            write_tools=config.write_tools,
            trusted=config.trusted,
            read_only=config.read_only,
            own=config.owner_id is not None,
        )
        if tool.name in parameters_unknown:  # not "takes none": the server did not say
            found = dataclasses.replace(found, description=listing.with_parameters_note(found.description))
        if why := oversized.get(tool.name):  # listed as a stub: held whatever the policy says
            found = dataclasses.replace(
                found, rejected=True, filtered=False, approval_reason="", reject_reason=f"held: {why}"
            )
        discovered.append(found)
    _tell_undeclared(name, discovered)
    return discovered, tools_note


def _tell_undeclared(name: str, discovered: list[DiscoveredTool]) -> None:
    """Log once which of the server's tools ask because they do not declare ``readOnlyHint: true``."""
    reasons = [tool.approval_reason for tool in discovered if tool.usable]
    if name in _told_undeclared or UNDECLARED_REASON not in reasons:
        return  # (a person's own server has no entry to fix: nothing for the operator)
    _told_undeclared.add(name)
    logger.warning(
        'MCP server "%s": %s. Tools that declare nothing now ask: the MCP default is that they '
        "may change things.",
        name,
        asking_summary(reasons),
    )


def seen(tools: list[types.Tool]) -> list[pinning.Seen]:
    """Each kept tool's pinned definition and digest (bounded: :mod:`mcpclient.engine.listing`)."""
    kept = []
    for tool in tools[: protocol.MAX_TOOLS]:
        definition = pinning.definition(tool)
        kept.append(pinning.Seen(tool.name, pinning.digest(definition), definition))
    return kept


async def review(
    config: ServerConfig,
    pins: PinBook | None,
    discovered: list[DiscoveredTool],
    tools: list[types.Tool],
    seen: list[pinning.Seen],
    client: Client,
) -> tuple[list[DiscoveredTool], tuple[object, ...] | None]:
    """The discovered tools, each with its pinned digest and the pin review's verdict, and the
    listing's identity (None when the review could not be made: the next listing is reviewed again).

    Every listed tool is reviewed (a filtered one too, so that including it later is no
    surprise) but those held for their size, of which only a stub was kept; a verdict holds
    back only what the policy would offer.
    """
    name = config.name
    listed: tuple[object, ...] | None = identity(config, tools, seen, client)
    if pins is None or config.owner_id is not None:  # (a person's own: theirs to trust)
        return [
            dataclasses.replace(d, digest=item.digest) for d, item in zip(discovered, seen, strict=True)
        ], listed
    oversized = protocol.oversized_tools(client)
    reviewable = [item for item in seen if item.name not in oversized]
    try:
        verdicts = await pins.review(
            name, reviewable, mode=config.pin_tools, accept_new=config.accept_new_tools
        )
    except Exception:
        logger.exception('MCP server "%s": its tools could not be checked against their pins', name)
        unchecked = pinning.Verdict(held=True, note="could not be checked against its accepted definition")
        verdicts = {item.name: unchecked for item in seen}
        listed = None
    reviewed = []
    for tool, item in zip(discovered, seen, strict=True):
        verdict = verdicts.get(item.name, pinning.ACCEPTED)
        reviewed.append(
            dataclasses.replace(
                tool,
                digest=item.digest,
                held=verdict.held,
                pin_note=verdict.note,
                findings=verdict.findings,
            )
        )
    if held := [tool.name for tool in reviewed if tool.held]:
        shown = ", ".join(held[:10])
        logger.warning('MCP server "%s": %d tool(s) held for review: %s', name, len(held), shown)
    return reviewed, listed


class ToolReview:
    """One server's tool review across its sessions: the last reviewed listing's identity (a relist
    that lists it again costs no review, no state change, no write and no re-index) and its note."""

    def __init__(self, config: ServerConfig, pins: PinBook | None) -> None:
        self.config = config
        # Where accepted tool definitions are kept (mcpclient.core.pinning; None: nothing pinned).
        self.pins = pins
        self.note = ""  # the tools past protocol.MAX_TOOLS, for the admin
        # What identifies the last reviewed listing (each tool's name and digest, the notes).
        self._listed: tuple[object, ...] | None = None
        self.wanted = False  # an administrator's rediscovery reviews even an unchanged listing

    async def reviewed(
        self, tools: list[types.Tool], client: Client, listed: list[pinning.Seen] | None = None
    ) -> list[DiscoveredTool]:
        """The listed tools discovered and reviewed against their pins."""
        discovered, self.note = discover(self.config, tools, client)
        listed = seen(tools) if listed is None else listed
        result, self._listed = await review(self.config, self.pins, discovered, tools, listed, client)
        return result

    async def relist(self, client: Client) -> list[DiscoveredTool] | None:
        """List the tools again (bounded by the server's timeout; a timeout is an MCPError): the
        reviewed tools, or None when the listing is the last one reviewed (every digest, the notes)."""
        try:
            with anyio.fail_after(self.config.timeout):
                tools = await protocol.list_all_tools(client, fresh=True)
        except TimeoutError:
            raise MCPError(code=REQUEST_TIMEOUT, message="tools/list timed out") from None
        forced, self.wanted = self.wanted, False
        listed = seen(tools)
        if not forced and identity(self.config, tools, listed, client) == self._listed:
            return None
        return await self.reviewed(tools, client, listed)

"""The hub speaks 2026-07-28 (stateless, ``server/discover``) and falls back to 2025-11-25.

Real servers over real Streamable HTTP on 127.0.0.1: tests/servers/modern.py (the SDK's
MCPServer; ``--handshake-only`` makes it refuse ``server/discover``, a 2025-11-25 server) and
the project's toolbox, which like every SDK 2.3 server answers both eras.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from mcpclient.core.state import Status
from mcpclient.engine.hub import Hub
from tests.support.hubs import make_config
from tests.support.processes import PYTHON, ROOT, HttpServer, free_port

pytestmark = pytest.mark.processes

MODERN = ROOT / "tests" / "servers" / "modern.py"


@pytest.fixture
def modern_server() -> Iterator[Callable[..., HttpServer]]:
    """Factory starting tests/servers/modern.py over Streamable HTTP."""
    started: list[HttpServer] = []

    def start(*extra: str) -> HttpServer:
        port = free_port()
        server = HttpServer([PYTHON, str(MODERN), "--http", str(port), *extra], port, "/mcp")
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


def offered(hub: Hub) -> set[str]:
    return {tool.prefixed_name for tool in hub.tools()}


async def test_a_2026_server_connects_lists_every_page_and_calls(modern_server, hub: Hub) -> None:
    server = modern_server("--page-size", "2")
    await hub.start([make_config("new", {"type": "http", "url": server.url})])

    snapshot = hub.snapshots()[0]
    assert snapshot.status is Status.READY, snapshot.last_error
    assert snapshot.protocol_version == "2026-07-28"
    assert snapshot.server_info == {"name": "modern", "version": "2.0.0"}
    assert snapshot.transport == "streamableHttp"
    assert offered(hub) == {"new_echo", "new_add", "new_add_tool", "new_resume", "new_ask_name"}
    assert (await hub.call_tool("new_add", {"a": 2, "b": 3})).output == "5"
    assert (await hub.call_tool("new_echo", {"text": "héllo"})).output == "héllo"


async def test_a_2025_server_gets_the_initialize_handshake(modern_server, hub: Hub) -> None:
    server = modern_server("--handshake-only", "--page-size", "2")
    await hub.start([make_config("old", {"type": "http", "url": server.url})])

    snapshot = hub.snapshots()[0]
    assert snapshot.status is Status.READY, snapshot.last_error
    assert snapshot.protocol_version == "2025-11-25"
    assert snapshot.server_info == {"name": "modern", "version": "2.0.0"}
    assert len(hub.tools()) == 5
    assert (await hub.call_tool("old_echo", {"text": "over 2025"})).output == "over 2025"
    # Tool-list changes come as notifications on this era.
    assert (await hub.call_tool("old_add_tool", {"name": "fresh"})).output == "added fresh"
    await hub.wait_until(lambda: "old_fresh" in offered(hub), 5)
    assert (await hub.call_tool("old_fresh", {})).output == "I am fresh"


async def test_the_toolbox_negotiates_2026_over_stdio_and_http(
    toolbox_config, shared_http_toolbox, hub: Hub
) -> None:
    server = shared_http_toolbox()
    await hub.start([toolbox_config("stdio"), make_config("web", {"type": "http", "url": server.url})])

    for snapshot in hub.snapshots():
        assert snapshot.status is Status.READY, snapshot.last_error
        assert snapshot.protocol_version == "2026-07-28"
        assert snapshot.server_info == {"name": "toolbox", "version": "1.0.0"}
    assert (await hub.call_tool("stdio_echo", {"text": "a"})).output == "a"
    assert (await hub.call_tool("web_add", {"a": 1, "b": 2})).output == "3"


async def test_a_tool_added_at_runtime_is_seen_despite_a_cache_hint(modern_server, hub: Hub) -> None:
    # The server lets clients cache tools/list for a minute: the change must still show.
    server = modern_server("--ttl-ms", "60000", "--page-size", "2")
    await hub.start([make_config("new", {"type": "http", "url": server.url})])
    generation = hub.generation

    assert (await hub.call_tool("new_add_tool", {"name": "fresh"})).output == "added fresh"
    await hub.wait_until(lambda: "new_fresh" in offered(hub), 5)
    assert hub.generation > generation
    assert (await hub.call_tool("new_fresh", {})).output == "I am fresh"
    # A second change while the first listing is cached is seen too.
    assert (await hub.call_tool("new_add_tool", {"name": "fresher"})).output == "added fresher"
    await hub.wait_until(lambda: "new_fresher" in offered(hub), 5)


async def test_rediscovery_of_a_2026_server_is_fresh(modern_server, hub: Hub) -> None:
    server = modern_server("--ttl-ms", "60000")
    await hub.start([make_config("new", {"type": "http", "url": server.url})])
    await hub.call_tool("new_add_tool", {"name": "fresh"})
    await hub.wait_until(lambda: "new_fresh" in offered(hub), 5)

    await hub.rediscover("new")

    assert "new_fresh" in offered(hub)


async def test_multi_round_trip_calls_complete_or_fail_readably(modern_server, hub: Hub) -> None:
    server = modern_server()
    await hub.start([make_config("new", {"type": "http", "url": server.url})])

    # The server answers InputRequiredResult with only requestState: the hub retries with it.
    assert (await hub.call_tool("new_resume", {})).output == "resumed after round-1"
    # The server asks for an elicitation; with no person behind the call the hub answers with the
    # schema's defaults (it has none and requires nothing: an empty answer). See test_elicitation.
    asked = await hub.call_tool("new_ask_name", {})
    assert (asked.is_error, asked.output) == (False, "hello nobody")
    # The connection is still good.
    assert (await hub.call_tool("new_echo", {"text": "still here"})).output == "still here"

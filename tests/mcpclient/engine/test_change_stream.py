"""One change stream per session, and rediscovery of everything a server lists.

A 2026-07-28 session opens ONE ``subscriptions/listen`` stream for tools, resources and prompts
(:func:`mcpclient.engine.protocol.watch_changes`); each event reaches the right listing, and a dropped
stream is opened again with every list fetched anew. An administrator's rediscovery
(:meth:`mcpclient.engine.hub.Hub.rediscover`) lists tools, resources and prompts again. Real server:
the toolbox with its resources and prompts groups, over stdio.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest
from mcp.client.subscriptions import SubscriptionLost

from mcpclient.engine import prompts, resources
from mcpclient.engine.hub import Hub
from mcpclient.engine.protocol import HubClient
from tests.support.hubs import make_config
from tests.support.processes import PYTHON, ROOT

pytestmark = pytest.mark.processes

TOOLBOX = ROOT / "tests" / "servers" / "toolbox.py"
ENTRY = {"command": PYTHON, "args": [str(TOOLBOX), "--feature", "resources", "--feature", "prompts"]}


class Listens:
    """Records every ``subscriptions/listen`` the hub opens; can drop the first stream on demand."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []
        self.drop = anyio.Event()
        self.dropping = False

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        original = HubClient.listen
        listens = self

        def listen(client: HubClient, **filters: Any) -> Any:
            listens.calls.append(filters)
            opened = original(client, **filters)
            if not (listens.dropping and len(listens.calls) == 1):
                return opened

            @asynccontextmanager
            async def dropped_on_demand() -> AsyncIterator[Any]:
                async with opened as subscription:
                    yield Dropping(subscription, listens.drop)

            return dropped_on_demand()

        monkeypatch.setattr(HubClient, "listen", listen)


class Dropping:
    """A subscription that is lost (as if the server vanished mid-stream) once ``drop`` is set."""

    def __init__(self, subscription: Any, drop: anyio.Event) -> None:
        self.honored = subscription.honored
        self._drop = drop

    def __aiter__(self) -> Dropping:
        return self

    async def __anext__(self) -> Any:
        await self._drop.wait()
        raise SubscriptionLost("dropped by the test")


async def start(hub: Hub) -> tuple[resources.ResourceCatalog, prompts.Catalog]:
    await hub.start([make_config("box", ENTRY)])
    assert hub.snapshots()[0].protocol_version == "2026-07-28"
    listed = await resources.catalog_of(hub, "box", None, wait=10)
    assert listed.listed and not listed.error, listed.error
    connection = hub.connection("box")
    assert connection is not None
    found = prompts.catalog(connection)
    assert found is not None
    with anyio.fail_after(10):
        while not found.listed:
            await found.updated.wait()
    return listed, found


async def seen(hub: Hub, listed: resources.ResourceCatalog, found: prompts.Catalog, name: str) -> None:
    """Wait (each on its own signal, no polling) until the tool, resource and prompt ``name`` are listed."""
    await hub.wait_until(lambda: f"box_{name}" in {tool.prefixed_name for tool in hub.tools()}, 10)
    with anyio.fail_after(10):
        while f"toolbox://added/{name}" not in {r.uri for r in listed.resources}:
            await listed.updated.wait()
        while name not in {p.name for p in found.prompts}:
            await found.updated.wait()


async def add_everything(hub: Hub, name: str, *, notify: bool) -> None:
    for tool in ("add_tool", "add_resource", "add_prompt"):
        result = await hub.call_tool(f"box_{tool}", {"name": name, "notify": notify})
        assert result.output == f"added {name}", result.output


async def test_one_listen_stream_carries_every_kind_of_change(hub: Hub, monkeypatch) -> None:
    listens = Listens()
    listens.install(monkeypatch)
    listed, found = await start(hub)

    assert listens.calls == [
        {"tools_list_changed": True, "resources_list_changed": True, "prompts_list_changed": True}
    ]
    before = (listed.listings, found.listings)

    await add_everything(hub, "fresh", notify=True)  # one event of each kind on the one stream

    await seen(hub, listed, found, "fresh")
    assert listed.listings > before[0] and found.listings > before[1]
    assert len(listens.calls) == 1


async def test_a_dropped_stream_is_opened_again_and_every_list_fetched(hub: Hub, monkeypatch) -> None:
    listens = Listens()
    listens.dropping = True
    listens.install(monkeypatch)
    listed, found = await start(hub)
    await add_everything(hub, "quiet", notify=False)  # nothing announced: only a refetch finds them

    listens.drop.set()

    await seen(hub, listed, found, "quiet")
    assert len(listens.calls) == 2 and listens.calls[0] == listens.calls[1]


async def test_rediscover_lists_tools_resources_and_prompts_again(hub: Hub) -> None:
    listed, found = await start(hub)
    await add_everything(hub, "unannounced", notify=False)
    assert "unannounced" not in {p.name for p in found.prompts}

    await hub.rediscover("box")

    # Listed by the time rediscovery returns: no waiting for a change event that never comes.
    assert "box_unannounced" in {tool.prefixed_name for tool in hub.tools()}
    assert "toolbox://added/unannounced" in {r.uri for r in listed.resources}
    assert "unannounced" in {p.name for p in found.prompts}

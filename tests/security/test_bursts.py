"""A burst of connections is absorbed: 300 websocket handshakes at once on one live Daphne.

Daphne is started the way every deployment starts it (``scripts/serve``: a listen backlog of
1,024, 30 s for a handshake). Each of the 300 sockets must open and get its ``history`` frame:
no connection reset, no handshake refused.
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests.support.live import create_accounts, live_daphne

pytestmark = pytest.mark.processes

SOCKETS = 300


async def _open(session: aiohttp.ClientSession, url: str, headers: dict[str, str]) -> str:
    """ "ok" once the socket opened and its history arrived, else what went wrong."""
    try:
        async with session.ws_connect(url, headers=headers) as socket:
            while (await socket.receive_json(timeout=60))["type"] != "history":
                pass
            return "ok"
    except Exception as exc:  # counted: a reset, a refused handshake, a timeout
        return type(exc).__name__


def test_300_handshakes_at_once_all_open(tmp_path: Path) -> None:
    (tmp_path / "mcp.json").write_text(json.dumps({"mcpServers": {}}))
    env = {
        **os.environ,
        "BOOCODE_DATA_DIR": str(tmp_path),
        "BOOCODE_ALLOWED_HOSTS": "127.0.0.1",
        "DJANGO_SETTINGS_MODULE": "tests.settings",
    }
    env.pop("BOOCODE_DATABASE_URL", None)
    [account] = create_accounts(env, 1)
    with live_daphne(env) as (_daphne, port):
        url = f"ws://127.0.0.1:{port}/ws/conversations/{account['conversation']}/"
        headers = {"Cookie": f"sessionid={account['cookie']}", "Origin": f"http://127.0.0.1:{port}"}

        async def burst() -> list[str]:
            limit = aiohttp.TCPConnector(limit=0)  # no client-side queue: all 300 at once
            async with aiohttp.ClientSession(connector=limit) as session:
                return await asyncio.gather(*(_open(session, url, headers) for _ in range(SOCKETS)))

        outcomes: list[Any] = asyncio.run(burst())
    failed = [outcome for outcome in outcomes if outcome != "ok"]
    assert not failed, f"{len(failed)} of {SOCKETS} failed: {sorted(set(failed))}"

"""A real Daphne after a chat turn: Ctrl-C closes the model client's connections cleanly."""

from __future__ import annotations

import asyncio
import json
import os
import signal
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests.support.live import create_accounts, live_daphne, server_log
from tests.support.llm import ScriptedLLM, Text

pytestmark = pytest.mark.processes

MODEL = "test-model"


async def one_turn(port: int, account: dict[str, Any]) -> dict[str, Any]:
    """Send one message through the websocket, as the page does; the ``turn_end`` frame."""
    url = f"ws://127.0.0.1:{port}/ws/conversations/{account['conversation']}/"
    headers = {"Cookie": f"sessionid={account['cookie']}", "Origin": f"http://127.0.0.1:{port}"}
    async with aiohttp.ClientSession() as session, session.ws_connect(url, headers=headers) as socket:
        await socket.send_json({"type": "user_message", "text": "hello"})
        async with asyncio.timeout(30):
            while (frame := await socket.receive_json())["type"] != "turn_end":
                pass
    return frame


def test_ctrl_c_after_a_turn_closes_the_model_session(tmp_path: Path) -> None:
    (tmp_path / "mcp.json").write_text(json.dumps({"mcpServers": {}}))
    with ScriptedLLM(models=(MODEL,), responder=lambda body: Text("Hello there")) as llm:
        env = {
            **os.environ,
            "BOOCODE_DATA_DIR": str(tmp_path),
            "BOOCODE_LLM_BASE_URL": llm.base_url,
            "BOOCODE_LLM_MODEL": MODEL,
            "BOOCODE_ALLOWED_HOSTS": "127.0.0.1",
        }
        env.pop("BOOCODE_DATABASE_URL", None)
        [account] = create_accounts(env, 1)
        with live_daphne(env) as (daphne, port):
            end = asyncio.run(one_turn(port, account))
            assert end["status"] == "complete"
            assert len(llm.requests) == 1
            daphne.send_signal(signal.SIGINT)
            daphne.wait(20)
        log = server_log(daphne)
    # Without the shutdown hook asyncio logs "Unclosed client session" / "Unclosed connector".
    assert "Unclosed" not in log, log
    assert "Traceback" not in log, log

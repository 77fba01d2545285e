"""The model client's transport: aiohttp (what boocode/chat/llm/client.py uses) against httpx2
(the MCP SDK's).

Both stream the same Chat Completions answer (12 SSE chunks after 20 ms) from the scripted
OpenAI-compatible server, run in a process of its own, through one shared client with
kept-alive connections: first one session doing requests one after another, then N sessions
at once (each pausing 50 ms between requests, so the pool holds N connections). Prints the
CPU time this process spent per request and the median time to the response headers.

    .venv/bin/python bench/llm_client.py [--sessions 50] [--requests 200]

This is a benchmark, not a test: it prints figures and asserts nothing about time.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from multiprocessing.connection import Connection
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import aiohttp  # noqa: E402
import httpx2  # noqa: E402

from tests.support.llm import ScriptedLLM, Text  # noqa: E402

BODY = {"model": "bench-model", "messages": [{"role": "user", "content": "hi"}], "stream": True}
ANSWER = "The echo came back, so the round trip works. " * 2


def serve(conn: Connection) -> None:
    llm = ScriptedLLM(responder=lambda body: Text(ANSWER, chunk_size=8, first_delay=0.02)).start()
    conn.send(llm.base_url)
    conn.recv()
    llm.stop()


def parse(line: str) -> None:
    if line.startswith("data: ") and line[6:] != "[DONE]":
        json.loads(line[6:])


async def with_aiohttp(url: str, sessions: int, requests: int) -> tuple[float, list[float]]:
    session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=200, keepalive_timeout=60))
    headers_at: list[float] = []

    async def one() -> None:
        for _ in range(requests):
            started = time.perf_counter()
            async with session.post(url, json=BODY) as response:
                headers_at.append(time.perf_counter() - started)
                async for raw in response.content:
                    parse(raw.decode().rstrip("\r\n"))
            await asyncio.sleep(0.05)

    return await measure(one, sessions, headers_at, session.close)


async def with_httpx2(url: str, sessions: int, requests: int) -> tuple[float, list[float]]:
    client = httpx2.AsyncClient(
        limits=httpx2.Limits(max_connections=200, max_keepalive_connections=100, keepalive_expiry=60.0)
    )
    headers_at: list[float] = []

    async def one() -> None:
        for _ in range(requests):
            started = time.perf_counter()
            async with client.stream("POST", url, json=BODY) as response:
                headers_at.append(time.perf_counter() - started)
                async for line in response.aiter_lines():
                    parse(line)
            await asyncio.sleep(0.05)

    return await measure(one, sessions, headers_at, client.aclose)


async def measure(
    one: Callable[[], Awaitable[None]],
    sessions: int,
    headers_at: list[float],
    close: Callable[[], Awaitable[None]],
) -> tuple[float, list[float]]:
    cpu = time.process_time()
    await asyncio.gather(*(one() for _ in range(sessions)))
    cpu = time.process_time() - cpu
    await close()
    return cpu, headers_at


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=50)
    parser.add_argument("--requests", type=int, default=200, help="requests of the single session")
    options = parser.parse_args()

    parent, child = multiprocessing.Pipe()
    model = multiprocessing.get_context("fork").Process(target=serve, args=(child,), daemon=True)
    model.start()
    url = parent.recv() + "/chat/completions"
    try:
        for sessions, requests in ((1, options.requests), (options.sessions, 10)):
            for name, run in (("aiohttp", with_aiohttp), ("httpx2", with_httpx2)):
                cpu, headers_at = asyncio.run(run(url, sessions, requests))
                total = sessions * requests
                print(
                    f"{name:8s} {sessions:3d} session(s): CPU {cpu / total * 1000:.2f} ms per request, "
                    f"headers after {statistics.median(headers_at) * 1000:.2f} ms (median)"
                )
    finally:
        parent.send("stop")
        model.join(10)


if __name__ == "__main__":
    main()

"""Shared fixtures: real MCP test servers over stdio and HTTP, and hubs that use them."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from mcpclient.config import ServerConfig, parse_server
from mcpclient.hub import Hub

ROOT = Path(__file__).resolve().parent.parent
TOOLBOX = ROOT / "tests" / "servers" / "toolbox.py"
NODE_DIR = ROOT / "tests" / "node"
PYTHON = sys.executable
# The test servers run with this interpreter, listed by its path (a path runs only when listed).
TEST_COMMANDS = ["npx", "uvx", "node", PYTHON]


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for_port(port: int, process: subprocess.Popen[Any], timeout: float = 30.0) -> None:
    """Block until ``port`` accepts connections (or the process died / time ran out)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"server exited with {process.returncode} before listening on {port}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise TimeoutError(f"nothing listens on 127.0.0.1:{port} after {timeout} s")


def toolbox_entry(*extra: str, **keys: Any) -> dict[str, Any]:
    """An mcp.json entry that runs the toolbox test server over stdio."""
    return {"command": PYTHON, "args": [str(TOOLBOX), *extra], **keys}


def make_config(name: str, entry: dict[str, Any]) -> ServerConfig:
    """Parse an mcp.json entry (validated like the file)."""
    return parse_server(name, entry)


@pytest.fixture
def toolbox_config() -> Callable[..., ServerConfig]:
    """Factory: ``toolbox_config("name", "--extra-tools", "3", timeout=2000)``."""

    def factory(name: str = "toolbox", *extra: str, **keys: Any) -> ServerConfig:
        return make_config(name, toolbox_entry(*extra, **keys))

    return factory


class HttpServer:
    """A server process listening on 127.0.0.1 (stopped by the fixture)."""

    def __init__(
        self,
        args: list[str],
        port: int,
        path: str,
        env: dict[str, str] | None = None,
        cwd: Path | None = None,
    ) -> None:
        self.port = port
        self.url = f"http://127.0.0.1:{port}{path}"
        self.process = subprocess.Popen(
            args,
            env={**os.environ, **(env or {})},
            cwd=cwd,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        wait_for_port(port, self.process)

    def stop(self) -> None:
        """Terminate the process and everything it started (SIGKILL after 5 s).

        The whole process group: ``npx`` runs the real server as a child that outlives a
        signal sent to ``npx`` alone.
        """
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGTERM)  # start_new_session: pgid == pid
        try:
            self.process.wait(5)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()


@pytest.fixture
def http_toolbox() -> Iterator[Callable[..., HttpServer]]:
    """Factory starting the toolbox server over Streamable HTTP (``--sse`` for legacy SSE)."""
    started: list[HttpServer] = []

    def start(*extra: str, sse: bool = False) -> HttpServer:
        port = free_port()
        flag, path = ("--sse", "/sse") if sse else ("--http", "/mcp")
        server = HttpServer([PYTHON, str(TOOLBOX), flag, str(port), *extra], port, path)
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


@pytest.fixture
async def hub() -> AsyncIterator[Hub]:
    """A hub allowed to run the test servers; stopped (children closed) after the test."""
    instance = Hub(base_dir=ROOT, allowed_commands=TEST_COMMANDS)
    try:
        yield instance
    finally:
        await instance.stop()


async def stop_process_hub() -> None:
    """Stop the process-wide hub a test installed, let its listeners finish, forget it.

    Also closes the database connection of the async ORM's thread, which would otherwise
    stay open and keep PostgreSQL from dropping the test database.
    """
    from channels.db import database_sync_to_async
    from django.db import connection

    from mcpclient import runtime

    hub = runtime.get_hub()
    if hub is not None:
        await hub.stop()
        await hub.drain_listeners()
    runtime.set_hub(None)
    await database_sync_to_async(lambda: connection.close())()


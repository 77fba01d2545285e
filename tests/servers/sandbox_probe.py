"""A stdio MCP server that reports what it can reach: files, the network, other processes.

    python tests/servers/sandbox_probe.py

Run plain, it reaches what BooCode's user reaches; run sandboxed (mcp.json's ``sandbox``,
tests/mcpclient/engine/test_sandbox.py), each tool says what the sandbox let through. Every tool answers
with text, also when the attempt failed (``refused: <the OS error>``), so a test reads the outcome
rather than an error result.

- ``fetch(url)``: a fetch-style tool: opens a TCP connection to the URL's host and port, sends an
  HTTP GET and returns the status line;
- ``read(path)``: the file's text;
- ``write(path, text)``: writes the file, says ``written``;
- ``processes()``: how many processes it can see in /proc;
- ``hold(megabytes)``: allocates that much memory and keeps it; an allocation refused ends the
  server with "MemoryError" on stderr, as a failed allocation ends a Node.js, Go or Rust server;
- ``burn(seconds)``: spins until the process has used that much CPU time, says how much it used;
- ``limits()``: its address space and CPU time limits (soft, hard), ``-1`` for none.
"""

from __future__ import annotations

import json
import os
import resource
import socket
import sys
import time
from urllib.parse import urlsplit

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # for common.py, even when run via runpy

from common import READ_ONLY, serve
from mcp.server.mcpserver import MCPServer

server = MCPServer("sandbox-probe")


@server.tool(annotations=READ_ONLY)
def fetch(url: str) -> str:
    """GET ``url`` (http only) and return the answer's status line."""
    parts = urlsplit(url)
    try:
        with socket.create_connection((parts.hostname or "", parts.port or 80), timeout=5) as connection:
            connection.sendall(f"GET {parts.path or '/'} HTTP/1.0\r\nHost: {parts.netloc}\r\n\r\n".encode())
            return connection.recv(4096).split(b"\r\n", 1)[0].decode()
    except OSError as exc:
        return f"refused: {exc}"


@server.tool(annotations=READ_ONLY)
def read(path: str) -> str:
    """The text of the file at ``path``."""
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read()
    except OSError as exc:
        return f"refused: {exc}"


@server.tool()
def write(path: str, text: str) -> str:
    """Write ``text`` to the file at ``path``."""
    try:
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(text)
    except OSError as exc:
        return f"refused: {exc}"
    return "written"


@server.tool(annotations=READ_ONLY)
def processes() -> str:
    """How many processes this server sees in /proc."""
    return str(sum(1 for entry in os.listdir("/proc") if entry.isdigit()))


HELD: list[bytearray] = []


@server.tool()
def hold(megabytes: int) -> str:
    """Allocate ``megabytes`` MiB more and keep them."""
    try:
        for _ in range(megabytes):
            HELD.append(bytearray(1 << 20))  # zero-filled: the pages are touched
    except MemoryError:
        HELD.clear()
        print(f"MemoryError: cannot allocate memory (asked for {megabytes} MiB)", file=sys.stderr, flush=True)
        os._exit(1)
    return f"holding {len(HELD)} MiB"


@server.tool(annotations=READ_ONLY)
def burn(seconds: float) -> str:
    """Spin until this process has used ``seconds`` of CPU time."""
    while time.process_time() < seconds:
        pass
    return f"used {time.process_time():.1f} s of CPU"


@server.tool(annotations=READ_ONLY)
def limits() -> str:
    """This process's resource limits: address space (bytes) and CPU time (seconds)."""
    return json.dumps(
        {
            "address_space": resource.getrlimit(resource.RLIMIT_AS),
            "cpu": resource.getrlimit(resource.RLIMIT_CPU),
        }
    )


if __name__ == "__main__":
    serve(server)

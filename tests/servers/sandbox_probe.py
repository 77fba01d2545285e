"""A stdio MCP server that reports what it can reach: files, the network, other processes.

    python tests/servers/sandbox_probe.py

Run plain, it reaches what BooCode's user reaches; run sandboxed (mcp.json's ``sandbox``,
tests/mcpclient/test_sandbox.py), each tool says what the sandbox let through. Every tool answers
with text, also when the attempt failed (``refused: <the OS error>``), so a test reads the outcome
rather than an error result.

- ``fetch(url)``: a fetch-style tool: opens a TCP connection to the URL's host and port, sends an
  HTTP GET and returns the status line;
- ``read(path)``: the file's text;
- ``write(path, text)``: writes the file, says ``written``;
- ``processes()``: how many processes it can see in /proc.
"""

from __future__ import annotations

import os
import socket
import sys
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


if __name__ == "__main__":
    serve(server)

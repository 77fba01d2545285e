"""A hostile MCP server over Streamable HTTP, written by hand (no SDK: every byte is chosen).

POST /mcp speaks just enough JSON-RPC to be connected (``initialize``, ``tools/list``,
notifications). Its tools answer ``tools/call`` with:

- ``huge``: a 20 MB JSON answer with its ``Content-Length``;
- ``endless``: a 20 MB JSON answer without a length (the body ends when the connection closes);
- ``bomb``: a gzip answer of about 100 KB that decodes to 100 MB;
- ``big_event``: an event stream whose one event carries 20 MB;
- ``echo {text}``: the text back;
- ``stream_seen``: whether the GET stream for the server's own messages had been answered when
  the call came (``--late-stream``).

``--oauth-bomb``: every POST answers 401 naming protected-resource metadata at ``/prm``, and
GET /prm answers 200 MB of JSON (without a length), made as it is sent.

``--late-stream S``: ``initialize`` is answered with a session id, so the client opens the GET
stream for the server's messages; its answer comes only after S seconds (then an event stream,
kept open with comments).

    python tests/servers/hostile_http.py PORT [--oauth-bomb] [--late-stream S]
"""

from __future__ import annotations

import argparse
import gzip
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MB = 1024 * 1024
TOOLS = [
    {
        "name": name,
        "description": f"The {name} tool.",
        "inputSchema": {"type": "object", "properties": {}},
        "annotations": {"readOnlyHint": True},
    }
    for name in ("huge", "endless", "bomb", "big_event", "echo", "stream_seen")
]
BOMB = gzip.compress(
    b'{"jsonrpc":"2.0","id":0,"result":{"content":[{"type":"text","text":"' + b" " * (100 * MB) + b'"}]}}'
)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    oauth_bomb = False
    late_stream: float | None = None
    stream_answered = threading.Event()

    def log_message(self, format: str, *args: object) -> None:
        return None

    def do_GET(self) -> None:
        if self.path == "/prm" and self.oauth_bomb:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(b'{"resource": "x", "padding": "')
            try:
                for _ in range(200):
                    self.wfile.write(b"x" * MB)
                self.wfile.write(b'"}')
            except OSError:
                pass  # the client stopped reading: that is the point
            self.close_connection = True
            return
        if self.path == "/mcp" and self.late_stream is not None:
            time.sleep(self.late_stream)
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Connection", "close")
            self.close_connection = True
            self.end_headers()
            Handler.stream_answered.set()
            try:
                while True:
                    self.wfile.write(b": open\n\n")
                    self.wfile.flush()
                    time.sleep(1)
            except OSError:
                return  # the client closed the stream
        self.send_response(405)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        if self.oauth_bomb:
            self.send_response(401)
            host = self.headers.get("Host")
            self.send_header("WWW-Authenticate", f'Bearer resource_metadata="http://{host}/prm"')
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        message = json.loads(body)
        message_id, method = message.get("id"), message.get("method")
        if message_id is None:
            self.send_response(202)
            self.send_header("Content-Length", "0")
            self.end_headers()
        elif method == "initialize":
            self.json(
                message_id,
                {
                    "protocolVersion": "2025-11-25",
                    "capabilities": {"tools": {}},
                    "serverInfo": {"name": "hostile-http", "version": "1.0.0"},
                },
            )
        elif method == "tools/list":
            self.json(message_id, {"tools": TOOLS})
        elif method == "tools/call":
            self.call(message_id, message["params"]["name"], message["params"].get("arguments") or {})
        else:
            self.json(message_id, {})

    def json(self, message_id: object, result: dict) -> None:
        data = json.dumps({"jsonrpc": "2.0", "id": message_id, "result": result}).encode()
        self.send_response(200)
        if self.late_stream is not None:
            self.send_header("Mcp-Session-Id", "late-stream-session")
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def call(self, message_id: object, name: str, arguments: dict) -> None:
        head = (
            b'{"jsonrpc":"2.0","id":'
            + json.dumps(message_id).encode()
            + b',"result":{"content":[{"type":"text","text":"'
        )
        tail = b'"}]}}'
        try:
            if name in ("huge", "endless"):
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                if name == "huge":
                    self.send_header("Content-Length", str(len(head) + 20 * MB + len(tail)))
                else:
                    self.send_header("Connection", "close")
                    self.close_connection = True
                self.end_headers()
                self.wfile.write(head)
                for _ in range(20):
                    self.wfile.write(b"x" * MB)
                self.wfile.write(tail)
            elif name == "bomb":
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Encoding", "gzip")
                self.send_header("Content-Length", str(len(BOMB)))
                self.end_headers()
                self.wfile.write(BOMB)
            elif name == "big_event":
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Connection", "close")
                self.close_connection = True
                self.end_headers()
                self.wfile.write(b"event: message\ndata: " + head)
                for _ in range(20):
                    self.wfile.write(b"x" * MB)
                self.wfile.write(tail + b"\n\n")
            elif name == "stream_seen":
                seen = "yes" if Handler.stream_answered.is_set() else "no"
                self.json(message_id, {"content": [{"type": "text", "text": f"stream answered: {seen}"}]})
            else:
                self.json(message_id, {"content": [{"type": "text", "text": str(arguments.get("text", ""))}]})
        except OSError:
            self.close_connection = True  # the client stopped reading


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("port", type=int)
    parser.add_argument("--oauth-bomb", action="store_true")
    parser.add_argument("--late-stream", type=float)
    options = parser.parse_args()
    Handler.oauth_bomb = options.oauth_bomb
    Handler.late_stream = options.late_stream
    ThreadingHTTPServer(("127.0.0.1", options.port), Handler).serve_forever()


if __name__ == "__main__":
    main()

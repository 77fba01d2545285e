"""The toolbox as a 2025-11-25 server only: it refuses ``server/discover``.

    python tests/servers/handshake_toolbox.py [--http PORT] [--feature NAME ...]

A client in the SDK's ``"auto"`` mode (the hub) then falls back to the ``initialize``
handshake, so the feature groups can be tested on both revisions with the same tools
(``tests/servers/modern.py --handshake-only`` does the same for its own tools).
"""

from __future__ import annotations

import argparse
import os
import sys

import anyio
import mcp.types as types

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from modern import _no_discover, _serve_stdio_handshake_only
from toolbox import FEATURES, build_server


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--http", type=int, metavar="PORT", help="serve Streamable HTTP on this port")
    parser.add_argument("--feature", action="append", default=[], choices=FEATURES)
    options = parser.parse_args()
    server = build_server(features=options.feature)
    server._lowlevel_server.add_request_handler("server/discover", types.RequestParams, _no_discover)
    server.settings.log_level = "WARNING"
    if options.http:
        server.run("streamable-http", host="127.0.0.1", port=options.http)
    else:
        anyio.run(_serve_stdio_handshake_only, server)


if __name__ == "__main__":
    main()

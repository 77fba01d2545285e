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

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # for common.py, even when run via runpy

import common
from toolbox import FEATURES, build_server


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    common.add_transport_flags(parser)
    parser.add_argument("--feature", action="append", default=[], choices=FEATURES)
    options = parser.parse_args()
    common.serve(build_server(features=options.feature), http=options.http, handshake_only=True)


if __name__ == "__main__":
    main()

"""A launcher that cannot start its server: it writes what ``npx`` or ``uvx`` write then, and exits 1.

The lines are those the launchers print (npm 10 for a package its registry does not have, uv for one
its index does not have, and npm for a registry it cannot reach), the registry's address
left out: the hub must tell from them what failed and whether trying again can help.

    python tests/servers/launcher_failure.py {npm-missing|uv-missing|npm-offline} [--count FILE]

``--count FILE``: a line is appended to FILE at each start, so a test can tell how often the
hub started the server.
"""

from __future__ import annotations

import argparse
import sys

PACKAGE = "@boocode-test/no-such-server"
LOG = "/root/.npm/_logs/2026-12-07T22_42_22_199Z-debug-0.log"

SAID = {
    "npm-missing": [
        "npm error code E404",
        "npm error 404 Not Found - GET https://registry.invalid/@boocode-test%2fno-such-server",
        "npm error 404",
        f"npm error 404  The requested resource '{PACKAGE}@*' could not be found or you do not have "
        "permission to access it.",
        "npm error 404",
        "npm error 404 Note that you can also install from a",
        "npm error 404 tarball, folder, http url, or git url.",
        f"npm error A complete log of this run can be found in: {LOG}",
    ],
    "uv-missing": [
        "error: No solution found when resolving tool dependencies",
        "  cause: Because boocode-test-no-such-server was not found in the package registry and you require "
        "boocode-test-no-such-server, we can conclude that your requirements are unsatisfiable.",
    ],
    "npm-offline": [
        "npm error code EAI_AGAIN",
        "npm error syscall getaddrinfo",
        "npm error errno EAI_AGAIN",
        "npm error request to https://registry.invalid/@boocode-test%2fno-such-server failed, reason: "
        "getaddrinfo EAI_AGAIN registry.invalid",
        f"npm error A complete log of this run can be found in: {LOG}",
    ],
}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("kind", choices=sorted(SAID))
    parser.add_argument("--count", default="")
    options = parser.parse_args()
    if options.count:
        with open(options.count, "a", encoding="utf-8") as counter:
            counter.write("started\n")
    for line in SAID[options.kind]:
        print(line, file=sys.stderr, flush=True)
    sys.exit(1)


if __name__ == "__main__":
    main()

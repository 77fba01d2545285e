"""Whether Daphne can listen where ``make run`` asks, checked before anything is prepared.

``make run`` migrates and syncs before Daphne starts; a port already taken (a second ``make run``)
used to fail only then, with Twisted's ``Address already in use``. :func:`listen_problem` binds
the address as Twisted does (``SO_REUSEADDR``: a port left in TIME_WAIT by a server that just
stopped is free, one a server listens on is not) and says what to do instead.
"""

from __future__ import annotations

import errno
import socket

__all__ = ["listen_problem", "next_free_port"]

NEXT_PORTS = 20  # how far past a taken port the advice looks for a free one


def _bind(host: str, port: int) -> OSError | None:
    """The error binding ``host:port`` gives now (the socket is closed at once), or None."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET  # Twisted's rule for an interface
    try:
        with socket.socket(family, socket.SOCK_STREAM) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            probe.bind((host, port))
    except OSError as exc:
        return exc
    return None


def next_free_port(host: str, port: int) -> int | None:
    """The first port after ``port`` that ``host`` can listen on (within :data:`NEXT_PORTS`)."""
    for candidate in range(port + 1, min(port + 1 + NEXT_PORTS, 65536)):
        if _bind(host, candidate) is None:
            return candidate
    return None


def listen_problem(host: str, port: int) -> str | None:
    """Why Daphne could not listen on ``host:port`` now, as advice for ``make run``; None if it can.

    ``host`` may be written as Daphne's endpoint wants an IPv6 address (``\\:\\:1``).
    """
    host = host.replace("\\", "")
    error = _bind(host, port)
    if error is None:
        return None
    if error.errno == errno.EADDRINUSE:
        free = next_free_port(host, port)
        pick = f"make run PORT={free}" if free else "make run PORT=<another port>"
        return (
            f"port {port} on {host} is already in use (is BooCode already running?). "
            f"Stop what listens there, or serve on another port: {pick}"
        )
    if isinstance(error, socket.gaierror) or error.errno == errno.EADDRNOTAVAIL:
        reason = error.strerror or error
        return f"HOST={host} is not an address of this machine: {reason}. Try make run HOST=127.0.0.1"
    return f"cannot listen on {host} port {port}: {error.strerror or error}. Try make run PORT=8001"

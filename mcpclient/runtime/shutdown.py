"""Work to finish before the server process exits (Daphne runs on Twisted's reactor).

``on_server_shutdown(factory)`` registers ``factory()`` (a coroutine function) to be awaited on
the reactor's loop before it shuts down, so Ctrl-C or SIGTERM leaves no child processes or
open connections behind. Outside Daphne (tests, management commands) it does nothing: their
owners close what they opened.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

logger = logging.getLogger(__name__)


def on_server_shutdown(factory: Callable[[], Awaitable[object]]) -> bool:
    """Await ``factory()`` before the running Twisted reactor shuts down; ``False`` if none runs."""
    try:
        # Not at the top: importing the reactor installs one, and Daphne installs its own first.
        from twisted.internet import reactor
        from twisted.internet.defer import Deferred
    except ImportError:  # pragma: no cover - Twisted comes with Daphne
        return False
    if not getattr(reactor, "running", False):
        return False

    def before_shutdown() -> Deferred:
        return Deferred.fromFuture(asyncio.ensure_future(factory()))

    # (The stubs read the zope interface's method as if its first argument were self.)
    reactor.addSystemEventTrigger("before", "shutdown", before_shutdown)  # type: ignore[arg-type]
    return True

"""A connection's record of its stdio server's stderr and exit: the last lines, which of them this
attempt wrote, and the hint a failure adds to ``last_error`` (what stderr said, what the sandbox did).

Stderr can hold secrets: what this record says is for staff (``last_error``, the admin), never for
the people who use the server or the model.
"""

from __future__ import annotations

from collections import deque

from mcpclient.config.model import ResolvedServer
from mcpclient.engine.sandbox_failures import explain as explain_sandbox_failure
from mcpclient.engine.server_stderr import missing_package, telling_stderr

STDERR_LINES = 200


class StderrRecord:
    """What one server wrote to stderr (across attempts) and how its process last exited."""

    def __init__(self) -> None:
        self.tail: deque[str] = deque(maxlen=STDERR_LINES)
        # Lines the server wrote to stderr in all, and how many before the current attempt began.
        self._count = 0
        self._attempt_from = 0
        # A stdio server's exit status, when its process exited on its own (None: it did not).
        self.exit_status: int | None = None

    def line(self, line: str) -> None:
        """Keep a line the server wrote."""
        self.tail.append(line)
        self._count += 1

    def begin_attempt(self) -> None:
        """A new connection attempt: the lines written from now on are its own."""
        self._attempt_from = self._count

    def package_not_found(self) -> bool:
        """Whether this attempt's stderr says the stdio server's launcher found no such package."""
        count = min(self._count - self._attempt_from, len(self.tail))
        return count > 0 and missing_package(list(self.tail)[-count:])

    def hint(self, resolved: ResolvedServer | None, *, timed_out: bool = False) -> str:
        """What a failure's ``last_error`` adds: what the sandbox did, what stderr said."""
        said = telling_stderr(self.tail)
        hint = f" (stderr: {said})" if said else ""
        why = self.sandbox_hint(resolved, timed_out=timed_out)
        return f"; {why}{hint}" if why else hint

    def sandbox_hint(self, resolved: ResolvedServer | None, *, timed_out: bool) -> str:
        """What the sandbox did, when the server's exit and stderr point at it (staff read it)."""
        if resolved is None or resolved.sandbox is None:
            return ""
        return explain_sandbox_failure(
            resolved.sandbox,
            resolved.command or "",
            resolved.args,
            resolved.env,
            exit_status=self.exit_status,
            stderr=self.tail,
            timed_out=timed_out,
        )

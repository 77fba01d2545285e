"""The stdio transport: a server as a child process, read line by line within bounds, watched.

Ours rather than the SDK's ``stdio_client`` (whose process handling this follows: its own
session and process group, stdin closed first, then the group terminated): the SDK's reader
joins each chunk to the line so far and splits the whole again, quadratic on one long line,
and parses a line of any size (a 20 MB result stalled the event loop for 8 to 11 s), and it
learns of the server's end only from end of file, which never comes while a child the server
started still holds the pipe (a call waited 37 s for its ping to fail). Here:

* :class:`~mcpclient.engine.inbound.LineReader` splits stdout in linear time and keeps at most
  one message's limit; each line is weighed before it is parsed
  (:func:`mcpclient.engine.inbound.parse`), and a refused one is answered: the waiting caller
  gets its error at once, a request of the server's gets an error back.
* The server process itself is watched (:data:`WATCH_SECONDS`): when it exits, its whole
  process group is ended and the session sees the end at once.

Built on public pieces only: anyio's process and memory streams, the SDK's ``SessionMessage``
and message types, and its POSIX process-group termination.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any, TextIO

import anyio
from anyio.abc import Process
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.client.stdio import get_default_environment
from mcp.os.posix.utilities import terminate_posix_process_tree
from mcp.shared.message import SessionMessage

from mcpclient.engine.inbound import LineReader, Oversized, Refused, parse, problem, refuse

logger = logging.getLogger("mcpclient.hub")

# After its stdin closed, the server gets this long to exit on its own.
EXIT_GRACE_SECONDS = 2.0
# After SIGTERM to its process group, this long before SIGKILL.
KILL_AFTER_SECONDS = 5.0
# How often the server process is checked for having exited.
WATCH_SECONDS = 0.2
# Accepted messages get this long to reach the server when the session closes.
FLUSH_SECONDS = 0.5
READ_CHUNK = 64 * 1024

Streams = tuple[MemoryObjectReceiveStream[SessionMessage | Exception], MemoryObjectSendStream[SessionMessage]]


@contextlib.asynccontextmanager
async def stdio_streams(
    command: str,
    args: list[str],
    *,
    env: dict[str, str],
    cwd: str | Path | None,
    errlog: TextIO,
    name: str,
    on_exit: Callable[[int], Any] = lambda status: None,
) -> AsyncIterator[Streams]:
    """Start ``command`` without a shell in a process group of its own; its ``(read, write)`` streams.

    ``on_exit`` is told the process's exit status once it is over (however it ended: stopped by
    the session, its status says so), after its streams closed."""
    process = await anyio.open_process(
        [command, *args],
        env=get_default_environment() | env,
        stderr=errlog,
        cwd=cwd,
        start_new_session=True,
    )
    to_session, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_stream, from_session = anyio.create_memory_object_stream[SessionMessage](0)
    to_server = write_stream.clone()  # answers to the server's refused requests
    writer_done = anyio.Event()
    closing = False

    async def read_stdout() -> None:
        assert process.stdout is not None
        lines = LineReader()
        async with to_session:
            try:
                while True:
                    chunk = await process.stdout.receive(READ_CHUNK)
                    for line in lines.feed(chunk):
                        if not await deliver(line):
                            return
            except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
                return

    async def deliver(line: bytes | Oversized) -> bool:
        if isinstance(line, Oversized):
            reason = problem(b"", line.size) or "an oversized message"
            taken: SessionMessage | Refused = refuse(name, reason, line.head, line.tail)
        elif not line.strip():
            return True
        else:
            taken = parse(name, line)
        try:
            if isinstance(taken, SessionMessage):
                await to_session.send(taken)
            elif taken.to_session is not None:
                await to_session.send(taken.to_session)
            elif taken.to_server is not None:
                await to_server.send(taken.to_server)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            return False  # the session is gone
        return True

    async def write_stdin() -> None:
        assert process.stdin is not None
        try:
            async with from_session:
                async for message in from_session:
                    data = message.message.model_dump_json(by_alias=True, exclude_unset=True)
                    await process.stdin.send(data.encode() + b"\n")
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            await to_session.aclose()  # the server stopped reading: the session sees the end
        finally:
            writer_done.set()

    async def watch() -> None:
        # Polled: nothing signals an exit while a child of the server still holds the pipes.
        while process.returncode is None or closing:  # noqa: ASYNC110
            await anyio.sleep(WATCH_SECONDS)
        logger.info('MCP server "%s" exited with status %s', name, process.returncode)
        await to_session.aclose()  # the session sees the end now, whoever still holds the pipe
        _signal_group(process, signal.SIGKILL)  # what it left behind goes with it

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(read_stdout)
        tasks.start_soon(write_stdin)
        tasks.start_soon(watch)
        try:
            yield read_stream, write_stream
        finally:
            closing = True
            with anyio.CancelScope(shield=True):
                read_stream.close()
                write_stream.close()
                to_server.close()
                with anyio.move_on_after(FLUSH_SECONDS):
                    await writer_done.wait()
                await _stop(process)
            tasks.cancel_scope.cancel()
            if process.returncode is not None:
                on_exit(process.returncode)


async def _stop(process: Process) -> None:
    """Close stdin, give the server :data:`EXIT_GRACE_SECONDS`, then end its process group."""
    assert process.stdin is not None and process.stdout is not None
    with contextlib.suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
        await process.stdin.aclose()
    with anyio.move_on_after(EXIT_GRACE_SECONDS):
        while process.returncode is None:  # noqa: ASYNC110 (as in watch)
            await anyio.sleep(0.01)
    if process.returncode is None:
        await terminate_posix_process_tree(process, KILL_AFTER_SECONDS)
    else:
        _signal_group(process, signal.SIGKILL)
    with contextlib.suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
        await process.stdout.aclose()


def _signal_group(process: Process, sig: int) -> None:
    """Send ``sig`` to the server's process group (its pid: it leads its own session)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, sig)

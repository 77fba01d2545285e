"""A warm Python for the processes a test process starts: imported once, forked per process.

A Python MCP test server spends ~1.4 s of CPU importing the MCP SDK before it reads a byte; a
``manage.py`` run or a Daphne ~1.5 s more importing Django and the rest. The suite starts
hundreds of them. So each test process (each pytest-xdist worker) starts one zygote
(:func:`start`, from tests/boocode_test_env.py): a process that imports those libraries once,
then waits on a Unix socket beside the launcher (found without any environment variable: the
MCP SDK starts stdio servers with only a few of them). ``tests.support.processes.PYTHON`` is the launcher
(tests/support/pylauncher.py), which asks the zygote for a child: the child takes the launcher's
standard streams, arguments, environment and working directory, leads a session of its own and
runs the script as ``python`` would (``__main__``, ``sys.argv``, ``sys.path``). Whoever started the
launcher talks to the real server over the same pipes; the launcher forwards signals and ends
with the child's status. A launcher killed outright has its child's process group killed.

Nothing the tests check changes: the servers are the same code in real processes over real
pipes. What the zygote imported is only libraries, never the project, and never Django set up
(the child does that with its own environment); nothing that opens a file, a socket, a thread
or an event loop at import (Twisted's reactor, Daphne) is imported here.

Without a zygote (another process than a test process) the launcher runs the real interpreter.
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import json
import os
import runpy
import selectors
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
import traceback
import types
from pathlib import Path
from typing import Any

# Libraries the suite's Python processes import; each is imported if it can be (a library
# missing here only makes its children slower). Nothing that does I/O at import.
PRELOAD = (
    "mcp",
    "mcp.types",
    "mcp.client",
    "mcp.client.stdio",
    "mcp.client.streamable_http",
    "mcp.server",
    "mcp.server.mcpserver",
    "mcp.server.runner",
    "mcp.server.stdio",
    "mcp.server.streamable_http",
    "mcp.server.sse",
    "mcp.shared.auth",
    "pydantic",
    "anyio",
    "httpx2",
    "starlette.applications",
    "starlette.routing",
    "uvicorn",
    "jsonschema",
    "yaml",
    "markdown_it",
    "nh3",
    "aiohttp",
    "cryptography.fernet",
    "django.db.models",
    "django.http",
    "django.urls",
    "django.forms",
    "django.template.defaulttags",
    "django.core.management",
    "django.contrib.admin.options",
    "django.db.backends.sqlite3.base",
    "psycopg",
    "channels.generic.websocket",
    "channels.layers",
    "asgiref.sync",
)
ZYGOTE_SOCKET = "zygote.sock"  # beside the launcher (tests/support/pylauncher.py looks there)
_MAIN = "from tests.support.zygote import main; main()"
POLL_SECONDS = 1.0  # how often the zygote checks that the test process that started it lives


def start(launcher: str) -> subprocess.Popen[bytes]:
    """Start this test process's zygote for ``launcher`` (``tests.support.processes.PYTHON``):
    it listens beside it once its imports are done; until then, and after, the launcher runs the
    real interpreter."""
    socket_path = Path(launcher).with_name(ZYGOTE_SOCKET)
    return subprocess.Popen(
        # Not run as __main__: a child's script gets a __main__ module of its own.
        [sys.executable, "-c", _MAIN, str(socket_path), str(os.getpid())],
        cwd=Path(__file__).resolve().parents[2],
        stdin=subprocess.DEVNULL,
    )


def stop(process: subprocess.Popen[bytes]) -> None:
    """End the zygote and any child still running."""
    process.terminate()
    try:
        process.wait(10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def _preload() -> None:
    for name in PRELOAD:
        with contextlib.suppress(Exception):
            importlib.import_module(name)
    if "twisted.internet.reactor" in sys.modules:  # a reactor would be shared by every child
        raise RuntimeError("the zygote imported Twisted's reactor")


def _receive(connection: socket.socket) -> tuple[dict[str, Any], list[int]]:
    head, fds, _, _ = socket.recv_fds(connection, 4, 3)
    if len(head) < 4 or len(fds) != 3:
        for fd in fds:
            os.close(fd)
        raise ConnectionError("a launcher sent no streams")
    size = struct.unpack("!I", head)[0]
    body = b""
    while len(body) < size:
        chunk = connection.recv(size - len(body))
        if not chunk:
            raise ConnectionError("a launcher went away mid-request")
        body += chunk
    return json.loads(body), fds


def _run_child(request: dict[str, Any], fds: list[int]) -> int:
    """In the forked child: become the process the launcher was asked to be; its exit code."""
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
    for fd in fds:
        if fd > 2:
            os.close(fd)
    os.setsid()
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    os.environ.clear()
    os.environ.update(request["env"])
    os.chdir(request["cwd"])
    os.umask(request["umask"])
    argv: list[str] = request["argv"]
    sys.modules["__main__"] = types.ModuleType("__main__")
    extra = [entry for entry in os.environ.get("PYTHONPATH", "").split(os.pathsep) if entry]
    base = [entry for entry in sys.path[1:] if entry not in extra]
    try:
        if argv[0] == "-m":
            sys.argv = [argv[1], *argv[2:]]
            sys.path[:] = [os.getcwd(), *extra, *base]
            runpy._run_module_as_main(argv[1])  # type: ignore[attr-defined]  # as python -m does
        elif argv[0] == "-c":
            sys.argv = ["-c", *argv[2:]]
            sys.path[:] = ["", *extra, *base]
            namespace = sys.modules["__main__"].__dict__
            namespace["__builtins__"] = __builtins__
            exec(compile(argv[1], "<string>", "exec"), namespace)
        else:
            script = os.path.realpath(argv[0])
            sys.argv = list(argv)
            sys.path[:] = [os.path.dirname(script), *extra, *base]
            runpy.run_path(argv[0], run_name="__main__")
        code = 0
    except SystemExit as exc:
        code = _exit_code(exc.code)
    except KeyboardInterrupt as exc:
        _print_as_python_would(exc)
        code = 130
    except BaseException as exc:
        _print_as_python_would(exc)
        code = 1
    # What the interpreter does on its way out: wait for non-daemon threads, run atexit handlers.
    with contextlib.suppress(BaseException):
        threading._shutdown()  # type: ignore[attr-defined]
    with contextlib.suppress(BaseException):
        import atexit

        atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(BaseException):
            stream.flush()
    return code


def _print_as_python_would(exc: BaseException) -> None:
    """The traceback from the script's first frame on (not the zygote's or runpy's)."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename in (__file__, runpy.__file__, "<frozen runpy>"):
        tb = tb.tb_next
    traceback.print_exception(type(exc), exc, tb)


def _exit_code(code: object) -> int:
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    with contextlib.suppress(BaseException):
        print(code, file=sys.stderr)
    return 1


class Zygote:
    def __init__(self, path: str, parent: int) -> None:
        self.path = path
        self.parent = parent
        self.selector = selectors.DefaultSelector()
        self.children: dict[int, tuple[socket.socket, int]] = {}  # pid -> (launcher, pidfd)
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)

    def serve(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)
        self.listener.bind(self.path)
        self.listener.listen(64)
        self.selector.register(self.listener, selectors.EVENT_READ, None)
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
        try:
            while os.getppid() == self.parent:
                for key, _ in self.selector.select(POLL_SECONDS):
                    if key.data is None:
                        self._accept()
                    else:
                        kind, pid = key.data
                        if kind == "exited":
                            self._exited(pid)
                        else:  # the launcher closed its end: it is gone, its child goes too
                            self._launcher_gone(pid)
        finally:
            for pid in list(self.children):
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(pid, signal.SIGKILL)
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.path)

    def _accept(self) -> None:
        connection, _ = self.listener.accept()
        try:
            connection.settimeout(5)
            request, fds = _receive(connection)
        except (OSError, ValueError):
            connection.close()
            return
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
        try:
            pid = os.fork()
        except OSError:  # no fork now (out of processes or memory): the launcher runs python itself
            for fd in fds:
                os.close(fd)
            with contextlib.suppress(OSError):
                connection.sendall(json.dumps({"refused": True}).encode() + b"\n")
            connection.close()
            return
        if pid == 0:
            code = 1
            try:
                self.selector.close()
                self.listener.close()
                connection.close()
                for launcher, pidfd in self.children.values():
                    launcher.close()
                    os.close(pidfd)
                code = _run_child(request, fds)
            finally:
                os._exit(code)
        for fd in fds:
            os.close(fd)
        pidfd = os.pidfd_open(pid)
        self.children[pid] = (connection, pidfd)
        connection.settimeout(None)
        with contextlib.suppress(OSError):  # a launcher gone already: its end is seen below
            connection.sendall(json.dumps({"pid": pid}).encode() + b"\n")
        self.selector.register(pidfd, selectors.EVENT_READ, ("exited", pid))
        self.selector.register(connection, selectors.EVENT_READ, ("launcher", pid))

    def _exited(self, pid: int) -> None:
        connection, pidfd = self.children.pop(pid)
        _, status = os.waitpid(pid, 0)
        self.selector.unregister(pidfd)
        with contextlib.suppress(KeyError):  # unregistered already if its launcher went first
            self.selector.unregister(connection)
        os.close(pidfd)
        with contextlib.suppress(OSError):
            connection.sendall(json.dumps({"status": status}).encode() + b"\n")
        connection.close()

    def _launcher_gone(self, pid: int) -> None:
        connection, _ = self.children[pid]
        with contextlib.suppress(OSError):
            if connection.recv(1, socket.MSG_PEEK):
                return  # a launcher sends nothing after its request; not an end
        self.selector.unregister(connection)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGKILL)
        # Its exit is reaped by _exited (the pidfd); the launcher hears nothing more.


def main() -> None:
    path, parent = sys.argv[-2], int(sys.argv[-1])
    try:  # a child's exit is watched through its pidfd (Linux 5.3): without, no zygote
        os.close(os.pidfd_open(os.getpid()))
    except (AttributeError, OSError):
        return
    started = time.monotonic()
    _preload()
    gc.collect()
    gc.freeze()  # what the children share stays shared (no reference-count writes by the collector)
    zygote = Zygote(path, parent)
    if os.environ.get("BOOCODE_ZYGOTE_VERBOSE"):
        print(f"zygote ready in {time.monotonic() - started:.2f} s", file=sys.stderr)
    zygote.serve()


if __name__ == "__main__":
    main()

"""Processes the tests start: where things are, free ports, HTTP servers and who is running.

Nothing here imports Django or the project, so ``bench/`` scripts use it before any setup.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import zlib
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
TOOLBOX = ROOT / "tests" / "servers" / "toolbox.py"
NODE_DIR = ROOT / "tests" / "node"
REAL_PYTHON = sys.executable


def launcher_in(folder: str | Path) -> str:
    """The tests' ``python`` in ``folder`` (tests/support/pylauncher.py behind a shebang to this
    interpreter): forked from the zygote listening beside it (tests/support/zygote.py), else
    the real interpreter. Written once per folder, interpreter and launcher text."""
    text = f"#!{REAL_PYTHON} -SE\n" + (Path(__file__).with_name("pylauncher.py")).read_text()
    digest = hashlib.sha256(text.encode()).hexdigest()[:12]
    path = Path(folder) / f"boocode-python-{os.getuid()}-{digest}" / "python"
    if not path.exists():
        path.parent.mkdir(exist_ok=True)
        partial = path.with_name(f"python.{os.getpid()}")
        partial.write_text(text)
        partial.chmod(0o755)
        os.replace(partial, path)
    return str(path)


# What the tests run Python scripts with: MCP test servers, manage.py, Daphne. In the test
# process's data folder: each pytest-xdist worker has its own, and its own zygote (the
# benchmarks, without one, get the real interpreter through it).
PYTHON = launcher_in(os.environ.get("BOOCODE_DATA_DIR") or tempfile.gettempdir())
# The test servers run with these interpreters, listed by their paths (a path runs only when
# listed): the launcher, and the real one for the tests about the server's own process (its
# pid, its process group, SIGSTOP), which the launcher stands in for.
TEST_COMMANDS = ["npx", "uvx", "node", PYTHON, REAL_PYTHON]


def _worker_index() -> int | None:
    """This pytest-xdist worker's number in the machine's test runs, ``None`` outside xdist.

    Two runs at once (``make test`` runs two: scripts/run-tests) are told apart by
    ``BOOCODE_TEST_SLOT``: slot N's workers count from 4 N (up to four workers a run, four runs).
    Without it, the run's id spreads two runs apart (likely, not surely).
    """
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    if not worker.startswith("gw"):
        return None
    slot = os.environ.get("BOOCODE_TEST_SLOT")
    offset = 4 * int(slot) if slot else zlib.crc32(os.environ.get("PYTEST_XDIST_TESTRUNUID", "").encode())
    return int(worker[2:]) + offset


def _port_block() -> range:
    """The ports this test process hands out: a block of its own below the kernel's ephemeral range.

    A port the kernel picks for ``bind(0)`` may be picked again (for another worker's server, or
    for an outgoing connection) between the moment it is returned and the moment a server binds
    it. Ports below 32768 are never given to outgoing connections, and each pytest-xdist worker
    takes its own block of 1,000 (:func:`_worker_index`).
    """
    index = _worker_index()
    if index is None:
        return range(0)
    block = index % 16
    return range(16_000 + block * 1_000, 17_000 + block * 1_000)


_ports = iter(_port_block())


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now (from this worker's own block)."""
    for port in _ports:
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    with socket.socket() as sock:  # not under pytest-xdist (or the block is used up): any port
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def redis_url() -> str:
    """A Redis database of this test process's own on the local server (db 1-15, one per worker)."""
    return f"redis://127.0.0.1:6379/{1 + (_worker_index() or 0) % 15}"


def wait_for_port(port: int, process: subprocess.Popen[Any], timeout: float = 30.0) -> None:
    """Block until ``port`` accepts connections (or the process died / time ran out)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"server exited with {process.returncode} before listening on {port}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise TimeoutError(f"nothing listens on 127.0.0.1:{port} after {timeout} s")


def toolbox_entry(*extra: str, **keys: Any) -> dict[str, Any]:
    """An mcp.json entry that runs the toolbox test server over stdio."""
    return {"command": PYTHON, "args": [str(TOOLBOX), *extra], **keys}


class HttpServer:
    """A server process listening on 127.0.0.1 (stopped by the fixture)."""

    def __init__(
        self,
        args: list[str],
        port: int,
        path: str,
        env: dict[str, str] | None = None,
        cwd: Path | None = None,
        start_within: float = 30.0,
    ) -> None:
        self.port = port
        self.url = f"http://127.0.0.1:{port}{path}"
        self.process = subprocess.Popen(
            args,
            env={**os.environ, **(env or {})},
            cwd=cwd,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        try:
            wait_for_port(port, self.process, start_within)
        except BaseException:  # (a server that never listened, or listened late, is not left running)
            self.stop()
            raise

    def stop(self) -> None:
        """Terminate the process and everything it started (SIGKILL after 5 s).

        The whole process group: ``npx`` runs the real server as a child that outlives a
        signal sent to ``npx`` alone.
        """
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGTERM)  # start_new_session: pgid == pid
        try:
            self.process.wait(5)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()


def alive(pid: int) -> bool:
    """Whether process ``pid`` is running (a zombie counts as gone)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return stat.exists() and stat.read_text().rsplit(")", 1)[1].split()[0] != "Z"


def pids_with(marker: str) -> list[int]:
    """PIDs of live processes whose command line contains ``marker``."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            state = (entry / "stat").read_text().split()[2]
        except OSError:
            continue
        if marker in cmdline and state != "Z":
            pids.append(int(entry.name))
    return pids

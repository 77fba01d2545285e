"""The tests' ``python``: a Python process forked from a warm one (tests/support/zygote.py).

``tests.support.processes.PYTHON`` is this file behind a shebang to the project's interpreter
(``-S -E``: no site packages, no environment variables, a start-up of a few milliseconds). Run
as ``python SCRIPT ARGS``, ``python -m MODULE ARGS`` or ``python -c CODE ARGS``, it hands its
standard streams, arguments, environment and working directory to the zygote of the test process
which forks a child that has already imported the MCP SDK and
Django, and runs the script there. The child reads and writes this process's own pipes (the fds
are passed, not copied), so a caller talks to a real process over real pipes as before; this
process stays as its stand-in: it forwards the signals it gets to the child's process group and
ends with the child's exit status (or by the signal that ended it). Killed outright, it leaves
the zygote to kill the child.

Anything else (another option, no zygote, a zygote that does not answer) runs the real
interpreter in its place (``exec``), so the launcher behaves as ``python`` everywhere.

Standard library only, and nothing of the project: it runs without site packages.
"""

import json
import os
import signal
import socket
import struct
import sys

ZYGOTE_SOCKET = "zygote.sock"  # beside this file (tests/support/processes.py puts it there)
FORWARDED = (
    signal.SIGTERM,
    signal.SIGINT,
    signal.SIGHUP,
    signal.SIGQUIT,
    signal.SIGUSR1,
    signal.SIGUSR2,
    signal.SIGALRM,
)


def real_python(argv: list[str], interpreter: str) -> None:
    """Run the real interpreter in this process's place."""
    os.execv(interpreter, [interpreter, *argv])


def forked(argv: list[str], path: str) -> int | None:
    """Run ``argv`` in a child of the zygote at ``path``; its wait status, None if no zygote took it."""
    mask = os.umask(0)
    os.umask(mask)
    request = json.dumps({"argv": argv, "env": dict(os.environ), "cwd": os.getcwd(), "umask": mask}).encode()
    connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        connection.connect(path)
    except OSError:  # no zygote listens (yet, or any more): the real interpreter runs it
        connection.close()
        return None
    # From here the zygote may have forked the child: never run the script a second time.
    try:
        socket.send_fds(connection, [struct.pack("!I", len(request))], [0, 1, 2])
        connection.sendall(request)
        reader = connection.makefile("rb")
        started = reader.readline()
    except OSError:
        started = b""
    if not started:
        sys.stderr.write("python launcher: the zygote went away before it said whether it ran the script\n")
        return 0x7F00  # exit status 127
    if json.loads(started).get("refused"):  # it did not fork: the real interpreter runs it
        connection.close()
        return None
    child = json.loads(started)["pid"]

    def forward(signum: int, frame: object) -> None:
        try:
            os.killpg(child, signum)  # the child leads a session of its own
        except ProcessLookupError:
            try:
                os.kill(child, signum)  # not yet: it is about to
            except ProcessLookupError:
                pass

    for sig in FORWARDED:
        signal.signal(sig, forward)
    while True:
        try:
            line = reader.readline()
            break
        except InterruptedError:
            continue
    if not line:  # the zygote went away first
        return 0x7F00  # exit status 127
    return int(json.loads(line)["status"])


def main() -> None:
    interpreter = sys.executable
    argv = sys.argv[1:]
    path = os.path.join(os.path.dirname(os.path.abspath(sys.argv[0])), ZYGOTE_SOCKET)
    # A script that does not exist is left to the real interpreter (its own message, exit 2).
    first = argv[0] if argv else "-"
    runnable = (first in ("-m", "-c") and len(argv) > 1) if first.startswith("-") else os.path.isfile(first)
    status = forked(argv, path) if runnable and os.path.exists(path) else None
    if status is None:
        real_python(argv, interpreter)
        return
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        if sig not in (signal.SIGKILL, signal.SIGSTOP):  # the others may have a handler here
            signal.signal(sig, signal.SIG_DFL)
        os.kill(os.getpid(), sig)
    sys.exit(os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else 1)


if __name__ == "__main__":
    main()

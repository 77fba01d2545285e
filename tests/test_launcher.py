"""The tests' ``python`` (tests/support/pylauncher.py, forked by tests/support/zygote.py) behaves
as the interpreter does where the suite relies on it: arguments, streams, environment, working
directory, exit status, signals, and a missing script."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import zygote
from tests.support.processes import REAL_PYTHON, alive, launcher_in

pytestmark = pytest.mark.processes


@pytest.fixture(scope="module")
def python(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A launcher with a zygote of its own, once it listens."""
    launcher = launcher_in(tmp_path_factory.mktemp("launcher"))
    warm = zygote.start(launcher)
    socket_path = Path(launcher).with_name(zygote.ZYGOTE_SOCKET)
    deadline = time.monotonic() + 120  # a start-up deadline, not a measurement
    while not socket_path.exists():
        assert warm.poll() is None, "the zygote ended"
        assert time.monotonic() < deadline, "the zygote did not listen"
        time.sleep(0.05)
    yield launcher
    zygote.stop(warm)


def run(python: str, *args: str, **keys: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run([python, *args], capture_output=True, text=True, timeout=60, **keys)  # type: ignore


PROBE = (
    "import os, sys, mcp.types\n"
    "print(repr(sys.argv), os.getcwd(), os.environ.get('PROBE'), sys.stdin.read().strip(), sep='|')\n"
    "print('to stderr', file=sys.stderr)\n"
    "print('forked' if 'django' in sys.modules else 'fresh', os.getpid() == os.getsid(0), sep='|')\n"
    "sys.exit(int(sys.argv[1]))\n"
)


def test_a_script_runs_forked_with_its_arguments_streams_environment_and_status(
    python: str, tmp_path: Path
) -> None:
    script = tmp_path / "probe.py"
    script.write_text(PROBE)
    environment = {**os.environ, "PROBE": "yes"}
    done = run(python, str(script), "3", "two words", input="from stdin\n", cwd=tmp_path, env=environment)
    first, second = done.stdout.splitlines()
    assert first == f"{[str(script), '3', 'two words']!r}|{tmp_path}|yes|from stdin"
    assert second == "forked|True"  # the zygote's child (it imported Django), leading its own session
    assert done.stderr == "to stderr\n"
    assert done.returncode == 3


def test_minus_c_and_minus_m_run_as_python_runs_them(python: str, tmp_path: Path) -> None:
    done = run(python, "-c", "import sys; print(sys.argv[1:], __name__)", "a", "b")
    assert done.stdout == "['a', 'b'] __main__\n"
    (tmp_path / "probemod.py").write_text("import sys\nprint(__name__, sys.argv[1:])\n")
    done = run(python, "-m", "probemod", "x", cwd=tmp_path)
    assert done.stdout == "__main__ ['x']\n"
    missing = run(python, "-m", "no_such_module_here")
    assert missing.returncode == 1 and "No module named no_such_module_here" in missing.stderr


def test_an_exception_shows_the_scripts_traceback_and_exits_1(python: str, tmp_path: Path) -> None:
    script = tmp_path / "boom.py"
    script.write_text("def go():\n    raise ValueError('boom')\n\ngo()\n")
    done = run(python, str(script))
    assert done.returncode == 1
    assert done.stderr.startswith('Traceback (most recent call last):\n  File "' + str(script))
    assert "zygote" not in done.stderr and done.stderr.endswith("ValueError: boom\n")


def test_a_missing_script_gets_the_interpreters_own_answer(python: str, tmp_path: Path) -> None:
    done = run(python, str(tmp_path / "absent.py"))
    expected = subprocess.run([REAL_PYTHON, str(tmp_path / "absent.py")], capture_output=True, text=True)
    assert (done.returncode, done.stderr.split(": ", 1)[1]) == (2, expected.stderr.split(": ", 1)[1])


def test_signals_reach_the_child_and_a_killed_launcher_takes_it_along(python: str, tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"
    code = f"import os, time; open({str(pidfile)!r}, 'w').write(str(os.getpid())); time.sleep(60)"
    for sig, expected in ((signal.SIGTERM, -signal.SIGTERM), (signal.SIGKILL, -signal.SIGKILL)):
        pidfile.unlink(missing_ok=True)
        launcher = subprocess.Popen([python, "-c", code])
        deadline = time.monotonic() + 60
        while not pidfile.exists() or not pidfile.read_text():
            assert time.monotonic() < deadline, "the child did not start"
            time.sleep(0.02)
        child = int(pidfile.read_text())
        assert child != launcher.pid
        launcher.send_signal(sig)
        assert launcher.wait(30) == expected
        deadline = time.monotonic() + 30
        while alive(child):
            assert time.monotonic() < deadline, f"the child outlived its launcher ({sig.name})"
            time.sleep(0.02)


def test_without_a_zygote_the_real_interpreter_runs(tmp_path: Path) -> None:
    done = run(launcher_in(tmp_path), "-c", "import sys; print(sys.executable, 'django' in sys.modules)")
    assert done.stdout == f"{sys.executable} False\n"

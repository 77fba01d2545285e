"""Running a stdio server under bubblewrap: a :class:`~mcpclient.config.model.SandboxPlan` as
the ``bwrap`` command line that starts the server.

Mounts are laid from the root down: the whole system read-only, a fresh ``/dev``, ``/proc`` of the
server's own process namespace, a private ``/tmp``; then the plan's paths by depth, so that where
two overlap the deeper one wins: what BooCode hides stays hidden inside a listed folder, and a
listed folder inside a hidden one is there. Every namespace is new (the network's too unless the
plan allows it), the server leads a session of its own (no terminal to push keystrokes into) and
dies with its ``bwrap``, which is the process :mod:`mcpclient.engine.stdio` starts, watches and
stops: ending ``bwrap`` ends everything in the sandbox.

Limits are the kernel's resource limits, set by ``prlimit`` on itself before it runs ``bwrap``
(no shell, nothing run in BooCode's process between fork and exec) and inherited by every process
in the sandbox, each on its own: ``RLIMIT_AS`` (address space; an allocation past it fails) and
``RLIMIT_CPU`` (CPU time; ``SIGXCPU`` at the limit, ``SIGKILL`` :data:`CPU_GRACE_SECONDS` later).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import PurePath

from mcpclient.config.model import SandboxPlan

SYSTEM = ("--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp")
# After SIGXCPU (which ends a process that does not catch it) the kernel's SIGKILL, this much later.
CPU_GRACE_SECONDS = 5


def limits_argv(plan: SandboxPlan) -> list[str]:
    """``prlimit`` with the plan's limits, ready for the command it runs; empty without limits."""
    if plan.prlimit is None or (plan.memory_mb is None and plan.cpu_seconds is None):
        return []
    command = [plan.prlimit]
    if plan.memory_mb is not None:
        command.append(f"--as={plan.memory_mb * 1024 * 1024}")
    if plan.cpu_seconds is not None:
        command.append(f"--cpu={plan.cpu_seconds}:{plan.cpu_seconds + CPU_GRACE_SECONDS}")
    return [*command, "--"]


def bwrap_argv(plan: SandboxPlan, argv: Sequence[str]) -> list[str]:
    """The command line that runs ``argv`` (the server's executable and arguments) in ``plan``."""
    layers: list[tuple[str, tuple[str, ...]]] = [(path, ("--tmpfs", path)) for path in plan.hidden_dirs]
    layers += [(path, ("--ro-bind", "/dev/null", path)) for path in plan.hidden_files]
    layers += [(path, ("--ro-bind", path, path)) for path in plan.read]
    layers += [(path, ("--bind", path, path)) for path in plan.write]
    layers.sort(key=lambda layer: len(PurePath(layer[0]).parts))  # stable: at one depth, write last
    command = [*limits_argv(plan), plan.bwrap, *SYSTEM]
    for _, mount in layers:
        command += mount
    command.append("--unshare-all")
    if plan.network:
        command.append("--share-net")
    command += ["--die-with-parent", "--new-session"]
    if plan.chdir is not None:
        command += ["--chdir", plan.chdir]
    return [*command, "--", *argv]

"""Running a stdio server under bubblewrap: a :class:`~mcpclient.config.model.SandboxPlan` as
the ``bwrap`` command line that starts the server.

Mounts are laid from the root down: the whole system read-only, a fresh ``/dev``, ``/proc`` of the
server's own process namespace, a private ``/tmp``; then the plan's paths by depth, so that where
two overlap the deeper one wins: what BooCode hides stays hidden inside a listed folder, and a
listed folder inside a hidden one is there. Every namespace is new (the network's too unless the
plan allows it), the server leads a session of its own (no terminal to push keystrokes into) and
dies with its ``bwrap``, which is the process :mod:`mcpclient.engine.stdio` starts, watches and
stops: ending ``bwrap`` ends everything in the sandbox.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import PurePath

from mcpclient.config.model import SandboxPlan

SYSTEM = ("--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp")


def bwrap_argv(plan: SandboxPlan, argv: Sequence[str]) -> list[str]:
    """The command line that runs ``argv`` (the server's executable and arguments) in ``plan``."""
    layers: list[tuple[str, tuple[str, ...]]] = [(path, ("--tmpfs", path)) for path in plan.hidden_dirs]
    layers += [(path, ("--ro-bind", "/dev/null", path)) for path in plan.hidden_files]
    layers += [(path, ("--ro-bind", path, path)) for path in plan.read]
    layers += [(path, ("--bind", path, path)) for path in plan.write]
    layers.sort(key=lambda layer: len(PurePath(layer[0]).parts))  # stable: at one depth, write last
    command = [plan.bwrap, *SYSTEM]
    for _, mount in layers:
        command += mount
    command.append("--unshare-all")
    if plan.network:
        command.append("--share-net")
    command += ["--die-with-parent", "--new-session"]
    if plan.chdir is not None:
        command += ["--chdir", plan.chdir]
    return [*command, "--", *argv]

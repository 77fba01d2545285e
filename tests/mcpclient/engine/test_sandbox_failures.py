"""What a sandboxed server's failure says of the sandbox (:mod:`mcpclient.engine.sandbox_failures`),
from the stderr lines the programs people run write: each shape only under the sandbox rule it
names, and nothing for a failure of the server's own. The real servers meeting the sandbox are in
tests/mcpclient/engine/test_sandbox.py."""

from __future__ import annotations

import dataclasses

import pytest

from mcpclient.config.model import SandboxPlan
from mcpclient.engine.sandbox_failures import explain

PLAN = SandboxPlan(bwrap="/usr/bin/bwrap", homes=("/home/ada",), memory_mb=2048, cpu_seconds=60)
OPEN = dataclasses.replace(PLAN, network=True)
UNLIMITED = dataclasses.replace(PLAN, memory_mb=None, cpu_seconds=None)
NPM_OFFLINE = [
    "npm error code EAI_AGAIN",
    "npm error syscall getaddrinfo",
    "npm error request to https://registry.example.com/@acme%2fserver failed, reason: getaddrinfo EAI_AGAIN",
]


def said(
    plan: SandboxPlan = PLAN,
    command: str = "/usr/bin/node",
    args: tuple[str, ...] = (),
    *,
    stderr: tuple[str, ...] = (),
    status: int | None = 1,
    timed_out: bool = False,
    env: dict[str, str] | None = None,
) -> str:
    return explain(plan, command, args, env or {}, exit_status=status, stderr=stderr, timed_out=timed_out)


def test_npx_without_the_network_names_the_package_and_the_offline_start() -> None:
    assert said(command="/usr/bin/npx", args=("-y", "@acme/server", "/srv"), stderr=tuple(NPM_OFFLINE)) == (
        "the sandbox blocks the network, and npx needs it to fetch @acme/server: fetch it once (start the "
        'server without the sandbox, or with the network), then start it from the cache with "args": '
        '["--offline", "-y", "@acme/server", "/srv"], or allow this server the network with "sandbox": '
        '{"network": true}'
    )
    # npx that never answers (it waits on the network) says the same; told to stay offline, it does not.
    assert "npx needs it to fetch @acme/server" in said(
        command="npx", args=("-y", "@acme/server"), timed_out=True
    )
    assert said(command="npx", args=("--offline", "-y", "@acme/server"), timed_out=True) == ""
    offline = {"npm_config_offline": "true"}
    assert said(command="npx", args=("-y", "@acme/server"), timed_out=True, env=offline) == ""
    # With the network allowed a DNS failure is the server's own business.
    assert said(OPEN, command="npx", args=("-y", "@acme/server"), stderr=tuple(NPM_OFFLINE)) == ""


def test_uvx_names_the_package_it_runs_from() -> None:
    stderr = ("error: Request failed after 3 retries", "cause: dns error")
    text = said(command="uvx", args=("--from", "acme-mcp==1.2", "acme-server"), stderr=stderr)
    assert text.startswith("the sandbox blocks the network, and uvx needs it to fetch acme-mcp==1.2: ")
    assert '"args": ["--offline", "--from", "acme-mcp==1.2", "acme-server"]' in text
    # Another command: the network, and the one fix there is.
    assert said(stderr=("Error: getaddrinfo ENOTFOUND api.example.com",)) == (
        "the sandbox blocks the network, which the server tried to reach: allow this server the network "
        'with "sandbox": {"network": true}'
    )


@pytest.mark.parametrize(
    "line",
    [
        "MemoryError",
        "# Fatal process out of memory: Failed to reserve virtual memory for CodeRange",
        "terminate called after throwing an instance of 'std::bad_alloc'",
        "memory allocation of 1073741824 bytes failed",
        "fatal error: runtime: out of memory",
    ],
)
def test_an_allocation_refused_under_the_memory_limit_names_it(line: str) -> None:
    assert said(stderr=(line,)).startswith(
        "the server ran out of memory under the sandbox's limit of 2048 MiB of address space per process "
        '("sandbox": {"memoryMB": 2048})'
    )
    assert said(UNLIMITED, stderr=(line,)) == ""


def test_nodes_own_heap_limit_is_not_the_sandboxs() -> None:
    assert (
        said(stderr=("FATAL ERROR: Reached heap limit Allocation failed - JavaScript heap out of memory",))
        == ""
    )


def test_sigxcpu_under_the_cpu_limit_names_it() -> None:
    assert said(status=128 + 24).startswith(
        "the sandbox's CPU time limit ended the server: a process of it used 60 s"
    )
    assert said(UNLIMITED, status=128 + 24) == "" and said(status=137) == "" and said(status=1) == ""


@pytest.mark.parametrize(
    ("line", "path"),
    [
        ("Error: EROFS: read-only file system, open '/srv/data/out.json'", " (/srv/data/out.json)"),
        ("OSError: [Errno 30] Read-only file system: '/var/lib/acme/db'", " (/var/lib/acme/db)"),
        (
            'error: failed to create directory at path "/opt/cache/x"\n cause: Read-only file system',
            " (/opt/cache/x)",
        ),
        ("EROFS", ""),
    ],
)
def test_a_write_outside_the_write_folders_names_the_key(line: str, path: str) -> None:
    text = said(stderr=tuple(line.split("\n")))
    assert text.startswith(
        'the sandbox lets the server write only in its "write" folders and its own /tmp, and it tried to '
        "write elsewhere"
    )
    assert text.endswith(f'write elsewhere{path}: list the folder in "sandbox": {{"write": [...]}}')


def test_a_file_missing_in_a_hidden_home_folder_says_the_home_is_hidden() -> None:
    line = "FileNotFoundError: [Errno 2] No such file or directory: '/home/ada/.config/acme/settings.toml'"
    assert said(stderr=(line,)) == (
        "the sandbox hides the home folder /home/ada, and the server looked for "
        '/home/ada/.config/acme/settings.toml there: list what it needs in "sandbox": {"read": [...]} '
        '(or "write")'
    )
    # Elsewhere, missing is missing.
    assert said(stderr=("FileNotFoundError: [Errno 2] No such file or directory: '/srv/acme.toml'",)) == ""


def test_a_failure_of_the_servers_own_gets_nothing_added() -> None:
    stderr = ("Traceback (most recent call last):", "ValueError: ACME_TOKEN is not set")
    assert said(stderr=stderr) == ""

"""stdio servers under bubblewrap: mcp.json's ``sandbox`` and ``BOOCODE_STDIO_SANDBOX=required``.

The process tests run real servers sandboxed by the hub and ask them to cross the sandbox's
lines: the published filesystem server (tests/node/, started with ``npx`` and ``/`` as its root)
for files, tests/servers/sandbox_probe.py for the network and other processes, and the published
time server through ``uvx --offline`` from the uv cache ``make test-deps`` fills
(tests/python/uvx-cache). What they cannot do is the sandbox's doing, not the servers' own
checks: each is told it may go anywhere.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import resource
import shutil
import subprocess
import threading
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from mcpclient.config.entries import parse_server
from mcpclient.config.model import DEFAULT_CPU_SECONDS, DEFAULT_MEMORY_MB, ConfigError, ServerConfig
from mcpclient.config.resolve import resolve_server
from mcpclient.config.sandbox import MISSING_BWRAP, MISSING_PRLIMIT, made_of
from mcpclient.config.shapes import SHAPES, entry_for
from mcpclient.core.state import ServerSnapshot, Status
from mcpclient.engine.hub import Hub
from mcpclient.engine.sandbox import CPU_GRACE_SECONDS
from mcpclient.runtime.sync import sync_servers
from tests.support.admin import write_config
from tests.support.hubs import make_config
from tests.support.processes import NODE_DIR, PYTHON, REAL_PYTHON, ROOT, TEST_COMMANDS, free_port, pids_with

PROBE = ROOT / "tests" / "servers" / "sandbox_probe.py"
REAL_PYTHON_FILE = os.path.realpath(REAL_PYTHON)  # pyenv's, say: in the home folder
# A checkout under /tmp: a sandboxed server's private /tmp holds its own (empty, writable) copy of it.
IN_PRIVATE_TMP = os.path.realpath(ROOT).startswith("/tmp/")
UVX_CACHE = ROOT / "tests" / "python" / "uvx-cache"
TIME_SERVER = "mcp-server-time==2026.10.19"  # as the Makefile puts it in UVX_CACHE

needs_bwrap = pytest.mark.skipif(
    shutil.which("bwrap") is None, reason="bubblewrap is not installed (make test-deps)"
)


def probe(name: str, *tag: str, **keys: Any) -> ServerConfig:
    """The probe server (the real interpreter: the tests' launcher hands the work to a process
    outside the sandbox, tests/support/zygote.py); ``tag`` marks its command line."""
    return make_config(name, {"command": REAL_PYTHON, "args": [str(PROBE), *tag], **keys})


def filesystem(name: str, sandbox: dict[str, Any]) -> ServerConfig:
    """The published filesystem server, as ``npx -y`` runs it, allowed every path there is."""
    entry = {
        "command": "npx",
        "args": ["-y", "@modelcontextprotocol/server-filesystem", "/"],
        "cwd": str(NODE_DIR),
        "writeTools": "approve",  # the hub calls them directly: no person to approve here
        "sandbox": sandbox,
    }
    return make_config(name, entry)


async def start(hub: Hub, *configs: ServerConfig) -> dict[str, ServerSnapshot]:
    async with asyncio.timeout(90):
        await hub.start(configs)
    return {snapshot.name: snapshot for snapshot in hub.snapshots()}


async def call(hub: Hub, tool: str, **arguments: Any) -> tuple[bool, str]:
    result = await hub.call_tool(tool, arguments)
    return result.is_error, result.output


def resolve(entry: dict[str, Any], base_dir: Path, **kwargs: Any) -> Any:
    return resolve_server(
        parse_server("srv", entry),
        base_dir=base_dir,
        environ=kwargs.pop("environ", os.environ),
        allowed_commands=kwargs.pop("allowed_commands", TEST_COMMANDS),
        **kwargs,
    )


# --- the key -------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("sandbox", "message"),
    [
        (
            "yes",
            '"sandbox" must be true, false or an object such as {"write": [...], "read": [...], '
            '"network": false}, got string',
        ),
        (
            {"writes": []},
            '"sandbox": unknown key "writes" (known: "write", "read", "network", "memoryMB", "cpuSeconds")',
        ),
        ({"write": "/srv/out"}, '"sandbox": "write" must be an array of strings, got string'),
        ({"read": ["/srv", 3]}, '"sandbox": "read[1]" must be a string, got number'),
        ({"write": [" "]}, '"sandbox": "write[0]" must not be empty'),
        ({"network": "no"}, '"sandbox": "network" must be true or false, got "no"'),
        (
            {"memoryMB": 16},
            '"sandbox": "memoryMB" must be a whole number of MiB from 64 to 1048576, or false for no limit, '
            "got 16",
        ),
        (
            {"memoryMB": "2G"},
            '"sandbox": "memoryMB" must be a whole number of MiB from 64 to 1048576, or false for no limit, '
            'got "2G"',
        ),
        (
            {"cpuSeconds": 1.5},
            '"sandbox": "cpuSeconds" must be a whole number of seconds from 1 to 31622400, or false for no '
            "limit, got 1.5",
        ),
        (
            {"cpuSeconds": True},
            '"sandbox": "cpuSeconds" must be a whole number of seconds from 1 to 31622400, or false for no '
            "limit, got true",
        ),
    ],
)
def test_a_bad_sandbox_is_refused_naming_the_server_and_the_key(sandbox: Any, message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_server("fs", {"command": "npx", "sandbox": sandbox}, source="mcp.json")
    assert str(caught.value) == f'mcp.json: server "fs": {message}'


def test_limits_have_defaults_and_false_lifts_them() -> None:
    assert (parse_server("a", {"command": "npx", "sandbox": True}).sandbox.memory_mb) == DEFAULT_MEMORY_MB
    assert (parse_server("a", {"command": "npx", "sandbox": True}).sandbox.cpu_seconds) == DEFAULT_CPU_SECONDS
    lifted = parse_server("a", {"command": "npx", "sandbox": {"memoryMB": False, "cpuSeconds": 90.0}}).sandbox
    assert (lifted.memory_mb, lifted.cpu_seconds) == (None, 90)


def test_a_sandbox_is_for_stdio_servers_only() -> None:
    with pytest.raises(ConfigError, match='"sandbox" only applies to stdio servers, not streamableHttp'):
        parse_server("docs", {"url": "https://mcp.example.com/mcp", "sandbox": True})
    assert parse_server("docs", {"url": "https://mcp.example.com/mcp", "sandbox": False}).sandbox is None


@pytest.mark.parametrize("shape", SHAPES, ids=lambda shape: shape.label)
def test_the_sandbox_is_written_back_as_written_in_every_shape(shape: Any) -> None:
    sandbox = {"write": ["${workspaceFolder}/out"], "network": True}
    entry = entry_for(shape, parse_server("fs", {"command": "npx", "args": ["-y", "x"], "sandbox": sandbox}))
    assert entry["sandbox"] == sandbox
    again = parse_server("fs", entry).sandbox
    assert again is not None and (again.write, again.read, again.network) == (
        ("${workspaceFolder}/out",),
        (),
        True,
    )


# --- planning ------------------------------------------------------------------------------------
@pytest.fixture
def outside_hidden_folders(monkeypatch: pytest.MonkeyPatch) -> None:
    """Run from "/": BooCode's own working folder is mounted read-only when it lies in /tmp or a
    home folder (a checkout there, mcpclient.config.sandbox.made_of); the tests using this look
    at what else a plan mounts, wherever the suite runs from."""
    monkeypatch.chdir("/")


@needs_bwrap
@pytest.mark.usefixtures("outside_hidden_folders")
def test_paths_take_placeholders_and_a_missing_write_folder_is_made(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    sandbox = {"write": ["${workspaceFolder}/out/${PERSON}"], "read": ["docs"]}
    resolved = resolve(
        {"command": "node", "sandbox": sandbox},
        tmp_path,
        environ={"PATH": os.environ["PATH"], "PERSON": "ada"},
    )
    plan = resolved.sandbox
    assert plan.write == (str(tmp_path / "out" / "ada"),) and (tmp_path / "out" / "ada").is_dir()
    assert plan.read == (str(tmp_path / "docs"),) and not plan.network


@needs_bwrap
@pytest.mark.parametrize(
    ("sandbox", "message"),
    [
        ({"read": ["nowhere"]}, '"sandbox.read[0]": {base}/nowhere does not exist'),
        ({"write": ["/"]}, '"sandbox.write[0]" cannot be "/": list the folders the server may change'),
        (
            # A shared server has no person (a "scope": "perUser" one does: test_per_user_stdio.py).
            {"write": ["out/${user.id}"]},
            '"sandbox" uses ${user.id} or ${user.name}, which only a server with "scope": "perUser" has',
        ),
        (
            {"read": ["${UNSET_FOLDER}"]},
            'environment variable "UNSET_FOLDER" is not set (used in "sandbox.read[0]")',
        ),
        ({"read": ["{data}"]}, '"sandbox.read[0]" is {data}, which BooCode keeps from sandboxed servers'),
    ],
)
def test_a_path_the_sandbox_cannot_take_stops_that_server(
    tmp_path: Path, settings: Any, sandbox: Any, message: str
) -> None:
    sandbox = json.loads(json.dumps(sandbox).replace("{data}", str(settings.DATA_DIR)))
    with pytest.raises(ConfigError) as caught:
        resolve({"command": "node", "sandbox": sandbox}, tmp_path, environ={"PATH": os.environ["PATH"]})
    expected = message.replace("{base}", str(tmp_path)).replace("{data}", str(settings.DATA_DIR))
    assert str(caught.value).startswith(f'mcp.json: server "srv": {expected}')
    assert not (tmp_path / "out").exists()


def test_without_bubblewrap_a_sandboxed_server_says_what_to_install(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        resolve({"command": REAL_PYTHON, "sandbox": True}, tmp_path, environ={"PATH": str(tmp_path)})
    assert str(caught.value) == f'mcp.json: server "srv": {MISSING_BWRAP}'
    assert "install Debian's bubblewrap" in MISSING_BWRAP
    # Not sandboxed, the same entry resolves on the same PATH.
    assert resolve({"command": REAL_PYTHON}, tmp_path, environ={"PATH": str(tmp_path)}).sandbox is None


@needs_bwrap
@pytest.mark.usefixtures("outside_hidden_folders")
def test_required_sandboxes_every_stdio_server(tmp_path: Path, settings: Any) -> None:
    environ = {"PATH": os.environ["PATH"]}
    assert resolve({"command": "node"}, tmp_path, environ=environ).sandbox is None
    settings.MCP_STDIO_SANDBOX = "required"
    for entry in ({"command": "node"}, {"command": "node", "sandbox": False}):
        plan = resolve(entry, tmp_path, environ=environ).sandbox
        assert plan is not None and (plan.write, plan.read, plan.network) == ((), (), False)
    assert resolve({"url": "https://mcp.example.com/mcp"}, tmp_path, environ=environ).sandbox is None


@needs_bwrap
def test_npx_and_uvx_get_their_caches_where_their_environment_puts_them(tmp_path: Path) -> None:
    environ = {"PATH": os.environ["PATH"], "HOME": str(tmp_path / "home")}
    npx = resolve({"command": "npx", "sandbox": True}, tmp_path, environ=environ).sandbox
    assert npx.write == (str(tmp_path / "home" / ".npm"),) and (tmp_path / "home" / ".npm").is_dir()
    env = {"UV_CACHE_DIR": str(tmp_path / "uv-cache"), "XDG_DATA_HOME": str(tmp_path / "data")}
    uvx = resolve({"command": "uvx", "env": env, "sandbox": True}, tmp_path, environ=environ).sandbox
    assert uvx.write == (str(tmp_path / "uv-cache"), str(tmp_path / "data" / "uv" / "tools"))
    assert resolve({"command": "node", "sandbox": True}, tmp_path, environ=environ).sandbox.write == ()


@needs_bwrap
@pytest.mark.usefixtures("outside_hidden_folders")
def test_the_home_folders_are_hidden_but_what_the_server_is_made_of_there(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    (home / ".venv" / "bin").mkdir(parents=True)
    (home / ".venv" / "bin" / "server").write_text("")
    (home / "tools").mkdir()
    (home / "tools" / "server.py").write_text("")
    (home / ".npmrc").write_text("registry=https://npm.example.com/\n")
    environ = {"PATH": os.environ["PATH"], "HOME": str(home)}
    plan = resolve(
        {
            "command": str(home / ".venv" / "bin" / "server"),
            "args": [str(home / "tools" / "server.py")],
            "sandbox": True,
        },
        tmp_path,
        environ=environ,
        allowed_commands=[str(home / ".venv" / "bin" / "server")],
    ).sandbox
    real_home = os.path.realpath(home)
    assert real_home in plan.hidden_dirs and os.path.realpath(Path.home()) in plan.hidden_dirs
    assert plan.homes == (real_home, os.path.realpath(Path.home()))
    assert set(plan.read) == {f"{real_home}/.venv", f"{real_home}/tools"}
    # npx: its cache writable, its configuration read-only, in the server's home folder.
    npx = resolve({"command": "npx", "sandbox": True}, tmp_path, environ=environ).sandbox
    assert npx.write == (f"{real_home}/.npm",) and npx.read == (f"{real_home}/.npmrc",)
    # Without a cwd the server works in BooCode's: a checkout in the home folder is there, read-only.
    (home / "checkout").mkdir()
    monkeypatch.chdir(home / "checkout")
    plan = resolve({"command": "node", "sandbox": True}, tmp_path, environ=environ).sandbox
    assert plan.read == (f"{real_home}/checkout",)


def test_a_command_in_a_home_folders_local_bin_brings_only_itself(tmp_path: Path) -> None:
    (tmp_path / ".local" / "bin").mkdir(parents=True)
    (tmp_path / ".local" / "bin" / "uvx").write_text("")
    real = os.path.realpath(tmp_path)
    assert made_of(str(tmp_path / ".local" / "bin" / "uvx"), [], None, hidden=[str(tmp_path)]) == [
        f"{real}/.local/bin/uvx"
    ]


@needs_bwrap
def test_limits_need_prlimit(tmp_path: Path) -> None:
    bwrap_only = tmp_path / "bin"
    bwrap_only.mkdir()
    (bwrap_only / "bwrap").symlink_to(shutil.which("bwrap") or "/usr/bin/bwrap")
    environ = {"PATH": str(bwrap_only)}
    with pytest.raises(ConfigError) as caught:
        resolve({"command": REAL_PYTHON, "sandbox": True}, tmp_path, environ=environ)
    assert str(caught.value) == f'mcp.json: server "srv": {MISSING_PRLIMIT}'
    entry = {"command": REAL_PYTHON, "sandbox": {"memoryMB": False, "cpuSeconds": False}}
    assert resolve(entry, tmp_path, environ=environ).sandbox.prlimit is None


@pytest.mark.processes
@pytest.mark.parametrize(("value", "ok"), [("Required", True), ("always", False)])
def test_the_setting_takes_off_or_required(tmp_path: Path, value: str, ok: bool) -> None:
    env = {**os.environ, "BOOCODE_DATA_DIR": str(tmp_path), "BOOCODE_STDIO_SANDBOX": value}
    code = (
        "import django; django.setup(); from django.conf import settings; print(settings.MCP_STDIO_SANDBOX)"
    )
    result = subprocess.run([PYTHON, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True)
    if ok:
        assert result.stdout.strip() == value.lower(), result.stderr
    else:
        assert result.returncode != 0
        assert "BOOCODE_STDIO_SANDBOX='always': expected off or required" in result.stderr


@pytest.mark.django_db
def test_a_sync_says_at_once_that_sandboxed_servers_need_bubblewrap(
    tmp_path: Path, settings: Any, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    settings.MCP_CONFIG = tmp_path / "mcp.json"
    write_config(settings.MCP_CONFIG, {"fs": {"command": "npx", "sandbox": True}, "time": {"command": "uvx"}})
    monkeypatch.setenv("PATH", str(tmp_path))
    with caplog.at_level(logging.ERROR, logger="mcpclient.runtime.sync"):
        sync_servers()
    assert [record.getMessage() for record in caplog.records] == [
        f'mcp.json: sandboxed servers "fs" will not start: {MISSING_BWRAP}'
    ]


@needs_bwrap
@pytest.mark.django_db
def test_a_sync_names_the_sandboxed_servers(
    tmp_path: Path, settings: Any, caplog: pytest.LogCaptureFixture
) -> None:
    settings.MCP_CONFIG = tmp_path / "mcp.json"
    servers = {
        "fs": {"command": "npx", "sandbox": True},
        "time": {"command": "uvx"},
        "docs": {"url": "https://x"},
    }
    write_config(settings.MCP_CONFIG, servers)
    with caplog.at_level(logging.INFO, logger="mcpclient.runtime.sync"):
        sync_servers()
        settings.MCP_STDIO_SANDBOX = "required"
        sync_servers()
    assert [record.getMessage() for record in caplog.records] == [
        'mcp.json: sandboxed stdio servers: "fs"',
        'mcp.json: sandboxed stdio servers (BOOCODE_STDIO_SANDBOX=required): "fs", "time"',
    ]


# --- real servers --------------------------------------------------------------------------------
@pytest.fixture
def listener() -> Iterator[str]:
    """An HTTP server on 127.0.0.1 answering every GET with 200: the network a server may reach."""

    class Answer(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", free_port()), Answer)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()
    server.server_close()


@pytest.fixture
def data_marker(settings: Any) -> Iterator[Path]:
    """A file in BooCode's data folder, which no sandboxed server may read."""
    path = Path(settings.DATA_DIR) / "sandbox-marker.txt"
    path.write_text("BooCode's own")
    yield path
    path.unlink()


@pytest.mark.processes
@pytest.mark.npx
@needs_bwrap
async def test_the_filesystem_server_reaches_only_what_the_sandbox_lets_through(
    hub: Hub, tmp_path: Path, settings: Any, data_marker: Path
) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "readme.txt").write_text("shared docs")
    (tmp_path / "private.txt").write_text("private notes")
    narrow = {"read": [str(tmp_path / "docs")], "write": [str(tmp_path / "out")]}
    snapshots = await start(hub, filesystem("fs", narrow), filesystem("wide", {"read": ["/tmp"]}))
    assert all(snapshot.status is Status.READY for snapshot in snapshots.values()), snapshots

    assert await call(hub, "fs_read_text_file", path=str(tmp_path / "docs" / "readme.txt")) == (
        False,
        "shared docs",
    )
    # Outside the listed paths, /tmp is the sandbox's own: the file is not there.
    error, said = await call(hub, "fs_read_text_file", path=str(tmp_path / "private.txt"))
    assert error and "ENOENT" in said
    # Writes land in "write" folders only; everything else is read-only.
    written = await call(hub, "fs_write_file", path=str(tmp_path / "out" / "result.txt"), content="done")
    assert written[0] is False and (tmp_path / "out" / "result.txt").read_text() == "done"
    error, said = await call(hub, "fs_write_file", path=str(tmp_path / "docs" / "readme.txt"), content="x")
    assert error and "EROFS" in said and (tmp_path / "docs" / "readme.txt").read_text() == "shared docs"
    error, said = await call(hub, "fs_write_file", path=str(ROOT / "sandbox-escape.txt"), content="x")
    assert not (ROOT / "sandbox-escape.txt").exists()
    # (A checkout under /tmp is in the server's private /tmp: the write lands there and vanishes.)
    assert IN_PRIVATE_TMP or (error and "EROFS" in said)

    # /tmp listed whole: its files are there, BooCode's data folder inside it is not.
    assert await call(hub, "wide_read_text_file", path=str(tmp_path / "private.txt")) == (
        False,
        "private notes",
    )
    # (an empty folder in its place; its secret files, here Django's secret key, cannot be opened)
    assert (Path(settings.DATA_DIR) / "secret_key").is_file()
    for secret, why in ((data_marker, "ENOENT"), (Path(settings.DATA_DIR) / "secret_key", "EACCES")):
        error, said = await call(hub, "wide_read_text_file", path=str(secret))
        assert error and why in said, said
    error, said = await call(hub, "wide_list_directory", path=str(settings.DATA_DIR))
    assert not error and data_marker.name not in said, said


@pytest.mark.processes
@needs_bwrap
async def test_a_fetch_reaches_the_network_only_when_allowed(hub: Hub, listener: str) -> None:
    tag = uuid.uuid4().hex
    snapshots = await start(
        hub,
        probe("closed", tag, sandbox=True),
        probe("open", sandbox={"network": True}),
        probe("plain"),
    )
    assert all(snapshot.status is Status.READY for snapshot in snapshots.values()), snapshots
    error, said = await call(hub, "closed_fetch", url=listener)
    assert not error and said.startswith("refused: [Errno 111]"), said  # its own, empty, network
    assert await call(hub, "open_fetch", url=listener) == (False, "HTTP/1.0 200 OK")
    assert await call(hub, "plain_fetch", url=listener) == (False, "HTTP/1.0 200 OK")
    # Its own process namespace: bubblewrap's init and the server itself.
    assert int((await call(hub, "closed_processes"))[1]) <= 3
    assert int((await call(hub, "plain_processes"))[1]) > 3
    # bubblewrap and the server in it end with the hub.
    assert len(pids_with(tag)) >= 2
    await hub.stop()
    assert pids_with(tag) == []


@pytest.mark.processes
@needs_bwrap
@pytest.mark.skipif(
    not (UVX_CACHE / ".installed").exists(), reason="the uvx cache is not filled (make test-deps)"
)
async def test_a_uvx_server_starts_offline_with_its_caches_mapped(hub: Hub, tmp_path: Path) -> None:
    entry = {
        "command": "uvx",
        "args": ["--offline", "--from", TIME_SERVER, "mcp-server-time"],
        "env": {"UV_CACHE_DIR": str(UVX_CACHE), "UV_TOOL_DIR": str(tmp_path / "uv-tools")},
        "sandbox": True,
    }
    [snapshot] = (await start(hub, make_config("time", entry))).values()
    assert snapshot.status is Status.READY, snapshot.last_error
    error, said = await call(hub, "time_get_current_time", timezone="UTC")
    assert not error and '"timezone": "UTC"' in said, said


@pytest.mark.processes
@needs_bwrap
async def test_required_sandboxes_a_server_without_the_key(
    hub: Hub, settings: Any, listener: str, data_marker: Path
) -> None:
    settings.MCP_STDIO_SANDBOX = "required"
    await start(hub, probe("probe"))
    assert (await call(hub, "probe_fetch", url=listener))[1].startswith("refused: ")
    said = (await call(hub, "probe_read", path=str(data_marker)))[1]
    assert said.startswith("refused: [Errno 2] No such file or directory")
    said = (await call(hub, "probe_write", path=str(ROOT / "sandbox-escape.txt"), text="x"))[1]
    assert not (ROOT / "sandbox-escape.txt").exists()
    assert IN_PRIVATE_TMP or said.startswith("refused: [Errno 30] Read-only file system")


def a_file_in_boocodes_home() -> Path | None:
    """A readable file right in BooCode's home folder (``.bashrc``, ``.profile``...), if there is one."""
    home = Path.home()
    for path in sorted(home.iterdir()) if home.is_dir() else []:
        if path.is_file() and os.access(path, os.R_OK):
            return path
    return None


@pytest.mark.processes
@needs_bwrap
async def test_the_home_folders_files_are_not_readable(hub: Hub, tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_ed25519").write_text("PRIVATE KEY")
    (home / "notes.txt").write_text("mine")
    env = {"HOME": str(home)}
    snapshots = await start(hub, probe("boxed", sandbox=True, env=env), probe("plain", env=env))
    assert all(snapshot.status is Status.READY for snapshot in snapshots.values()), snapshots
    for secret in (home / ".ssh" / "id_ed25519", home / "notes.txt"):
        said = (await call(hub, "boxed_read", path=str(secret)))[1]
        assert said.startswith("refused: [Errno 2] No such file or directory"), said
        assert (await call(hub, "plain_read", path=str(secret)))[1] == secret.read_text()
    # BooCode's own home folder too (the server's HOME is elsewhere); an empty folder of its own.
    own = a_file_in_boocodes_home()
    if own is not None:
        said = (await call(hub, "boxed_read", path=str(own)))[1]
        assert said.startswith("refused: [Errno 2] No such file or directory"), said
    # (the probe's Python may live in the home folder, as pyenv's does: it is mounted back, read-only)
    said = (await call(hub, "boxed_write", path=REAL_PYTHON_FILE, text="x"))[1]
    assert said.startswith("refused: "), said


@pytest.mark.processes
@needs_bwrap
async def test_a_server_past_its_memory_limit_dies_naming_the_limit(hub: Hub) -> None:
    snapshots = await start(hub, probe("small", sandbox={"memoryMB": 1024}))
    assert snapshots["small"].status is Status.READY, snapshots["small"].last_error
    assert await call(hub, "small_hold", megabytes=16) == (False, "holding 16 MiB")
    error, _ = await call(hub, "small_hold", megabytes=2048)
    assert error
    await hub.wait_until(lambda: "memoryMB" in snapshot_of(hub, "small").last_error, 30)
    said = snapshot_of(hub, "small").last_error
    assert (
        "the server ran out of memory under the sandbox's limit of 1024 MiB of address space per process "
        '("sandbox": {"memoryMB": 1024}); raise the limit, or set it to false for none'
    ) in said, said
    assert "MemoryError" in said  # its own words follow


@pytest.mark.processes
@needs_bwrap
async def test_cpu_time_is_limited(hub: Hub) -> None:
    snapshots = await start(
        # 3 s: a Python server's start-up (its imports) alone takes up to a second of CPU on a busy machine.
        hub,
        probe("busy", sandbox={"cpuSeconds": 3}),
        probe("plain"),
        probe("boxed", sandbox=True),
    )
    assert all(snapshot.status is Status.READY for snapshot in snapshots.values()), snapshots
    # Every process of a sandboxed server has the kernel's limits (the defaults without the keys).
    unlimited = resource.RLIM_INFINITY
    assert json.loads((await call(hub, "busy_limits"))[1])["cpu"] == [3, 3 + CPU_GRACE_SECONDS]
    assert json.loads((await call(hub, "boxed_limits"))[1]) == {
        "address_space": [DEFAULT_MEMORY_MB << 20] * 2,
        "cpu": [DEFAULT_CPU_SECONDS, DEFAULT_CPU_SECONDS + CPU_GRACE_SECONDS],
    }
    assert json.loads((await call(hub, "plain_limits"))[1])["cpu"] == [unlimited, unlimited]
    # Asked for a minute of CPU, the server is ended by the kernel's SIGXCPU at its three seconds.
    error, _ = await call(hub, "busy_burn", seconds=60)
    assert error
    await hub.wait_until(lambda: "cpuSeconds" in snapshot_of(hub, "busy").last_error, 30)
    assert (
        "the sandbox's CPU time limit ended the server: a process of it used 3 s of CPU "
        '("sandbox": {"cpuSeconds": 3})'
    ) in snapshot_of(hub, "busy").last_error


def snapshot_of(hub: Hub, name: str) -> ServerSnapshot:
    return next(snapshot for snapshot in hub.snapshots() if snapshot.name == name)


@pytest.mark.processes
@needs_bwrap
@pytest.mark.parametrize(
    ("args", "said"),
    [
        (
            None,  # as shipped
            "the sandbox blocks the network, and uvx needs it to fetch mcp-server-time: fetch it once "
            "(start the server without the sandbox, or with the network), then start it from the cache with "
            '"args": ["--offline", "mcp-server-time"], or allow this server the network with "sandbox": '
            '{"network": true}',
        ),
        (
            ["--offline", "mcp-server-time"],
            "uvx found no mcp-server-time in its cache, and the sandbox blocks the network to fetch it: "
            "fetch it once",
        ),
    ],
)
async def test_the_shipped_time_server_under_required_says_what_the_sandbox_blocks(
    hub: Hub, tmp_path: Path, settings: Any, args: list[str] | None, said: str
) -> None:
    settings.MCP_STDIO_SANDBOX = "required"
    shipped = json.loads((ROOT / "data" / "mcp.example.json").read_text())["mcpServers"]["time"]
    cache = {"UV_CACHE_DIR": str(tmp_path / "uv-cache"), "UV_TOOL_DIR": str(tmp_path / "uv-tools")}
    # (an empty cache of its own; no retries: uv's own wait for the network is not what is tested)
    entry = {**shipped, "env": {**cache, "UV_HTTP_RETRIES": "0"}}
    if args is not None:
        entry["args"] = args
    [snapshot] = (await start(hub, make_config("time", entry))).values()
    assert snapshot.status is Status.FAILED
    assert said in snapshot.last_error, snapshot.last_error
    assert "(stderr: " in snapshot.last_error  # uv's own words stay


@pytest.mark.processes
async def test_without_bubblewrap_only_the_sandboxed_server_fails(
    hub: Hub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no bwrap there
    snapshots = await start(hub, probe("boxed", sandbox=True), probe("plain"))
    assert snapshots["boxed"].status is Status.FAILED
    assert snapshots["boxed"].last_error == f'mcp.json: server "boxed": {MISSING_BWRAP}'
    assert snapshots["plain"].status is Status.READY
    assert await call(hub, "plain_read", path=str(PROBE)) == (False, PROBE.read_text())


def test_what_a_server_is_made_of_under_tmp_is_mounted_read_only(tmp_path: Path) -> None:
    """The private /tmp would hide a server installed under /tmp (a checkout there): its command's
    installation, the folders of the files its arguments name and its cwd are mounted back, read-only."""
    (tmp_path / "venv" / "bin").mkdir(parents=True)
    (tmp_path / "venv" / "bin" / "tool").write_text("")
    (tmp_path / "srv").mkdir()
    (tmp_path / "srv" / "server.py").write_text("")
    (tmp_path / "work").mkdir()
    found = made_of(
        str(tmp_path / "venv" / "bin" / "tool"),
        ["/", "--flag", str(tmp_path / "srv" / "server.py")],
        str(tmp_path / "work"),
    )
    if not os.path.realpath(tmp_path).startswith("/tmp/"):
        assert found == []
        return
    real = Path(os.path.realpath(tmp_path))
    assert found == [str(real / "venv"), str(real / "srv"), str(real / "work")]
    assert made_of("/usr/bin/node", ["/etc/hosts"], None) == []  # outside /tmp: the system view has it

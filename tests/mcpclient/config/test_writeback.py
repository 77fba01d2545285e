"""Atomic write-back of mcp.json, on real files in tmp_path.

The only fakes are ``os.replace``/``os.fsync`` raising, to simulate a disk failing mid-write.
"""

from __future__ import annotations

import json
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from mcpclient.config import writeback
from mcpclient.config.loading import load_config
from mcpclient.config.writeback import WritebackError, set_enabled, update_server, write_servers

pytestmark = pytest.mark.processes

REPO_ROOT = Path(__file__).resolve().parents[3]

GIT = {
    "command": "npx",
    "args": ["-y", "@scope/server-git", "--repo", "${REPO_DIR}"],
    "env": {"GITHUB_TOKEN": "${env:GITHUB_TOKEN}"},
    "x-custom": {"nested": [1, 2.5, None, "é"], "order": "kept"},
}
WEB = {
    "type": "streamableHttp",
    "url": "https://{env:HOST}/mcp",
    "headers": {"Authorization": "Bearer ${TOKEN}"},
    "timeout": 120000,
}
TIME = {"command": "uvx", "args": ["mcp-server-time"], "enabled": False}


def dump(document: object) -> str:
    return json.dumps(document, indent=2, ensure_ascii=False) + "\n"


@pytest.fixture
def config_path(tmp_path: Path) -> Path:
    path = tmp_path / "mcp.json"
    document = {
        "$schema": "https://example.invalid/schema.json",
        "mcpServers": {"git": GIT, "web": WEB, "time": TIME},
        "inputs": [{"id": "token", "type": "promptString"}],
    }
    path.write_text(dump(document), encoding="utf-8")
    return path


def servers_in(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))["mcpServers"]


def leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name not in {"mcp.json", "mcp.json.lock"})


def test_replacing_one_entry_keeps_everything_else_byte_for_byte(config_path: Path) -> None:
    new_web = {"type": "sse", "url": "https://h/sse", "x-new": True}
    update_server(config_path, "web", new_web)
    expected = {
        "$schema": "https://example.invalid/schema.json",
        "mcpServers": {"git": GIT, "web": new_web, "time": TIME},
        "inputs": [{"id": "token", "type": "promptString"}],
    }
    assert config_path.read_text(encoding="utf-8") == dump(expected)
    # Untouched entries serialise exactly as before: placeholders, unknown keys and key order.
    after = servers_in(config_path)
    assert json.dumps(after["git"], ensure_ascii=False) == json.dumps(GIT, ensure_ascii=False)
    assert json.dumps(after["time"]) == json.dumps(TIME)


def test_write_servers_replaces_the_servers_in_the_given_order(config_path: Path) -> None:
    write_servers(config_path, {"time": TIME, "git": GIT})
    document = json.loads(config_path.read_text(encoding="utf-8"))
    assert list(document) == ["$schema", "mcpServers", "inputs"]
    assert list(document["mcpServers"]) == ["time", "git"]
    assert document["mcpServers"]["git"] == GIT
    assert config_path.read_text(encoding="utf-8").endswith("}\n")


def test_write_servers_creates_a_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "mcp.json"
    write_servers(path, {"git": GIT})
    assert path.read_text(encoding="utf-8") == dump({"mcpServers": {"git": GIT}})
    loaded = load_config(path)
    assert loaded.servers["git"].args == tuple(GIT["args"])
    assert leftovers(tmp_path) == []


def test_insert_appends_and_delete_removes(config_path: Path) -> None:
    update_server(config_path, "fs", {"command": "node", "args": ["fs.js"]})
    assert list(servers_in(config_path)) == ["git", "web", "time", "fs"]
    update_server(config_path, "web", None)
    assert list(servers_in(config_path)) == ["git", "time", "fs"]
    before = config_path.read_bytes()
    update_server(config_path, "web", None)  # already gone: nothing to do
    assert config_path.read_bytes() == before


def test_rename_keeps_the_position(config_path: Path) -> None:
    update_server(config_path, "remote", WEB, rename_from="web")
    servers = servers_in(config_path)
    assert list(servers) == ["git", "remote", "time"]
    assert servers["remote"] == WEB


@pytest.mark.parametrize(
    ("name", "rename_from", "message"),
    [
        ("git", "web", 'mcp.json: server "git" already exists'),
        ("new", "missing", 'mcp.json: server "missing" not found, cannot rename it'),
        ("bad name", None, "mcp.json: invalid server name 'bad name'"),
    ],
)
def test_refused_updates_leave_the_file_alone(
    config_path: Path, name: str, rename_from: str | None, message: str
) -> None:
    before = config_path.read_bytes()
    with pytest.raises(WritebackError) as info:
        update_server(config_path, name, {"command": "npx"}, rename_from=rename_from)
    assert str(info.value).startswith(message)
    assert config_path.read_bytes() == before


def test_disable_then_enable_an_entry_without_the_key(config_path: Path) -> None:
    set_enabled(config_path, "git", False)
    git = servers_in(config_path)["git"]
    assert list(git) == [*GIT, "enabled"]
    assert git["enabled"] is False
    set_enabled(config_path, "git", True)
    assert servers_in(config_path)["git"] == GIT  # as it was written: no "enabled": true


def test_enable_leaves_an_absent_key_absent(config_path: Path) -> None:
    before = config_path.read_bytes()
    set_enabled(config_path, "web", True)
    assert config_path.read_bytes() == before


def test_enable_removes_an_enabled_false(config_path: Path) -> None:
    set_enabled(config_path, "time", True)
    time_entry = servers_in(config_path)["time"]
    assert list(time_entry) == ["command", "args"]


def test_set_enabled_on_an_unknown_server(config_path: Path) -> None:
    with pytest.raises(WritebackError, match=r'mcp\.json: server "nope" not found'):
        set_enabled(config_path, "nope", False)


@pytest.mark.parametrize("failing", ["replace", "fsync"])
def test_failed_write_leaves_the_old_file_and_no_temp_file(
    config_path: Path, monkeypatch: pytest.MonkeyPatch, failing: str
) -> None:
    before = config_path.read_bytes()

    def disk_full(*args: object, **kwargs: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(writeback.os, failing, disk_full)
    with pytest.raises(WritebackError) as info:
        update_server(config_path, "git", {"command": "uvx"})
    assert "No space left on device" in str(info.value)
    assert "the file is unchanged" in str(info.value)
    assert config_path.read_bytes() == before
    assert leftovers(config_path.parent) == []


def test_unserialisable_entry_is_refused_before_touching_the_file(config_path: Path) -> None:
    before = config_path.read_bytes()
    with pytest.raises(WritebackError, match="not JSON-serialisable"):
        update_server(config_path, "git", {"command": "npx", "args": {1, 2}})
    assert config_path.read_bytes() == before
    assert leftovers(config_path.parent) == []


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"mcpServers": {', "mcp.json: invalid JSON at line 1, column 17"),
        ("[1]", "the top level is not a JSON object"),
        ('{"mcpServers": []}', '"mcpServers" is not an object'),
        ('{"mcpServers": {"a": {"command": "x", "command": "y"}}}', 'duplicate key "command"'),
    ],
)
def test_a_broken_file_is_never_overwritten(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "mcp.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(WritebackError) as info:
        update_server(path, "new", {"command": "npx"})
    assert message in str(info.value)
    assert path.read_text(encoding="utf-8") == text


def test_file_mode_is_preserved(config_path: Path) -> None:
    config_path.chmod(0o640)
    update_server(config_path, "fs", {"command": "node"})
    assert stat.S_IMODE(config_path.stat().st_mode) == 0o640


def test_a_symlinked_file_is_updated_where_it_points(tmp_path: Path, config_path: Path) -> None:
    link = tmp_path / "link.json"
    link.symlink_to(config_path)
    update_server(link, "fs", {"command": "node"})
    assert link.is_symlink()
    assert "fs" in servers_in(config_path)


def test_concurrent_threads_lose_no_update(config_path: Path) -> None:
    def add(prefix: str) -> None:
        for index in range(10):
            update_server(config_path, f"{prefix}{index}", {"command": "npx"})

    threads = [threading.Thread(target=add, args=(f"t{n}_",)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert len(servers_in(config_path)) == 3 + 40


def test_concurrent_processes_lose_no_update(config_path: Path) -> None:
    script = (
        "import sys; from pathlib import Path; from mcpclient.config.writeback import update_server\n"
        "for i in range(15): update_server(Path(sys.argv[1]), f'{sys.argv[2]}{i}', {'command': 'npx'})\n"
    )
    processes = [
        subprocess.Popen([sys.executable, "-c", script, str(config_path), f"p{n}_"], cwd=REPO_ROOT)
        for n in range(4)
    ]
    assert [process.wait(timeout=60) for process in processes] == [0, 0, 0, 0]
    assert len(servers_in(config_path)) == 3 + 60
    assert leftovers(config_path.parent) == []


def test_written_file_loads_back(config_path: Path) -> None:
    update_server(config_path, "web", {**WEB, "timeout": 5000})
    loaded = load_config(config_path)
    assert loaded.errors == {}
    assert loaded.servers["web"].timeout == 5.0
    assert loaded.raw_servers["git"] == GIT

"""Other hosts' MCP configs, pasted in as they are: every shape connects, writes back, imports.

One fixture file per host (tests/fixtures/configs/), written the way that host's documentation
writes it, with each host's own placeholder syntax pointing at the real toolbox test server:
over stdio, over Streamable HTTP and (Gemini CLI's ``url``) over legacy SSE.
"""

from __future__ import annotations

import json
import os
import shutil
from io import StringIO
from pathlib import Path
from typing import Any

import anyio
import pytest
from django.core.management import call_command

from mcpclient.admin import changes as admin_services
from mcpclient.admin.importing import ImportError_, import_servers
from mcpclient.config.loading import load_config, load_config_text
from mcpclient.config.model import ConfigError, ServerConfig
from mcpclient.config.shapes import MCP_SERVERS, OPENCODE, SHAPES, VSCODE, ZED
from mcpclient.core.state import Status
from mcpclient.engine.hub import Hub
from tests.support.processes import PYTHON, ROOT, TEST_COMMANDS, TOOLBOX

pytestmark = pytest.mark.processes

FIXTURES = ROOT / "tests" / "fixtures" / "configs"
SHAPE_OF = {
    "claude_code.json": "mcpServers",
    "claude_desktop.json": "mcpServers",
    "cursor.json": "mcpServers",
    "windsurf.json": "mcpServers",
    "gemini.json": "mcpServers",
    "vscode.json": "servers",
    "vscode_settings.json": "mcp.servers",
    "opencode.json": "mcp",
    "zed.json": "context_servers",
}
API_KEY = "k-123"


@pytest.fixture
def toolbox_env(shared_http_toolbox: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """The variables the fixtures read, pointing at real toolbox servers; returns mcp.json's folder.

    The HTTP and SSE servers are the session's: the tests only call ``echo`` on them.
    """
    http, sse = shared_http_toolbox(), shared_http_toolbox(sse=True)
    for name, value in {
        "TOOLBOX_PYTHON": PYTHON,
        "TOOLBOX_SCRIPT": str(TOOLBOX),
        "TOOLBOX_DIR": str(TOOLBOX.parent),
        "TOOLBOX_URL": http.url,
        "TOOLBOX_SSE_URL": sse.url,
        "API_KEY": API_KEY,
        "BOOCODE_INPUT_API_KEY": API_KEY,  # VS Code's ${input:api-key}
    }.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("GREETING", raising=False)
    (tmp_path / "toolbox.env").write_text(f"API_KEY={API_KEY}\n")  # VS Code's envFile
    return tmp_path


def _install(fixture: str, folder: Path) -> Path:
    path = folder / "mcp.json"
    shutil.copy(FIXTURES / fixture, path)
    return path


def _essentials(config: ServerConfig) -> tuple[Any, ...]:
    return (
        config.transport,
        config.command,
        config.args,
        config.env,
        config.env_file,
        config.cwd,
        config.url,
        config.headers,
        config.enabled,
        config.timeout,
        config.init_timeout,
        config.include_tools,
        config.exclude_tools,
    )


@pytest.mark.parametrize("fixture", sorted(SHAPE_OF))
@pytest.mark.django_db  # ${input:} values are resolved on the database thread (vscode.json has one)
async def test_each_hosts_file_connects_as_written(fixture: str, toolbox_env: Path) -> None:
    loaded = load_config(_install(fixture, toolbox_env))
    assert loaded.shape.key == SHAPE_OF[fixture] and loaded.errors == {}
    hub = Hub(base_dir=toolbox_env, allowed_commands=TEST_COMMANDS)
    try:
        with anyio.fail_after(30):
            await hub.start(loaded.servers.values())
        states = {snapshot.name: snapshot for snapshot in hub.snapshots()}
        errors = {name: s.last_error for name, s in states.items()}
        assert {name: s.status for name, s in states.items()} == dict.fromkeys(
            loaded.servers, Status.READY
        ), errors
        for name in loaded.servers:
            result = await hub.call_tool(f"{name}_echo", {"text": f"hi from {fixture}"})
            assert not result.is_error and result.output == f"hi from {fixture}"
        if fixture == "gemini.json":  # includeTools / excludeTools, applied before any agent's policy
            offered = {tool.prefixed_name for tool in hub.tools()}
            assert {name for name in offered if name.startswith("remote_")} == {"remote_echo", "remote_add"}
            assert "toolbox_echo" in offered and not offered & {"toolbox_slow", "toolbox_crash"}
    finally:
        await hub.stop()


@pytest.mark.parametrize("fixture", sorted(SHAPE_OF))
@pytest.mark.django_db
def test_an_admin_toggle_writes_back_in_the_files_own_shape(
    fixture: str, toolbox_env: Path, settings: Any
) -> None:
    path = _install(fixture, toolbox_env)
    original = load_config(path)
    settings.MCP_CONFIG = path
    settings.MCP_STDIO_COMMANDS = TEST_COMMANDS
    call_command("mcp_sync", stdout=StringIO())
    admin_services.set_servers_enabled(names=["toolbox"], enabled=False)

    after = load_config(path)
    assert after.shape == original.shape
    assert not after.servers["toolbox"].enabled and after.servers["remote"].enabled
    written = after.raw_servers["toolbox"]
    flag = {"disabled": True} if "disabled" in original.raw_servers["toolbox"] else {"enabled": False}
    assert written == {**original.raw_servers["toolbox"], **flag}  # nothing else touched
    assert after.raw_servers["remote"] == original.raw_servers["remote"]
    top = json.loads(path.read_text())
    assert list(top) == list(json.loads(_without_comments(FIXTURES / fixture)))  # same top-level keys

    admin_services.set_servers_enabled(names=["toolbox"], enabled=True)
    assert load_config(path).servers["toolbox"].enabled


def _without_comments(path: Path) -> str:
    from mcpclient.config.document import without_comments

    return without_comments(path.read_text())


TARGETS = {shape.key: shape for shape in SHAPES}


@pytest.mark.parametrize("target", [MCP_SERVERS.key, VSCODE.key, OPENCODE.key, ZED.key])
@pytest.mark.parametrize("fixture", sorted(SHAPE_OF))
@pytest.mark.django_db
def test_mcp_import_round_trips_every_fixture(
    fixture: str, target: str, tmp_path: Path, settings: Any
) -> None:
    settings.MCP_CONFIG = tmp_path / "mcp.json"
    settings.MCP_STDIO_COMMANDS = TEST_COMMANDS
    shape = TARGETS[target]
    settings.MCP_CONFIG.write_text(json.dumps({shape.key: {}}))
    source = load_config(FIXTURES / fixture)

    out = StringIO()
    call_command("mcp_import", str(FIXTURES / fixture), stdout=out)
    assert f"imported {len(source.servers)} servers" in out.getvalue()

    imported = load_config(settings.MCP_CONFIG)
    assert imported.shape.key == target and imported.errors == {}
    assert {n: _essentials(c) for n, c in imported.servers.items()} == {
        n: _essentials(c) for n, c in source.servers.items()
    }
    # Placeholders stay as written: nothing was expanded on the way.
    assert "${" in settings.MCP_CONFIG.read_text() or "{env:" in settings.MCP_CONFIG.read_text()


@pytest.mark.django_db
def test_mcp_import_dry_run_replace_and_selection(tmp_path: Path, settings: Any) -> None:
    settings.MCP_CONFIG = tmp_path / "mcp.json"
    settings.MCP_STDIO_COMMANDS = TEST_COMMANDS
    source = FIXTURES / "cursor.json"

    plan = import_servers(source, names=["remote"], dry_run=True)
    assert not plan.written and not settings.MCP_CONFIG.exists()
    assert '+    "remote": {' in plan.diff and "toolbox" not in plan.diff

    import_servers(source, names=["remote"])
    assert list(load_config(settings.MCP_CONFIG).servers) == ["remote"]
    with pytest.raises(ImportError_, match='server "remote" already exists; use --replace'):
        import_servers(FIXTURES / "zed.json", names=["remote"])
    import_servers(FIXTURES / "zed.json", names=["remote"], replace=True)
    assert load_config(settings.MCP_CONFIG).servers["remote"].headers == {"X-Api-Key": "${API_KEY}"}
    with pytest.raises(ImportError_, match='no server named "nope"'):
        import_servers(source, names=["nope"])


@pytest.mark.django_db
def test_mcp_import_masks_secrets_in_its_diff_and_refuses_invalid_entries(
    tmp_path: Path, settings: Any
) -> None:
    settings.MCP_CONFIG = tmp_path / "mcp.json"
    source = tmp_path / "claude_desktop_config.json"
    entry = {"command": "npx", "env": {"TOKEN": "ghp_literal0123456789"}}
    source.write_text(json.dumps({"mcpServers": {"gh": entry}}))
    out = StringIO()
    call_command("mcp_import", str(source), "--dry-run", stdout=out)
    assert "ghp_literal0123456789" not in out.getvalue() and "••••••" in out.getvalue()

    source.write_text(json.dumps({"mcpServers": {"ok": {"command": "npx"}, "bad": {"command": 5}}}))
    with pytest.raises(ImportError_) as info:
        import_servers(source)
    assert info.value.errors == [
        'claude_desktop_config.json: server "bad": "command" must be a string, got number'
    ]
    assert not settings.MCP_CONFIG.exists()


BAD = [
    ('{"mcpServers": {"x": {"command": 5}}}', '"command" must be a string, got number'),
    ('{"mcpServers": {"x": {"command": "npx", "url": "https://h/mcp"}}}', 'conflicting "command" and "url"'),
    ('{"servers": {"x": {"type": "websocket", "url": "https://h"}}}', '"type" must be "stdio"'),
    (
        '{"servers": {"x": {"type": "http", "url": "https://h", "headers": {"A": "${input:nope}"}}}}',
        '"${input:nope}" is not declared in "inputs"',
    ),
    ('{"mcp": {"x": {"type": "local", "command": []}}}', '"command" must not be empty'),
    ('{"mcp": {"x": {"type": "remote"}}}', '"url" is required for streamableHttp'),
    (
        '{"mcp": {"x": {"type": "local", "command": ["npx"], "environment": {"A": 1}}}}',
        '"environment.A" must be',
    ),
    ('{"mcpServers": {"x": {"serverUrl": 5}}}', '"serverUrl" must be a string, got number'),
    ('{"mcpServers": {"x": {"serverUrl": "ftp://h/mcp"}}}', '"serverUrl" must be an http:// or https://'),
    (
        '{"mcpServers": {"x": {"url": "https://a", "httpUrl": "https://b"}}}',
        'conflicting "url" and "httpUrl"',
    ),
    (
        '{"mcpServers": {"x": {"httpUrl": "https://a", "includeTools": "echo"}}}',
        '"includeTools" must be an array',
    ),
    ('{"context_servers": {"x": {"source": "extension", "settings": {}}}}', '"source": "extension"'),
    ('{"context_servers": {"x": {"command": {"args": []}}}}', '"command": "path" is required'),
]


@pytest.mark.parametrize(("text", "message"), BAD)
def test_bad_entries_of_every_shape_name_file_server_and_key(text: str, message: str) -> None:
    loaded = load_config_text(text, path=Path("/etc/boocode/mcp.json"))
    assert list(loaded.errors) == ["x"]
    assert loaded.errors["x"].startswith('mcp.json: server "x": ') and message in loaded.errors["x"]


def test_a_file_with_two_shapes_is_refused() -> None:
    with pytest.raises(
        ConfigError, match=r'both "mcpServers" and "servers" \(VS Code\); one file may use one shape'
    ):
        load_config_text('{"mcpServers": {}, "servers": {}}', path=Path("mcp.json"))


@pytest.mark.django_db  # ${input:} looks in the secret store when the environment has nothing
def test_placeholders_of_every_host() -> None:
    from mcpclient.config.entries import parse_server
    from mcpclient.config.resolve import resolve_server

    environ = {"A": "1", "EMPTY": "", "HOME": "/home/me"}
    entry = {
        "command": "npx",
        "args": [
            "${A}",
            "${env:A}",
            "{env:A}",
            "${B:-fallback}",
            "${EMPTY:-used}",
            "${userHome}/x",
            "${workspaceFolder}",
        ],
    }
    resolved = resolve_server(
        parse_server("x", entry), base_dir=Path("/srv/boocode"), environ=environ, allowed_commands=["npx"]
    )
    assert resolved.args == ["1", "1", "1", "fallback", "used", "/home/me/x", "/srv/boocode"]
    with pytest.raises(ConfigError, match=r'input "tok" has no value .* set BOOCODE_INPUT_TOK'):
        os.environ.pop("BOOCODE_INPUT_TOK", None)
        resolve_server(
            parse_server("x", {"command": "npx", "args": ["${input:tok}"]}),
            base_dir=Path("/srv"),
            environ=environ,
            allowed_commands=["npx"],
        )


@pytest.mark.parametrize(
    ("original", "changes", "expected"),
    [
        (  # opencode keeps the whole argv in "command", its env in "environment", start-up in "timeout"
            {"type": "local", "command": ["npx", "-y", "a"], "environment": {"A": "1"}},
            {"args": ["-y", "b"], "env": {"A": "2"}, "init_timeout": 9000},
            {"type": "local", "command": ["npx", "-y", "b"], "environment": {"A": "2"}, "timeout": 9000},
        ),
        (  # Windsurf's serverUrl and Cline's disabled stay what they are
            {"serverUrl": "https://a/mcp", "disabled": False},
            {"url": "https://b/mcp", "enabled": False},
            {"serverUrl": "https://b/mcp", "disabled": True},
        ),
        (  # Gemini's httpUrl
            {"httpUrl": "https://a/mcp", "timeout": 5000},
            {"url": "https://b/mcp", "timeout": 7000},
            {"httpUrl": "https://b/mcp", "timeout": 7000},
        ),
        (  # older Zed: the command object keeps its path, args and env
            {"command": {"path": "npx", "args": ["a"], "env": {"A": "1"}}, "settings": {}},
            {"args": ["b"], "env": {"A": "2"}},
            {"command": {"path": "npx", "args": ["b"], "env": {"A": "2"}}, "settings": {}},
        ),
    ],
)
def test_admin_edits_keep_each_hosts_dialect(
    original: dict[str, Any], changes: dict[str, Any], expected: dict[str, Any]
) -> None:
    assert admin_services.build_entry(original, changes) == expected
    values = admin_services.entry_values(expected)
    for field, value in changes.items():
        assert values[field] == value, field

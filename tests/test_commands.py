"""The management commands behave like Unix tools, run as a user runs them.

Each test runs ``manage.py`` in its own process on a data folder of its own, with real MCP
servers (the toolbox over stdio). What is asserted is what a shell or a script sees: the exit
status (0 all worked, 1 something failed, 2 usage), the lines on stderr, JSON on stdout.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.support.live import seed_migrated
from tests.support.processes import PYTHON, ROOT, TEST_COMMANDS, TOOLBOX, toolbox_entry

pytestmark = pytest.mark.processes

SERVER_KEYS = {
    "name",
    "status",
    "config",
    "tool_count",
    "rejected_count",
    "error",
    "protocol_version",
    "server_info",
    "tools",
}
DEAD = {"command": PYTHON, "args": ["-c", "pass"]}  # exits at once: "Connection closed"
INVALID = {"type": "ws", "url": "http://127.0.0.1:9/"}  # refused when the file is read
UNSET = toolbox_entry(env={"TOKEN": "${BOOCODE_TEST_SURELY_UNSET_VARIABLE}"})


def manage(
    data_dir: Path, *args: str, path: str = "", commands: str = "", log_level: str = "CRITICAL"
) -> subprocess.CompletedProcess[str]:
    """``manage.py <args>`` in its own process, on ``data_dir`` (database, mcp.json, AGENTS.md).

    ``path``: the process's PATH instead of this one's; ``commands``: BOOCODE_MCP_STDIO_COMMANDS;
    ``log_level``: BOOCODE_LOG_LEVEL (log lines are on stderr from that level up).
    """
    env = {
        **os.environ,
        **({"PATH": path} if path else {}),
        "BOOCODE_DATA_DIR": str(data_dir),
        "BOOCODE_MCP_STDIO_COMMANDS": commands or ",".join(TEST_COMMANDS),
        # Log lines are not the command's report: keep stderr to what the command says itself.
        "BOOCODE_LOG_LEVEL": log_level,
    }
    env.pop("BOOCODE_DATABASE_URL", None)
    env.pop("BOOCODE_TEST_SURELY_UNSET_VARIABLE", None)
    return subprocess.run(
        [PYTHON, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )


def command_error(done: subprocess.CompletedProcess[str]) -> str:
    """The one ``CommandError:`` line a failing command printed last, without the prefix."""
    assert "Traceback" not in done.stderr, done.stderr
    lines = done.stderr.strip().splitlines()
    assert lines and lines[-1].startswith("CommandError: "), done.stderr
    assert sum(line.startswith("CommandError") for line in lines) == 1, done.stderr
    return lines[-1].removeprefix("CommandError: ")


@pytest.fixture(scope="module")
def migrated_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A data folder migrated once; each test copies it (migrating costs seconds)."""
    template = tmp_path_factory.mktemp("migrated")
    seed_migrated(template, {})
    return template


@pytest.fixture
def data_dir(migrated_template: Path, tmp_path: Path) -> Path:
    """A migrated data folder of this test's own."""
    shutil.copytree(migrated_template, tmp_path, dirs_exist_ok=True)
    return tmp_path


def write_servers(data_dir: Path, servers: dict[str, Any]) -> None:
    (data_dir / "mcp.json").write_text(json.dumps({"mcpServers": servers}))


# --- A database that was never migrated --------------------------------------------------


@pytest.mark.parametrize(
    "command",
    [
        ["mcp_discover"],
        ["mcp_discover", "tb"],
        ["mcp_call", "tb_add", '{"a": 1, "b": 2}'],
        ["mcp_sync"],
        ["agents_sync"],
        ["boocode_sync"],
    ],
    ids=lambda command: " ".join(command[:2]),
)
def test_commands_on_an_unmigrated_database_say_what_to_run(tmp_path: Path, command: list[str]) -> None:
    write_servers(tmp_path, {"tb": toolbox_entry()})
    done = manage(tmp_path, *command)
    assert done.returncode == 1
    message = command_error(done)
    assert "manage.py migrate" in message and "make run" in message
    assert done.stderr.strip().count("\n") == 0, done.stderr  # that one line, nothing else
    assert done.stdout == ""


def test_a_database_behind_the_code_names_the_missing_migrations(data_dir: Path) -> None:
    # As after pulling new code without running migrate.
    assert manage(data_dir, "migrate", "agents", "0001", "-v0").returncode == 0
    done = manage(data_dir, "agents_sync")
    assert done.returncode == 1
    message = command_error(done)
    assert "agents.0002_agent_error" in message and "manage.py migrate" in message


def test_mcp_discover_json_on_an_unmigrated_database_is_still_json(tmp_path: Path) -> None:
    done = manage(tmp_path, "mcp_discover", "--json")
    assert done.returncode == 1
    data = json.loads(done.stdout)
    assert data["servers"] == []
    [error] = data["errors"]
    assert error["server"] is None and "manage.py migrate" in error["error"]
    assert "manage.py migrate" in command_error(done)


# --- boocode_prepare (what `make run` runs before Daphne) -----------------------------------


def test_boocode_prepare_migrates_syncs_and_creates_the_admin_once(tmp_path: Path) -> None:
    write_servers(tmp_path, {"tb": toolbox_entry()})
    written = (tmp_path / "mcp.json").read_bytes()
    first = manage(tmp_path, "boocode_prepare")
    assert first.returncode == 0, first.stderr
    # AGENTS.md did not exist: the shipped example becomes it; mcp.json did and stays as it was
    assert f"Created {tmp_path / 'AGENTS.md'} from AGENTS.example.md" in first.stdout
    assert "mcp.json from" not in first.stdout and (tmp_path / "mcp.json").read_bytes() == written
    assert (tmp_path / "AGENTS.md").read_bytes() == (ROOT / "data" / "AGENTS.example.md").read_bytes()
    assert "migrations applied." in first.stdout and "Applying" not in first.stdout  # quietly
    assert "\n| Password: " in first.stdout and first.stdout.endswith("-+\n")  # in the frame, last
    check = (
        "from django.contrib.auth import get_user_model\n"
        "from agents.models import Agent\n"
        "from mcpclient.models import McpServer\n"
        "print(sorted(McpServer.objects.values_list('name', flat=True)),"
        " sorted(Agent.objects.values_list('name', flat=True)),"
        " list(get_user_model().objects.values_list('username', flat=True)))"
    )
    rows = manage(tmp_path, "shell", "-c", check)
    assert rows.stdout.strip().splitlines()[-1] == "['tb'] ['Assistant', 'Reader', 'Researcher'] ['admin']", (
        rows.stderr
    )
    (tmp_path / "AGENTS.md").write_text("## Helper\n---\ndescription: helps\n---\nYou help.\n")
    again = manage(tmp_path, "boocode_prepare")  # a restart: nothing to apply, nobody created
    assert again.returncode == 0, again.stderr
    assert "applied" not in again.stdout and "Created" not in again.stdout and "Password" not in again.stdout
    assert (tmp_path / "AGENTS.md").read_text().startswith("## Helper")  # the edit is kept


# --- mcp_discover ----------------------------------------------------------------------------


def test_mcp_discover_fails_when_any_enabled_server_failed(data_dir: Path) -> None:
    write_servers(
        data_dir,
        {"tb": toolbox_entry(), "dead": DEAD, "bad": INVALID, "off": toolbox_entry(enabled=False)},
    )
    done = manage(data_dir, "mcp_discover")
    assert done.returncode == 1
    lines = done.stdout.splitlines()
    assert lines[:2] == ["mcp.json shape: mcpServers", "tb: ready, 12 tools, 1 rejected"]
    assert lines[2].startswith("dead: failed, 0 tools, 0 rejected (")
    assert len(lines) == 3  # "off" is disabled: not asked about
    assert 'server "bad": "type" must be' in done.stderr  # the invalid entry, on stderr
    assert 'MCP server "dead" failed: ' in done.stderr
    assert command_error(done) == "failed: bad, dead"


def test_mcp_discover_json_reports_failures_and_entry_errors(data_dir: Path) -> None:
    write_servers(data_dir, {"tb": toolbox_entry(), "dead": DEAD, "bad": INVALID})
    done = manage(data_dir, "mcp_discover", "--json")
    assert done.returncode == 1
    data = json.loads(done.stdout)
    servers = {server["name"]: server for server in data["servers"]}
    assert {name: server["status"] for name, server in servers.items()} == {"tb": "ready", "dead": "failed"}
    assert all(SERVER_KEYS <= server.keys() for server in servers.values())
    assert servers["tb"]["tool_count"] == 12 and servers["tb"]["error"] == ""
    assert servers["dead"]["error"]
    [error] = data["errors"]
    assert error["server"] == "bad" and '"type" must be' in error["error"]
    assert command_error(done) == "failed: bad, dead"


def test_mcp_discover_named_servers(data_dir: Path) -> None:
    write_servers(data_dir, {"tb": toolbox_entry(), "dead": DEAD, "off": toolbox_entry(enabled=False)})
    done = manage(data_dir, "mcp_discover", "tb")
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout == "mcp.json shape: mcpServers\ntb: ready, 12 tools, 1 rejected\n"

    # An unknown and a disabled name are entry errors; the valid name is still discovered.
    done = manage(data_dir, "mcp_discover", "tb", "nope", "off", "--json")
    assert done.returncode == 1
    data = json.loads(done.stdout)
    assert [(server["name"], server["status"]) for server in data["servers"]] == [("tb", "ready")]
    errors = {error["server"]: error["error"] for error in data["errors"]}
    assert errors["nope"] == 'no MCP server named "nope" in mcp.json'
    assert '"off" is disabled' in errors["off"]
    assert 'no MCP server named "nope"' in done.stderr and '"off" is disabled' in done.stderr
    assert command_error(done) == "failed: nope, off"


def test_mcp_discover_names_the_shape_once(data_dir: Path) -> None:
    (data_dir / "mcp.json").write_text(json.dumps({"servers": {"tb": toolbox_entry()}}))
    done = manage(data_dir, "mcp_discover")
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout.splitlines()[0] == "mcp.json shape: VS Code (servers)"
    assert json.loads(manage(data_dir, "mcp_discover", "--json").stdout)["shape"] == "VS Code (servers)"


def test_mcp_discover_reports_an_unset_variable(data_dir: Path) -> None:
    write_servers(data_dir, {"secret": UNSET})
    done = manage(data_dir, "mcp_discover", "--json")
    assert done.returncode == 1
    [server] = json.loads(done.stdout)["servers"]
    assert server["status"] == "failed"
    assert '"BOOCODE_TEST_SURELY_UNSET_VARIABLE" is not set' in server["error"]
    assert 'MCP server "secret" failed: ' in done.stderr and "is not set" in done.stderr
    assert command_error(done) == "failed: secret"


LAUNCHER_FAILURE = ROOT / "tests" / "servers" / "launcher_failure.py"
# What the hub says of a package the launcher's registry does not have (mcpclient.engine.connection).
NOT_FOUND = (
    "its package was not found in the registry, so it is not retried until its entry in mcp.json "
    "changes or an administrator reconnects it"
)


def test_mcp_discover_shows_the_line_that_says_which_package_is_missing(data_dir: Path) -> None:
    missing = {"command": PYTHON, "args": [str(LAUNCHER_FAILURE), "npm-missing"]}
    uv_missing = {"command": PYTHON, "args": [str(LAUNCHER_FAILURE), "uv-missing"]}
    offline = {"command": PYTHON, "args": [str(LAUNCHER_FAILURE), "npm-offline"]}
    write_servers(data_dir, {"typo": missing, "pytypo": uv_missing, "offline": offline})
    done = manage(data_dir, "mcp_discover")
    assert done.returncode == 1
    said = {line.split('"')[1]: line for line in done.stderr.splitlines() if line.startswith("MCP server ")}
    assert said["typo"] == (
        f'MCP server "typo" failed: {NOT_FOUND} (stderr: npm error 404  The requested resource '
        "'@boocode-test/no-such-server@*' could not be found or you do not have permission to access it.)"
    )
    assert said["pytypo"].startswith(f'MCP server "pytypo" failed: {NOT_FOUND} (stderr: error: No solution')
    assert "boocode-test-no-such-server was not found in the package registry" in said["pytypo"]
    # A registry that did not answer may answer later: that failure is not said to be for good.
    assert said["offline"].startswith('MCP server "offline" failed: Connection closed (stderr: ')
    assert "getaddrinfo EAI_AGAIN" in said["offline"] and "not retried" not in said["offline"]
    assert (
        "Note that" not in done.stderr and "tarball" not in done.stderr and "complete log" not in done.stderr
    )
    assert command_error(done) == "failed: typo, pytypo, offline"


def test_mcp_discover_says_a_program_that_is_not_there_is_missing(data_dir: Path) -> None:
    write_servers(data_dir, {"typo": {"command": "mcp-server-nope-typo"}, "bash": {"command": "bash"}})
    done = manage(data_dir, "mcp_discover")
    assert done.returncode == 1
    said = [line for line in done.stderr.splitlines() if line.startswith("MCP server ")]
    assert said == [
        'MCP server "typo" failed: mcp.json: server "typo": command not found: mcp-server-nope-typo '
        "(looked up on BooCode's PATH and its virtualenv)",
        # A program that is there but not allowed: how to allow it.
        'MCP server "bash" failed: mcp.json: server "bash": command "bash" is not allowed; add its name to '
        "BOOCODE_MCP_STDIO_COMMANDS to allow it",
    ]


@pytest.mark.skipif(shutil.which("npx") is None, reason="npx is not installed")
def test_mcp_discover_of_a_mistyped_npx_package_names_it(data_dir: Path) -> None:
    # The real launcher asks the real registry (which this machine and CI reach) for a package
    # nobody published.
    package = "@boocode-test-missing/no-such-mcp-server"
    write_servers(data_dir, {"typo": {"command": "npx", "args": ["-y", package]}})
    done = manage(data_dir, "mcp_discover", "--json")
    assert done.returncode == 1
    [server] = json.loads(done.stdout)["servers"]
    assert server["status"] == "failed"
    assert server["error"].startswith(f"{NOT_FOUND} (stderr: npm error 404 "), server["error"]
    assert f"'{package}@*'" in server["error"]
    assert "Note that" not in server["error"] and "tarball" not in server["error"]


def test_mcp_discover_json_on_an_unreadable_file_is_still_json(data_dir: Path) -> None:
    (data_dir / "mcp.json").write_text('{"mcpServers": {')
    done = manage(data_dir, "mcp_discover", "--json")
    assert done.returncode == 1
    data = json.loads(done.stdout)
    assert data["servers"] == []
    [error] = data["errors"]
    assert error["server"] is None and "mcp.json" in error["error"]
    assert "mcp.json" in command_error(done)


def test_mcp_discover_without_servers_succeeds(data_dir: Path) -> None:
    write_servers(data_dir, {})
    done = manage(data_dir, "mcp_discover", "--json")
    assert (done.returncode, done.stderr) == (0, "")
    assert json.loads(done.stdout)["errors"] == []


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed (make test-deps)")
def test_mcp_sync_logs_the_sandboxed_servers_by_name(data_dir: Path, tmp_path: Path) -> None:
    write_servers(data_dir, {"fs": {"command": "npx", "sandbox": True}, "tb": toolbox_entry()})
    done = manage(data_dir, "mcp_sync", log_level="INFO")
    assert done.returncode == 0, done.stderr
    assert done.stderr.rstrip().endswith('mcpclient.runtime.sync: mcp.json: sandboxed stdio servers: "fs"')
    # Without bubblewrap on BooCode's PATH, the same names with why they will not start.
    bare = tmp_path / "bin-without-bwrap"
    bare.mkdir()
    done = manage(data_dir, "mcp_sync", path=str(bare), log_level="INFO")
    assert done.returncode == 0, done.stderr
    assert 'mcp.json: sandboxed servers "fs" will not start: sandbox needs bubblewrap (bwrap)' in done.stderr


# --- mcp_call --------------------------------------------------------------------------------


def test_mcp_call_prints_the_answer(data_dir: Path) -> None:
    write_servers(data_dir, {"tb": toolbox_entry()})
    done = manage(data_dir, "mcp_call", "tb_add", '{"a": 1, "b": 2}')
    assert (done.returncode, done.stdout, done.stderr) == (0, "3\n", "")


@pytest.mark.parametrize(
    ("arguments", "stdout", "says"),
    [
        (["tb_fail", '{"message": "bad"}'], "bad\n", "the tool call returned an error: bad"),
        (["tb_nope"], "", 'no ready MCP server offers a tool named "tb_nope"'),
        (["tb_delete_everything", '{"path": "/"}'], "", "readOnlyHint is false"),
        (["dead_echo", '{"text": "x"}'], "", '"dead" failed'),
        (["tb_add", "{nope"], "", "arguments are not valid JSON"),
        (["tb_add", "[1, 2]"], "", "arguments must be a JSON object"),
    ],
    ids=["error result", "unknown tool", "rejected tool", "server down", "bad JSON", "not an object"],
)
def test_mcp_call_failures_exit_1_with_one_line(
    data_dir: Path, arguments: list[str], stdout: str, says: str
) -> None:
    write_servers(data_dir, {"tb": toolbox_entry(), "dead": DEAD})
    done = manage(data_dir, "mcp_call", *arguments)
    assert done.returncode == 1
    assert done.stdout == stdout
    assert says in command_error(done)
    assert done.stderr.strip().count("\n") == 0, done.stderr


def test_mcp_call_finds_what_the_virtualenv_installed_and_starts_only_its_server(data_dir: Path) -> None:
    # As a person runs the README's example: the virtualenv's bin folder is not on PATH. A bare
    # "python3" must be the virtualenv's (which has the MCP SDK the toolbox needs), not the
    # system's; and the other enabled server must not start (it would leave its marker).
    marker = data_dir / "other-started"
    other = {"command": "python3", "args": ["-c", f"open({str(marker)!r}, 'w')"]}
    write_servers(data_dir, {"tb": {"command": "python3", "args": [str(TOOLBOX)]}, "other": other})
    add = ("mcp_call", "tb_add", '{"a": 1, "b": 2}')
    done = manage(data_dir, *add, path="/usr/bin:/bin", commands="python3")
    assert (done.returncode, done.stdout, done.stderr) == (0, "3\n", "")
    assert not marker.exists()


@pytest.mark.parametrize("handshake", [[], ["--handshake-only"]], ids=["2026-07-28", "2025-11-25"])
def test_mcp_call_answers_an_elicitation_with_the_defaults(data_dir: Path, handshake: list[str]) -> None:
    # Nobody to ask: accepted with the defaults when every required field has one, else declined.
    modern = str(ROOT / "tests" / "servers" / "modern.py")
    args = [modern, "--stdio", "--elicit-tools", *handshake]
    write_servers(data_dir, {"forms": {"command": PYTHON, "args": args}})
    done = manage(data_dir, "mcp_call", "forms_ask_defaults")
    assert (done.returncode, done.stderr) == (0, "")
    defaults = {"age": 30, "name": "John Doe", "score": 95.5, "status": "active", "verified": True}
    assert done.stdout == f"accept {json.dumps(defaults)}\n"
    done = manage(data_dir, "mcp_call", "forms_ask_profile")
    assert (done.returncode, done.stdout, done.stderr) == (0, "decline\n", "")


def test_mcp_call_usage_error_exits_2(data_dir: Path) -> None:
    done = manage(data_dir, "mcp_call")
    assert done.returncode == 2
    assert "the following arguments are required: tool" in done.stderr
    assert "Traceback" not in done.stderr


# --- how many tools ask before each call --------------------------------------------------------

UNDECLARED = (
    'not declaring "readOnlyHint": true (vouch for them with "readOnly": [...] in the server\'s entry)'
)


def test_mcp_discover_says_how_many_tools_ask_and_why(data_dir: Path) -> None:
    undeclared = toolbox_entry("--feature", "undeclared")
    write_servers(data_dir, {"tb": undeclared, "ok": {**undeclared, "readOnly": ["create_*"]}})
    done = manage(data_dir, "mcp_discover", "tb", "ok", "-v", "2")
    assert (done.returncode, done.stderr) == (0, "")
    lines = done.stdout.splitlines()
    assert f"tb: ready, 15 tools, 1 rejected; 2 of 15 tools ask before each call: 2 {UNDECLARED}" in lines
    assert f"ok: ready, 15 tools, 1 rejected; 1 of 15 tools asks before each call: 1 {UNDECLARED}" in lines
    assert (
        '  tb_create_issue (asks before each call: it does not declare "readOnlyHint": true, so it may '
        'change things ("readOnly": [...] in its server\'s entry vouches for it))'
    ) in lines
    assert "  tb_list_issues" in lines and "  ok_create_issue" in lines

    done = manage(data_dir, "mcp_discover", "tb", "--json")
    [server] = json.loads(done.stdout)["servers"]
    assert (server["approval_count"], server["approval_causes"]) == (2, {UNDECLARED: 2})
    asking = sorted(tool["name"] for tool in server["tools"] if tool["approval"])
    assert asking == ["create_issue", "issue_count"]


def test_mcp_import_says_which_tools_will_ask_and_counts_them_when_asked(data_dir: Path) -> None:
    undeclared = toolbox_entry("--feature", "undeclared")
    servers = {
        "iss": undeclared,
        "ro": {**undeclared, "readOnly": ["*"]},
        "wary": {**undeclared, "trusted": False},
    }
    source = data_dir / "claude_desktop_config.json"
    source.write_text(json.dumps({"mcpServers": servers}))
    done = manage(data_dir, "mcp_import", str(source), "--dry-run")
    assert (done.returncode, done.stderr) == (0, "")
    lines = done.stdout.splitlines()
    assert (
        'iss: its tools ask before each call unless they declare "readOnlyHint": true (a tool that '
        "declares nothing may change things) (--list-tools counts them)"
    ) in lines
    vouched = 'ro: its tools ask before each call unless they declare "readOnlyHint": true or match its'
    assert any(line.startswith(f'{vouched} "readOnly" ["*"]') for line in lines)
    untrusted = "wary: every tool asks before each call (the server is not trusted"
    assert any(line.startswith(untrusted) for line in lines)

    done = manage(data_dir, "mcp_import", str(source), "--dry-run", "--list-tools")
    assert (done.returncode, done.stderr) == (0, "")
    lines = done.stdout.splitlines()
    assert f"iss: 2 of 15 tools ask before each call: 2 {UNDECLARED}" in lines
    assert "ro: none of its 15 tools asks before each call" in lines
    cause = 'on a server that is not trusted ("trusted": false)'
    assert f"wary: 15 of 15 tools ask before each call: 15 {cause}" in lines
    assert not (data_dir / "mcp.json").exists()  # a dry run: nothing written, nothing stored

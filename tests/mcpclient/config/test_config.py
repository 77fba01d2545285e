"""mcp.json parsing, validation and resolution, on real files in tmp_path."""

from __future__ import annotations

import json
import logging
import os
import shutil
from pathlib import Path

import pytest
from django.test import override_settings

from mcpclient.config.dotenv import parse_env_file
from mcpclient.config.entries import parse_server
from mcpclient.config.loading import load_config
from mcpclient.config.model import ConfigError, ServerConfig
from mcpclient.config.resolve import resolve_server

ALLOWED = ["npx", "uvx", "node"]


def write_json(path: Path, value: object) -> Path:
    path.write_text(json.dumps(value, indent=2), encoding="utf-8")
    return path


def error_of(name: str, entry: object) -> str:
    with pytest.raises(ConfigError) as info:
        parse_server(name, entry)
    return str(info.value)


# --- parse_server: shapes, aliases, defaults --------------------------------------------------


def test_stdio_entry_with_defaults() -> None:
    config = parse_server("git", {"command": "uvx", "args": ["mcp-server-git"], "env": {"A": "1"}})
    assert config == ServerConfig(
        name="git",
        transport="stdio",
        command="uvx",
        args=("mcp-server-git",),
        env={"A": "1"},
        raw={"command": "uvx", "args": ["mcp-server-git"], "env": {"A": "1"}},
    )
    assert config.enabled is True
    assert config.timeout == 60.0
    assert config.init_timeout == 30.0


@pytest.mark.parametrize(
    ("entry", "transport"),
    [
        ({"command": "npx"}, "stdio"),
        ({"url": "http://127.0.0.1:9/mcp"}, "streamableHttp"),
        ({"type": "stdio", "command": "npx"}, "stdio"),
        ({"type": "streamableHttp", "url": "http://h/mcp"}, "streamableHttp"),
        ({"type": "http", "url": "http://h/mcp"}, "streamableHttp"),
        ({"type": "streamable-http", "url": "http://h/mcp"}, "streamableHttp"),
        ({"type": "sse", "url": "https://h/sse"}, "sse"),
        ({"type": "remote", "url": "https://h/mcp"}, "streamableHttp"),
        ({"type": "local", "command": "npx"}, "stdio"),
    ],
)
def test_transport_aliases_and_inference(entry: dict, transport: str) -> None:
    assert parse_server("s", entry).transport == transport


def test_opencode_local_entry() -> None:
    entry = {"type": "local", "command": ["npx", "-y", "pkg"], "environment": {"TOKEN": "{env:TOKEN}"}}
    config = parse_server("oc", entry)
    assert (config.transport, config.command, config.args) == ("stdio", "npx", ("-y", "pkg"))
    assert config.env == {"TOKEN": "{env:TOKEN}"}
    assert config.raw == entry  # untouched


def test_timeouts_are_milliseconds_and_unknown_keys_are_kept() -> None:
    entry = {"url": "https://h/mcp", "timeout": 1500, "initTimeout": 2000.0, "enabled": False, "x-note": [1]}
    config = parse_server("s", entry)
    assert (config.timeout, config.init_timeout, config.enabled) == (1.5, 2.0, False)
    assert config.raw == entry
    entry["x-note"].append(2)  # the config holds its own copy
    assert config.raw["x-note"] == [1]


def test_placeholders_in_url_scheme_or_host_are_checked_only_after_expansion() -> None:
    assert parse_server("s", {"url": "${BASE_URL}/mcp"}).url == "${BASE_URL}/mcp"
    assert parse_server("s", {"url": "https://{env:HOST}:8443/mcp"}).url == "https://{env:HOST}:8443/mcp"
    # A placeholder in the query does not excuse a bad scheme.
    assert '"url" must be an http:// or https://' in error_of("s", {"url": "ftp://h/?k=${K}"})


@pytest.mark.parametrize(
    ("name", "entry", "message"),
    [
        ("git", {"type": "stdio"}, 'mcp.json: server "git": "command" is required for stdio'),
        ("x", {"type": "sse"}, 'mcp.json: server "x": "url" is required for sse'),
        ("x", {"type": "http"}, 'mcp.json: server "x": "url" is required for streamableHttp'),
        (
            "x",
            {},
            'mcp.json: server "x": "command" (for stdio) or "url" (for streamableHttp/sse) is required',
        ),
        ("x", {"command": "a", "url": "http://h"}, 'mcp.json: server "x": conflicting "command" and "url"'),
        (
            "x",
            {"type": "stdio", "command": "a", "url": "http://h"},
            'mcp.json: server "x": conflicting "url"',
        ),
        ("x", {"type": "stdio", "command": "a", "headers": {"A": "b"}}, 'server "x": conflicting "headers"'),
        (
            "x",
            {"type": "http", "url": "http://h", "command": "a"},
            'mcp.json: server "x": conflicting "command"',
        ),
        ("x", {"type": "sse", "url": "http://h", "args": ["a"]}, 'server "x": conflicting "args"'),
        ("x", {"url": "http://h", "env": {"A": "b"}}, 'server "x": conflicting "env"'),
        (
            "x",
            {"command": "a", "env": {}, "environment": {}},
            'server "x": conflicting "env" and "environment"',
        ),
        (
            "x",
            {"type": "ws", "url": "http://h"},
            '"type" must be "stdio", "streamableHttp", "http", "sse", "local" or "remote", got "ws"',
        ),
        ("x", {"type": 1, "command": "a"}, '"type" must be a string, got number'),
        ("x", {"command": 5}, 'mcp.json: server "x": "command" must be a string, got number'),
        (
            "x",
            {"command": ["npx"]},
            '"command" must be a string (an array is only accepted with "type": "local")',
        ),
        ("x", {"type": "local", "command": []}, '"command" must not be empty'),
        ("x", {"command": "  "}, '"command" must not be empty'),
        ("x", {"command": "a", "args": "-y"}, '"args" must be an array of strings, got string'),
        ("x", {"command": "a", "args": ["-y", 3]}, '"args[1]" must be a string, got number'),
        ("x", {"command": "a", "env": ["A=1"]}, '"env" must be an object of strings, got array'),
        ("x", {"command": "a", "env": {"A": 1}}, '"env.A" must be a string, got number'),
        ("x", {"command": "a", "env": {"A=B": "1"}}, '"env" has an invalid variable name "A=B"'),
        ("x", {"command": "a", "envFile": 3}, '"envFile" must be a string, got number'),
        ("x", {"command": "a", "cwd": None}, '"cwd" must be a string, got null'),
        ("x", {"url": "http://h", "headers": "a"}, '"headers" must be an object of strings, got string'),
        ("x", {"url": "http://h", "headers": {"A": True}}, '"headers.A" must be a string, got boolean'),
        (
            "x",
            {"url": "http://h", "headers": {"Bad Name": "v"}},
            '"headers" has an invalid header name "Bad Name"',
        ),
        (
            "x",
            {"url": "http://h", "headers": {"A": "v\r\nB: c"}},
            '"headers.A" must not contain a line break',
        ),
        ("x", {"url": 5}, '"url" must be a string, got number'),
        ("x", {"url": "file:///etc/passwd"}, '"url" must be an http:// or https:// URL with a host'),
        ("x", {"url": "http://"}, '"url" must be an http:// or https:// URL with a host, got "http://"'),
        ("x", {"command": "a", "enabled": "yes"}, '"enabled" must be true or false, got "yes"'),
        (
            "x",
            {"command": "a", "timeout": "abc"},
            'mcp.json: server "x": "timeout" must be a positive integer (milliseconds), got "abc"',
        ),
        ("x", {"command": "a", "timeout": 0}, '"timeout" must be a positive integer (milliseconds), got 0'),
        ("x", {"command": "a", "timeout": -5}, '"timeout" must be a positive integer (milliseconds), got -5'),
        (
            "x",
            {"command": "a", "timeout": 1.5},
            '"timeout" must be a positive integer (milliseconds), got 1.5',
        ),
        (
            "x",
            {"command": "a", "timeout": True},
            '"timeout" must be a positive integer (milliseconds), got true',
        ),
        (
            "x",
            {"command": "a", "initTimeout": None},
            '"initTimeout" must be a positive integer (milliseconds), got null',
        ),
        ("x", ["npx"], 'mcp.json: server "x": the entry must be an object, got array'),
        (
            "bad name",
            {"command": "a"},
            "mcp.json: server \"bad name\": the name may only contain letters, digits, '_' and '-'",
        ),
        ("a.b", {"command": "a"}, 'server "a.b": the name may only contain'),
        ("", {"command": "a"}, 'server "": the name may only contain'),
    ],
)
def test_validation_errors_name_file_server_and_key(name: str, entry: object, message: str) -> None:
    assert message in error_of(name, entry)


def test_error_messages_use_the_source_name() -> None:
    with pytest.raises(ConfigError, match=r'^servers\.json: server "x": "command" is required'):
        parse_server("x", {"type": "stdio"}, source="servers.json")


# --- load_config -------------------------------------------------------------------------------


def test_missing_file_is_no_servers_and_logged_once(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "mcp.json"
    caplog.set_level(logging.INFO, logger="mcpclient.config")
    first = load_config(path)
    second = load_config(path)
    assert (first.exists, first.servers, first.errors, first.raw_servers) == (False, {}, {}, {})
    assert second.exists is False
    assert [r.getMessage() for r in caplog.records] == [f"{path} not found: no MCP servers are configured"]


def test_one_bad_entry_does_not_hide_the_others(tmp_path: Path) -> None:
    entries = {
        "time": {"command": "uvx", "args": ["mcp-server-time"]},
        "broken": {"type": "stdio", "timeout": "abc"},
        "bad name": {"command": "npx"},
        "web": {"url": "http://127.0.0.1:9/mcp", "headers": {"Authorization": "Bearer ${TOKEN}"}},
    }
    loaded = load_config(write_json(tmp_path / "mcp.json", {"mcpServers": entries}))
    assert loaded.exists is True
    assert list(loaded.servers) == ["time", "web"]
    assert list(loaded.errors) == ["broken", "bad name"]
    assert loaded.errors["broken"] == 'mcp.json: server "broken": "command" is required for stdio'
    assert list(loaded.raw_servers) == list(entries)
    assert loaded.raw_servers == entries
    assert loaded.servers["web"].headers == {"Authorization": "Bearer ${TOKEN}"}


def test_invalid_json_reports_line_and_column(tmp_path: Path) -> None:
    path = tmp_path / "mcp.json"
    text = '{\n  "mcpServers": {\n    "a": {"command": "npx" "args": []}\n  }\n}\n'  # a comma missing
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError, match=r"^mcp\.json: invalid JSON at line 3, column 28: "):
        load_config(path)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[]", 'mcp.json: the top level must be a JSON object with a "mcpServers" key, got array'),
        ('"x"', "got string"),
        ("{}", 'mcp.json: no server map found; expected one of "mcpServers"'),
        ('{"mcpServers": []}', 'mcp.json: "mcpServers" must be an object, got array'),
        ('{"mcpServers": null}', 'mcp.json: "mcpServers" must be an object, got null'),
        ("", "mcp.json: the file is empty"),
        (
            '{"mcpServers": {"a": {"command": "npx", "timeout": NaN}}}',
            "mcp.json: invalid JSON: NaN is not allowed",
        ),
        (
            '{"mcpServers": {"a": {"command": "x"}, "a": {"command": "y"}}}',
            'server "a" is defined more than once',
        ),
        ('{"mcpServers": {}, "mcpServers": {}}', 'mcp.json: duplicate top-level key "mcpServers"'),
    ],
)
def test_whole_file_problems_raise(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "mcp.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert message in str(info.value)


def test_duplicate_key_inside_an_entry_fails_that_entry(tmp_path: Path) -> None:
    path = tmp_path / "mcp.json"
    path.write_text(
        '{"mcpServers": {"a": {"command": "npx", "command": "uvx"}, "b": {"command": "npx"}}}',
        encoding="utf-8",
    )
    loaded = load_config(path)
    assert list(loaded.servers) == ["b"]
    assert loaded.errors == {"a": 'mcp.json: server "a": duplicate key "command"'}


def test_other_file_names_appear_in_messages(tmp_path: Path) -> None:
    path = write_json(tmp_path / "servers.json", {"mcpServers": {"x": {"type": "sse"}}})
    assert load_config(path).errors["x"] == 'servers.json: server "x": "url" is required for sse'


# --- envFile syntax ------------------------------------------------------------------------------


def test_env_file_syntax() -> None:
    text = (
        "# a comment\n"
        "\n"
        "PLAIN=value with spaces   # trailing comment\n"
        "export EXPORTED=1\n"
        "SINGLE='lit${X}\\n # not a comment'\n"
        'DOUBLE="a\\nb \\"q\\" # kept"  # comment\n'
        'MULTI="line one\n'
        'line two"\n'
        "EMPTY=\n"
        "HASH=a#b\n"
    )
    assert parse_env_file(text) == {
        "PLAIN": "value with spaces",
        "EXPORTED": "1",
        "SINGLE": "lit${X}\\n # not a comment",
        "DOUBLE": 'a\nb "q" # kept',
        "MULTI": "line one\nline two",
        "EMPTY": "",
        "HASH": "a#b",
    }


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("OK=1\nJUSTTEXT\n", "line 2: expected KEY=VALUE"),
        ("1BAD=x", "line 1: invalid variable name"),
        ("A='open", "line 1: unterminated ' quote"),
        ('A="open\nB=2', 'line 1: unterminated " quote'),
        ("A='x' y", "line 1: unexpected text after the closing quote"),
    ],
)
def test_env_file_errors_name_the_line_not_the_content(text: str, message: str) -> None:
    with pytest.raises(ValueError) as info:
        parse_env_file(text)
    assert str(info.value) == message


# --- resolve_server -----------------------------------------------------------------------------


def resolve(entry: dict, tmp_path: Path, environ: dict[str, str], **kwargs: object):
    return resolve_server(
        parse_server("srv", entry), base_dir=tmp_path, environ=environ, allowed_commands=ALLOWED, **kwargs
    )


def test_placeholders_expand_in_every_stdio_field(tmp_path: Path) -> None:
    entry = {
        "command": "${BIN_DIR}/npx",
        "args": ["-y", "${env:PKG}", "--dir={env:DIR}", "${not a placeholder}"],
        "env": {"TOKEN": "${TOKEN}", "BOTH": "${A}-${env:B}-{env:C}"},
        "cwd": "${DIR}",
    }
    npx = shutil.which("npx")
    assert npx is not None
    environ = {
        "BIN_DIR": os.path.dirname(npx),
        "PKG": "pkg",
        "DIR": "/srv",
        "TOKEN": "t0k",
        "A": "1",
        "B": "2",
        "C": "3",
    }
    resolved = resolve(entry, tmp_path, environ)
    assert resolved.command == npx
    assert resolved.args == ["-y", "pkg", "--dir=/srv", "${not a placeholder}"]
    assert resolved.env == {"TOKEN": "t0k", "BOTH": "1-2-3"}
    assert resolved.cwd == "/srv"
    # The config keeps the raw values.
    assert resolved.config.env == {"TOKEN": "${TOKEN}", "BOTH": "${A}-${env:B}-{env:C}"}


def test_expansion_is_a_single_pass(tmp_path: Path) -> None:
    resolved = resolve({"command": "npx", "args": ["${A}"]}, tmp_path, {"A": "${B}", "B": "no"})
    assert resolved.args == ["${B}"]


def test_placeholders_expand_in_url_and_headers(tmp_path: Path) -> None:
    entry = {
        "type": "sse",
        "url": "https://${HOST}/sse?team={env:TEAM}",
        "headers": {"Authorization": "Bearer ${env:TOKEN}", "X-Plain": "v"},
    }
    resolved = resolve(entry, tmp_path, {"HOST": "mcp.example.com", "TEAM": "t", "TOKEN": "s3cret"})
    assert resolved.url == "https://mcp.example.com/sse?team=t"
    assert resolved.headers == {"Authorization": "Bearer s3cret", "X-Plain": "v"}
    assert (resolved.command, resolved.args, resolved.env, resolved.cwd) == (None, [], {}, None)
    assert "s3cret" not in repr(resolved)


@pytest.mark.parametrize(
    ("entry", "where"),
    [
        ({"command": "npx", "args": ["${MISSING}"]}, "args[0]"),
        ({"command": "${MISSING}"}, "command"),
        ({"command": "npx", "env": {"K": "{env:MISSING}"}}, "env.K"),
        ({"type": "local", "command": ["npx"], "environment": {"K": "${MISSING}"}}, "environment.K"),
        ({"command": "npx", "cwd": "${env:MISSING}/x"}, "cwd"),
        ({"url": "https://h/${MISSING}"}, "url"),
        ({"url": "https://h/", "headers": {"Authorization": "Bearer ${MISSING}"}}, "headers.Authorization"),
    ],
)
def test_unset_variable_names_server_variable_and_key(tmp_path: Path, entry: dict, where: str) -> None:
    environ = {"SECRET_A": "value-a-123", "OTHER": "value-b-456"}
    with pytest.raises(ConfigError) as info:
        resolve(entry, tmp_path, environ)
    message = str(info.value)
    assert message == f'mcp.json: server "srv": environment variable "MISSING" is not set (used in "{where}")'


def test_header_line_break_after_expansion_is_refused(tmp_path: Path) -> None:
    entry = {"url": "https://h/", "headers": {"X-Token": "${T}"}}
    with pytest.raises(ConfigError) as info:
        resolve(entry, tmp_path, {"T": "abc\r\nX-Evil: 1"})
    assert (
        str(info.value) == 'mcp.json: server "srv": "headers.X-Token" contains a line break after expansion'
    )


def test_url_is_checked_after_expansion(tmp_path: Path) -> None:
    with pytest.raises(
        ConfigError, match=r'"url" must be an http:// or https:// URL with a host after expansion'
    ):
        resolve({"url": "${BASE}/mcp"}, tmp_path, {"BASE": "file:///tmp"})


def test_env_file_is_loaded_and_overridden_by_env(tmp_path: Path) -> None:
    (tmp_path / "secrets").mkdir()
    (tmp_path / "secrets" / "git.env").write_text(
        "TOKEN=from-file\nSHARED=file\nURL_PART=file-part\n", encoding="utf-8"
    )
    entry = {
        "command": "npx",
        "envFile": "secrets/git.env",
        "env": {"SHARED": "explicit", "COMBINED": "${TOKEN}+${FROM_PROCESS}"},
        "args": ["${URL_PART}"],
    }
    # envFile values win over the process environment for placeholders.
    environ = {"FROM_PROCESS": "proc", "TOKEN": "from-process"}
    resolved = resolve(entry, tmp_path, environ)
    assert resolved.env == {
        "TOKEN": "from-file",
        "SHARED": "explicit",
        "URL_PART": "file-part",
        "COMBINED": "from-file+proc",
    }
    assert resolved.args == ["file-part"]


def test_env_file_feeds_http_headers(tmp_path: Path) -> None:
    (tmp_path / ".env.web").write_text("export API_KEY='k-1'\n", encoding="utf-8")
    entry = {"url": "https://h/mcp", "envFile": ".env.web", "headers": {"X-Api-Key": "{env:API_KEY}"}}
    resolved = resolve(entry, tmp_path, {})
    assert resolved.headers == {"X-Api-Key": "k-1"}
    assert resolved.env == {}


def test_env_file_path_is_relative_to_base_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "a.env").write_text("A=1\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path.parent)  # not the mcp.json folder
    assert resolve({"command": "npx", "envFile": "a.env"}, tmp_path, {}).env == {"A": "1"}


def test_missing_env_file_names_the_path(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        resolve({"command": "npx", "envFile": "nope.env"}, tmp_path, {})
    assert str(info.value) == (
        f'mcp.json: server "srv": envFile "nope.env" not found (looked for {tmp_path / "nope.env"})'
    )


def test_env_file_syntax_error_does_not_show_the_line(tmp_path: Path) -> None:
    (tmp_path / "bad.env").write_text("GOOD=1\nsk-live-secret-value\n", encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        resolve({"command": "npx", "envFile": "bad.env"}, tmp_path, {})
    assert str(info.value) == 'mcp.json: server "srv": envFile "bad.env" line 2: expected KEY=VALUE'


def test_command_not_in_allowlist_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        resolve({"command": "/bin/bash", "args": ["-c", "echo hi"]}, tmp_path, {})
    assert str(info.value) == (
        'mcp.json: server "srv": command "/bin/bash" is not allowed; a path must be listed in '
        "BOOCODE_MCP_STDIO_COMMANDS as it is, or be the very file a listed name resolves to"
    )


def test_a_command_that_is_not_there_is_said_to_be_missing_not_to_be_allowed(tmp_path: Path) -> None:
    for command, shown in [("mcp-server-nope-typo", "mcp-server-nope-typo"), ("./bin/nope", "./bin/nope")]:
        with pytest.raises(ConfigError) as info:
            resolve({"command": command}, tmp_path, {})
        message = str(info.value)
        assert message.startswith(f'mcp.json: server "srv": command not found: {shown}'), message
        assert "BOOCODE_MCP_STDIO_COMMANDS" not in message


def test_allowlist_applies_after_expansion(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match='command "/bin/sh" is not allowed'):
        resolve({"command": "${TOOL}"}, tmp_path, {"TOOL": "/bin/sh"})
    assert resolve({"command": "${TOOL}"}, tmp_path, {"TOOL": "/usr/bin/node"}).command == "/usr/bin/node"


def test_allowed_command_keeps_args_as_a_list(tmp_path: Path) -> None:
    resolved = resolve({"command": "npx", "args": ["mcp-server-time", "a b; rm -rf /", "$(x)"]}, tmp_path, {})
    assert resolved.command == shutil.which("npx")
    assert resolved.args == ["mcp-server-time", "a b; rm -rf /", "$(x)"]


@override_settings(MCP_STDIO_COMMANDS=["mytool"])
def test_default_allowlist_comes_from_settings(tmp_path: Path) -> None:
    tool = tmp_path / "mytool"
    tool.write_text("#!/bin/sh\n")
    tool.chmod(0o755)
    config = parse_server("srv", {"command": "mytool"})
    resolved = resolve_server(config, base_dir=tmp_path, environ={"PATH": str(tmp_path)})
    assert resolved.command == str(tool)
    with pytest.raises(ConfigError, match="BOOCODE_MCP_STDIO_COMMANDS"):
        resolve_server(parse_server("srv", {"command": "npx"}), base_dir=tmp_path, environ={})


def test_tls_variables_and_path_pass_through_unless_given(tmp_path: Path) -> None:
    environ = {
        "SSL_CERT_FILE": "/etc/ca.pem",
        "NODE_EXTRA_CA_CERTS": "/etc/ca.pem",
        "PATH": "/usr/bin",
        "UNRELATED": "not passed",
    }
    resolved = resolve({"command": "npx", "env": {"PATH": "/custom/bin"}}, tmp_path, environ)
    assert resolved.env == {
        "PATH": "/custom/bin",
        "SSL_CERT_FILE": "/etc/ca.pem",
        "NODE_EXTRA_CA_CERTS": "/etc/ca.pem",
    }
    assert resolve({"command": "npx"}, tmp_path, {"PATH": "/usr/bin"}).env == {"PATH": "/usr/bin"}


def test_relative_cwd_is_relative_to_base_dir(tmp_path: Path) -> None:
    assert resolve({"command": "npx", "cwd": "work"}, tmp_path, {}).cwd == str(tmp_path / "work")

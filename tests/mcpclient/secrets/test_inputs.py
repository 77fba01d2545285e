"""``${input:ID}`` values: the environment, then the secret store; the admin's inputs page.

The admin is driven with Django's test clients, forms submitted as a browser would (fields
read from the page); the live test runs a real hub against the real HTTP toolbox, whose port
is only known through a stored input.
"""

from __future__ import annotations

import asyncio
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from channels.db import database_sync_to_async
from cryptography.fernet import Fernet
from django.contrib.auth.models import Permission, User
from django.core.management import call_command
from django.test import AsyncClient, Client
from django.urls import reverse

from mcpclient import runtime
from mcpclient.config.resolve import env_name
from mcpclient.models import McpServer, StoredSecret
from mcpclient.secrets.inputs import input_ids, input_value
from mcpclient.secrets.store import get_secret, put_secret
from tests.support.admin import AsgiAdmin, form_fields, write_config
from tests.support.hubs import stop_process_hub
from tests.support.processes import TEST_COMMANDS, free_port

# Also run on PostgreSQL (make test): the store is a database feature.
pytestmark = [pytest.mark.postgres, pytest.mark.processes]

TOKEN = "ghp_inputValue0123456789abcdef"
ENV_VALUE = "from-the-environment-42"


@pytest.fixture
def store(settings: Any, tmp_path: Path) -> Any:
    settings.SECRETS_KEYS = [Fernet.generate_key().decode()]
    settings.SECRETS_KEY_FILE = tmp_path / "secrets.key"
    return settings


def test_env_names() -> None:
    assert env_name("github-token") == "BOOCODE_INPUT_GITHUB_TOKEN"
    assert env_name("api.key") == "BOOCODE_INPUT_API_KEY"
    assert env_name("Org_1") == "BOOCODE_INPUT_ORG_1"


def test_the_inputs_of_an_entry_are_found_at_any_depth() -> None:
    entry = {
        "url": "https://api.example.invalid/${input:path}",
        "headers": {"Authorization": "Bearer ${input:github-token}", "X-Org": "${input:org}-${input:path}"},
        "x-other-host": {"nested": ["${input:deep}"]},
        "env": {"PLAIN": "${GITHUB_TOKEN}"},
    }
    assert input_ids(entry) == ["path", "github-token", "org", "deep"]
    assert input_ids({"command": "npx"}) == [] and input_ids("not an entry") == []


@pytest.mark.django_db
def test_the_environment_wins_over_the_store(store: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("BOOCODE_INPUT_GITHUB_TOKEN", raising=False)
    assert input_value("github-token") is None
    put_secret("input", "github-token", TOKEN)
    assert input_value("github-token") == TOKEN
    monkeypatch.setenv("BOOCODE_INPUT_GITHUB_TOKEN", ENV_VALUE)
    assert input_value("github-token") == ENV_VALUE
    monkeypatch.setenv("BOOCODE_INPUT_GITHUB_TOKEN", "")  # set but empty: as if unset
    assert input_value("github-token") == TOKEN


# --- the admin's inputs page ---------------------------------------------------------------

ENTRY = {
    "type": "http",
    "url": "https://api.example.invalid/mcp",
    "headers": {"Authorization": "Bearer ${input:github-token}", "X-Org": "${input:org}"},
    "x-note": "${input:from-env}",
}


@pytest.fixture
def mcp_file(tmp_path: Path, settings: Any, store: Any, monkeypatch: pytest.MonkeyPatch) -> Path:
    settings.MCP_CONFIG = tmp_path / "mcp.json"
    settings.MCP_STDIO_COMMANDS = TEST_COMMANDS
    monkeypatch.setenv("BOOCODE_INPUT_FROM_ENV", ENV_VALUE)
    monkeypatch.delenv("BOOCODE_INPUT_GITHUB_TOKEN", raising=False)
    monkeypatch.delenv("BOOCODE_INPUT_ORG", raising=False)
    write_config(settings.MCP_CONFIG, {"gh": ENTRY})
    call_command("mcp_sync", stdout=StringIO())
    return settings.MCP_CONFIG


def inputs_url(name: str = "gh") -> str:
    return reverse("admin:mcpclient_mcpserver_inputs", args=[McpServer.objects.get(name=name).pk])


def change_url(name: str = "gh") -> str:
    return reverse("admin:mcpclient_mcpserver_change", args=[McpServer.objects.get(name=name).pk])


@pytest.mark.django_db
def test_values_are_entered_stored_encrypted_and_never_shown(admin_client: Client, mcp_file: Path) -> None:
    before = mcp_file.read_bytes()
    change = admin_client.get(change_url()).content.decode()
    assert '<li class="mcp-input mcp-input-missing"><code>${input:github-token}</code>' in change
    assert '<li class="mcp-input mcp-input-environment"><code>${input:from-env}</code>' in change
    assert "set in the environment as BOOCODE_INPUT_FROM_ENV" in change and ENV_VALUE not in change
    assert f'href="{inputs_url()}"' in change

    page = admin_client.get(inputs_url()).content.decode()
    fields = form_fields(page, "mcpserver_inputs_form")
    assert fields["value:github-token"] == fields["value:org"] == fields["value:from-env"] == ""
    assert 'type="password" name="value:github-token"' in page
    assert "missing: enter a value or set BOOCODE_INPUT_GITHUB_TOKEN" in page

    fields["value:github-token"] = TOKEN
    fields["value:not-an-input"] = "ignored"  # a name the entry does not use is never stored
    response = admin_client.post(inputs_url(), fields, follow=True)
    stored = "Inputs: stored github-token; no MCP hub runs in this process: gh will use it when next"
    assert stored in response.content.decode()
    assert get_secret("input", "github-token") == TOKEN
    assert list(StoredSecret.objects.values_list("name", flat=True)) == ["github-token"]
    assert TOKEN not in StoredSecret.objects.get().ciphertext
    assert mcp_file.read_bytes() == before  # mcp.json untouched

    for url in (change_url(), inputs_url(), reverse("admin:mcpclient_mcpserver_changelist")):
        html = admin_client.get(url).content.decode()
        assert TOKEN not in html, url
    page = admin_client.get(inputs_url()).content.decode()
    assert form_fields(page, "mcpserver_inputs_form")["value:github-token"] == ""
    assert '<tr class="mcp-input mcp-input-stored">' in page and "stored (encrypted)" in page

    # A value and "clear" together: refused, nothing changed.
    fields = form_fields(page, "mcpserver_inputs_form")
    fields.update({"value:github-token": "other", "clear:github-token": "on"})
    response = admin_client.post(inputs_url(), fields, follow=True)
    assert "Nothing was changed" in response.content.decode()
    assert get_secret("input", "github-token") == TOKEN

    # Clearing removes the stored value.
    fields = form_fields(admin_client.get(inputs_url()).content.decode(), "mcpserver_inputs_form")
    fields["clear:github-token"] = "on"
    response = admin_client.post(inputs_url(), fields, follow=True)
    assert "Inputs: cleared github-token;" in response.content.decode()
    assert not StoredSecret.objects.exists()
    assert mcp_file.read_bytes() == before


@pytest.mark.django_db
def test_a_value_the_key_cannot_read_is_reported_not_shown(
    admin_client: Client, mcp_file: Path, store: Any
) -> None:
    put_secret("input", "github-token", TOKEN)
    store.SECRETS_KEYS = [Fernet.generate_key().decode()]  # the key changed without a rotation
    page = admin_client.get(inputs_url()).content.decode()
    assert '<tr class="mcp-input mcp-input-unreadable">' in page
    assert "cannot decrypt input &quot;github-token&quot;: the encryption key is wrong or missing" in page
    assert TOKEN not in page


@pytest.mark.django_db
def test_viewers_see_states_but_cannot_enter_values(mcp_file: Path) -> None:
    user = User.objects.create_user("viewer", password="x", is_staff=True)
    user.user_permissions.add(Permission.objects.get(codename="view_mcpserver"))
    viewer = Client()
    viewer.force_login(user)
    page = viewer.get(inputs_url()).content.decode()
    assert "missing: enter a value" in page and 'type="password"' not in page
    response = viewer.post(inputs_url(), {"value:github-token": TOKEN})
    assert response.status_code == 403
    assert not StoredSecret.objects.exists()

    outsider = Client()
    outsider.force_login(User.objects.create_user("alice", password="x"))
    response = outsider.post(inputs_url(), {"value:github-token": TOKEN})
    assert response.status_code == 302 and response["Location"].startswith("/admin/login/")
    assert not StoredSecret.objects.exists()


@pytest.mark.django_db
def test_a_post_without_the_csrf_token_is_refused(mcp_file: Path, admin_user: User) -> None:
    client = Client(enforce_csrf_checks=True)
    client.force_login(admin_user)
    assert client.post(inputs_url(), {"value:github-token": TOKEN}).status_code == 403
    assert not StoredSecret.objects.exists()


# --- live: the hub reads the stored value ------------------------------------------------------


@pytest.mark.django_db(transaction=True)
async def test_a_stored_value_reconnects_the_servers_that_use_it(
    tmp_path: Path, settings: Any, store: Any, shared_http_toolbox: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings.MCP_CONFIG = tmp_path / "mcp.json"
    settings.MCP_AUTOSTART = True
    monkeypatch.delenv("BOOCODE_INPUT_PORT", raising=False)
    server = shared_http_toolbox()
    # The port is only known through the input: the server is ready only if the hub read it.
    write_config(settings.MCP_CONFIG, {"web": {"type": "http", "url": "http://127.0.0.1:${input:port}/mcp"}})
    await database_sync_to_async(call_command)("mcp_sync", stdout=StringIO())
    try:
        async with asyncio.timeout(60):
            hub = await runtime.ensure_hub()
            snapshot = hub.snapshots()[0]
            assert snapshot.status.value == "failed"
            assert 'input "port" has no value' in snapshot.last_error
            assert "BOOCODE_INPUT_PORT" in snapshot.last_error

            user = await database_sync_to_async(User.objects.create_superuser)("root", password="x")
            client = AsyncClient()
            await client.aforce_login(user)
            admin = AsgiAdmin(client)
            row = await McpServer.objects.aget(name="web")
            url = reverse("admin:mcpclient_mcpserver_inputs", args=[row.pk])
            fields = form_fields((await admin.get(url)).content.decode(), "mcpserver_inputs_form")
            fields["value:port"] = str(server.port)
            response = await admin.post(url, fields)
            assert response.status_code == 302
            # When the response arrives the server has reconnected with the stored value.
            assert "web_echo" in {tool.prefixed_name for tool in runtime.hub_tools()}
            row = await McpServer.objects.aget(name="web")
            assert (row.status, row.tool_count) == ("ready", 12)

            # The environment wins over the store: a wrong port there breaks the connection.
            monkeypatch.setenv("BOOCODE_INPUT_PORT", str(free_port()))
            await hub.reconnect("web")
            snapshot = hub.snapshots()[0]
            assert snapshot.status.value == "failed" and "connection refused" in snapshot.last_error
    finally:
        await stop_process_hub()

"""The admin carries the product's name; its server list fits 1280 px; a rejected tool is not a failure."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import reverse

from mcpclient.models import McpServer, McpTool
from tests.support.live import live_daphne, seed_migrated
from tests.support.processes import PYTHON, ROOT, TOOLBOX

pytestmark = pytest.mark.processes

PASSWORD = "admin-page-test-password"


@pytest.fixture
def admin_client() -> Client:
    user = get_user_model().objects.create_superuser("boss", password=PASSWORD)
    client = Client()
    client.force_login(user)
    return client


@pytest.mark.django_db
def test_admin_pages_carry_the_product_name(admin_client: Client) -> None:
    index = admin_client.get(reverse("admin:index")).content.decode()
    assert "<title>BooCode: MCP servers, agents, conversations and users | BooCode admin</title>" in index
    assert ">BooCode administration<" in index and "Django administration" not in index
    login = Client().get(reverse("admin:login")).content.decode()
    assert "BooCode" in login and "Django" not in login


@pytest.mark.django_db
def test_a_rejected_tool_reads_no_in_words(admin_client: Client) -> None:
    server = McpServer.objects.create(name="tb", status="ready", tool_count=1, rejected_count=1)
    McpTool.objects.create(
        server=server,
        name="wipe",
        prefixed_name="tb_wipe",
        annotations={"readOnlyHint": False},
        rejected=True,
        reject_reason="readOnlyHint is false",
    )
    McpTool.objects.create(
        server=server, name="echo", prefixed_name="tb_echo", annotations={"readOnlyHint": True}
    )
    McpTool.objects.create(server=server, name="note", prefixed_name="tb_note")  # declares nothing
    for url in (
        reverse("admin:mcpclient_mcptool_changelist"),
        reverse("admin:mcpclient_mcpserver_change", args=[server.pk]),
        reverse("admin:mcpclient_mcptool_change", args=[McpTool.objects.get(name="wipe").pk]),
    ):
        page = admin_client.get(url).content.decode()
        assert "icon-no.svg" not in page and "icon-yes.svg" not in page, url
    page = admin_client.get(reverse("admin:mcpclient_mcptool_changelist")).content.decode()
    assert '<td class="field-read_only">no</td>' in page and '<td class="field-read_only">yes</td>' in page
    assert '<td class="field-read_only">not declared (may change things)</td>' in page


@pytest.mark.browser
def test_the_server_list_fits_a_1280_pixel_screen(browser: Any, tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    servers: dict[str, Any] = {
        "toolbox": {"command": PYTHON, "args": [str(TOOLBOX)]},
        "a-server-with-a-rather-long-name": {"command": PYTHON, "args": [str(TOOLBOX), "--titled-tools"]},
        "refused": {"url": "http://127.0.0.1:9/mcp"},
        "missing": {"command": "not-a-command-anywhere", "args": ["--with", "flags"]},
    }
    (data / "mcp.json").write_text(json.dumps({"mcpServers": servers}))
    env = {
        **os.environ,
        "BOOCODE_DATA_DIR": str(data),
        "BOOCODE_MCP_CONFIG": str(data / "mcp.json"),
        "BOOCODE_MCP_STDIO_COMMANDS": f"npx,{PYTHON}",
        "BOOCODE_MCP_AUTOSTART": "1",
        "BOOCODE_ADMIN_PASSWORD": PASSWORD,
        "DJANGO_SETTINGS_MODULE": "tests.settings",
    }
    setup = (
        "import django; django.setup(); from django.core.management import call_command; "
        "call_command('migrate', interactive=False, verbosity=0); call_command('boocode_sync'); "
        "call_command('ensure_admin')"
    )
    seed_migrated(data, env)
    subprocess.run([PYTHON, "-c", setup], cwd=ROOT, env=env, check=True, capture_output=True)
    with live_daphne(env) as (_, port):
        page = browser.new_page(viewport={"width": 1280, "height": 800})
        page.set_default_timeout(15_000)
        base = f"http://127.0.0.1:{port}"
        page.goto(f"{base}/admin/login/")
        page.fill("#id_username", "admin")
        page.fill("#id_password", PASSWORD)
        page.click("input[type=submit]")
        page.goto(f"{base}/admin/mcpclient/mcpserver/")
        # The hub starts with the first request; wait until every server has settled (the
        # badge's class names the status: a refused server's "reconnecting at ..." is settled).
        badges = page.locator("td.field-status_badge .mcp-status")
        unsettled = badges.and_(page.locator(".mcp-status-connecting, .mcp-status-disabled"))
        deadline = time.monotonic() + 60
        while badges.count() != 4 or unsettled.count():
            assert time.monotonic() < deadline, f"servers not settled: {badges.all_inner_texts()}"
            page.wait_for_timeout(250)  # the list is not live: poll it
            page.reload()
        assert page.title() == "Select MCP server to change | BooCode admin"
        fits = page.evaluate(
            """() => {
                const table = document.querySelector('#result_list');
                const box = table.parentElement.getBoundingClientRect();
                return {page: document.documentElement.scrollWidth <= window.innerWidth,
                        table: table.getBoundingClientRect().right <= box.right + 1,
                        scroll: table.parentElement.scrollWidth <= table.parentElement.clientWidth};
            }"""
        )
        assert fits == {"page": True, "table": True, "scroll": True}
        page.close()


@pytest.mark.django_db
def test_superseded_messages_stay_visible_in_the_admin(admin_client: Client) -> None:
    from django.utils import timezone

    from boocode.chat.models import Conversation, Message

    conversation = Conversation.objects.create(owner=get_user_model().objects.get(username="boss"))
    old = Message.objects.create(conversation=conversation, role="user", content="the first wording")
    Message.objects.filter(pk=old.pk).update(superseded_at=timezone.now())
    Message.objects.create(conversation=conversation, role="user", content="the second wording")
    change = reverse("admin:chat_conversation_change", args=[conversation.pk])
    page = admin_client.get(change).content.decode()
    assert "the first wording" in page and "the second wording" in page
    listing = admin_client.get(reverse("admin:chat_message_changelist"), {"superseded_at__isempty": "0"})
    assert listing.context["cl"].result_count == 1

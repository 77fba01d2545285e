"""The admin's own colours and sizes apply under the Content-Security-Policy (``style-src 'self'``):
they come from static/boocode/admin.css, so the browser refuses nothing and the server list's
states keep their colours, light and dark.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.browser import Site, screenshot

pytestmark = pytest.mark.browser

READY = {"light": "rgb(46, 125, 50)", "dark": "rgb(129, 199, 132)"}
FAILED = {"light": "rgb(198, 40, 40)", "dark": "rgb(239, 154, 154)"}


def _refusals(page: Any) -> list[str]:
    refused: list[str] = []
    page.on(
        "console",
        lambda message: refused.append(message.text) if "Content Security Policy" in message.text else None,
    )
    return refused


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_server_states_are_coloured_without_inline_styles(open_page: Any, site: Site, scheme: str) -> None:
    from playwright.sync_api import expect

    page = open_page(1280, scheme=scheme)
    refused = _refusals(page)
    site.db(
        "from mcpclient.models import McpServer\n"
        "McpServer.objects.filter(name='catalog').update(status='failed', last_error='test: it broke')\n"
        "tail = '\\n'.join(f'line {n}' for n in range(200))\n"
        "McpServer.objects.filter(name='toolbox').update(stderr_tail=tail)"
    )
    try:
        response = page.goto(f"{site.url}/admin/mcpclient/mcpserver/")
        assert "style-src 'self'" in response.headers["content-security-policy"]
        assert 'style="' not in response.text()
        ready = page.locator(".mcp-status-ready").first
        expect(ready).to_have_text("● ready")
        expect(ready).to_have_css("color", READY[scheme])
        expect(ready).to_have_css("font-weight", "700")
        expect(page.locator(".mcp-status-failed").first).to_have_css("color", FAILED[scheme])
        screenshot(page, f"admin-servers-{scheme}")

        # A server's page: the stderr tail scrolls in its box instead of stretching the form.
        toolbox = site.db(
            "from mcpclient.models import McpServer\nresult = McpServer.objects.get(name='toolbox').pk"
        )
        response = page.goto(f"{site.url}/admin/mcpclient/mcpserver/{toolbox}/change/")
        assert 'style="' not in response.text()
        stderr = page.locator(".mcp-stderr")
        expect(stderr).to_contain_text("line 199")
        expect(stderr).to_have_css("overflow-y", "auto")
        assert page.evaluate(
            "(p => p.scrollHeight > p.clientHeight + 100)(document.querySelector('.mcp-stderr'))"
        )
        assert refused == [], refused
    finally:
        site.db(
            "from mcpclient.models import McpServer\n"
            "McpServer.objects.filter(name='catalog').update(status='ready', last_error='')\n"
            "McpServer.objects.filter(name='toolbox').update(stderr_tail='')"
        )

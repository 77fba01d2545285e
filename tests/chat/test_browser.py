"""The chat page in Debian's Chromium (Playwright) against a live Daphne.

Daphne runs in a subprocess with its own data directory, the scripted LLM, the toolbox MCP
server and tests/servers/modern.py with its eliciting tools ("forms"), both over stdio (started
by the server's own hub). The viewport is a phone's (375 px).
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.browser import CHROMIUM, log_in
from tests.support.live import live_daphne, seed_migrated
from tests.support.llm import Call, ScriptedLLM, Stall, Text, ToolCalls
from tests.support.processes import PYTHON, ROOT, TOOLBOX, free_port

pytestmark = pytest.mark.browser

MODERN = ROOT / "tests" / "servers" / "modern.py"
PASSWORD = "browser-test-password"
XSS = "<img src=x onerror=\"window.__pwned='img'\"><script>window.__pwned='script'</script>"


class LiveServer:
    """Daphne on a fixed port; ``restart()`` drops every socket like a server restart does."""

    def __init__(self, env: dict[str, str], port: int, llm: ScriptedLLM) -> None:
        self.env, self.port, self.llm = env, port, llm
        self.url = f"http://127.0.0.1:{port}"
        self._running = contextlib.ExitStack()

    def start(self) -> None:
        self._running.enter_context(live_daphne(self.env, self.port, graceful=True))

    def stop(self) -> None:
        self._running.close()

    def restart(self) -> None:
        self.stop()
        self.start()


@pytest.fixture(scope="module")
def daphne_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """Daphne on a free port with the scripted LLM and the toolbox server."""
    if not Path(CHROMIUM).exists():
        pytest.skip("Chromium is not installed (make test-deps)")
    data = tmp_path_factory.mktemp("browser-data")
    forms = {"command": PYTHON, "args": [str(MODERN), "--stdio", "--elicit-tools"]}  # servers that elicit
    (data / "mcp.json").write_text(
        json.dumps({"mcpServers": {"toolbox": {"command": PYTHON, "args": [str(TOOLBOX)]}, "forms": forms}})
    )
    llm = ScriptedLLM(models=("test-model",)).start()
    env = {
        **os.environ,
        "BOOCODE_DATA_DIR": str(data),
        "BOOCODE_MCP_CONFIG": str(data / "mcp.json"),
        "BOOCODE_MCP_STDIO_COMMANDS": f"npx,uvx,node,{PYTHON}",
        "BOOCODE_MCP_AUTOSTART": "1",
        "BOOCODE_LLM_BASE_URL": llm.base_url,
        "BOOCODE_LLM_MODEL": "test-model",
        "BOOCODE_LLM_TIMEOUT": "30",
        "BOOCODE_ADMIN_PASSWORD": PASSWORD,
        "BOOCODE_ALLOWED_HOSTS": "127.0.0.1",
    }
    setup = (
        "import django; django.setup(); from django.core.management import call_command; "
        "call_command('migrate', interactive=False, verbosity=0); call_command('ensure_admin')"
    )
    seed_migrated(data, env)
    subprocess.run(
        [PYTHON, "-c", setup],
        cwd=ROOT,
        env={**env, "DJANGO_SETTINGS_MODULE": "tests.settings"},
        check=True,
        capture_output=True,
    )
    server = LiveServer(env, free_port(), llm)
    try:
        server.start()
        yield server
    finally:
        llm.release()
        server.stop()
        llm.stop()


@pytest.fixture
def page(browser: Any, daphne_server: LiveServer) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 375, "height": 740})
    context.set_default_timeout(15_000)
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    yield page
    context.close()
    assert errors == [], errors


def test_chat_in_a_real_browser(page: Any, daphne_server: LiveServer) -> None:
    from playwright.sync_api import expect

    expect.set_options(timeout=15_000)
    base, llm = daphne_server.url, daphne_server.llm
    page.goto(f"{base}/")
    assert "/login/" in page.url
    log_in(page, base, "admin", PASSWORD)
    page.click("#sidebar-toggle")  # the conversation list is a drawer at phone width
    page.click("#new-conversation")  # the landing: the first message creates the conversation

    # A streamed answer, rendered as Markdown once complete.
    llm.script(Text("Hello from **the model**.", chunk_size=3, delay=0.02))
    page.fill("#message-input", "Hi there")
    page.keyboard.press("Enter")
    expect(page.locator("#connection-state")).to_have_text("connected")
    expect(page.locator("#server-states .server-ready[data-name=toolbox]")).to_contain_text("toolbox: ready")
    expect(page.locator(".message.role-user").last).to_contain_text("Hi there")
    expect(page.locator(".message.role-assistant strong").last).to_have_text("the model")

    # A tool call against the real MCP server; hostile markup in tool and model output stays text.
    llm.script(ToolCalls([Call("toolbox_echo", {"text": XSS})]), Text(f"The tool said: {XSS}"))
    page.fill("#message-input", "echo this")
    page.click("#send-button")
    card = page.locator(".tool-card").last
    expect(card.locator(".tool-server")).to_have_text("toolbox")
    expect(card.locator(".tool-name")).to_have_text("echo")
    expect(card.locator(".badge")).to_have_text("done")
    card.locator("summary").click()
    expect(card.locator(".tool-output")).to_have_text(XSS)
    answer = page.locator(".message.role-assistant").last
    expect(answer).to_contain_text("The tool said: <img src=x")
    assert page.evaluate("window.__pwned") is None
    assert page.locator(".messages script, .message-body img").count() == 0

    # The tool console: an image from a tool result, shown as a data: URL.
    page.fill("#message-input", "/call toolbox_media")
    page.click("#send-button")
    image = page.locator(".tool-card img.tool-image").last
    expect(image).to_be_visible()
    assert image.get_attribute("src").startswith("data:image/png;base64,")

    # Reload mid-turn: the partial text is still there; then stop the turn.
    llm.script(Stall(text="I am thinking about", seconds=60))
    page.fill("#message-input", "think hard")
    page.click("#send-button")
    streaming = page.locator(".message.status-streaming")
    expect(streaming).to_contain_text("I am thinking about")
    page.reload()
    expect(page.locator(".message.status-streaming")).to_contain_text("I am thinking about")
    expect(page.locator("#stop-button")).to_be_visible()
    page.click("#stop-button")
    stopped = page.locator(".message.status-stopped")
    expect(stopped).to_contain_text("I am thinking about")
    expect(stopped.locator(".badge")).to_have_text("stopped")
    expect(page.locator("#stop-button")).to_be_hidden()
    llm.wait_until(lambda server: server.aborted_streams >= 1)

    # A dropped connection (here: the server restarts) comes back by itself, with the history.
    page.evaluate("document.querySelector('.message.role-user').classList.add('before-reconnect')")
    daphne_server.restart()
    expect(page.locator("#connection-state")).to_have_text("connected")
    expect(page.locator(".before-reconnect")).to_have_count(0)  # the list was rebuilt from history
    expect(page.locator(".message.status-stopped")).to_contain_text("I am thinking about")
    expect(page.locator(".message.role-user").first).to_contain_text("Hi there")

    # Phone width: nothing overflows sideways.
    assert page.evaluate("document.documentElement.scrollWidth") <= 375
    assert page.evaluate("window.__pwned") is None


def test_a_form_an_mcp_server_asks_for(page: Any, daphne_server: LiveServer) -> None:
    from playwright.sync_api import expect

    expect.set_options(timeout=15_000)
    base, llm = daphne_server.url, daphne_server.llm
    log_in(page, base, "admin", PASSWORD)
    page.click("#sidebar-toggle")
    page.click("#new-conversation")
    page.fill("#message-input", "/tools")  # the first message creates the conversation
    page.keyboard.press("Enter")
    expect(page.locator("#connection-state")).to_have_text("connected")
    expect(page.locator("#server-states .server-ready[data-name=forms]")).to_contain_text("forms: ready")
    # Answered: its turn has started, so the click below waits for the Send button to come back
    # (a message sent while a turn runs is refused and put back in the box).
    expect(page.locator(".message.role-notice")).to_contain_text("may use")

    llm.script(ToolCalls([Call("forms_ask_profile", {})]), Text("Thanks for telling me."))
    page.fill("#message-input", "ask me something")
    page.click("#send-button")
    form = page.locator("form.elicitation")
    expect(form).to_be_visible()
    # The server's text is shown as text: its markup is not interpreted.
    expect(form.locator(".elicitation-message")).to_have_text("Tell me about <b>you</b>")
    assert form.locator(".elicitation-message b").count() == 0
    expect(form.locator(".elicitation-from")).to_have_text("forms_ask_profile asks:")
    # One input per field, defaults filled in, the required one marked.
    expect(form.get_by_label("Age")).to_have_value("30")
    expect(form.get_by_label("Favourite colour")).to_have_value("green")
    expect(form.get_by_label("Subscribe")).not_to_be_checked()
    expect(form.locator(".field-string .required-mark")).to_have_count(1)
    expect(form.locator(".field-description")).to_have_text("As you like to be called")

    # Accepting without the required name: the server says why, the form stays.
    form.get_by_role("button", name="Accept").click()
    expect(form.locator(".elicitation-error")).to_contain_text('"Your name" is required')

    form.get_by_label("Your name").fill("Ada")
    form.get_by_label("Age").fill("41")
    form.get_by_label("Favourite colour").select_option("blue")
    form.get_by_label("Subscribe").check()
    form.get_by_role("button", name="Accept").click()
    expect(page.locator(".elicitation-done").last).to_have_text("You accepted.")
    expect(page.locator("form.elicitation")).to_have_count(0)
    card = page.locator(".tool-card").last
    expect(card.locator(".badge")).to_have_text("done")
    card.locator("summary").click()
    expect(card.locator(".tool-output")).to_have_text(
        'accept {"age": 41, "color": "blue", "name": "Ada", "subscribe": true}'
    )
    expect(page.locator(".message.role-assistant").last).to_contain_text("Thanks for telling me.")

    # Another form, declined.
    llm.script(ToolCalls([Call("forms_ask_profile", {})]), Text("Fine."))
    page.fill("#message-input", "ask again")
    page.click("#send-button")
    page.locator("form.elicitation").get_by_role("button", name="Decline").click()
    expect(page.locator(".elicitation-done").last).to_have_text("You declined.")
    expect(page.locator(".tool-card .tool-output").last).to_have_text("decline")
    assert page.evaluate("document.documentElement.scrollWidth") <= 375

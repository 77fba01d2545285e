"""The chat page in Debian's Chromium (Playwright) against one live Daphne for the whole session.

Daphne runs in a subprocess with its own data directory, the scripted LLM (tests/llm_server.py),
two real MCP servers over stdio (tests/servers/toolbox.py with its titled tools, and
tests/browser/catalog_server.py for structured results) and an AGENTS.md with two agents.
Users: ``admin`` (staff) and ``reader`` (not staff). Each test opens its own browser context at
the width it is parametrized with (375 px: a phone, 1280 px: a laptop), logs in, and fails if
the page threw an error. ``site.db(code)`` runs Django code on the server's database.
"""

from __future__ import annotations

import contextlib
import http.cookiejar
import json
import os
import re
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.chat.test_browser import CHROMIUM, CHROMIUM_ARGS
from tests.conftest import PYTHON, ROOT, TOOLBOX, free_port, wait_for_port
from tests.llm_server import ScriptedLLM, Text

PASSWORD = "browser-page-password"
SCREENSHOTS = Path("/tmp/boocode-screenshots")
CATALOG = Path(__file__).resolve().parent / "catalog_server.py"
WIDTHS = [375, 1280]
HEIGHTS = {375: 740, 1280: 800}
NODE_MODULES = ROOT / "tests" / "node" / "node_modules"
AGENTS = """\
## Assistant
---
description: General assistant that may use every tool
---
You are a test assistant.

## Clerk
---
description: Keeps the catalogue; uses only the catalog server
tools: [catalog_*]
---
You keep the catalogue.
"""
XSS = "<img src=x onerror=\"window.__pwned='img'\"><script>window.__pwned='script'</script>"

_SETUP = """
import django
django.setup()
from django.contrib.auth import get_user_model
from django.core.management import call_command
call_command("migrate", interactive=False, verbosity=0)
call_command("ensure_admin")
get_user_model().objects.create_user("reader", password=%r)
"""


@dataclass
class Site:
    """The running server: its address, the scripted model, and its database."""

    url: str
    port: int
    llm: ScriptedLLM
    env: dict[str, str]
    data: Path
    process: subprocess.Popen[bytes]

    def db(self, code: str) -> Any:
        """Run ``code`` (Django set up) in another process; it sets ``result`` (JSON-able), returned."""
        script = (
            f"import django, json\ndjango.setup()\nresult = None\n{code}\n"
            "print(json.dumps(result, default=str))"
        )
        done = subprocess.run(
            [PYTHON, "-c", script],
            cwd=ROOT,
            env={**self.env, "DJANGO_SETTINGS_MODULE": "boocode.settings"},
            check=True,
            capture_output=True,
            text=True,
        )
        return json.loads(done.stdout.strip().splitlines()[-1])

    def conversation(self, conversation_id: int) -> dict[str, Any] | None:
        """The stored conversation's title, agent and model, or None when it is gone."""
        return self.db(
            "from boocode.chat.models import Conversation\n"
            f"result = Conversation.objects.filter(pk={conversation_id})"
            ".values('title', 'agent_name', 'model').first()"
        )

    def write_agents(self, text: str) -> None:
        (self.data / "AGENTS.md").write_text(text)

    def servers_offering(self) -> set[str]:
        """The MCP servers whose tools the agents are offered now, as the page's agent list says.

        Asks ``/api/agents/`` as ``admin``, which applies an edited mcp.json first.
        """
        jar = http.cookiejar.CookieJar()
        opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
        opener.open(f"{self.url}/login/", timeout=30).read()
        token = next(cookie.value for cookie in jar if cookie.name == "csrftoken")
        form = urllib.parse.urlencode(
            {"username": "admin", "password": PASSWORD, "csrfmiddlewaretoken": token}
        )
        request = urllib.request.Request(
            f"{self.url}/login/", data=form.encode(), headers={"Referer": f"{self.url}/login/"}
        )
        opener.open(request, timeout=30).read()
        with opener.open(f"{self.url}/api/agents/", timeout=60) as response:
            agents = json.load(response)["agents"]
        return {tool["server"] for agent in agents for tool in agent["tools"] if tool["server"]}

    @contextlib.contextmanager
    def with_servers(self, entries: dict[str, dict[str, Any]], timeout: float = 90.0) -> Iterator[None]:
        """mcp.json with ``entries`` added while the block runs; their tools are offered when it starts.

        The web process applies an edited mcp.json at its next request and connects an added
        server in the background, so a test that used it at once would race its start. Leaving
        the block puts the file back and waits until the added servers are gone, so the next
        test starts from the site's own servers.
        """
        path = self.data / "mcp.json"
        original = path.read_text()
        servers = json.loads(original)
        servers["mcpServers"].update(entries)
        path.write_text(json.dumps(servers))
        try:
            self._wait_for_servers(lambda offered: set(entries) <= offered, timeout)
            yield
        finally:
            path.write_text(original)
            self._wait_for_servers(lambda offered: not set(entries) & offered, timeout)

    def _wait_for_servers(self, done: Callable[[set[str]], bool], timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not done(offered := self.servers_offering()):
            if time.monotonic() > deadline:
                raise AssertionError(f"MCP servers offered after {timeout:.0f} s: {sorted(offered)}")
            time.sleep(0.2)  # polling the page's own endpoint; each answer reflects the hub's state


@pytest.fixture(scope="session")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    if not Path(CHROMIUM).exists():
        pytest.skip("Chromium is not installed (make test-deps)")
    data = tmp_path_factory.mktemp("browser-page")
    servers = {
        "toolbox": {"command": PYTHON, "args": [str(TOOLBOX), "--titled-tools"]},
        "catalog": {"command": PYTHON, "args": [str(CATALOG)]},
    }
    (data / "mcp.json").write_text(json.dumps({"mcpServers": servers}))
    (data / "AGENTS.md").write_text(AGENTS)
    # Requests nobody scripted (a title asked of the model, say) get a short answer, not a hang.
    llm = ScriptedLLM(
        models=("test-model", "other-model"), responder=lambda body: Text("(unscripted)")
    ).start()
    env = {
        **os.environ,
        "BOOCODE_DATA_DIR": str(data),
        "BOOCODE_MCP_CONFIG": str(data / "mcp.json"),
        "BOOCODE_AGENTS_FILE": str(data / "AGENTS.md"),
        "BOOCODE_MCP_STDIO_COMMANDS": f"npx,uvx,node,{PYTHON}",
        "BOOCODE_MCP_AUTOSTART": "1",
        "BOOCODE_LLM_BASE_URL": llm.base_url,
        "BOOCODE_LLM_MODEL": "test-model",
        "BOOCODE_LLM_TIMEOUT": "30",
        "BOOCODE_LLM_CHECK_INTERVAL": "5",
        "BOOCODE_ADMIN_PASSWORD": PASSWORD,
        "BOOCODE_ALLOWED_HOSTS": "127.0.0.1",
    }
    subprocess.run(
        [PYTHON, "-c", _SETUP % PASSWORD],
        cwd=ROOT,
        env={**env, "DJANGO_SETTINGS_MODULE": "boocode.settings"},
        check=True,
        capture_output=True,
    )
    port = free_port()
    log = (data / "daphne.log").open("wb")
    process = subprocess.Popen(
        [PYTHON, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port), "boocode.asgi:application"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=log,
        start_new_session=True,
    )
    running = Site(f"http://127.0.0.1:{port}", port, llm, env, data, process)
    try:
        wait_for_port(port, process)
        yield running
    finally:
        running.llm.release()
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()
        running.llm.stop()


def release(llm: ScriptedLLM) -> None:
    """Let stalled streams go on, then re-arm: the next ``Stall`` of the session stalls again.

    (ScriptedLLM's release is for good; both steps run in order on its loop, and the waiting
    streams are already woken when the event is cleared.)
    """
    llm.release()
    llm._loop.call_soon_threadsafe(llm._release.clear)


@pytest.fixture(autouse=True)
def fresh_script(site: Site) -> Iterator[None]:
    """Replies one test scripted and did not use never reach the next test."""
    yield
    with site.llm._lock:
        site.llm._queue.clear()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    # Module scope: the sync API runs an event loop while it is open, and other test modules
    # (and pytest-asyncio) need the thread without one.
    from playwright.sync_api import expect, sync_playwright

    expect.set_options(timeout=20_000)
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


@pytest.fixture
def open_page(browser: Any, site: Site) -> Iterator[Callable[..., Any]]:
    """``open_page(width, user="admin", scheme="light")``: a logged-in page on the chat."""
    contexts: list[Any] = []
    errors: list[str] = []

    def opener(width: int, user: str = "admin", scheme: str = "light", **options: Any) -> Any:
        context = browser.new_context(
            viewport={"width": width, "height": HEIGHTS.get(width, 800)}, color_scheme=scheme, **options
        )
        context.set_default_timeout(20_000)
        contexts.append(context)
        page = context.new_page()
        page.on("pageerror", lambda error: errors.append(str(error)))
        page.goto(f"{site.url}/login/")
        page.fill("input[name=username]", user)
        page.fill("input[name=password]", PASSWORD)
        page.click("button[type=submit]")
        page.wait_for_url(lambda url: "/login/" not in url)
        return page

    yield opener
    for context in contexts:
        context.close()
    assert errors == [], errors


def landing(page: Any, site: Site) -> None:
    """Show the landing (a new conversation not created yet) with "New conversation"."""
    from playwright.sync_api import expect

    page.goto(f"{site.url}/")
    if page.locator("#chat[data-conversation]").count():
        open_drawer(page)
        page.click("#new-conversation")
    expect(page.locator("#conversation-title")).to_have_text("New conversation")
    expect(page.locator("#chat")).not_to_have_attribute("data-conversation", re.compile(".*"))


def start_conversation(page: Any, text: str) -> int:
    """Send the first message from the landing; the id of the conversation it created."""
    page.fill("#message-input", text)
    page.keyboard.press("Enter")
    page.wait_for_url(lambda url: "/c/" in url and url.rstrip("/").split("/")[-1].isdigit())
    return int(page.url.rstrip("/").split("/")[-1])


def open_drawer(page: Any) -> None:
    """At phone width the conversation list is a drawer: open it."""
    if page.viewport_size["width"] < 800 and not page.locator("#sidebar.open").count():
        page.click("#sidebar-toggle")
        page.locator("#sidebar.open").wait_for()


def screenshot(page: Any, name: str) -> None:
    """Save the viewport as /tmp/boocode-screenshots/<name>-<width>.png once transitions have ended."""
    SCREENSHOTS.mkdir(exist_ok=True)
    # (evaluate, not wait_for_function: the page's CSP refuses the eval that one uses)
    page.evaluate(
        "Promise.all(document.getAnimations().filter(a => a.effect.getTiming().iterations !== Infinity)"
        ".map(a => a.finished.catch(() => null)))"
    )
    page.screenshot(path=str(SCREENSHOTS / f"{name}-{page.viewport_size['width']}.png"))


# Visible elements sticking out of the viewport sideways (those inside a box that scrolls or
# clips are that box's business), and the page's own columns scrolling sideways.
_OVERFLOW = """async () => {
  // A box sliding in or out (the sidebar's transition) is measured where it comes to rest.
  const ending = document.getAnimations().filter(
    (motion) => motion.effect && motion.effect.getComputedTiming().endTime !== Infinity);
  await Promise.all(ending.map((motion) => motion.finished.catch(() => null)));
  const width = document.documentElement.clientWidth;
  const out = [];
  const page = document.documentElement.scrollWidth;
  if (page > width) out.push(`page scrollWidth ${page}`);
  const columns = '#messages, .sidebar, .topbar, .composer, .statusline, .message, .tool-card';
  for (const box of document.querySelectorAll(columns)) {
    if (box.scrollWidth > box.clientWidth + 1) {
      out.push(`${box.id || box.className} scrolls sideways: ${box.scrollWidth} > ${box.clientWidth}`);
    }
  }
  const clips = ['auto', 'scroll', 'hidden', 'clip'];
  for (const node of document.querySelectorAll('body *')) {
    const box = node.getBoundingClientRect();
    if (!box.width || !box.height || getComputedStyle(node).visibility === 'hidden') continue;
    let clipped = false;
    for (let up = node.parentElement; up && up !== document.body; up = up.parentElement) {
      if (clips.includes(getComputedStyle(up).overflowX)) { clipped = true; break; }
    }
    if (!clipped && (box.right > width + 1 || box.left < -1)) {
      const name = `${node.tagName.toLowerCase()}#${node.id}.${[...node.classList].join('.')}`;
      out.push(`${name} ${Math.round(box.left)}..${Math.round(box.right)}`);
    }
  }
  return out;
}"""


def overflowing(page: Any) -> list[str]:
    """What sticks out of the viewport sideways (an empty list when nothing does)."""
    return page.evaluate(_OVERFLOW)

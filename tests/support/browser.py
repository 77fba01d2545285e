"""The chat page in Debian's Chromium (Playwright): the browser, the live sites it opens, page helpers.

A site (:class:`Site`) is one live Daphne (:func:`tests.support.live.live_daphne`) with its own
data directory: an mcp.json, an AGENTS.md, the scripted model (tests/support/llm.py) and two
users, ``admin`` (staff, made by ``ensure_admin``) and ``reader`` (not staff), both with
:data:`PASSWORD`. :func:`running_site` runs one for as long as its generator is open; the
browser tests' conftest runs the session's site with it, and a module that needs other servers
overrides the ``site`` fixture with its own (:func:`questions_site` for the questions tests).

Page helpers take a Playwright page: :func:`landing`, :func:`send`, :func:`start_conversation`,
:func:`log_in` (the one way a browser test logs in; ``open_page`` uses it), :func:`open_drawer`,
:func:`screenshot`, :func:`overflowing` (what sticks out sideways),
:func:`serious_violations` (axe-core, tests/node).
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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.support.live import PASSWORD as LIVE_PASSWORD
from tests.support.live import live_daphne, seed_migrated
from tests.support.llm import Call, ScriptedLLM, Text, ToolCalls
from tests.support.processes import PYTHON, ROOT, TOOLBOX

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
PASSWORD = "browser-page-password"
SCREENSHOTS = Path("/tmp/boocode-screenshots")
CATALOG = ROOT / "tests" / "browser" / "catalog_server.py"
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

# Site.db's process: one JSON-encoded piece of code a line in, one JSON reply a line out.
_DB_LOOP = """
import json, sys, traceback
import django
django.setup()
for line in sys.stdin:
    scope = {"result": None}
    try:
        exec(json.loads(line), scope)
        reply = {"result": scope["result"]}
    except Exception:
        reply = {"error": traceback.format_exc()}
    print(json.dumps(reply, default=str), flush=True)
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
    _db: subprocess.Popen[str] | None = field(default=None, repr=False)

    def db(self, code: str) -> Any:
        """Run ``code`` (Django set up) in another process; it sets ``result`` (JSON-able), returned.

        One process per site answers every call (a Django start-up costs seconds; a call,
        milliseconds): it reads the site's database as the server has committed it.
        """
        if self._db is None:
            self._db = subprocess.Popen(
                [PYTHON, "-c", _DB_LOOP],
                cwd=ROOT,
                env={**self.env, "DJANGO_SETTINGS_MODULE": "tests.settings"},
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
            )
        assert self._db.stdin is not None and self._db.stdout is not None
        self._db.stdin.write(json.dumps(code) + "\n")
        self._db.stdin.flush()
        answer = self._db.stdout.readline()
        if not answer:
            raise RuntimeError(f"the site's database process ended (exit {self._db.wait()})")
        reply = json.loads(answer)
        if "error" in reply:
            raise RuntimeError(f"site.db code failed:\n{reply['error']}")
        return reply["result"]

    def close(self) -> None:
        """Stop the database process, if one was started."""
        if self._db is not None:
            assert self._db.stdin is not None
            self._db.stdin.close()
            self._db.wait(10)
            self._db = None

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


def running_site(
    data: Path,
    servers: dict[str, dict[str, Any]],
    agents: str,
    *,
    models: tuple[str, ...] = ("test-model",),
    env: dict[str, str] | None = None,
) -> Iterator[Site]:
    """A live site in ``data``: ``servers`` in its mcp.json, ``agents`` its AGENTS.md; stopped when closed.

    The scripted model offers ``models`` (the first is the default) and answers what nobody
    scripted (a title asked of the model, say) with a short text, not a hang; ``env`` adds
    settings. Skips the test when Chromium is not installed.
    """
    if not Path(CHROMIUM).exists():
        pytest.skip("Chromium is not installed (make test-deps)")
    (data / "mcp.json").write_text(json.dumps({"mcpServers": servers}))
    (data / "AGENTS.md").write_text(agents)
    llm = ScriptedLLM(models=models, responder=lambda body: Text("(unscripted)")).start()
    full_env = {
        **os.environ,
        "BOOCODE_DATA_DIR": str(data),
        "BOOCODE_MCP_CONFIG": str(data / "mcp.json"),
        "BOOCODE_AGENTS_FILE": str(data / "AGENTS.md"),
        "BOOCODE_MCP_STDIO_COMMANDS": f"npx,uvx,node,{PYTHON}",
        "BOOCODE_MCP_AUTOSTART": "1",
        "BOOCODE_LLM_BASE_URL": llm.base_url,
        "BOOCODE_LLM_MODEL": models[0],
        "BOOCODE_LLM_TIMEOUT": "30",
        "BOOCODE_ADMIN_PASSWORD": PASSWORD,
        "BOOCODE_ALLOWED_HOSTS": "127.0.0.1",
        **(env or {}),
    }
    try:
        seed_migrated(data, full_env)
        subprocess.run(
            [PYTHON, "-c", _SETUP % PASSWORD],
            cwd=ROOT,
            env={**full_env, "DJANGO_SETTINGS_MODULE": "tests.settings"},
            check=True,
            capture_output=True,
        )
        with live_daphne(full_env, log=data / "daphne.log", graceful=True) as (process, port):
            site = Site(f"http://127.0.0.1:{port}", port, llm, full_env, data, process)
            try:
                yield site
            finally:
                site.close()
                llm = site.llm  # a test may have put another model server in its place
                llm.release()  # stalled streams end, so Daphne stops at once
    finally:
        llm.stop()


HANDSHAKE_TOOLBOX = ROOT / "tests" / "servers" / "handshake_toolbox.py"
QUESTIONS = {  # the toolbox's "questions" group at both revisions: 2026-07-28 and 2025-11-25
    "q26": {"command": PYTHON, "args": [str(TOOLBOX), "--feature", "questions"]},
    "q25": {"command": PYTHON, "args": [str(HANDSHAKE_TOOLBOX), "--feature", "questions"]},
}


def questions_site(data: Path, *, elicitation_timeout: float) -> Iterator[Site]:
    """A site for the question (elicitation) tests: the questions servers, the time limit given."""
    yield from running_site(
        data,
        QUESTIONS,
        "## Assistant\n---\ndescription: Uses every tool\n---\nYou are a test assistant.\n",
        env={"BOOCODE_ELICITATION_TIMEOUT": f"{elicitation_timeout:g}"},
    )


def ask(page: Any, site: Site, tool: str, reply: str, arguments: dict[str, Any] | None = None) -> None:
    """Start a conversation in which the model calls ``tool`` and then says ``reply``."""
    from playwright.sync_api import expect

    landing(page, site)
    agent = page.get_by_role("region", name="Agent: Assistant")  # lists the tools of ready servers
    expect(agent).to_contain_text(re.compile(r"\d+ from q25 \(shared\), \d+ from q26 \(shared\)"))
    site.llm.script(ToolCalls([Call(tool, arguments or {})]), Text(reply))
    start_conversation(page, "ask me")


def tool_output(site: Site) -> str:
    """What the model was told the tool returned (the scripted model's last request)."""
    messages = site.llm.requests[-1]["messages"]
    return next(m["content"] for m in reversed(messages) if m["role"] == "tool")


def log_in(page: Any, base: str, user: str, password: str = PASSWORD) -> None:
    """Log ``user`` in on the login page of the server at ``base``; returns once the page left it."""
    page.goto(f"{base}/login/")
    page.fill("input[name=username]", user)
    page.fill("input[name=password]", password)
    page.click("button[type=submit]")
    page.wait_for_url(lambda url: "/login/" not in url)


def signed_in_page(browser: Any, base: str, user: str, width: int, password: str = LIVE_PASSWORD) -> Any:
    """A page of a new browser context ``width`` pixels wide, ``user`` logged in at ``base`` (with the
    password of the accounts :func:`tests.support.live.live_server` creates)."""
    context = browser.new_context(viewport={"width": width, "height": 900})
    context.set_default_timeout(15_000)
    page = context.new_page()
    log_in(page, base, user, password)
    return page


def landing(page: Any, site: Site) -> None:
    """Show the landing (a new conversation not created yet) with "New conversation"."""
    from playwright.sync_api import expect

    page.goto(f"{site.url}/")
    if page.locator("#chat[data-conversation]").count():
        open_drawer(page)
        page.click("#new-conversation")
    expect(page.locator("#conversation-title")).to_have_text("New conversation")
    expect(page.locator("#chat")).not_to_have_attribute("data-conversation", re.compile(".*"))


def send(page: Any, text: str) -> None:
    """Type ``text`` and send it with Enter, once the page shows no turn running.

    A turn's last words arrive before the frame that ends it, and Enter does nothing while a
    turn runs (Send is Stop then): the wait is on the Send button, which comes back with the end.
    """
    from playwright.sync_api import expect

    expect(page.locator("#send-button")).to_be_visible()
    page.fill("#message-input", text)
    page.keyboard.press("Enter")


def start_conversation(page: Any, text: str) -> int:
    """Send the first message from the landing; the id of the conversation it created."""
    send(page, text)
    page.wait_for_url(lambda url: "/c/" in url and url.rstrip("/").split("/")[-1].isdigit())
    return int(page.url.rstrip("/").split("/")[-1])


def search_resources(page: Any, query: str, shows: str) -> Any:
    """Type ``query`` into the open resource picker; its one option, once the search has answered.

    The list the picker opened with stays clickable until the answer replaces it (on purpose: a
    click is not lost to a list replaced under the pointer), so a test waits for the answer.
    """
    from playwright.sync_api import expect

    options = page.locator("#resource-picker .resource-option")
    page.fill("#resource-search", query)
    expect(options).to_have_count(1)
    expect(options.first).to_contain_text(shows)
    return options.first


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


AXE = NODE_MODULES / "axe-core" / "axe.min.js"


def serious_violations(page: Any) -> list[str]:
    """axe's serious and critical violations on the page as it is now, one line per element."""
    if not page.evaluate("typeof window.axe === 'object'"):
        page.evaluate(AXE.read_text())
    results = page.evaluate("axe.run(document, {resultTypes: ['violations']})")
    found = []
    for violation in results["violations"]:
        if violation["impact"] in ("serious", "critical"):
            for node in violation["nodes"]:
                found.append(
                    f"{violation['id']} ({violation['impact']}): {node['target']} {node['failureSummary']}"
                )
    return found

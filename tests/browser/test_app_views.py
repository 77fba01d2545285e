"""MCP Apps on the page: published App servers' views rendered in the conversation, sandboxed.

The site's mcp.json gets ``@modelcontextprotocol/server-basic-vanillajs`` and
``@modelcontextprotocol/server-system-monitor`` (pinned in tests/node/package.json, run with node
over stdio) for the test. The scripted model calls a tool; the view, in its frame below the card,
receives the call's result from the page through the official bridge, shows it, calls its own
server's tools through the page (the basic view's "Get Server Time", the monitor's polling of its
views-only ``poll-system-stats``), proposes a message the person sends with a click, and the
frame takes the height the view asks for. A reloaded page shows the view again from the stored
result, without calling the tool again.

Our own views (the toolbox's apps group) play the hostile part: what a view must not reach, what
it must not call, approving its own write call, a flood of messages, a 50 MB resource.
"""

from __future__ import annotations

import re
import socket
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.browser import (
    AXE,
    NODE_MODULES,
    WIDTHS,
    Site,
    landing,
    overflowing,
    screenshot,
    send,
    serious_violations,
    start_conversation,
)
from tests.support.llm import Call, Text, ToolCalls
from tests.support.processes import PYTHON, TOOLBOX

pytestmark = pytest.mark.browser

BASIC = NODE_MODULES / "@modelcontextprotocol" / "server-basic-vanillajs" / "dist" / "index.js"
MONITOR = NODE_MODULES / "@modelcontextprotocol" / "server-system-monitor" / "dist" / "index.js"
ISO_TIME = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}")


@pytest.fixture
def basic_server(site: Site) -> Iterator[None]:
    """The site with the published basic App server (``basic``) for this test only; its tools
    declare no annotations, and the entry vouches for the one that reads the time."""
    entry = {"command": "node", "args": [str(BASIC), "--stdio"], "readOnly": ["get-time"]}
    with site.with_servers({"basic": entry}):
        yield


@pytest.mark.parametrize("width", WIDTHS)
def test_a_published_apps_view_shows_the_calls_result_in_a_sandboxed_frame(
    open_page: Any, site: Site, width: int, basic_server: None
) -> None:
    from playwright.sync_api import expect

    page = open_page(width)
    landing(page, site)
    site.llm.script(ToolCalls([Call("basic_get-time", {})]), Text("That is the time."))
    start_conversation(page, "What time is it there?")
    expect(page.locator(".message.role-assistant").last).to_contain_text("That is the time.")

    frame = page.locator(".app-view-frame")
    expect(frame).to_have_count(1)
    assert frame.get_attribute("sandbox") == "allow-scripts"  # an opaque origin: never BooCode's
    view = page.frame_locator(".app-view-frame")
    shown = view.locator("#server-time")
    expect(shown).to_have_text(ISO_TIME)  # the result's structuredContent, delivered by the page
    time_shown = shown.inner_text()
    card = page.locator(".tool-card", has=page.locator(".tool-server", has_text="basic"))
    expect(card.locator(".tool-result")).to_contain_text(time_shown)  # the same call's result

    # The frame takes the height the view asked for (its content), within the page's bounds.
    expect(frame).not_to_have_css("height", "120px")
    height = frame.bounding_box()["height"]
    assert 60 <= height <= 800, height
    assert overflowing(page) == []
    if AXE.exists():  # the page around the frame (the frame is titled; its inside is the server's)
        assert serious_violations(page) == []
    screenshot(page, "app-view")

    # The view calls its server's tool through the page: a new time, the card's stays.
    view.locator("#get-time-btn").click()
    expect(shown).not_to_have_text(time_shown)
    expect(shown).to_have_text(ISO_TIME)
    expect(card.locator(".tool-result")).to_contain_text(time_shown)

    # A message the view proposes is shown, and sent only when the person clicks Send.
    view.locator("#message-text").fill("Hello from the view")
    view.locator("#send-message-btn").click()
    offer = page.locator(".app-view-offer")
    expect(offer).to_contain_text("The view asks to send this message:")
    expect(offer.locator(".app-view-quote")).to_have_text("Hello from the view")
    expect(page.locator(".message.role-user")).to_have_count(1)  # nothing sent yet
    assert overflowing(page) == []
    if AXE.exists():
        assert serious_violations(page) == []
    screenshot(page, "app-view-message")
    site.llm.script(Text("Hello, view."))
    offer.get_by_role("button", name="Send").click()
    expect(offer).to_have_count(0)
    expect(page.locator(".message.role-user").last).to_contain_text("Hello from the view")
    expect(page.locator(".message.role-assistant").last).to_contain_text("Hello, view.")

    # Reloaded: the view again, from the stored result (a new call would give another time).
    page.reload()
    expect(page.frame_locator(".app-view-frame").locator("#server-time")).to_have_text(time_shown)


@pytest.fixture
def monitor_server(site: Site) -> Iterator[None]:
    """The site with the published system monitor App server (``monitor``) for this test only; its
    tools declare no annotations, and the entry vouches for the two that read the machine's state."""
    entry = {
        "command": "node",
        "args": [str(MONITOR), "--stdio"],
        "readOnly": ["get-system-info", "poll-system-stats"],
    }
    with site.with_servers({"monitor": entry}):
        yield


@pytest.mark.parametrize("width", WIDTHS)
def test_a_published_view_polls_its_servers_views_only_tool_through_the_page(
    open_page: Any, site: Site, width: int, monitor_server: None
) -> None:
    from playwright.sync_api import expect

    page = open_page(width)
    landing(page, site)
    site.llm.script(ToolCalls([Call("monitor_get-system-info", {})]), Text("Here is the machine."))
    start_conversation(page, "How is the machine doing?")
    expect(page.locator(".message.role-assistant").last).to_contain_text("Here is the machine.")
    view = page.frame_locator(".app-view-frame")
    expect(view.locator("#info-hostname")).not_to_be_empty()  # the result, from the page
    # poll-system-stats is for views only ("visibility": ["app"]): the model was never offered it,
    # and the view's polls reach it through the page's socket.
    offered = [tool["function"]["name"] for tool in site.llm.requests[-1].get("tools", [])]
    assert "monitor_get-system-info" in offered and "monitor_poll-system-stats" not in offered
    expect(view.locator("#memory-percent")).to_contain_text("%", timeout=15_000)
    expect(view.locator("#status-text")).to_have_text(re.compile(r"^\d{2}:\d{2}:\d{2}$"))
    height = page.locator(".app-view-frame").bounding_box()["height"]
    assert 60 <= height <= 800, height
    assert overflowing(page) == []
    screenshot(page, "app-view-monitor")

    # From the tool console too: the call's card shows its own view.
    send(page, "/call monitor_get-system-info")
    expect(page.locator(".app-view-frame")).to_have_count(2)
    expect(page.frame_locator(".app-view-frame >> nth=1").locator("#info-hostname")).not_to_be_empty()


# Where the view's frame ends, scrolled to the bottom of the message list's visible part, once
# the frame has taken its height (its transition ended).
_VIEW_AT_THE_BOTTOM = """async () => {
  await Promise.all(document.getAnimations().map((motion) => motion.finished.catch(() => null)));
  const list = document.getElementById('messages');
  const frame = document.querySelector('.app-view-frame');
  list.scrollTop += frame.getBoundingClientRect().bottom - list.getBoundingClientRect().bottom;
}"""


def _overlap(a: dict[str, float], b: dict[str, float]) -> bool:
    return (
        a["x"] < b["x"] + b["width"]
        and b["x"] < a["x"] + a["width"]
        and a["y"] < b["y"] + b["height"]
        and b["y"] < a["y"] + a["height"]
    )


@pytest.mark.parametrize("width", WIDTHS)
def test_the_view_stands_for_the_result_and_the_raw_data_is_folded_under_it(
    open_page: Any, site: Site, width: int, monitor_server: None
) -> None:
    """The monitor's result is a large structured one (tables, a tree): the view comes first in
    the card, the raw result under it, closed; Latest never covers the view's bottom."""
    from playwright.sync_api import expect

    page = open_page(width)
    landing(page, site)
    answer = "Here is the machine.\n\n" + "\n\n".join(f"Reading {n}: steady." for n in range(30))
    site.llm.script(ToolCalls([Call("monitor_get-system-info", {})]), Text(answer))
    start_conversation(page, "How is the machine doing?")
    expect(page.locator(".message.role-assistant").last).to_contain_text("Reading 29: steady.")
    card = page.locator(".tool-card")
    view = page.frame_locator(".app-view-frame")
    expect(view.locator("#info-hostname")).not_to_be_empty()
    expect(view.locator("#memory-percent")).to_contain_text("%", timeout=15_000)  # polled: all drawn
    # (Chromium draws a frame of another origin only once it is on screen: then the view sizes it.)
    card.locator(".app-view-frame").scroll_into_view_if_needed()
    expect(card.locator(".app-view-frame")).not_to_have_css("height", "120px")

    # The view first (after the call's name and arguments), the raw result folded under it.
    parts = card.evaluate("card => [...card.children].map(child => child.classList[0])")
    assert parts == ["tool-head", "tool-args", "app-view", "tool-raw"], parts
    raw = card.locator(".tool-raw")
    expect(raw).not_to_have_attribute("open", re.compile(".*"))
    expect(raw.locator("summary")).to_have_text("Raw result")
    expect(raw.locator(".structured").first).to_be_hidden()
    frame_box = card.locator(".app-view-frame").bounding_box()
    assert frame_box["y"] + frame_box["height"] <= raw.bounding_box()["y"]
    assert overflowing(page) == []
    if AXE.exists():
        assert serious_violations(page) == []

    # Scrolled up to the view's bottom edge: Latest is offered and covers none of the view (on a
    # phone it takes a row of its own, over nothing of the list).
    page.evaluate(_VIEW_AT_THE_BOTTOM)
    latest = page.locator("#jump-latest")
    expect(latest).to_be_visible()
    button = latest.bounding_box()
    assert not _overlap(button, card.locator(".app-view-frame").bounding_box()), button
    if width < 800:
        assert not _overlap(button, page.locator("#messages").bounding_box()), button
    screenshot(page, "app-view-first")

    # The raw result opens on a click.
    raw.locator("summary").click()
    expect(raw.locator(".structured").first).to_be_visible()
    assert overflowing(page) == []
    screenshot(page, "app-view-raw-open")
    latest.click()
    expect(latest).to_be_hidden()


@pytest.fixture
def apps_toolbox(site: Site) -> Iterator[None]:
    """The site with the toolbox's apps group (``boxapps``: views of our own, hostile ones among
    them; its write tool behind approval)."""
    entry = {"command": PYTHON, "args": [str(TOOLBOX), "--feature", "apps"], "writeTools": "approve"}
    with site.with_servers({"boxapps": entry}):
        yield


def test_a_hostile_view_reaches_nothing_outside_its_frame(
    open_page: Any, site: Site, apps_toolbox: None
) -> None:
    """Cookies, storage, the page, top navigation, pop-ups, undeclared origins: each refused."""
    from playwright.sync_api import expect

    page = open_page(1280)
    landing(page, site)
    page.evaluate("localStorage.setItem('anything', 'secret')")
    site.llm.script(ToolCalls([Call("boxapps_hostile_view", {})]), Text("Shown."))
    start_conversation(page, "Show the hostile view")
    here = page.url
    view = page.frame_locator(".app-view-frame")
    for name in ("cookie", "storage", "page", "navigate", "popup", "fetch"):
        expect(view.locator(f"#{name}")).to_contain_text(f"{name}: refused")
    expect(page.locator(".message.role-assistant").last).to_contain_text("Shown.")
    assert page.url == here and len(page.context.pages) == 1  # not navigated, no window opened


def test_a_view_calls_only_what_views_may_and_cannot_approve_its_own_write(
    open_page: Any, site: Site, apps_toolbox: None
) -> None:
    """Its server's views-only tool, not a model-only one, not another server's; a 50 MB resource
    refused; a write waits for the person, whatever the view posts to the page."""
    from playwright.sync_api import expect

    page = open_page(1280)
    landing(page, site)
    site.llm.script(ToolCalls([Call("boxapps_caller_view", {})]), Text("Shown."))
    start_conversation(page, "Show the caller view")
    view = page.frame_locator(".app-view-frame")
    expect(view.locator("#tick")).to_contain_text('tick: ok {"content":[{"type":"text","text":"tick"}]')
    expect(view.locator("#model_only")).to_contain_text("model_only: refused")
    expect(view.locator("#model_only")).to_contain_text("is for the model only, not for views")
    expect(view.locator("#other_server")).to_contain_text('has no tool "toolbox_echo" that a view may call')
    expect(view.locator("#huge")).to_contain_text("over the 16.0 MB limit")

    # The host context: the theme and every style variable of the spec, from the page's colours.
    expect(view.locator("#theme")).to_have_text("theme: light 76 #ffffff")  # (the spec names 76)

    # Fullscreen when the person allows it (the card names the server), told to the view, with
    # a way back (Escape here; the button in the fullscreen test).
    ask = page.locator(".app-view-ask")
    expect(ask).to_have_text(re.compile(r"^boxapps asks to fill the window"))
    expect(view.locator("#fullscreen")).to_have_count(0)  # the request waits for the person
    expect(page.locator(".app-view-fullscreen")).to_have_count(0)
    ask.get_by_role("button", name="Allow").click()
    expect(view.locator("#fullscreen")).to_contain_text('fullscreen: ok {"mode":"fullscreen"}')
    expect(view.locator("#context")).to_have_text('context: "fullscreen"')
    expect(view.locator("#socket")).to_contain_text("socket: refused")
    box = page.locator(".app-view-fullscreen").bounding_box()
    assert (box["width"], box["height"]) == (1280, page.viewport_size["height"])
    expect(page.locator(".app-view-bar")).to_have_text(re.compile(r"^boxapps fills the window"))
    page.keyboard.press("Escape")
    expect(page.locator(".app-view-fullscreen")).to_have_count(0)
    expect(page.locator(".app-view-bar")).to_have_count(0)
    page.locator("#theme-switch input[value=dark]").click()  # the page's theme reaches the view
    expect(view.locator("#theme-dark")).to_have_text("theme-dark: #16171b")

    card = page.locator(".approval")
    expect(card).to_contain_text("The view asks to run this tool. Approve?")
    expect(card).to_contain_text("set_alarm")
    page.wait_for_timeout(500)  # the forged answers had their time: the call still waits
    expect(view.locator("#set_alarm")).to_have_count(0)
    expect(card).to_have_count(1)
    screenshot(page, "app-view-approval")
    card.get_by_role("button", name="Deny").click()
    expect(view.locator("#set_alarm")).to_contain_text("set_alarm: error")
    expect(view.locator("#set_alarm")).to_contain_text("the person denied this call")


def test_a_view_that_floods_the_page_is_stopped_and_the_page_stays_responsive(
    open_page: Any, site: Site, apps_toolbox: None
) -> None:
    from playwright.sync_api import expect

    page = open_page(1280)
    landing(page, site)
    site.llm.script(ToolCalls([Call("boxapps_flood_view", {})]), Text("Flooded."))
    start_conversation(page, "Show the flood view")
    expect(page.locator(".app-view .note")).to_have_text("The view sent too many messages and was stopped.")
    expect(page.locator(".app-view-frame")).to_have_count(0)
    # The page takes typing as ever: a page still flooded would not (Playwright's deadline on
    # the action, a guard against a hang; how fast it answers is not a test's to say).
    page.locator("#message-input").fill("still here")
    expect(page.locator("#message-input")).to_have_value("still here")


class StunListener:
    """A UDP socket on 127.0.0.1 playing a STUN/TURN server: it keeps what it receives, answers nothing."""

    def __init__(self) -> None:
        self.socket = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.socket.bind(("127.0.0.1", 0))
        self.port = self.socket.getsockname()[1]
        self.received: list[bytes] = []
        self.arrived = threading.Event()
        self.thread = threading.Thread(target=self._listen, daemon=True)
        self.thread.start()

    def _listen(self) -> None:
        while True:
            try:
                data, _ = self.socket.recvfrom(65536)
            except OSError:  # closed
                return
            self.received.append(data)
            self.arrived.set()

    def binding_requests(self) -> list[bytes]:
        """What arrived that is a STUN message (its magic cookie at bytes 4..8)."""
        return [data for data in self.received if data[4:8] == STUN_MAGIC_COOKIE]

    def close(self) -> None:
        self.socket.close()
        self.thread.join(5)


STUN_MAGIC_COOKIE = bytes.fromhex("2112a442")
# A path a hostile view takes, and what must become of it.
WEBRTC_PATHS = {
    "declared": "removed",  # an https frame: kept only where the view declares its origin
    "markup": "removed",  # an <iframe srcdoc> with a script, in the view's own markup
    "declarative": "inert",  # the same inside a declarative closed shadow root
    "names": "none",  # RTC* interfaces left in the view's window
    "main": "refused TypeError",
    "prefixed": "refused TypeError",  # webkitRTCPeerConnection
    "blank": "refused SecurityError",  # a nested about:blank frame's: another origin
    "srcdoc": "removed",
    "inner": "removed",  # <iframe srcdoc> through innerHTML
    "shadow": "removed",  # in a closed shadow root
    "unsafe": "inert",  # setHTMLUnsafe with a declarative shadow root
    "javascript": "removed",
    "location": "refused SecurityError",  # a javascript: URL sent to a nested about:blank frame
    "data": "removed",
    "worker": "refused Error",
    "ran": "nothing",  # nested documents that said they ran
}


@pytest.fixture
def stun_listener() -> Iterator[StunListener]:
    listener = StunListener()
    yield listener
    listener.close()


@pytest.mark.parametrize("tool", ["webrtc_view", "webrtc_framed_view"])
def test_a_hostile_view_cannot_reach_a_turn_server_over_webrtc(
    open_page: Any, site: Site, tool: str, apps_toolbox: None, stun_listener: StunListener
) -> None:
    """Every way to WebRTC a view has, against a STUN/TURN listener on loopback: nothing arrives.

    The framed view declares a frame origin: it keeps that frame, and nothing else changes.
    """
    from playwright.sync_api import expect

    page = open_page(1280)
    landing(page, site)
    site.llm.script(ToolCalls([Call(f"boxapps_{tool}", {"port": stun_listener.port})]), Text("Shown."))
    start_conversation(page, "Show the WebRTC view")
    view = page.frame_locator(".app-view-frame")
    expect(view.locator("#done")).to_have_text("done", timeout=30_000)
    fates = dict(text.split(": ", 1) for text in view.locator("#out li").all_inner_texts())
    sent = stun_listener.binding_requests()
    expected = {**WEBRTC_PATHS, "declared": "kept"} if tool == "webrtc_framed_view" else WEBRTC_PATHS
    assert (fates, sent) == (expected, [])

    # The listener hears WebRTC where it is not blocked (the page's own realm): had the view's
    # requests gone out, they would have arrived.
    page.evaluate(
        """async (port) => {
          const pc = new RTCPeerConnection({ iceServers: [{ urls: `stun:127.0.0.1:${port}` }] });
          pc.createDataChannel("control");
          await pc.setLocalDescription(await pc.createOffer());
          window.__control = pc;
        }""",
        stun_listener.port,
    )
    assert stun_listener.arrived.wait(20)
    assert stun_listener.binding_requests() != []


@pytest.mark.parametrize("width", WIDTHS)
def test_a_view_fills_the_window_only_after_the_persons_click_below_boocodes_bar(
    open_page: Any, site: Site, width: int, apps_toolbox: None
) -> None:
    """The request alone changes nothing; Allow does; BooCode's bar names the server above the view."""
    from playwright.sync_api import expect

    page = open_page(width)
    landing(page, site)
    site.llm.script(ToolCalls([Call("boxapps_fullscreen_view", {})]), Text("Shown."))
    start_conversation(page, "Show the full window view")
    expect(page.locator(".message.role-assistant").last).to_contain_text("Shown.")
    view = page.frame_locator(".app-view-frame")
    ask = page.locator(".app-view-ask")
    expect(ask).to_have_text(re.compile(r"^boxapps asks to fill the window"))
    expect(ask.get_by_role("button", name="Allow")).to_be_visible()
    expect(view.locator("#mode")).to_have_text("mode: inline")
    expect(view.locator("#fullscreen")).to_have_count(0)  # (its request waits for the person)
    expect(page.locator(".app-view-fullscreen")).to_have_count(0)
    assert overflowing(page) == []
    if AXE.exists():
        assert serious_violations(page) == []
    screenshot(page, "app-view-fullscreen-ask")

    ask.get_by_role("button", name="Allow").click()
    expect(view.locator("#mode")).to_have_text("mode: fullscreen")
    expect(view.locator("#fullscreen")).to_have_text('fullscreen: {"mode":"fullscreen"}')
    expect(ask).to_have_count(0)
    bar = page.locator(".app-view-bar")
    expect(bar).to_have_text(re.compile(r"^boxapps fills the window"))
    shown = page.locator(".app-view-fullscreen").bounding_box()
    assert (shown["width"], shown["height"]) == (width, page.viewport_size["height"])
    bar_box = bar.bounding_box()
    frame_box = page.locator(".app-view-frame").bounding_box()
    assert bar_box["y"] >= 0 and bar_box["y"] + bar_box["height"] <= frame_box["y"]  # above the frame
    # What is under the bar's middle is the bar: the view's own "sign-in" at its top cannot cover it.
    middle = [bar_box["x"] + bar_box["width"] / 2, bar_box["y"] + bar_box["height"] / 2]
    on_top = "([x, y]) => Boolean(document.elementFromPoint(x, y).closest('.app-view-bar'))"
    assert page.evaluate(on_top, middle)
    assert overflowing(page) == []
    if AXE.exists():
        assert serious_violations(page) == []
    screenshot(page, "app-view-fullscreen")

    bar.get_by_role("button", name="Exit full screen").click()
    expect(view.locator("#mode")).to_have_text("mode: inline")
    expect(page.locator(".app-view-fullscreen")).to_have_count(0)
    # Asked again and dismissed: the view stays inline and is told so.
    view.locator("#ask-again").click()
    ask.get_by_role("button", name="Dismiss").click()
    expect(view.locator("#again")).to_have_text('again: {"mode":"inline"}')
    expect(page.locator(".app-view-fullscreen")).to_have_count(0)


# One message of 200 MB (what crashed the tab), and a burst of 25 over the bound: the rest of a
# burst is dropped unread (25 x 200 MB would hold ~10 GB of the shared machine for the test alone).
@pytest.mark.parametrize(("megabytes", "count"), [(200, 1), (8, 25)])
def test_a_view_that_sends_an_oversized_message_is_stopped_and_the_page_stays_responsive(
    open_page: Any, site: Site, megabytes: int, count: int, apps_toolbox: None
) -> None:
    """Oversized messages (200 MB, or a burst of 25): the view is stopped with a note, the page answers."""
    from playwright.sync_api import expect

    page = open_page(1280)
    landing(page, site)
    arguments = {"megabytes": megabytes, "count": count}
    site.llm.script(ToolCalls([Call("boxapps_oversized_view", arguments)]), Text("Oversized."))
    start_conversation(page, "Show the oversized view")
    stopped = page.locator(".app-view .app-view-stopped")
    expect(stopped).to_have_text("The view sent a message larger than 1 MB and was stopped.", timeout=60_000)
    expect(page.locator(".app-view-frame")).to_have_count(0)
    assert page.evaluate("document.querySelectorAll('.app-view').length") == 1  # the page answers
    site.llm.script(Text("Still here."))
    send(page, "Are you still there?")  # the composer works, and the turn comes back
    expect(page.locator(".message.role-assistant").last).to_contain_text("Still here.")
    expect(page.locator(".message.role-user")).to_have_count(2)

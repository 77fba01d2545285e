"""An answer's HTML while it streams, over the websocket: ``text_html`` frames carry the rendered
Markdown before the turn ends, a tab that connects mid-answer goes on from the history's HTML,
the final ``html`` is what the frames built (nothing jumps), the rendering keeps its pace, and
one enormous block streams as text without holding the event loop (the loop's thread parses no
Markdown of it: a count, which load cannot move; how long the loop goes without a break is
measured by ``bench/loop_lag.py``).
"""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
from typing import Any

import pytest
from markdown_it import MarkdownIt

from boocode.chat.wire.live_markdown import HTML_BYTES, RENDER_INTERVAL, LiveHtml
from boocode.chat.wire.rendering import render_markdown
from boocode.chat.wire.sizes import utf16_length
from tests.support.accounts import stored
from tests.support.llm import ScriptedLLM, Stall
from tests.support.tabs import Tab, logged_in_tab

ANSWER = (
    "## Plan\n\nThe **first** step, then [the docs](https://example.com/docs).\n\n"
    "| tool | calls |\n|---|---|\n| echo | 2 |\n\n"
    "Half-typed <script>alert(1)</script> and [a link](javascript:alert(1)) stay inert"
)


class ShownHtml:
    """The HTML a page builds from ``text_html`` frames (as static/chat/messages.js applies them)."""

    def __init__(self, start: dict[str, Any] | None = None) -> None:
        self.settled, self.tail, self.to, self.end = "", "", 0, 0
        if start is not None:
            self.apply(start)

    def apply(self, frame: dict[str, Any]) -> bool:
        if frame["from"] != self.to or frame["end"] < self.end:
            return False
        self.settled += frame["settled"]
        self.tail, self.to, self.end = frame["tail"], frame["to"], frame["end"]
        return True

    @property
    def html(self) -> str:
        return self.settled + (self.tail or "")


@pytest.mark.django_db(transaction=True)
async def test_frames_carry_rendered_html_while_the_answer_streams(llm: ScriptedLLM) -> None:
    tab = await logged_in_tab()
    conversation, cookie = tab.conversation_id, tab.cookie
    llm.script(Stall(text=ANSWER, seconds=30))  # the whole text, then the model waits
    await tab.send({"type": "user_message", "text": "a plan, please"})
    message_id = (await tab.next("message_start"))["message"]["id"]

    shown = ShownHtml()
    while shown.end != utf16_length(ANSWER):
        frame = await tab.next("text_html", message_id=message_id)
        assert shown.apply(frame), frame  # in order: each continues what is shown
    assert "<h2>Plan</h2>" in shown.settled and "<strong>first</strong>" in shown.settled
    assert "<td>echo</td>" in shown.html  # (settles once a complete line follows it)
    assert 'target="_blank" rel="noopener noreferrer nofollow"' in shown.settled
    assert "<script" not in shown.html and 'href="javascript' not in shown.html
    assert "&lt;script&gt;" in (shown.tail or "")

    # A tab that connects now gets the HTML so far with the text, and goes on from it.
    other = Tab(conversation, cookie)
    history = await other.open()
    streaming = history["messages"][-1]
    assert (streaming["status"], streaming["content"]) == ("streaming", ANSWER)
    assert ShownHtml(streaming["text_html"]).html == shown.html

    llm.release()
    for page in (tab, other):
        complete = await page.next("message_complete")
        # The final HTML is what the frames built: the page keeps it as it is.
        assert complete["message"]["html"] == shown.html == render_markdown(ANSWER)
        assert (await page.next(("text_html", "turn_end")))["type"] == "turn_end"
        await page.close()


async def test_html_follows_the_text_at_its_own_pace() -> None:
    text: list[str] = []
    emitted: list[tuple[float, dict[str, Any]]] = []
    whole = asyncio.Event()

    async def emit(frame: dict[str, Any]) -> None:
        emitted.append((time.monotonic(), frame))
        if len(text) == 60 and frame["end"] == utf16_length("".join(text)):
            whole.set()

    live = LiveHtml(7, lambda: "".join(text), emit)
    started = time.monotonic()
    for n in range(60):  # a model writing a paragraph every 10 ms: the pace under test
        text.append(f"Paragraph {n} with **bold** text.\n\n")
        live.poke()
        await asyncio.sleep(0.01)
    async with asyncio.timeout(10):
        await whole.wait()  # the renderer catches up by itself once the text stops growing
    live.close()
    span = emitted[-1][0] - started
    # At most one frame per RENDER_INTERVAL (whatever the machine's speed), the last one whole.
    assert len(emitted) <= span / RENDER_INTERVAL + 1
    gaps = [b[0] - a[0] for a, b in itertools.pairwise(emitted)]
    assert min(gaps, default=RENDER_INTERVAL) >= RENDER_INTERVAL * 0.99
    shown = ShownHtml()
    for _, frame in emitted:
        assert frame["type"] == "text_html" and frame["message_id"] == 7
        assert shown.apply(frame)
    assert shown.html == render_markdown("".join(text))


@pytest.mark.django_db(transaction=True)
async def test_an_enormous_block_streams_as_text_without_holding_the_loop(
    llm: ScriptedLLM, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The stream stalls after the text until the page got the frame; on a loaded machine the
    # render before it can take longer than the tests' 5 s BOOCODE_LLM_TIMEOUT (a deadline, not a wait).
    settings.LLM_TIMEOUT = 60.0
    tab = await logged_in_tab()
    conversation = tab.conversation_id
    answer = "## One paragraph\n\n" + "**word** " * 12_000  # 108 KB in one block
    llm.script(Stall(text=answer, seconds=30))
    # Every Markdown parse (the live steps, the final HTML) and the thread it ran in.
    parses: list[tuple[int, int]] = []
    parse = MarkdownIt.parse

    def counted(self: MarkdownIt, src: str, env: Any = None) -> Any:
        parses.append((threading.get_ident(), len(src)))
        return parse(self, src, env)

    monkeypatch.setattr(MarkdownIt, "parse", counted)
    loop_thread = threading.get_ident()
    await tab.send({"type": "user_message", "text": "a long one"})
    # Too large to render while it streams: shown as text (tail null), and no more frames.
    gave_up = await tab.next("text_html", within=45, tail=None)
    llm.release()
    await tab.until_turn_end()
    # The answer was parsed (rendered while small, then whole for the final HTML), never by the loop.
    assert max(size for _, size in parses) >= len(answer), parses
    on_the_loop = [size for thread, size in parses if thread == loop_thread]
    assert on_the_loop == [], f"the event loop parsed Markdown of {on_the_loop} characters"
    assert (gave_up["from"], gave_up["to"], gave_up["settled"]) == (0, 0, "")
    frames = [frame for frame in tab.frames if frame["type"] == "text_html"]
    assert frames[-1] is gave_up  # rendered while it was small, then none after it
    # Each frame within the renderer's bound (how much text arrived before a render is the
    # machine's timing: a render just under the region limit is about 70 KB of HTML here).
    assert all(len(frame["settled"]) + len(frame["tail"] or "") <= HTML_BYTES for frame in frames)
    assert (await stored(conversation))[-1] == ("assistant", "complete", answer)
    await tab.close()

"""An answer's Markdown as HTML while it streams: settled blocks rendered once, the open one again.

Markdown's top-level blocks do not change once another block has started after them: only the
last one (the *open* block: a paragraph still being written, a list that may get more items, a
table more rows, a fence not yet closed) can. So a step parses only the text after the settled
blocks (the *region*); the blocks of the region before its last block settle: their HTML is
rendered once, on its own, and sent to be appended; the rest (the *tail*) is rendered again and
replaces the previous tail. Only a block that starts on a complete line counts as a later
block: a line still being written can start a block and then turn out to continue the one
before it (``#`` is an empty heading until ``#hashtag`` makes it paragraph text; ``***`` a rule
until ``***bold***``; ``3`` a paragraph until ``3. three`` makes it the next item of the list
above, even after a blank line), and a table counts only once its delimiter row is complete
too (``a | b`` over a ``--`` still being written is paragraph text if ``--word`` follows).
Lists, tables and fences need no other care: each stays the last block for as long as a
later line could continue it (a list across blank lines, a table until a blank line, a fence
until its closing line; an unclosed fence is rendered as an open code block), so it settles
only when a block that cannot belong to it has started.

Invariants (tests/chat/wire/test_live_markdown.py):

- Settled HTML never changes; every piece is sanitized by :func:`~boocode.chat.wire.rendering.
  render_tokens`, the same policy as :func:`~boocode.chat.wire.rendering.render_markdown` (raw HTML
  disabled, then the nh3 allowlist), so a half-written ``<script>`` or ``javascript:`` link is
  as inert as in a finished answer.
- The settled pieces and the last tail, concatenated, are ``render_markdown(text)``, with one
  decided exception: a link reference definition (``[docs]: https://...``) reaches only the
  blocks that settle with it or after it (a block settles with the definitions known by then,
  as a reader of the stream knows them), so a ``[docs]`` that settled before its definition
  arrived stays text until the message ends. The final ``html`` (``message_complete``) is
  always ``render_markdown`` of the whole text and wins.

Bounds: a step parses the region only, never the whole text, and each block settles once. A
region over :data:`REGION_MAX_CHARS` (one enormous block) or HTML over :data:`HTML_BYTES` for
one frame ends the rendering of this message: its text then streams as text and the final HTML
comes at its end. :class:`LiveHtml` runs the steps one at a time in one thread of their own, off
the event loop, at most every :data:`RENDER_INTERVAL` seconds and never more often than
:data:`COST_FACTOR` times the last step's CPU time, so a message's rendering costs at most a
small share of a core however it streams, and a page sees the text at once (``text_delta``)
and its HTML a moment later (``text_html``).
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from markdown_it.token import Token

from boocode.chat.wire.events import Emit
from boocode.chat.wire.rendering import parse_markdown, render_tokens
from boocode.chat.wire.sizes import encoded_size, utf16_length

logger = logging.getLogger(__name__)

# One block this long (a 1 MB paragraph, a whole file in one fence) is not rendered while it
# streams: rendering it again at every step would cost seconds of CPU per message.
REGION_MAX_CHARS = 32_000
# HTML of one text_html frame (JSON bytes); frames stay far below Daphne's 1 MiB.
HTML_BYTES = 256 * 1024
# Seconds between two steps of one message, at least: the newest words show as text inside
# their block for up to this long. At 50 sessions each step costs the loop its frames as well
# as the rendering (docs/benchmarks.md): a shorter interval costs more first-token delay.
RENDER_INTERVAL = 0.2
COST_FACTOR = 20  # ... and at least this many times the last step's CPU time (<= 5 % of a core)
# markdown-it normalizes these to "\n" before it counts lines (its token maps are in its lines).
_NEWLINE = re.compile(r"\r\n?|\n")


@dataclass(frozen=True)
class Step:
    """What one step changed, in UTF-16 offsets of the text (the ``text_html`` frame's fields).

    ``settled`` is the HTML of ``text[start:to]``, to append after the settled HTML shown;
    ``tail`` the HTML of ``text[to:end]``, replacing the previous tail, or ``None``: show
    ``text[to:]`` as text (the message is no longer rendered while it streams).
    """

    start: int
    to: int
    settled: str
    tail: str | None
    end: int

    def frame(self, message_id: int) -> dict[str, Any]:
        return {
            "type": "text_html",
            "message_id": message_id,
            "from": self.start,
            "to": self.to,
            "settled": self.settled,
            "tail": self.tail,
            "end": self.end,
        }


class LiveMarkdown:
    """The incremental renderer of one message's text (pure: no I/O, no clock).

    :meth:`advance` takes the whole text so far (each call's text extends the previous one's)
    and returns what changed, or ``None`` once the message is no longer rendered.
    """

    def __init__(self) -> None:
        self.settled_chars = 0  # characters of the text whose blocks have settled
        self.to = 0  # ... in UTF-16 code units
        self.references: dict[str, Any] = {}  # link reference definitions of the settled text
        self.stopped = False

    def advance(self, text: str) -> Step | None:
        """Render the text's new state: newly settled blocks once, the open tail again."""
        if self.stopped:
            return None
        start = self.to
        region = text[self.settled_chars :]
        end = start + utf16_length(region)
        if len(region) > REGION_MAX_CHARS:
            return self._stop(end)
        env = self._env()
        tokens = parse_markdown(region, env)
        cut, line = _settled_length(region, tokens)
        settled, references, to = "", self.references, start
        if cut and len(env["references"]) == len(self.references):
            # The region defines no link references: its tokens are those of each part on its
            # own (its top-level blocks are rendered alone), so nothing is parsed again.
            split = next(i for i, token in enumerate(tokens) if token.map and token.map[0] >= line)
            settled = render_tokens(tokens[:split], env)
            tokens, to = tokens[split:], start + utf16_length(region[:cut])
        elif cut:  # each part parsed on its own: the definitions above reach the blocks below
            chunk, region = region[:cut], region[cut:]
            chunk_env = self._env()
            settled = render_tokens(parse_markdown(chunk, chunk_env), chunk_env)
            references, to = chunk_env["references"], start + utf16_length(chunk)
            env = {"references": dict(references)}
            tokens = parse_markdown(region, env)
        tail = render_tokens(tokens, env)
        if len(settled) + len(tail) > HTML_BYTES // 6 and encoded_size([settled, tail]) > HTML_BYTES:
            return self._stop(end)
        self.settled_chars += cut
        self.to, self.references = to, references
        return Step(start, to, settled, tail, end)

    def _env(self) -> dict[str, Any]:
        return {"references": dict(self.references)}

    def _stop(self, end: int) -> Step:
        self.stopped = True
        return Step(self.to, self.to, "", None, end)


def _settled_length(region: str, tokens: list[Token]) -> tuple[int, int]:
    """Characters (and lines) at the start of ``region`` whose blocks have settled (0: none).

    Those are the blocks before the last top-level block that starts on a complete line (a
    table: whose delimiter row is complete too); the cut is that block's first line, so what
    lies between (blank lines, reference definitions) settles with the blocks before it.
    """
    breaks = [match.end() for match in _NEWLINE.finditer(region)]
    if breaks and region.endswith("\r"):
        breaks.pop()  # maybe the first half of "\r\n": that line is not complete yet
    complete = len(breaks)
    starts = [
        token.map[0]
        for token in tokens
        if token.level == 0
        and token.nesting >= 0
        and token.map
        # A table is one only with its delimiter row: "a | b" over "--" still being written
        # may turn out to be paragraph text ("--word"), so the row must be complete too.
        and token.map[0] + (2 if token.type == "table_open" else 1) <= complete
    ]
    if len(starts) < 2 or starts[-1] == 0:
        return 0, 0
    return breaks[starts[-1] - 1], starts[-1]


# Steps are CPU work (markdown-it and Pygments are pure Python): one thread for all of them
# keeps the event loop answering while a large block renders, and queues steps under load
# instead of spreading them over threads that would only take turns at the interpreter lock.
_executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="boocode-markdown")


class LiveHtml:
    """Keeps the pages' HTML of one streamed message current: ``text_html`` frames.

    Lifecycle: made when the message opens; :meth:`poke` (after each ``text_delta``) starts a
    task unless one runs; the task runs a step in the renderer's thread when one is due (see the
    module docstring), emits its frame, and goes on while the text has grown since. :meth:`close`
    (the message ends, stops or fails) cancels the task before the message's final frame goes
    out; a step already in the thread finishes there and its result is dropped.
    """

    def __init__(self, message_id: int, text: Callable[[], str], emit: Emit) -> None:
        self.message_id = message_id
        self._text = text
        self._emit = emit
        self._renderer = LiveMarkdown()
        self._task: asyncio.Task[None] | None = None
        self._rendered = -1  # length of the text the last step rendered
        # The first step waits an interval too: the first words go out as text at once, with no
        # rendering beside them in the loop's process (the first-token delay, docs/benchmarks.md).
        self._next_at = time.monotonic() + RENDER_INTERVAL
        self._closed = False
        self._settled: list[str] = []  # every settled piece sent, for a page that connects now
        self._last: Step | None = None

    def poke(self) -> None:
        """The text grew: render it when due (a task of its own; returns at once)."""
        if self._task is None and not self._closed and not self._renderer.stopped:
            self._task = asyncio.get_running_loop().create_task(self._run())

    def close(self) -> None:
        """The message is over: nothing more is rendered or sent for it."""
        self._closed = True
        if self._task is not None:
            self._task.cancel()
            self._task = None

    def state(self) -> dict[str, Any] | None:
        """The HTML sent so far as one ``text_html`` object from the start (the ``history``
        frame's streaming message), or ``None`` before the first step."""
        if self._last is None:
            return None
        whole = Step(0, self._last.to, "".join(self._settled), self._last.tail, self._last.end)
        frame = whole.frame(self.message_id)
        del frame["type"], frame["message_id"]
        return frame

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            while not self._closed:
                wait = self._next_at - time.monotonic()
                if wait > 0:
                    await asyncio.sleep(wait)  # the rate limit itself (see the module docstring)
                text = self._text()
                if len(text) == self._rendered:
                    return
                try:
                    step, cost = await loop.run_in_executor(_executor, _timed, self._renderer, text)
                except Exception:  # the top of this task: the turn goes on, the page shows the text
                    logger.exception("message %s: could not render it while it streams", self.message_id)
                    self._renderer.stopped = True
                    to = self._last.to if self._last is not None else 0
                    step, cost = Step(to, to, "", None, utf16_length(text)), 0.0
                self._rendered = len(text)
                self._next_at = time.monotonic() + max(RENDER_INTERVAL, COST_FACTOR * cost)
                if step is None or self._closed:
                    return
                if step.settled:
                    self._settled.append(step.settled)
                self._last = step
                await self._emit(step.frame(self.message_id))
                if step.tail is None:
                    return
        finally:
            if self._task is asyncio.current_task():
                self._task = None


def _timed(renderer: LiveMarkdown, text: str) -> tuple[Step | None, float]:
    """One step and the CPU time it took (in the renderer's thread)."""
    started = time.thread_time()
    step = renderer.advance(text)
    return step, time.thread_time() - started

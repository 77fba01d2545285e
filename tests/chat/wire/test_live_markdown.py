"""An answer's Markdown rendered while it streams (boocode/chat/wire/live_markdown.py): settled blocks
never change, the pieces add up to the final rendering, hostile text stays inert at every step,
and one enormous block costs no more than one pass over it.
"""

from __future__ import annotations

from typing import Any

import pytest

from boocode.chat.wire import live_markdown
from boocode.chat.wire.live_markdown import REGION_MAX_CHARS, LiveMarkdown, Step
from boocode.chat.wire.rendering import ALLOWED_TAGS, render_markdown
from boocode.chat.wire.sizes import MESSAGE_INLINE_BYTES, bounded_message, utf16_length
from tests.support.html import elements

ANSWER = (
    "## Plan\n\nThe **first** step, then `code`.\n\n"
    "| tool | calls |\n|---|---|\n| echo | 2 |\n| add | 1 |\n\nAfter the table.\n"
)
TEXTS = [
    ANSWER,
    # A list goes on across blank lines (and turns loose); a later number starts a new list.
    "- a\n- b\n\n- c\n\n  more of c\n\nA paragraph.\n\n1. one\n2. two\n\n3. three\n\nend",
    # A closed fence, then one never closed: an open code block to the end.
    "```python\ndef f():\n    return 1\n```\n\nText after.\n\n```\nunclosed\n\nstill code",
    # Lines that start a block until the rest of the line arrives: "#" then "#hashtag",
    # "***" then "***bold***", "---" under text (a heading), "___" (a rule).
    "para\n#hashtag\n\n# Heading\ntext\n***bold italic*** here\n___\nx\n\nsetext\n---\n",
    # A table's header line waits for its delimiter row: "--" then "--word" is paragraph text.
    # "3" after a blank line is a paragraph until "3. three" makes it the list's next item.
    "intro\n\nx | y\n--word\n\nsecond | table\n---|---\n1 | 2\n\nend",
    "1. one\n2. two\n\n3. three\n\n- x\n\n* y\n\nend",
    "> quote\nlazy line\n\n> second\n\n    indented\n\n    code\n\npara\n===\n",
    "a\r\nb\r\n\r\n# h\r\n\r\nc\rd\r\re",
    "Ünïcödé 😀 **bold** 😀\n\n## 😀 heading\n\n`x` 😀",
    "[docs]: https://example.com/docs\n\nSee [docs].\n\nAgain [docs] and [later].\n\n[later]: https://example.org",
]


def stream(text: str, size: int) -> list[Step]:
    """The steps of a renderer fed ``text`` ``size`` characters at a time."""
    renderer = LiveMarkdown()
    steps = []
    for end in range(size, len(text) + size, size):
        step = renderer.advance(text[:end])
        assert step is not None
        steps.append(step)
    return steps


@pytest.mark.parametrize("size", [1, 3, 8])
@pytest.mark.parametrize("text", TEXTS)
def test_settled_html_never_changes_and_the_pieces_add_up_to_the_final_html(text: str, size: int) -> None:
    final = render_markdown(text)
    settled, to = "", 0
    for index, step in enumerate(stream(text, size)):
        shown = text[: min((index + 1) * size, len(text))]
        assert (step.start, step.end) == (to, utf16_length(shown))  # offsets in the page's units
        settled += step.settled
        to = step.to
        # What settled is the final rendering's beginning, so nothing shown ever has to change.
        assert final.startswith(settled), (shown, settled)
        assert step.tail is not None
    assert settled + step.tail == final


def test_blocks_settle_once_another_block_has_started_on_a_complete_line() -> None:
    renderer = LiveMarkdown()
    first = renderer.advance("## Plan\n\nThe **first")
    assert first is not None  # the line being written may still turn into anything
    assert (first.settled, first.tail) == ("", "<h2>Plan</h2>\n<p>The **first</p>\n")
    second = renderer.advance("## Plan\n\nThe **first** step\n")
    assert second is not None
    assert (second.settled, second.tail) == ("<h2>Plan</h2>\n", "<p>The <strong>first</strong> step</p>\n")
    third = renderer.advance("## Plan\n\nThe **first** step\n\n| a | b |\n|---|---|\n| 1 | 2 |")
    assert third is not None
    assert third.settled == "<p>The <strong>first</strong> step</p>\n"
    assert third.tail is not None and "<td>1</td>" in third.tail  # the table is rendered as it grows


def test_an_unclosed_fence_is_an_open_code_block_and_settles_once_closed() -> None:
    renderer = LiveMarkdown()
    step = renderer.advance("Code:\n\n```python\ndef f():\n    return 1")
    assert step is not None and step.tail is not None
    assert step.tail.startswith('<pre class="code"><code class="language-python">')
    assert "tok-k" in step.tail  # highlighted while it streams
    step = renderer.advance("Code:\n\n```python\ndef f():\n    return 1\n```\n\nDone.\n")
    assert step is not None
    assert step.settled.startswith('<pre class="code"><code class="language-python">')
    assert step.tail == "<p>Done.</p>\n"


def test_a_list_stays_open_across_blank_lines() -> None:
    renderer = LiveMarkdown()
    for text in ("- a\n", "- a\n\n", "- a\n\n- b\n\n", "- a\n\n- b\n\nAfter."):
        step = renderer.advance(text)
        assert step is not None and step.settled == ""  # another item may come
    step = renderer.advance("- a\n\n- b\n\nAfter.\n")
    assert step is not None
    assert step.settled == "<ul>\n<li>\n<p>a</p>\n</li>\n<li>\n<p>b</p>\n</li>\n</ul>\n"


@pytest.mark.parametrize(
    "text",
    [
        "Look: <script>alert(1)</script> and **more** <img src=x onerror=alert(1)>\n\n# done",
        "Click [here](javascript:alert(1)) or [there](JaVaScRiPt:alert(2)) now\n\nnext",
        "<a href='javascript:alert(1)'>x</a>\n\n<iframe src='https://example.com'></iframe>",
        "```\n</code></pre><script>alert(1)</script>\n```\n\n<svg onload=alert(1)>",
        "| a | <b onclick=x> |\n|---|---|\n| [x](javascript:y) | 2 |",
    ],
)
def test_hostile_text_stays_inert_at_every_step(text: str) -> None:
    # Character by character: half-typed tags and links included.
    for step in stream(text, 1):
        for html in (step.settled, step.tail or ""):
            for tag, attributes in elements(html):
                assert tag in ALLOWED_TAGS, html
                for name, value in attributes:
                    assert not name.startswith("on"), html
                    assert "javascript" not in (value or "").lower(), html


def test_a_reference_definition_reaches_the_blocks_that_settle_after_it() -> None:
    # Decided: a block settles with the definitions known by then. "[docs]" above its
    # definition, with a block between, stays text while streaming; the final html links it.
    text = "Use [docs].\n\nMore.\n\n[docs]: https://example.com/docs\n\nSee [docs]."
    steps = stream(text, 4)
    settled = "".join(step.settled for step in steps)
    assert settled.startswith("<p>Use [docs].</p>\n")
    assert '<a href="https://example.com/docs"' in (steps[-1].tail or "")  # below it: a link
    assert render_markdown(text).startswith('<p>Use <a href="https://example.com/docs"')


@pytest.fixture
def parsed(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many characters the renderer has parsed so far (``parsed[0]``)."""
    count = [0]
    parse = live_markdown.parse_markdown

    def counting(text: str, env: dict[str, Any]) -> Any:
        count[0] += len(text)
        return parse(text, env)

    monkeypatch.setattr(live_markdown, "parse_markdown", counting)
    return count


def test_one_enormous_block_costs_less_than_one_pass_over_it(parsed: list[int]) -> None:
    paragraph = "word " * 200_000  # a megabyte in one paragraph, streamed a kilobyte at a time
    renderer = LiveMarkdown()
    steps = [renderer.advance(paragraph[:end]) for end in range(1024, len(paragraph) + 1024, 1024)]
    given_up = [step for step in steps if step is not None and step.tail is None]
    assert len(given_up) == 1 and given_up[0].settled == ""  # then shown as text until the end
    assert steps[-1] is None
    assert parsed[0] < len(paragraph)  # (quadratic would be 500 times as much)
    assert parsed[0] < (REGION_MAX_CHARS // 1024 + 1) * REGION_MAX_CHARS


def test_many_small_blocks_cost_a_few_passes(parsed: list[int]) -> None:
    # 250 KB of short paragraphs, 64 characters a step: the region is the last block or two.
    text = "".join(f"Paragraph {n} with **bold** text and more words.\n\n" for n in range(5_000))
    steps = stream(text, 64)
    assert all(step.tail is not None for step in steps)
    assert "".join(step.settled for step in steps) + (steps[-1].tail or "") == render_markdown(text)
    assert parsed[0] < 6 * len(text)  # linear: each step parses what has not settled, not the text


def test_a_streamed_message_too_large_for_a_frame_loses_its_html_first() -> None:
    live = {"from": 0, "to": 10, "settled": "<p>x</p>" * 10_000, "tail": "", "end": 20}
    message = {"id": 1, "role": "assistant", "status": "streaming", "content": "x" * 1000, "html": ""}
    assert bounded_message({**message, "text_html": live})["text_html"] == live
    big = {**live, "settled": "<p>x</p>" * (MESSAGE_INLINE_BYTES // 8)}
    bounded = bounded_message({**message, "text_html": big})
    assert bounded["text_html"] is None and bounded["content"] == message["content"]
    assert not bounded.get("large")

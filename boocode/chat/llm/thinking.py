"""A thinking model's reasoning inline in its answer: a ``<think>...</think>`` block at the very
start of the content (qwen3, QwQ, DeepSeek-R1 on servers that do not split it off), its tags
cut anywhere between streamed chunks. :class:`ThinkSplitter` tells it from the answer as the
pieces arrive; both chat routes use it (:mod:`boocode.chat.llm.client`, :mod:`boocode.chat.llm.ollama`).
"""

from __future__ import annotations

from boocode.chat.llm.types import ReasoningDelta, TextDelta


class ThinkSplitter:
    """Splits a leading ``<think>...</think>`` block off streamed content, tags cut anywhere.

    Only a block at the very start (after white space) is thinking: a ``<think>`` later in an
    answer is the answer's text. An unclosed block is thinking to the end.
    """

    OPEN, CLOSE = "<think>", "</think>"

    def __init__(self) -> None:
        self.state = "start"  # start -> thinking -> after -> answer, or start -> answer
        self.held = ""  # text not yet known to be thinking or answer

    def feed(self, text: str) -> list[tuple[bool, str]]:
        """``(is_thinking, text)`` pieces of what can be told apart so far."""
        out: list[tuple[bool, str]] = []
        held = self.held + text
        while held:
            if self.state == "start":
                stripped = held.lstrip()
                if stripped.startswith(self.OPEN):
                    self.state, held = "thinking", stripped[len(self.OPEN) :]
                    continue
                if not stripped or self.OPEN.startswith(stripped):
                    break  # white space or a tag still arriving
                self.state = "answer"
            elif self.state == "thinking":
                end = held.find(self.CLOSE)
                if end >= 0:
                    if end:
                        out.append((True, held[:end]))
                    self.state, held = "after", held[end + len(self.CLOSE) :]
                    continue
                keep = _partial_suffix(held, self.CLOSE)
                if len(held) > keep:
                    out.append((True, held[: len(held) - keep]))
                held = held[len(held) - keep :]
                break
            elif self.state == "after":  # the blank lines between the block and the answer
                held = held.lstrip()
                if held:
                    self.state = "answer"
                continue
            else:
                out.append((False, held))
                held = ""
        self.held = held
        return out

    def finish(self) -> list[tuple[bool, str]]:
        """What is still held when the stream ends."""
        held, self.held = self.held, ""
        if not held or self.state == "after":
            return []
        return [(self.state == "thinking", held)]


def _partial_suffix(text: str, tag: str) -> int:
    """The length of the longest end of ``text`` that begins ``tag`` (a tag still arriving)."""
    for size in range(min(len(tag) - 1, len(text)), 0, -1):
        if tag.startswith(text[-size:]):
            return size
    return 0


def split_thinking(
    pieces: list[tuple[bool, str]], text: list[str], reasoning: list[str]
) -> list[TextDelta | ReasoningDelta]:
    """The events of :meth:`ThinkSplitter.feed`'s pieces, each kept in ``text`` or ``reasoning``."""
    events: list[TextDelta | ReasoningDelta] = []
    for thinking, piece in pieces:
        (reasoning if thinking else text).append(piece)
        events.append(ReasoningDelta(piece) if thinking else TextDelta(piece))
    return events

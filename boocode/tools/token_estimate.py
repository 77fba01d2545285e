"""How many tokens a text costs a model request, estimated without the model's tokenizer.

No tokenizer ships with BooCode: a model's own (Qwen, Llama, Mistral, GPT) is not known from
its name, and the tables of the ones that could be bundled are not the model's. The estimate
counts the bytes of six classes (ASCII letters, digits, spaces, line breaks, other ASCII
symbols, and the bytes of non-ASCII characters), each at the tokens per byte that BPE
tokenizers give it, fitted on tool outputs (JSON, logs, code) and prose: see docs/models.md for
the fit and its error. Counting is a few passes of ``bytes.translate`` in C (about 1 ms per MB);
the chat multiplies it by what the server's own ``usage.prompt_tokens`` says
(:mod:`boocode.chat.llm.request_budget`).
"""

from __future__ import annotations

import json
import string
from typing import Any

__all__ = [
    "MESSAGE_OVERHEAD",
    "Excerpt",
    "estimate",
    "estimate_bytes",
    "estimate_json",
    "prefix_within",
    "suffix_within",
]

# Tokens per byte of each class (least squares over 342 chunks of 6 KB, o200k_base counts).
_LETTERS, _DIGITS, _SPACES, _BREAKS, _HIGH, _SYMBOLS = 0.2, 0.85, 0.06, 0.43, 1.0, 0.74
MESSAGE_OVERHEAD = 4  # a chat template's role and separators around each message


def _all_but(kept: bytes | range) -> bytes:
    """The bytes to delete so that only ``kept`` remain (for ``bytes.translate``)."""
    keep = set(kept)
    return bytes(byte for byte in range(256) if byte not in keep)


_NOT_LETTERS = _all_but(string.ascii_letters.encode())
_NOT_DIGITS = _all_but(string.digits.encode())
_NOT_SPACES = _all_but(b" \t")
_NOT_BREAKS = _all_but(b"\r\n")
_NOT_HIGH = _all_but(range(128, 256))


class Excerpt(str):
    """The beginning and end of a long text read without its middle (a stored tool result):
    the string is ``head``, a line saying what is missing, and ``tail``; ``total`` is the whole
    text's length in characters. Whoever sends it cuts it (``request_budget.cut_result``)."""

    head: str
    tail: str
    total: int

    def __new__(cls, head: str, tail: str, total: int) -> Excerpt:
        text = super().__new__(cls, f"{head}\n[... {total - len(head) - len(tail):,} characters ...]\n{tail}")
        text.head, text.tail, text.total = head, tail, total
        return text


def estimate_bytes(data: bytes) -> float:
    """The estimated tokens of UTF-8 ``data``."""
    letters = len(data.translate(None, _NOT_LETTERS))
    digits = len(data.translate(None, _NOT_DIGITS))
    spaces = len(data.translate(None, _NOT_SPACES))
    breaks = len(data.translate(None, _NOT_BREAKS))
    high = len(data.translate(None, _NOT_HIGH))
    symbols = len(data) - letters - digits - spaces - breaks - high
    return (
        letters * _LETTERS
        + digits * _DIGITS
        + spaces * _SPACES
        + breaks * _BREAKS
        + high * _HIGH
        + symbols * _SYMBOLS
    )


def estimate(text: str) -> int:
    """The estimated tokens of ``text`` (rounded up)."""
    if not text:
        return 0
    return int(estimate_bytes(text.encode("utf-8", "surrogatepass"))) + 1


def estimate_json(value: Any) -> int:
    """The estimated tokens of ``value`` as the JSON a request carries."""
    return estimate(json.dumps(value, ensure_ascii=False))


def prefix_within(text: str, tokens: int) -> str:
    """The longest start of ``text`` (to a character, roughly) whose estimate is at most ``tokens``."""
    return _within(text, tokens, head=True)


def suffix_within(text: str, tokens: int) -> str:
    """The longest end of ``text`` (roughly) whose estimate is at most ``tokens``."""
    return _within(text, tokens, head=False)


def _within(text: str, tokens: int, *, head: bool) -> str:
    if tokens <= 0:
        return ""
    # Start from 8 characters a token (more than any text but runs of spaces has) and shrink the
    # piece by its own density until it fits: a few estimates of the piece, never of the whole text.
    size = min(len(text), tokens * 8)
    for _ in range(6):
        piece = text[:size] if head else text[len(text) - size :]
        cost = estimate(piece)
        if cost <= tokens or size == 0:
            return piece
        size = max(0, min(size - 1, int(size * tokens / cost * 0.97)))
    return text[:size] if head else text[len(text) - size :]

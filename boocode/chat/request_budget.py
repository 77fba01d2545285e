"""Every model request fits the model's window: counted before it is sent, cut where it must be.

:func:`fit` takes the conversation as the model would read it whole (:mod:`boocode.chat.model_history`
and the turn's own steps) and the tool definitions, and returns what is sent:

- the **fixed parts** are counted first: the system prompt, the tool definitions and the space
  kept for the answer (:func:`boocode.chat.windows.answer_tokens`);
- a **tool result** over :data:`RESULT_SHARE` of the window reaches the model as its beginning
  and its end, with a marker saying how many characters were left out and how to read them
  with the ``read_result`` tool (:mod:`boocode.chat.result_pages`); the stored result is whole;
- **earlier turns** that do not fit are replaced by their summary when one covers them
  (:mod:`boocode.chat.compaction`), else left out, oldest first, and the system prompt says how
  many were; a turn is never split (a tool result never loses its call);
- results of the **current turn** are cut to a marker, oldest first, if its steps alone pass
  the window;
- when the newest user message and the fixed parts cannot fit, :class:`TooLarge` says so in a
  sentence and nothing is sent.

Counting is :mod:`boocode.tools.token_estimate` times the model's :class:`Calibration`: the
ratio of what its server's ``usage.prompt_tokens`` said to what was estimated for the same
request, kept per model in this process (a restart begins at 1 again). Each message is
estimated once per turn (:class:`Counter` keeps the figures for the turn's later steps).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from boocode.chat.windows import Window, answer_tokens
from boocode.tools.token_estimate import (
    MESSAGE_OVERHEAD,
    estimate,
    estimate_json,
    prefix_within,
    suffix_within,
)

__all__ = [
    "RESULT_SHARE",
    "Calibration",
    "Counter",
    "Fitted",
    "TooLarge",
    "calibration",
    "cut_result",
    "fit",
]

RESULT_SHARE = 0.25  # of the window's room for the conversation: the most one tool result gets whole
TOOLS_SHARE = 0.25  # of the window: the most the tool definitions get before deferred tools take over
MARGIN = 1.1  # the estimate's error on a single request (docs/models.md), kept as headroom
READ_RESULT = "read_result"
NOTE_TOKENS = 60  # the note that says what was left out


class TooLarge(Exception):
    """The newest message and the fixed parts do not fit the window; ``str()`` is for the person."""


@dataclass
class Calibration:
    """What one model's server counts for what BooCode estimates (``ratio``), from its usage."""

    ratio: float = 1.0

    def observe(self, estimated: int, reported: int) -> None:
        """The server said ``reported`` prompt tokens for a request estimated at ``estimated``."""
        if estimated > 0 and reported > 0:
            # Bounded: one odd report (a server that counts cached tokens apart) cannot make
            # every later request twice too large or too small.
            self.ratio = min(max(reported / estimated, 0.5), 3.0)

    def tokens(self, estimated: int) -> int:
        """``estimated`` in the model's own tokens, with the margin kept."""
        return int(estimated * self.ratio * MARGIN) + 1


_calibrations: dict[tuple[str, str], Calibration] = {}


def calibration(base_url: str, model: str) -> Calibration:
    """The calibration of ``model`` at ``base_url`` (created at 1)."""
    key = (base_url, model)
    found = _calibrations.get(key)
    if found is None:
        if len(_calibrations) > 1000:  # models come from a list a person picks from; stay bounded
            _calibrations.clear()
        found = _calibrations[key] = Calibration()
    return found


@dataclass
class Counter:
    """The estimates of one turn's messages, kept for its later steps (keyed by the message object)."""

    sizes: dict[int, tuple[dict[str, Any], int]] = field(default_factory=dict)

    def of(self, message: dict[str, Any]) -> int:
        """The estimated tokens of ``message`` as it would be sent whole."""
        key = id(message)
        held = self.sizes.get(key)
        if held is not None and held[0] is message:
            return held[1]
        tokens = _message_tokens(message)
        self.sizes[key] = (message, tokens)
        return tokens


def _message_tokens(message: dict[str, Any]) -> int:
    content = message.get("content")
    if isinstance(content, str):
        tokens = estimate(content)
    elif isinstance(content, list):
        tokens = sum(_part_tokens(part) for part in content)
    else:
        tokens = 0
    for call in message.get("tool_calls") or ():
        function = call.get("function") or {}
        tokens += estimate(function.get("name") or "") + estimate(function.get("arguments") or "") + 8
    return tokens + MESSAGE_OVERHEAD


IMAGE_TOKENS = 1600  # what a vision model charges for one image at most (OpenAI's high detail: 765 to 1,105)


def _part_tokens(part: Any) -> int:
    if not isinstance(part, dict):
        return 0
    if part.get("type") == "text":
        return estimate(str(part.get("text") or ""))
    if part.get("type") == "image_url":
        return IMAGE_TOKENS
    return estimate_json(part)


@dataclass
class Fitted:
    """What is sent: the messages, the tools, and what was done to fit them."""

    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] | None
    estimated: int  # the request's estimate before calibration (what usage is compared with)
    tokens: int  # the request in the model's tokens (calibrated), without the answer's space
    window: Window
    cut: list[str] = field(default_factory=list)  # call ids of results sent as beginning and end
    left_out: int = 0  # earlier messages neither sent nor summarised
    summarised: int = 0  # earlier messages the summary stood for


def result_limit(window: Window) -> int:
    """The most tokens one tool result is given whole in a request for ``window``."""
    return max(256, int((window.tokens - answer_tokens(window)) * RESULT_SHARE))


def tools_limit(window: Window) -> int:
    """The most tokens the tool definitions may take before deferred tools take over."""
    return int(window.tokens * TOOLS_SHARE)


def cut_result(call_id: str, output: str, tokens: int) -> str:
    """``output`` as its beginning and end within about ``tokens``, with a marker between them
    saying how much was left out and how to read it (``read_result``)."""
    marker_room = 120
    head = prefix_within(output, max(0, (tokens - marker_room) * 2 // 3))
    tail = suffix_within(output[len(head) :], max(0, (tokens - marker_room) // 3))
    left = len(output) - len(head) - len(tail)
    if left <= 0:
        return output
    marker = (
        f"\n[... {left:,} of {len(output):,} characters left out here (characters {len(head):,} to "
        f"{len(head) + left:,}). The result is stored whole: read on with {READ_RESULT} "
        f'{{"call_id": "{call_id}", "offset": {len(head)}, "length": 8000}}, or search it with '
        f'{READ_RESULT} {{"call_id": "{call_id}", "pattern": "..."}}.]\n'
    )
    return head + marker + tail


def _stub(call_id: str, output: str) -> str:
    return (
        f"[This result ({len(output):,} characters) is left out: the turn's results do not fit the "
        f'model\'s window together. Read it with {READ_RESULT} {{"call_id": "{call_id}", "offset": 0, '
        '"length": 8000}, or search it with a "pattern".]'
    )


def fit(
    messages: Sequence[dict[str, Any]],
    tools: list[dict[str, Any]] | None,
    window: Window,
    calibrated: Calibration,
    counter: Counter,
    *,
    keep: int = 0,
    summary: str = "",
    summarised: int = 0,
) -> Fitted:
    """The request for ``window`` (see the module docstring); raises :class:`TooLarge`.

    ``keep``: the messages after the system prompt that are always sent (the agent's skills).
    ``summary`` (with ``summarised``, the number of conversation messages from the first it
    stands for) replaces those messages when the request does not fit with them.
    """
    room = window.tokens - answer_tokens(window)
    system = messages[0] if messages and messages[0].get("role") == "system" else None
    start = 1 if system is not None else 0
    preamble = list(messages[start : start + keep])
    body = list(messages[start + keep :])
    fixed = sum(counter.of(message) for message in ([system] if system is not None else []) + preamble)
    fixed += estimate_json(tools) if tools else 0
    if calibrated.tokens(fixed) > room:
        raise TooLarge(
            f"This conversation's system prompt and tool definitions (about {calibrated.tokens(fixed):,} "
            f"tokens) do not fit the model's context window of {window.describe()} with room for the "
            "answer, so nothing was sent. Give the agent fewer tools or toolSearch: always in AGENTS.md, "
            "or use a model with a larger window."
        )
    limit = result_limit(window)
    cut: list[str] = []
    sizes: list[int] = []
    for index, message in enumerate(body):
        tokens = counter.of(message)
        if message.get("role") == "tool" and calibrated.tokens(tokens) > limit:
            call_id = str(message.get("tool_call_id") or "")
            share = int(limit / calibrated.ratio / MARGIN)
            shortened = {**message, "content": cut_result(call_id, str(message["content"]), share)}
            body[index] = shortened
            tokens = counter.of(shortened)
            cut.append(call_id)
        sizes.append(tokens)

    newest = max((i for i, m in enumerate(body) if m.get("role") == "user"), default=0)
    total = fixed + sum(sizes)
    first = 0  # the first message of ``body`` sent
    note = ""
    if calibrated.tokens(total) > room and newest > 0:
        # Earlier turns go, oldest first and a turn at a time; a summary stands for those it covers.
        summary_tokens = estimate(summary) + MESSAGE_OVERHEAD if summary else 0
        starts = [i for i, m in enumerate(body[: newest + 1]) if i and m.get("role") == "user"]
        for first in starts:
            extra = summary_tokens if summary and summarised >= first else 0
            if calibrated.tokens(total - sum(sizes[:first]) + extra + NOTE_TOKENS) <= room:
                break
        uses_summary = bool(summary) and summarised >= first
        total += (summary_tokens if uses_summary else 0) + NOTE_TOKENS - sum(sizes[:first])
        if uses_summary:
            note = f"[Summary of the {first:,} earlier messages of this conversation, left out]\n{summary}"
        else:
            note = (
                f"[{first:,} earlier messages of this conversation are left out: they do not fit the "
                f"model's context window of {window.tokens:,} tokens.]"
            )
    sent = body[first:]
    if calibrated.tokens(total) > room:
        # The current turn alone is too large: its results give way, oldest first.
        for index, message in enumerate(sent):
            if message.get("role") != "tool" or index + first <= newest:
                continue
            call_id = str(message.get("tool_call_id") or "")
            stub = {**message, "content": _stub(call_id, str(message["content"]))}
            total += counter.of(stub) - sizes[index + first]
            sent[index] = stub
            if call_id not in cut:
                cut.append(call_id)
            if calibrated.tokens(total) <= room:
                break
    if calibrated.tokens(total) > room:
        raise TooLarge(
            f"Your message is too long for the model: with the system prompt and the tool definitions it "
            f"comes to about {calibrated.tokens(total):,} tokens, and the model's context window is "
            f"{window.describe()}, {answer_tokens(window):,} of them kept for the answer. Nothing was "
            "sent; shorten the message (or what it attaches) and send it again."
        )
    head: list[dict[str, Any]] = []
    if system is not None or note:
        prompt = str(system.get("content") or "") if system is not None else ""
        head = [{"role": "system", "content": f"{prompt}\n\n{note}".strip() if note else prompt}]
    return Fitted(
        messages=[*head, *preamble, *sent],
        tools=tools,
        estimated=total,
        tokens=calibrated.tokens(total),
        window=window,
        cut=cut,
        left_out=0 if (summary and summarised >= first) else first,
        summarised=first if (summary and summarised >= first) else 0,
    )

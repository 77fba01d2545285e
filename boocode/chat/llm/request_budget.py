"""Every model request fits the model's window: counted before it is sent, cut where it must be.

:func:`fit` takes the conversation as the model would read it whole (:mod:`boocode.chat.turn.history`
and the turn's own steps) and the tool definitions, and returns what is sent:

- the **fixed parts** are counted first: the system prompt, the tool definitions and the space
  kept for the answer (:func:`boocode.chat.llm.windows.answer_tokens`);
- a **tool result** over :data:`RESULT_SHARE` of the window reaches the model as its beginning
  and its end, with a marker saying how many characters were left out and how to read them
  with the ``read_result`` tool (:mod:`boocode.chat.llm.result_pages`); the stored result is whole;
- the **summary** of the earlier messages, when there is one (:mod:`boocode.chat.llm.compaction`),
  is sent in the system prompt instead of the messages it stands for;
- **earlier turns** that still do not fit are left out, oldest first, and the system prompt
  says how many were; a turn is never split (a tool result never loses its call);
- results of the **current turn** are cut to a marker, oldest first, if its steps alone pass
  the window;
- when the newest user message and the fixed parts cannot fit, :class:`TooLarge` says so in a
  sentence and nothing is sent.

Counting is :mod:`boocode.tools.token_estimate` times the model's :class:`Calibration`: the
ratio of what its server's ``usage.prompt_tokens`` said to what was estimated for the same
request, kept per conversation and model in this process (a restart begins at 1 again). Each message is
estimated once per turn (:class:`Counter` keeps the figures for the turn's later steps).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from boocode.chat.llm.windows import Window, answer_tokens
from boocode.tools.token_estimate import (
    MESSAGE_OVERHEAD,
    Excerpt,
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
TOOLS_SHARE = 0.5  # of the window: the most the tool definitions get before deferred tools take over
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


_calibrations: OrderedDict[tuple[int, str, str], Calibration] = OrderedDict()
MAX_CALIBRATIONS = 10_000  # conversations (and their models) remembered; the oldest go first


def calibration(conversation_id: int, base_url: str, model: str) -> Calibration:
    """The calibration of ``model`` at ``base_url`` in one conversation (created at 1).

    Per conversation: what a server counts for an estimate depends on what the conversation
    holds (code, logs, another language), and one conversation's odd report stays in it.
    """
    key = (conversation_id, base_url, model)
    found = _calibrations.get(key)
    if found is None:
        found = _calibrations[key] = Calibration()
        if len(_calibrations) > MAX_CALIBRATIONS:
            _calibrations.popitem(last=False)
    else:
        _calibrations.move_to_end(key)
    return found


@dataclass
class Counter:
    """The estimates of one turn's messages, kept for its later steps (keyed by the message object)."""

    sizes: dict[int, tuple[dict[str, Any], int]] = field(default_factory=dict)
    definitions: tuple[list[dict[str, Any]] | None, int] = (None, 0)

    def of_tools(self, tools: list[dict[str, Any]]) -> int:
        """The estimated tokens of the tool definitions ``tools`` (the same list is counted once)."""
        if self.definitions[0] is not tools:
            self.definitions = (tools, estimate_json(tools))
        return self.definitions[1]

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
    saying how much was left out and how to read it (``read_result``).

    An :class:`~boocode.tools.token_estimate.Excerpt` (a stored result read without its middle)
    is cut from the parts that were read; the offsets are the whole result's.
    """
    marker_room = 120
    total = output.total if isinstance(output, Excerpt) else len(output)
    whole_head = output.head if isinstance(output, Excerpt) else output
    head = prefix_within(whole_head, max(0, (tokens - marker_room) * 2 // 3))
    rest = output.tail if isinstance(output, Excerpt) else output[len(head) :]
    tail = suffix_within(rest, max(0, (tokens - marker_room) // 3))
    left = total - len(head) - len(tail)
    if left <= 0:
        return str(output)
    marker = (
        f"\n[... {left:,} of {total:,} characters left out here (characters {len(head):,} to "
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

    The conversation is counted from its newest message back, a turn at a time, and no further
    than the window reaches: what a turn costs grows with the window, not with the conversation.
    """
    room = window.tokens - answer_tokens(window)
    system = messages[0] if messages and messages[0].get("role") == "system" else None
    start = 1 if system is not None else 0
    preamble = list(messages[start : start + keep])
    body = list(messages[start + keep :])
    fixed = sum(counter.of(message) for message in ([system] if system is not None else []) + preamble)
    fixed += counter.of_tools(tools) if tools else 0
    if calibrated.tokens(fixed) > room:
        raise TooLarge(
            f"This conversation's system prompt and tool definitions (about {calibrated.tokens(fixed):,} "
            f"tokens) do not fit the model's context window of {window.describe()} with room for the "
            "answer, so nothing was sent. Give the agent fewer tools or toolSearch: always in AGENTS.md, "
            "or use a model with a larger window."
        )
    limit = result_limit(window)
    share = int(limit / calibrated.ratio / MARGIN)
    cut: list[str] = []

    def cost(index: int) -> int:
        """The estimate of ``body[index]`` as sent (a result over its share is cut first)."""
        message = body[index]
        content = message.get("content")
        if message.get("role") == "tool" and isinstance(content, str) and _over(content, share):
            call_id = str(message.get("tool_call_id") or "")
            body[index] = message = {**message, "content": cut_result(call_id, content, share)}
            cut.append(call_id)
        return counter.of(message)

    newest = max((i for i, m in enumerate(body) if m.get("role") == "user"), default=0)
    current = [cost(index) for index in range(newest, len(body))]
    total = fixed + sum(current)
    # A summary stands for the messages it covers (never the newest question's turn).
    covered = min(summarised, newest) if summary else 0
    summary_tokens = estimate(summary) + MESSAGE_OVERHEAD if covered else 0
    # Earlier turns, newest first, while they fit (with room kept for the summary and the note).
    first = newest
    reserve = NOTE_TOKENS + summary_tokens  # what goes in place of the turns left out
    earlier = 0
    index = newest - 1
    while index >= covered:
        begin = index
        while begin > covered and body[begin].get("role") != "user":
            begin -= 1
        turn = sum(cost(i) for i in range(begin, index + 1))
        if begin == 0 and calibrated.tokens(total + earlier + turn) <= room:
            first, earlier = 0, earlier + turn  # the whole conversation fits: no note
            break
        if calibrated.tokens(total + earlier + turn + reserve) > room:
            break
        first, earlier, index = begin, earlier + turn, begin - 1
    total += earlier
    notes = []
    if covered:
        total += summary_tokens + NOTE_TOKENS
        notes.append(
            f"[Summary of the {covered:,} earlier messages of this conversation, left out]\n{summary}"
        )
    if first > covered:
        total += NOTE_TOKENS
        notes.append(
            f"[{first - covered:,} earlier messages of this conversation are left out: they do not fit the "
            f"model's context window of {window.tokens:,} tokens.]"
        )
    note = "\n\n".join(notes)
    sent = body[first:]
    if calibrated.tokens(total) > room:
        # The current turn alone is too large: its results give way, oldest first.
        for offset, message in enumerate(sent):
            if message.get("role") != "tool" or offset + first <= newest:
                continue
            call_id = str(message.get("tool_call_id") or "")
            stub = {**message, "content": _stub(call_id, str(message["content"]))}
            total += counter.of(stub) - counter.of(message)
            sent[offset] = stub
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
        left_out=first - covered,
        summarised=covered,
    )


def _over(text: str, tokens: int) -> bool:
    """Whether ``text`` is estimated at more than ``tokens``, estimating no more of it than needed."""
    if isinstance(text, Excerpt):
        return True  # read without its middle because it is long
    if len(text) <= tokens:  # under one token a character unless non-ASCII: estimate it
        return estimate(text) > tokens
    piece = text[: tokens * 8]
    return estimate(piece) > tokens or (len(piece) < len(text) and estimate(text) > tokens)

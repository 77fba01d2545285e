"""Building one model request of a long conversation, budget included: what a turn's start costs.

Fills a fresh SQLite database (in a temporary data folder) with one conversation of
``--messages`` messages, ``--results`` of them assistant steps each with one tool call whose
result is real tool output (this checkout's code, JSON, logs; some over their share of the
window, so they are cut), then times, as median and p95 milliseconds over ``--reads`` runs:

  history     the read of the conversation as the model reads it (model_history.llm_history)
  budget      fitting it into the window (request_budget.fit with a fresh Counter, as a turn's
              first step does): estimating every message, cutting long results, leaving
              out earlier turns
  request     both, then the JSON body (llm.build_request and its encoding), as the turn's first
              model request is built

with ``--window`` tokens (default 32,768) and prints how many results were cut and messages left out.
Each result is a real output cut to a random length of 200 to ``--result-chars`` characters
(default 8,000; 0 keeps whole outputs, up to 150 KB, about 2.6 MB in all).

    .venv/bin/python bench/request_budget.py [--messages 1000] [--results 200] [--reads 200]
        [--window 32768] [--result-chars 8000]

This is a benchmark, not a test: it prints figures and asserts nothing about time.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import django

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def options() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--messages", type=int, default=1000)
    parser.add_argument("--results", type=int, default=200)
    parser.add_argument("--reads", type=int, default=200)
    parser.add_argument("--window", type=int, default=32768)
    parser.add_argument(
        "--result-chars",
        type=int,
        default=8000,
        help="results are real outputs cut to a random length up to this (0: whole, up to 150 KB)",
    )
    return parser.parse_args()


def timed(call: Callable[[], Any], times: int) -> tuple[float, float]:
    """Median and p95 of ``call``'s duration in milliseconds."""
    spent = []
    for _ in range(times):
        started = time.perf_counter()
        call()
        spent.append((time.perf_counter() - started) * 1e3)
    spent.sort()
    return statistics.median(spent), spent[max(int(len(spent) * 0.95) - 1, 0)]


def outputs() -> list[str]:
    """Real tool outputs: source files, JSON documents and log lines of this checkout, of many sizes."""
    found = [path.read_text() for path in sorted((ROOT / "boocode" / "chat").glob("*.py"))]
    found += [
        json.dumps(json.loads(path.read_text()), indent=2)
        for path in sorted(ROOT.glob("tests/node/package*.json"))
    ]
    log = (ROOT / "docs" / "benchmarks.md").read_text().splitlines()
    found += [
        "\n".join(f"2026-12-07 12:00:{i % 60:02d},123 INFO {line}" for i, line in enumerate(log[:n]))
        for n in (40, 400)
    ]
    return found


def fill(messages: int, results: int, result_chars: int = 0) -> int:
    from django.contrib.auth import get_user_model
    from django.db import transaction

    from boocode.chat.models import Conversation, Message, ToolCall

    pick = random.Random(7)
    texts = outputs()
    user = get_user_model().objects.create(username="bench")
    conversation = Conversation.objects.create(owner=user)
    steps = set(pick.sample(range(1, messages, 2), results))  # assistant positions (odd) with a call
    with transaction.atomic():
        for index in range(messages):
            if index % 2 == 0:
                Message.objects.create(
                    conversation=conversation,
                    role="user",
                    content=f"Question {index}: " + "word " * pick.randint(5, 60),
                )
                continue
            content = "" if index in steps else "An answer of some sentences. " * pick.randint(1, 20)
            message = Message.objects.create(conversation=conversation, role="assistant", content=content)
            if index in steps:
                ToolCall.objects.create(
                    message=message,
                    call_id=f"call_{index}",
                    name="fs_read_text_file",
                    arguments=json.dumps({"path": f"/srv/file{index}.txt"}),
                    output=pick.choice(texts)[: pick.randint(200, result_chars) if result_chars else None],
                    status="done",
                )
    return conversation.pk


def main() -> None:
    args = options()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "boocode.settings")
    os.environ.setdefault("BOOCODE_DATA_DIR", tempfile.mkdtemp(prefix="boocode-bench-budget-"))
    os.environ["BOOCODE_MCP_AUTOSTART"] = "0"
    os.environ.pop("BOOCODE_DATABASE_URL", None)
    django.setup()

    from django.core.management import call_command

    from boocode.chat.llm.client import build_request
    from boocode.chat.llm.request_budget import Calibration, Counter, fit, result_limit
    from boocode.chat.llm.windows import Window
    from boocode.chat.turn import history as model_history

    call_command("migrate", verbosity=0)
    conversation = fill(args.messages, args.results, args.result_chars)
    prompt = "You are a careful assistant. " * 40
    window = Window(args.window, "bench")
    tools = [
        {
            "type": "function",
            "function": {
                "name": f"fs_tool_{n}",
                "description": "Does one thing. " * 10,
                "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
            },
        }
        for n in range(14)
    ]

    read_chars = result_limit(window) * 5  # as the turn reads (boocode.chat.turn.context.read_for_model)
    history = model_history.llm_history(conversation, prompt, result_chars=read_chars)
    fitted = fit(history, tools, window, Calibration(), Counter())
    characters = sum(len(str(m["content"] or "")) for m in history)
    print(
        f"{len(history) - 1:,} messages ({args.results} tool results, {characters:,} characters); "
        f"window {args.window:,}: {len(fitted.cut)} results cut, {fitted.left_out} messages left out, "
        f"request about {fitted.tokens:,} tokens"
    )

    def request() -> None:
        read = model_history.llm_history(conversation, prompt, result_chars=read_chars)
        sent = fit(read, tools, window, Calibration(), Counter())
        json.dumps(build_request(sent.messages, model="m", tools=sent.tools)).encode()

    rows = [
        ("history", lambda: model_history.llm_history(conversation, prompt, result_chars=read_chars)),
        ("budget", lambda: fit(history, tools, window, Calibration(), Counter())),
        ("request", request),
    ]
    print(f"{'':10} {'median ms':>10} {'p95 ms':>8}")
    for name, call in rows:
        median, p95 = timed(call, args.reads)
        print(f"{name:10} {median:10.2f} {p95:8.2f}")


if __name__ == "__main__":
    main()

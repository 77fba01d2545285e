"""The budget of a model request: windows from configuration, the estimate, cut results and
turns left out (boocode.chat.llm.windows, boocode.chat.llm.request_budget, boocode.tools.token_estimate).

Pure functions: no server is needed. The turn's use of them, against a scripted model that
enforces its window, is in test_context_window.py.
"""

from __future__ import annotations

import json
import os
import subprocess
from typing import Any

import pytest

from agents.models import Agent
from boocode.chat.llm.request_budget import Calibration, Counter, TooLarge, fit
from boocode.chat.llm.windows import Window, answer_tokens, configured_window, window_problem
from boocode.tools.native import page_text
from boocode.tools.token_estimate import estimate, prefix_within, suffix_within
from tests.support.llm import prompt_tokens
from tests.support.processes import PYTHON, ROOT


def agent(**fields: Any) -> Agent:
    return Agent(name="Local", **fields)


def test_the_window_comes_from_the_server_then_the_agent_then_the_setting_then_the_default(settings):
    settings.LLM_MODEL, settings.LLM_CONTEXT_TOKENS = "qwen3:8b", 0
    own = agent(model="qwen3:8b", context_tokens=32768)
    assert configured_window(own, "qwen3:8b", discovered=40960) == Window(40960, "server")
    assert configured_window(own, "qwen3:8b") == Window(32768, "agent context:")
    assert configured_window(agent(context_tokens=16384), "") == Window(16384, "agent context:")
    # The agent's context: is its own model's: a conversation switched to another does not inherit it.
    assert configured_window(own, "big-model") == Window(8192, "default")
    settings.LLM_CONTEXT_TOKENS = 65536
    assert configured_window(own, "big-model") == Window(65536, "BOOCODE_LLM_CONTEXT_TOKENS")
    assert configured_window(None, "") == Window(65536, "BOOCODE_LLM_CONTEXT_TOKENS")


@pytest.mark.processes
@pytest.mark.parametrize("value", ["512", "lots"])
def test_a_bad_context_setting_stops_the_process_with_a_clear_message(tmp_path, value):
    env = {**os.environ, "BOOCODE_DATA_DIR": str(tmp_path), "BOOCODE_LLM_CONTEXT_TOKENS": value}
    result = subprocess.run([PYTHON, "manage.py", "check"], cwd=ROOT, env=env, capture_output=True, text=True)
    assert result.returncode != 0
    expected = "must be 0 (unset) or at least 1024 tokens" if value == "512" else "expected an integer"
    assert f"BOOCODE_LLM_CONTEXT_TOKENS={value!r}" in result.stderr or f"={value}:" in result.stderr
    assert expected in result.stderr


def test_a_window_too_small_for_the_prompt_and_tools_is_named_with_what_to_change():
    window = Window(4096, "server")
    problem = window_problem("qwen3:8b", window, 800, 15000, "Coder")
    assert 'Model "qwen3:8b" has a context window of 4,096 tokens (server)' in problem
    assert 'agent "Coder"' in problem and "toolSearch: always" in problem and "fewer tools" in problem
    assert window_problem("qwen3:8b", Window(32768, "server"), 800, 15000, "Coder") == ""


@pytest.mark.parametrize(
    "text",
    [
        json.dumps([{"id": i, "name": f"item {i}", "tags": ["a", "b"], "size": i * 37} for i in range(300)]),
        "\n".join(
            f"2026-12-07 17:{i % 60:02d}:13,482 INFO worker[{i}] done in {i * 3} ms" for i in range(300)
        ),
        (ROOT / "boocode" / "chat" / "turn" / "loop.py").read_text()[:20000],
        "Plain words that a person writes to a model, sentence after sentence. " * 100,
    ],
    ids=["json", "log", "code", "prose"],
)
def test_the_estimate_is_near_a_byte_pair_count(text):
    # The scripted server's tokenizer stands for the model's: the estimate is within a third of it
    # (the calibration by the server's usage takes the rest, docs/models.md).
    counted = prompt_tokens({"messages": [{"role": "user", "content": text}]})
    assert 0.67 < estimate(text) / counted < 1.5


def test_prefix_and_suffix_stay_within_their_tokens():
    text = "".join(f"line {i}: {'x' * (i % 50)}\n" for i in range(5000))
    head, tail = prefix_within(text, 1000), suffix_within(text, 500)
    assert text.startswith(head) and text.endswith(tail)
    assert 900 <= estimate(head) <= 1000 and 450 <= estimate(tail) <= 500


def history(turns: int, result: str = "ok") -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are terse."}]
    for index in range(turns):
        call = f"call_{index}"
        messages += [
            {"role": "user", "content": f"question {index}"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": call, "type": "function", "function": {"name": "t", "arguments": ""}}],
            },
            {"role": "tool", "tool_call_id": call, "content": result},
            {"role": "assistant", "content": f"answer {index}"},
        ]
    return messages


def test_a_result_over_its_share_reaches_the_model_as_its_beginning_and_end():
    big = "".join(f"{i:06d} some log line\n" for i in range(100_000))
    messages = [*history(1, big), {"role": "user", "content": "and the last line?"}]
    fitted = fit(messages, None, Window(32768, "default"), Calibration(), Counter())
    sent = fitted.messages[3]["content"]
    assert fitted.cut == ["call_0"] and fitted.tokens <= 32768 - answer_tokens(Window(32768, "default"))
    assert sent.startswith("000000 some log line") and sent.endswith("099999 some log line\n")
    assert "characters left out here" in sent and '"call_id": "call_0", "offset": ' in sent
    assert messages[3]["content"] is big  # the conversation itself is not changed


def test_earlier_turns_are_left_out_whole_with_a_note_and_the_newest_always_stays():
    messages = [*history(200, "r" * 400), {"role": "user", "content": "now?"}]
    window = Window(4096, "default")
    fitted = fit(messages, None, window, Calibration(), Counter())
    assert fitted.left_out > 0 and fitted.left_out % 4 == 0  # whole turns
    assert fitted.messages[0]["content"].startswith("You are terse.\n\n[")
    note = f"{fitted.left_out:,} earlier messages of this conversation are left out"
    assert note in fitted.messages[0]["content"]
    assert fitted.messages[1]["role"] == "user" and fitted.messages[-1] == {"role": "user", "content": "now?"}
    assert prompt_tokens({"messages": fitted.messages}) <= window.tokens - answer_tokens(window)


def test_a_summary_stands_for_the_turns_it_covers():
    messages = [*history(200, "r" * 400), {"role": "user", "content": "now?"}]
    window = Window(4096, "default")
    fitted = fit(messages, None, window, Calibration(), Counter(), summary="We spoke of r.", summarised=800)
    assert fitted.left_out == 0 and fitted.summarised > 0
    system = fitted.messages[0]["content"]
    assert "Summary of the" in system and "We spoke of r." in system


def test_a_message_that_cannot_fit_is_refused_in_a_sentence():
    messages = [{"role": "system", "content": "x"}, {"role": "user", "content": "word " * 20000}]
    with pytest.raises(TooLarge, match=r"Your message is too long for the model.*Nothing was sent"):
        fit(messages, None, Window(8192, "default"), Calibration(), Counter())
    tools = [
        {"type": "function", "function": {"name": f"t{i}", "description": "d " * 200}} for i in range(99)
    ]
    short = [*messages[:1], {"role": "user", "content": "hi"}]
    with pytest.raises(TooLarge, match="system prompt and tool definitions"):
        fit(short, tools, Window(8192, "default"), Calibration(), Counter())


def test_the_calibration_follows_the_servers_count_within_bounds():
    calibrated = Calibration()
    calibrated.observe(1000, 1300)
    assert calibrated.ratio == 1.3
    calibrated.observe(1000, 100_000)
    assert calibrated.ratio == 3.0


def test_a_stored_result_is_read_by_pages_and_by_pattern():
    text = "".join(f"line {i}\n" for i in range(10_000)) + "the LAST line"
    page = page_text(text, 10, 20)
    assert page.startswith(text[10:30]) and "read on with offset 30" in page
    assert page_text(text, len(text) - 13, 100).startswith("the LAST line\n[characters")
    found = page_text(text, pattern="LAST")
    assert found == f"line 10001 (offset {len(text) - 13}): the LAST line"
    assert len(page_text(text, 0, 10**6)) < 16_200  # a page is bounded
    assert "stopped after 200 matching lines" in page_text(text, pattern="line")

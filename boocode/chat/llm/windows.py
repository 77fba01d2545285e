"""A model's context window: how many tokens one request and its answer may hold, and who said so.

In order, the first that knows wins:

1. ``server``: what the model server says of the model (discovered, passed in as ``discovered``);
2. ``agent context:``: the agent's ``context:`` key in AGENTS.md, for the agent's own model;
3. ``BOOCODE_LLM_CONTEXT_TOKENS``: the setting;
4. ``default``: :data:`DEFAULT_CONTEXT_TOKENS`, 8,192 tokens. Every chat model in current use has
   at least that window (Llama 3 8B's is 8,192; Qwen 2.5 and 3, Mistral, gpt-oss and the hosted
   models' are 32k and more), so a request built for it fits any of them. A server that was
   started with a smaller one (Ollama's and llama.cpp's 4,096) says so and is discovered.

:func:`window_problem` tells, in a sentence for a person, when a window cannot hold BooCode's
system prompt, the agent's tool definitions and the space kept for the answer.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings

from agents.models import Agent
from boocode.chat.llm.model_windows import known_window
from boocode.chat.llm.types import LLMSettings

__all__ = [
    "DEFAULT_CONTEXT_TOKENS",
    "MIN_HISTORY_TOKENS",
    "Window",
    "answer_tokens",
    "configured_window",
    "window_for",
    "window_problem",
]

DEFAULT_CONTEXT_TOKENS = 8192
# What a window must keep for the conversation itself once the fixed parts are in.
MIN_HISTORY_TOKENS = 512

SERVER = "server"
AGENT = "agent context:"
SETTING = "BOOCODE_LLM_CONTEXT_TOKENS"
DEFAULT = "default"


@dataclass(frozen=True)
class Window:
    """A context window: ``tokens`` and where the figure came from (``source``)."""

    tokens: int
    source: str

    def describe(self) -> str:
        """The window as a person reads it: "32,768 tokens (agent context:)"."""
        return f"{self.tokens:,} tokens ({self.source})"


def configured_window(agent: Agent | None, model: str, discovered: int | None = None) -> Window:
    """The window of ``model`` used by ``agent`` (see the module docstring for the order).

    ``discovered``: what the model server said of the model (``None``: what it said when last
    asked, :func:`boocode.chat.llm.model_windows.known_window`, so that the page and the admin show
    the window the turn used). The agent's ``context:`` counts for the agent's own model only
    (its ``model:``, or the default model when it names none): a conversation switched to
    another model does not inherit it.
    """
    if discovered is None:
        name = model or (agent.model if agent is not None else "") or settings.LLM_MODEL
        discovered = known_window(LLMSettings.from_settings(name), name)
    if discovered is not None and discovered > 0:
        return Window(discovered, SERVER)
    if agent is not None and agent.context_tokens:
        own = agent.model or settings.LLM_MODEL
        if not model or model == own:
            return Window(agent.context_tokens, AGENT)
    if settings.LLM_CONTEXT_TOKENS:
        return Window(settings.LLM_CONTEXT_TOKENS, SETTING)
    return Window(DEFAULT_CONTEXT_TOKENS, DEFAULT)


async def window_for(agent: Agent | None, model: str, discovered: int | None = None) -> Window:
    """:func:`configured_window`, for the turn: ``discovered`` is the model server's own figure
    (``boocode.chat.llm.model_windows.server_window``), consulted first."""
    return configured_window(agent, model, discovered)


def answer_tokens(window: Window) -> int:
    """The tokens kept free for the answer: ``BOOCODE_LLM_ANSWER_TOKENS``, at most a quarter of the window."""
    return min(settings.LLM_ANSWER_TOKENS, window.tokens // 4)


def window_problem(model: str, window: Window, prompt_tokens: int, tools_tokens: int, agent: str) -> str:
    """Why ``window`` cannot hold the agent's system prompt and tools with room to talk, or ``""``."""
    answer = answer_tokens(window)
    needed = prompt_tokens + tools_tokens + answer + MIN_HISTORY_TOKENS
    if needed <= window.tokens:
        return ""
    return (
        f'Model "{model}" has a context window of {window.describe()}, which cannot hold agent '
        f'"{agent}"\'s system prompt (about {prompt_tokens:,} tokens) and tool definitions (about '
        f"{tools_tokens:,} tokens) with the {answer:,} tokens kept for the answer and "
        f"{MIN_HISTORY_TOKENS:,} for the conversation (about {needed:,} tokens in all). Give the "
        "agent fewer tools (tools: in AGENTS.md) or toolSearch: always, a shorter prompt, or a "
        "model with a larger window (the agent's context: key or BOOCODE_LLM_CONTEXT_TOKENS, if "
        "the server's window is larger than BooCode assumes)."
    )

"""The turn's context: what a turn gathers before its model request, and the request fitted to it.

Who (the conversation's owner, their groups and own servers, as the read found them), which
agent and model, the agent's tools right now (deferred behind a search when they pass their
share of the window), the history as the model reads it (with the summary that stands for the
earlier part), the owner's budget standing, and the model's window the request is fitted to
(:mod:`boocode.chat.llm.request_budget`). The read is one database unit (:func:`read_for_model`,
or :func:`admitted_read` with the socket's session check in the same hop); :func:`turn_context`
builds the :class:`TurnContext` from it without a query. The turn loop
(:mod:`boocode.chat.turn.loop`) owns the context for the turn's length and changes it as the turn
goes (the messages it appends, the window a refusal shrinks).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from agents.models import Agent
from agents.roster import refresh_agents_if_changed
from boocode.chat.ledger import budgets
from boocode.chat.llm import compaction, windows
from boocode.chat.llm.client import LLMError, LLMSettings
from boocode.chat.llm.request_budget import (
    READ_RESULT,
    Counter,
    Fitted,
    TooLarge,
    calibration,
    fit,
    result_limit,
    tools_limit,
)
from boocode.chat.llm.result_pages import read_result_tool
from boocode.chat.turn import agent_choice
from boocode.chat.turn import history as model_history
from boocode.tools.agent_rules import agent_tools
from boocode.tools.deferred import DeferredTools, search_on
from boocode.tools.tool import MAX_MODEL_TOOL_BYTES, MAX_MODEL_TOOLS, Tool, within_model_bounds
from mcpclient.runtime.signin import remember_person

NOT_CONFIGURED = (
    "No model is configured: set BOOCODE_LLM_BASE_URL and BOOCODE_LLM_MODEL. "
    "The tool console still works: /tools lists the agent's tools, /call <tool> {json} runs one."
)


@dataclass
class TurnContext:
    """What one turn works with: the agent, its tools right now and the history."""

    agent_name: str
    llm: LLMSettings
    tools: list[Tool]
    openai_tools: list[dict[str, Any]]
    messages: list[dict[str, Any]]
    temperature: float | None
    top_p: float | None
    max_tool_calls: int
    tools_left_out: int = 0  # the agent's tools past what one model request may carry
    # Deferred tools (toolSearch, docs/tools.md): what each request offers, loaded by searches.
    deferred: DeferredTools | None = None
    # The model's window and the estimates of the turn's messages (boocode.chat.llm.request_budget).
    window: windows.Window = field(default_factory=lambda: windows.configured_window(None, ""))
    counter: Counter = field(default_factory=Counter)
    keep: int = 0  # messages after the system prompt always sent (the agent's skills)
    fitted: Fitted | None = None  # the last request sent
    conversation_id: int = 0  # whose calibration the estimates use (request_budget.calibration)
    # The stored message of each entry of ``messages`` read from the database (0: none), and the
    # summary that stands for the earlier ones (boocode.chat.llm.compaction).
    ids: list[int] = field(default_factory=list)
    summary: compaction.Summary | None = None

    def summarised(self) -> int:
        """How many messages (after the system prompt and skills) the summary stands for."""
        if self.summary is None:
            return 0
        start = (1 if self.messages and self.messages[0].get("role") == "system" else 0) + self.keep
        up_to = self.summary.up_to
        return sum(1 for source in self.ids[start:] if 0 < source <= up_to)

    def offered(self) -> list[dict[str, Any]]:
        """The tool definitions of the next model request."""
        if self.deferred is None:
            return self.openai_tools
        return within_model_bounds(self.deferred.offered())[1]


def read_for_model(conversation_id: int, text: str | None) -> Read:
    """The read before the model request: the agent, the conversation's model, the messages and
    the owner's daily token budget, groups and whether they have own servers (read with the
    conversation's choices: no query of their own); their own servers when they have some.

    Re-reads AGENTS.md if it changed. The history ends with ``text``, the message that is
    stored while the request goes out (``None``: the history already ends with it).
    """
    refresh_agents_if_changed()
    read_at = time.monotonic()
    agent_name, model, standing, owner = budgets.conversation_read(conversation_id)
    # The owner's groups and own servers, as this read found them: prepare_hub reads nothing.
    remember_person(standing.user_id, owner.groups, owner.own_servers, read_at)
    agent = agent_choice.resolve_agent(agent_name, standing.user_id)
    # Long results are read as their beginning and end: what the window lets a request carry
    # (5 characters a token: letters' rate, more than most text has).
    result_chars = result_limit(windows.configured_window(agent, model)) * 5
    ids: list[int] = []
    history = model_history.llm_history(
        conversation_id, agent.prompt, then=text, result_chars=result_chars, ids=ids
    )
    return agent, model, history, standing, Earlier(ids, compaction.current_summary(conversation_id))


@dataclass(frozen=True)
class Earlier:
    """Of the read: the stored message each history entry comes from, and the summary in use."""

    ids: list[int]
    summary: compaction.Summary | None


type Read = tuple[Agent, str, list[dict[str, Any]], budgets.Standing, Earlier]


def admitted_read(
    check: Callable[[], bool], conversation_id: int, text: str | None
) -> tuple[bool, Read | None]:
    """The admission check and, when it passes and ``text`` is given, the read before the model
    request (:func:`read_for_model`) in the same hop; an unavailable agent is raised by the turn."""
    if not check():
        return False, None
    return True, None if text is None else read_for_model(conversation_id, text)


def tools_left_out_notice(context: TurnContext) -> str:
    left_out, kept = context.tools_left_out, len(context.tools)
    return (
        f"{left_out:,} of the agent's {left_out + kept:,} tools were left out of this request: one "
        f"request carries at most {MAX_MODEL_TOOLS} tools and {MAX_MODEL_TOOL_BYTES // 1024:,} KB of "
        "their definitions. Narrow the agent's tools in AGENTS.md to choose which."
    )


def turn_context(
    agent: Agent,
    history: list[dict[str, Any]],
    user_id: int | None = None,
    model: str = "",
    window: windows.Window | None = None,
    conversation_id: int | None = None,
) -> TurnContext:
    """The turn's context; the tools are the registry's current ones (in memory, no query).

    ``model`` is the conversation's choice; empty means the agent's ``model:`` (or the default).
    An agent with ``toolSearch: auto`` defers its tools when their definitions pass their share
    of ``window`` too (:func:`boocode.chat.llm.request_budget.tools_limit`). With ``conversation_id``
    the model may call ``read_result`` (:mod:`boocode.chat.llm.result_pages`); it is offered when a
    request carries a cut result.
    """
    window = window or windows.configured_window(agent, model)
    allowed = agent_tools(agent, user_id=user_id)
    deferred = None
    tools: list[Tool]
    definitions: list[dict[str, Any]]
    if search_on(agent.tool_search, allowed, tools_limit(window)):
        deferred = DeferredTools(
            allowed,
            pinned=agent.pinned or (),
            history=history,
            current=lambda: agent_tools(agent, user_id=user_id),
        )
        tools, definitions = [*deferred.tools, deferred.tool], []  # any of them may be called by name
    else:
        tools, definitions = within_model_bounds(allowed)
    left_out = 0 if deferred is not None else len(allowed) - len(tools)
    if conversation_id is not None:
        tools = [*tools, read_result_tool(conversation_id)]
    return TurnContext(
        agent_name=agent.name,
        llm=LLMSettings.from_settings(model or agent.model),
        tools=tools,
        openai_tools=definitions,
        deferred=deferred,
        tools_left_out=left_out,
        messages=history,
        temperature=agent.temperature,
        top_p=agent.top_p,
        max_tool_calls=agent.max_tool_calls,
        window=window,
        conversation_id=conversation_id or 0,
    )


def fixed_tokens(agent: Agent, window: windows.Window, user_id: int | None = None) -> tuple[int, int]:
    """The estimated tokens of ``agent``'s system prompt and of the tool definitions its first
    request offers with ``window`` (the deferred set when its tools are deferred): what
    :func:`boocode.chat.llm.windows.window_problem` weighs, counted as the turn counts them."""
    history = [{"role": "system", "content": agent.prompt}] if agent.prompt.strip() else []
    context = turn_context(agent, history, user_id, "", window)
    prompt = context.counter.of(history[0]) if history else 0
    return prompt, context.counter.of_tools(context.offered())


def refit(context: TurnContext, refusal: LLMError) -> str:
    """After the server refused a request as too long: its figures are believed (the window it
    states, the prompt tokens it counted), the window shrinks to them (or by a quarter when it
    gave none) and the turn asks again once; what happened, for the person."""
    if refusal.prompt_tokens and context.fitted is not None:
        calibration(context.conversation_id, context.llm.base_url, context.llm.model).observe(
            context.fitted.estimated, refusal.prompt_tokens
        )
    before = context.window
    tokens = refusal.window if refusal.window else int(before.tokens * 0.75)
    context.window = windows.Window(min(tokens, before.tokens), "server" if refusal.window else before.source)
    return (
        f"The model server refused the request as longer than the model's context window (BooCode "
        f"counted about {context.fitted.tokens if context.fitted else 0:,} tokens for a window of "
        f"{before.describe()}); the request was made smaller for a window of {context.window.tokens:,} "
        "tokens, leaving out more of the earlier conversation, and sent again."
    )


def refused_again(refusal: LLMError, context: TurnContext) -> str:
    return (
        f"The model server refused the request as longer than the model's context window twice, the "
        f"second time fitted to {context.window.describe()} ({refusal}). The model's window is smaller "
        "than BooCode knows: an administrator can set it (the agent's context: key or "
        "BOOCODE_LLM_CONTEXT_TOKENS); or start a new conversation."
    )


def fit_request(context: TurnContext, tools: list[dict[str, Any]] | None) -> Fitted:
    """The request of the next step within the model's window (``read_result`` offered when a
    result in it is cut); raises :class:`LLMError` (``too_large``) when it cannot fit."""
    calibrated = calibration(context.conversation_id, context.llm.base_url, context.llm.model)
    try:
        summary = context.summary.text if context.summary is not None else ""
        covered = context.summarised()

        def fitted_with(offered: list[dict[str, Any]] | None) -> Fitted:
            return fit(
                context.messages,
                offered,
                context.window,
                calibrated,
                context.counter,
                keep=context.keep,
                summary=summary,
                summarised=covered,
            )

        fitted = fitted_with(tools)
        reader = next((tool for tool in context.tools if tool.name == READ_RESULT), None)
        if (
            fitted.cut
            and tools is not None
            and reader is not None
            and all(definition["function"]["name"] != READ_RESULT for definition in tools)
        ):
            fitted = fitted_with([*tools, reader.openai()])
    except TooLarge as exc:
        raise LLMError(str(exc), kind="too_large") from None
    context.fitted = fitted
    return fitted

"""An agent's tools: its ``tools:`` patterns and ``approve:`` rules (:mod:`agents.policy`) applied to
the registry's list (:func:`agent_tools`). A denied tool is left out, a tool the rules ask for
needs the person's approval for each call, and ``allow`` vouches for a tool that asks only
because it does not declare ``readOnlyHint: true``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from typing import Protocol

from agents.policy import ALLOW, ASK, DENY, approval_rule, is_allowed
from boocode.tools.registry import available_tools
from boocode.tools.tool import Tool
from mcpclient.core.approval import UNDECLARED_OWN_REASON, UNDECLARED_REASON

# The reasons an agent's ``approve: allow`` may vouch for: the tool said nothing (it did not
# declare readOnlyHint: true), as opposed to what its server's settings demand.
UNDECLARED_REASONS = (UNDECLARED_REASON, UNDECLARED_OWN_REASON)


class HasToolPatterns(Protocol):
    """Anything with the agent's ``tools`` patterns: an ``Agent`` row or an ``AgentSpec``."""

    @property
    def tools(self) -> Sequence[str] | None: ...


def allowed_by(tool: Tool, pattern: str) -> Tool:
    """``tool`` vouched for by the agent's ``approve: allow`` ``pattern``, when the only reason it
    asks is that it does not declare ``readOnlyHint: true``; an approval its server's settings
    demand (``writeTools``, ``trusted: false``) or the agent's own ``ask`` stays."""
    if tool.rule_reason or tool.approval_reason not in UNDECLARED_REASONS:
        return tool
    return dataclasses.replace(tool, allowed_by=pattern)


def with_rule(tool: Tool, reason: str) -> Tool:
    """``tool`` asked for by the agent's rules (``reason``); the server's own reason, if any, stays."""
    if not reason:
        return tool
    return dataclasses.replace(tool, approval_reason=tool.approval_reason or reason, rule_reason=reason)


def rule_reason(pattern: str) -> str:
    """What the approval card says of a call asked for by the agent's ``approve: ask`` rule."""
    return f'the agent\'s approval rules ask for each call ("approve: ask" matches "{pattern}")'


def agent_tools(
    agent: HasToolPatterns, tools: Iterable[Tool] | None = None, *, user_id: int | None = None
) -> list[Tool]:
    """The tools ``agent`` may use now (for ``user_id``): its patterns applied to the registry.

    Its approval rules (``approve:``, :func:`agents.policy.approval_rule`) apply too: a denied
    tool is left out, a tool the rules ask for needs the person's approval for each call, and
    ``allow`` vouches for a tool that asks only because it does not declare ``readOnlyHint: true``.
    ``tools`` defaults to :func:`available_tools`; pass a list to reuse one already built.
    """
    candidates = available_tools(user_id) if tools is None else list(tools)
    patterns = agent.tools
    rules = getattr(agent, "approve", None)
    allowed = []
    for tool in candidates:
        if not is_allowed(patterns, tool.name):
            continue
        rule, pattern = approval_rule(rules, tool.name)
        if rule == DENY:
            continue
        if rule == ASK:
            tool = with_rule(tool, rule_reason(pattern))
        elif rule == ALLOW:
            tool = allowed_by(tool, pattern)
        allowed.append(tool)
    return allowed

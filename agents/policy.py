"""The agent tool policy: glob patterns that allow and deny tools by name.

Rules (the same in the docs, the admin and the tests):

- ``*`` is the only wildcard and matches any run of characters, including none. Every other
  character is literal (``?``, ``[``, ``.`` too). Matching is anchored and case-sensitive.
- Patterns are read left to right; a leading ``!`` denies; the last pattern that matches a tool
  decides.
- A tool matched by no pattern is excluded, except when every pattern is a deny: then the list
  starts from all tools (``[!web_*]`` means "everything but web").
- ``None`` (no ``tools:`` key) allows every tool; ``[]`` allows none, and so does anything that
  is not a list of strings: a policy that cannot be evaluated fails closed.

The policy is a pure function of the patterns and the tool names it is given, so callers
evaluate it against the current registry on every turn rather than caching a resolved list.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from mcpclient.core.patterns import glob_match

__all__ = ["approval_rule", "glob_match", "is_allowed", "select", "unmatched_patterns"]

ALLOW, ASK, DENY = "allow", "ask", "deny"


def _well_formed(patterns: object) -> bool:
    """Whether ``patterns`` is a list of strings (a row edited by hand may hold anything)."""
    return isinstance(patterns, list | tuple) and all(isinstance(pattern, str) for pattern in patterns)


def _split(pattern: str) -> tuple[bool, str]:
    """``(denies, glob)`` for one written pattern."""
    if pattern.startswith("!"):
        return True, pattern[1:]
    return False, pattern


def is_allowed(patterns: Sequence[str] | None, name: str) -> bool:
    """Whether a tool called ``name`` is allowed by ``patterns`` (``None`` allows everything)."""
    if patterns is None:
        return True
    if not _well_formed(patterns):
        return False  # a policy that cannot be read allows nothing: fail closed, never open
    if not patterns:
        return False
    split = [_split(pattern) for pattern in patterns]
    allowed = all(denies for denies, _ in split)  # deny-only lists start from every tool
    for denies, glob in split:
        if glob_match(glob, name):
            allowed = not denies
    return allowed


def select(patterns: Sequence[str] | None, names: Iterable[str]) -> list[str]:
    """The names allowed by ``patterns``, in the order given."""
    return [name for name in names if is_allowed(patterns, name)]


def unmatched_patterns(patterns: Sequence[str] | None, names: Iterable[str]) -> list[str]:
    """Patterns (as written) that match none of ``names``: likely typos or a server that is down."""
    if not patterns:
        return []
    names = list(names)
    return [pattern for pattern in patterns if not any(glob_match(_split(pattern)[1], n) for n in names)]


def approval_rule(rules: object, name: str) -> tuple[str, str]:
    """The agent's ``approve:`` verdict on the tool ``name``: ``(rule, pattern)``, ``("", "")`` for none.

    ``deny`` wins, then ``allow`` (which exempts a tool from the agent's own ``ask`` patterns, as
    in ``ask: ["*"]``, ``allow: ["*_read_*"]``), then ``ask``. No rule approves what the server's
    settings ask the person for (``writeTools``, ``trusted: false``): ``allow`` takes back the
    agent's own asking, and vouches for a tool that asks only because it declares nothing
    (:func:`boocode.tools.agent_rules.agent_tools`). Rules that
    cannot be read (a row edited by hand) deny: fail closed.
    """
    if not rules:
        return "", ""
    if not isinstance(rules, dict) or not all(_well_formed(rules.get(key, [])) for key in (ALLOW, ASK, DENY)):
        return DENY, "approve: (unreadable)"
    for rule in (DENY, ALLOW, ASK):
        for pattern in rules.get(rule, []):
            if glob_match(pattern, name):
                return rule, pattern
    return "", ""

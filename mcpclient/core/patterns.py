"""Tool-name patterns: ``*`` is the only wildcard.

The one matcher behind agents' ``tools:`` policies (:mod:`agents.policy`) and servers'
``includeTools``/``excludeTools`` filters (the hub), so the two read the same way. It lives
here, at the bottom of the package arrows, because the hub needs it and must not import agents.
"""

from __future__ import annotations

__all__ = ["glob_match"]


def glob_match(pattern: str, name: str) -> bool:
    """Whether ``name`` matches ``pattern`` as a whole, where ``*`` matches any run of characters.

    A linear two-pointer scan (no regular expressions), so a pattern with many stars cannot
    make matching slow.
    """
    p = n = 0
    star = -1  # position in pattern just after the last "*" seen
    resume = 0  # position in name where that "*" currently stops
    while n < len(name):
        if p < len(pattern) and pattern[p] == "*":
            star, resume = p + 1, n
            p += 1
        elif p < len(pattern) and pattern[p] == name[n]:
            p += 1
            n += 1
        elif star >= 0:
            resume += 1
            n = resume
            p = star
        else:
            return False
    while p < len(pattern) and pattern[p] == "*":
        p += 1
    return p == len(pattern)

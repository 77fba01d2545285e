"""The tool glob policy: matcher properties (hypothesis) and the examples from the design."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agents.policy import glob_match, is_allowed, select, unmatched_patterns

TOOLS = [
    "context7_get_docs",
    "context7_resolve",
    "git_log",
    "git_status",
    "grep",
    "list_dir",
    "time_now",
    "view_file",
    "web_fetch",
    "web_search",
]

# Small alphabets make collisions (and so interesting matches) likely; regex metacharacters
# are included because they must be literal.
names = st.text(alphabet="ab_.?[]", max_size=8)
globs = st.text(alphabet="ab_.?[]*", max_size=8)
patterns = st.builds(lambda deny, glob: ("!" if deny else "") + glob, st.booleans(), globs)


def oracle_match(glob: str, name: str) -> bool:
    """Reference semantics: * is .*, everything else literal, anchored."""
    regex = ".*".join(re.escape(part) for part in glob.split("*"))
    return re.fullmatch(regex, name, flags=re.DOTALL) is not None


def oracle_allowed(pats: list[str] | None, name: str) -> bool:
    """Reference semantics: last match decides; deny-only lists start from everything."""
    if pats is None:
        return True
    decision = bool(pats) and all(p.startswith("!") for p in pats)
    for pattern in pats:
        deny = pattern.startswith("!")
        if oracle_match(pattern[1:] if deny else pattern, name):
            decision = not deny
    return decision


@given(globs, names)
def test_matcher_agrees_with_the_reference(glob, name):
    assert glob_match(glob, name) == oracle_match(glob, name)


@given(names)
def test_a_pattern_without_star_matches_only_itself(name):
    assert glob_match(name, name)
    assert not glob_match(name, name + "a")
    assert not glob_match(name + "a", name)


@given(names, names)
def test_prefix_star_is_startswith_and_star_suffix_is_endswith(prefix, name):
    assert glob_match(prefix + "*", name) == name.startswith(prefix)
    assert glob_match("*" + prefix, name) == name.endswith(prefix)


@given(names)
def test_star_matches_everything_including_empty(name):
    assert glob_match("*", name) and glob_match("**", name)


def test_metacharacters_are_literal_and_matching_is_case_sensitive():
    assert glob_match("a?b", "a?b") and not glob_match("a?b", "axb")
    assert glob_match("[ab]", "[ab]") and not glob_match("[ab]", "a")
    assert glob_match("a.b", "a.b") and not glob_match("a.b", "axb")
    assert not glob_match("View_file", "view_file")


def test_many_stars_stay_fast():
    # Backtracking regexes take exponential time here; the linear matcher does not.
    assert not glob_match("*a" * 30 + "b", "a" * 200)


@given(st.none() | st.lists(patterns, max_size=5), names)
def test_policy_agrees_with_the_reference(pats, name):
    assert is_allowed(pats, name) == oracle_allowed(pats, name)


@given(st.lists(patterns, max_size=5), globs, names)
def test_a_trailing_pattern_decides_for_what_it_matches(pats, glob, name):
    if oracle_match(glob, name):
        assert is_allowed([*pats, glob], name)
        assert not is_allowed([*pats, "!" + glob], name)


@given(st.lists(globs.map(lambda g: "!" + g), min_size=1, max_size=5), names)
def test_deny_only_list_is_everything_but_the_denied(denies, name):
    assert is_allowed(denies, name) == (not any(oracle_match(d[1:], name) for d in denies))


@given(st.lists(globs, max_size=5), names)
def test_allow_only_list_is_the_union(allows, name):
    assert is_allowed(allows, name) == any(oracle_match(a, name) for a in allows)


@pytest.mark.parametrize(
    ("pats", "expected"),
    [
        (None, TOOLS),
        (["*"], TOOLS),
        (["*", "!web_*"], [t for t in TOOLS if not t.startswith("web_")]),
        (["!web_*"], [t for t in TOOLS if not t.startswith("web_")]),
        (["view_file", "grep", "context7_*"], ["context7_get_docs", "context7_resolve", "grep", "view_file"]),
        ([], []),
        (["git_*", "!git_log"], ["git_status"]),
        (["!git_log", "git_*"], ["git_log", "git_status"]),  # the last match wins
        (["!web_*", "web_search"], ["web_search"]),  # an allow makes it an allow list
    ],
)
def test_design_examples(pats, expected):
    assert sorted(select(pats, TOOLS)) == sorted(expected)


def test_unmatched_patterns_reports_typos():
    assert unmatched_patterns(["view_file", "gerp", "!web_*", "!wbe_*", "context7_*"], TOOLS) == [
        "gerp",
        "!wbe_*",
    ]
    assert unmatched_patterns(None, TOOLS) == [] and unmatched_patterns([], TOOLS) == []

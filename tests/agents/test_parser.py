"""AGENTS.md parsing: the valid forms, every reported error, and what is kept or ignored."""

from __future__ import annotations

from pathlib import Path

import pytest

from agents.parser import BUILTIN_AGENT, AgentSpec, load_agents, parse_agents_text

VALID = """\
# Our agents

Preamble text, ignored. It may mention ## inside a line without starting an agent.

## Assistant
---
description: General help
---
You are helpful.

### A sub-heading stays in the prompt

## Researcher
---
description: No web
tools: [*, !web_*]
model: small-model
temperature: 0.2
top_p: 0.9
max_tool_calls: 5
color: blue
---
Research carefully.

```markdown
## Not a heading inside a fence
```

## Reader
---
tools:
  - view_file
  - "grep"
  - list_dir
---
Read.
"""


def parse(text: str):
    return parse_agents_text(text, source="AGENTS.md")


def by_name(agents: list[AgentSpec]) -> dict[str, AgentSpec]:
    return {agent.name: agent for agent in agents}


def test_valid_file_loads_every_agent_in_order_with_defaults():
    result = parse(VALID)
    assert result.errors == []
    assert [agent.name for agent in result.agents] == ["Assistant", "Researcher", "Reader"]
    agents = by_name(result.agents)

    assistant = agents["Assistant"]
    assert assistant.tools is None  # no tools: key -> every tool
    assert assistant.temperature == 0.7 and assistant.max_tool_calls == 30 and assistant.top_p is None
    assert assistant.model == ""
    assert assistant.prompt == "You are helpful.\n\n### A sub-heading stays in the prompt"
    assert assistant.line == 5

    researcher = agents["Researcher"]
    assert researcher.tools == ("*", "!web_*")  # unquoted * and ! read as patterns, not YAML syntax
    assert (researcher.model, researcher.temperature, researcher.top_p, researcher.max_tool_calls) == (
        "small-model",
        0.2,
        0.9,
        5,
    )
    assert "## Not a heading inside a fence" in researcher.prompt

    assert agents["Reader"].tools == ("view_file", "grep", "list_dir")


def test_unknown_keys_are_kept_and_ignored():
    researcher = by_name(parse(VALID).agents)["Researcher"]
    assert researcher.extra == {"color": "blue"}


def test_preamble_only_defines_no_agent():
    result = parse("# Title\n\nSome text\n---\ntools: [x]\n---\n")
    assert result.agents == [] and result.errors == []


def test_empty_tools_list_and_missing_front_matter():
    result = parse("## Mute\n---\ntools: []\n---\nNo tools.\n\n## Plain\nJust a prompt.\n")
    agents = by_name(result.agents)
    assert agents["Mute"].tools == ()
    assert agents["Plain"].tools is None and agents["Plain"].prompt == "Just a prompt."


def test_quoted_patterns_work_too():
    result = parse('## A\n---\ntools: ["*", "!web_*"]\n---\n')
    assert result.agents[0].tools == ("*", "!web_*")


def test_duplicate_agent_names_keep_the_first_and_name_both_lines():
    result = parse("## Twin\n---\ntemperature: 0.1\n---\n\n## Twin\n---\ntemperature: 0.9\n---\n")
    assert [agent.temperature for agent in result.agents] == [0.1]
    [error] = result.errors
    assert (error.line, error.agent) == (6, "Twin")
    assert str(error) == 'AGENTS.md:6: agent "Twin": duplicate agent name (first defined at line 1)'


def test_bad_yaml_names_the_file_line_and_agent_and_others_still_load():
    text = (
        "## Good\n---\ndescription: ok\n---\n\n"
        "## Broken\n---\ndescription: ok\ntools: [a, b\n---\n\n"
        "## Also\n"
    )
    result = parse(text)
    assert [agent.name for agent in result.agents] == ["Good", "Also"]
    [error] = result.errors
    assert error.agent == "Broken" and error.path == "AGENTS.md"
    assert error.line in (9, 10)  # the unclosed flow sequence, as PyYAML reports it
    assert "invalid YAML" in error.message


@pytest.mark.parametrize("value", ["0", "101", "2.5", "true", "many"])
def test_max_tool_calls_out_of_range_or_not_an_integer(value):
    result = parse(f"## Bad\n---\ndescription: x\nmax_tool_calls: {value}\n---\nprompt\n")
    assert result.agents == []
    [error] = result.errors
    assert (error.line, error.agent, error.key) == (4, "Bad", "max_tool_calls")
    assert "must be an integer from 1 to 100" in str(error)
    assert str(error).startswith('AGENTS.md:4: agent "Bad": key "max_tool_calls": ')


def test_max_tool_calls_bounds_are_inclusive():
    result = parse("## Low\n---\nmax_tool_calls: 1\n---\n## High\n---\nmax_tool_calls: 100\n---\n")
    assert [agent.max_tool_calls for agent in result.agents] == [1, 100]


@pytest.mark.parametrize(
    "value",
    ["view_file", "[view_file, 3]", "{a: b}", "", "[view_file, [grep]]", "[yes]"],
)
def test_tools_must_be_a_list_of_strings(value):
    result = parse(f"## Bad\n---\n\ntools: {value}\n---\n")
    [error] = result.errors
    assert (error.line, error.agent, error.key) == (4, "Bad", "tools")
    assert "must be a list of strings" in error.message


def test_empty_pattern_is_an_error():
    [error] = parse("## Bad\n---\ntools: [view_file, '!']\n---\n").errors
    assert error.key == "tools" and "empty pattern" in error.message


@pytest.mark.parametrize(
    ("key", "value", "expected"),
    [
        ("temperature", "3", "from 0 to 2"),
        ("temperature", "hot", "from 0 to 2"),
        ("top_p", "1.5", "from 0 to 1"),
        ("description", "[a]", "must be a string"),
        ("model", "42", "must be a string"),
        ("toolSearch", "sometimes", "must be one of auto, always, never"),
        ("toolSearch", "true", "must be one of auto, always, never"),
        ("pinned", "github_*", "must be a list of non-empty strings"),
        ("pinned", "['']", "must be a list of non-empty strings"),
        ("skills", "[1]", "must be a list of non-empty strings"),
        ("skills", "[" + ", ".join(["a"] * 201) + "]", "has 201 entries; at most 200"),
    ],
)
def test_other_keys_are_validated(key, value, expected):
    [error] = parse(f"## Bad\n---\n{key}: {value}\n---\n").errors
    assert (error.key, error.line) == (key, 3)
    assert expected in error.message


def test_tool_search_pinned_tools_and_skills():
    [agent] = parse(
        "## Big\n---\ntoolSearch: always\npinned: [view_file, ' github_* ']\n"
        "skills: [docs/style-guide, review]\n---\n"
    ).agents
    assert (agent.tool_search, agent.pinned, agent.skills) == (
        "always",
        ("view_file", "github_*"),
        ("docs/style-guide", "review"),
    )
    [default] = parse("## Plain\n---\ndescription: x\n---\n").agents
    assert (default.tool_search, default.pinned, default.skills) == ("auto", (), ())


def test_every_problem_of_one_agent_is_reported():
    errors = parse("## Bad\n---\ntemperature: 9\nmax_tool_calls: 0\n---\n").errors
    assert [(error.key, error.line) for error in errors] == [("temperature", 3), ("max_tool_calls", 4)]


def test_duplicate_key_in_front_matter():
    [error] = parse("## Bad\n---\ntemperature: 0.1\ntemperature: 0.2\n---\n").errors
    assert (error.key, error.line) == ("temperature", 4)
    assert "first set at line 3" in error.message


def test_unclosed_front_matter_and_non_mapping_front_matter():
    result = parse("## Open\n---\ndescription: x\n\n## List\n---\n- a\n- b\n---\n")
    assert result.agents == []
    assert [(error.agent, error.line) for error in result.errors] == [("Open", 2), ("List", 7)]
    assert "not closed" in result.errors[0].message
    assert "must be a mapping" in result.errors[1].message


def test_heading_without_name():
    [error] = parse("## \n---\n---\n").errors
    assert error.line == 1 and "no name" in error.message


def test_missing_file_gives_the_builtin_agent(tmp_path: Path):
    result = load_agents(tmp_path / "AGENTS.md")
    assert not result.exists
    assert result.agents == [BUILTIN_AGENT] and BUILTIN_AGENT.tools is None


def test_load_names_the_file_and_handles_bom_crlf_and_bad_utf8(tmp_path: Path):
    path = tmp_path / "AGENTS.md"
    path.write_bytes("\ufeff## A\r\n---\r\nmax_tool_calls: 7\r\n---\r\nHi\r\n".encode())
    result = load_agents(path)
    assert result.exists and result.agents[0].max_tool_calls == 7 and result.agents[0].prompt == "Hi"

    path.write_bytes(b"## A\n---\nmax_tool_calls: 0\n---\n")
    [error] = load_agents(path, display="data/AGENTS.md").errors
    assert str(error).startswith('data/AGENTS.md:3: agent "A"')

    path.write_bytes(b"## A\n\xff\n")
    [error] = load_agents(path).errors
    assert error.line == 2 and "UTF-8" in error.message


def test_extra_values_become_json_safe():
    [agent] = parse("## A\n---\nsince: 2024-05-01\nnested: {when: 2024-05-01, n: .nan}\n---\n").agents
    assert agent.extra == {"since": "2024-05-01", "nested": {"when": "2024-05-01", "n": "nan"}}


def test_shipped_agents_file_is_valid():
    shipped = Path(__file__).resolve().parents[2] / "data" / "AGENTS.example.md"
    result = load_agents(shipped)
    assert result.errors == []
    agents = by_name(result.agents)
    assert {"Assistant", "Researcher", "Reader"} <= set(agents)
    assert agents["Assistant"].tools is None
    assert agents["Reader"].tools == ("view_file", "grep", "list_dir")
    assert agents["Researcher"].tools is not None and agents["Researcher"].tools[0] == "*"
    assert all(pattern.startswith("!") for pattern in agents["Researcher"].tools[1:])


def test_context_is_the_models_window_in_tokens():
    result = parse("## Local\n---\nmodel: qwen3:8b\ncontext: 32768\n---\n## Plain\n---\n---\n")
    assert [agent.context_tokens for agent in result.agents] == [32768, None]
    assert "context" not in result.agents[0].extra


@pytest.mark.parametrize("value", ["512", "32k", "8192.5", "true", "[1]", "100000001"])
def test_context_must_be_a_whole_number_of_tokens_in_range(value):
    result = parse(f"## Bad\n---\ndescription: x\ncontext: {value}\n---\nprompt\n")
    assert result.agents == []
    [error] = result.errors
    assert (error.line, error.key) == (4, "context")
    assert "must be the model's context window in tokens, an integer from 1,024 to 100,000,000" in str(error)

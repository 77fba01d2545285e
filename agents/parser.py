"""Parse ``AGENTS.md``: agents as Markdown sections with a YAML front-matter block.

The file format::

    Anything before the first "## " heading is a preamble and is ignored.

    ## Reader
    ---
    description: Reads files in the workspace
    tools: [view_file, grep, list_dir]
    max_tool_calls: 10
    context: 32768              # the model's context window in tokens, when its server does not say
    toolSearch: auto            # auto | always | never: deferred tools behind a search tool
    pinned: [view_file]         # tools always given to the model when search is on (globs)
    skills: [docs/style-guide]  # skills from MCP servers the agent starts with
    ---
    You are a careful reader. (The system prompt, Markdown, until the next "## " heading.)

Parsing never raises for bad content: each problem becomes an :class:`AgentError` that names
the file, the line, the agent and the key, the bad agent is skipped and the others load.
A missing file yields the built-in default agent (all tools). A file that cannot be used at all
is marked ``unusable`` and the caller keeps the agents it had: unreadable, not UTF-8, or hostile
though valid (over :data:`MAX_FILE_BYTES`, or a front-matter block nested deeper than
:data:`MAX_YAML_DEPTH` levels; agent settings need two or three).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import date, datetime
from pathlib import Path
from typing import Any

import yaml

from mcpclient.core.access import MAX_GROUP_NAME

__all__ = [
    "BUILTIN_AGENT",
    "DEFAULT_MAX_TOOL_CALLS",
    "DEFAULT_TEMPERATURE",
    "LOCKED_AGENT",
    "MAX_FILE_BYTES",
    "MAX_NAME_LENGTH",
    "MAX_YAML_DEPTH",
    "AgentError",
    "AgentSpec",
    "ParsedAgents",
    "load_agents",
    "parse_agents_text",
]

DEFAULT_TEMPERATURE = 0.7
DEFAULT_MAX_TOOL_CALLS = 30
MAX_TOOL_CALLS_RANGE = (1, 100)
CONTEXT_TOKENS_RANGE = (1024, 100_000_000)
TEMPERATURE_RANGE = (0.0, 2.0)
TOP_P_RANGE = (0.0, 1.0)
MAX_NAME_LENGTH = 100
MAX_FILE_BYTES = 1024 * 1024
MAX_YAML_DEPTH = 20
KNOWN_KEYS = (
    "description",
    "tools",
    "model",
    "temperature",
    "max_tool_calls",
    "top_p",
    "toolSearch",
    "pinned",
    "skills",
    "approve",
    "groups",
    "context",
)
APPROVAL_RULES = ("allow", "ask", "deny")
TOOL_SEARCH_MODES = ("auto", "always", "never")
MAX_PATTERNS = 200  # in ``pinned:`` and ``skills:``

_HEADING = re.compile(r"^## (?P<name>.*)$")
_FENCE = re.compile(r"^ {0,3}(?P<fence>`{3,}|~{3,})")
_CLOSING_HASHES = re.compile(r"\s+#+\s*$")


@dataclass(frozen=True)
class AgentSpec:
    """One agent as written in the file (validated, defaults applied)."""

    name: str
    description: str = ""
    tools: tuple[str, ...] | None = None  # None: no ``tools:`` key, i.e. every tool
    model: str = ""  # "" means the default model (BOOCODE_LLM_MODEL)
    temperature: float = DEFAULT_TEMPERATURE
    max_tool_calls: int = DEFAULT_MAX_TOOL_CALLS
    top_p: float | None = None
    # The model's context window in tokens (``context:``), used when its server does not say.
    context_tokens: int | None = None
    # Deferred tools (docs/tools.md): "auto" (on past the settings' token budget or tool count),
    # "always" or "never"; ``pinned`` globs name the tools always loaded when search is on.
    tool_search: str = "auto"
    pinned: tuple[str, ...] = ()
    skills: tuple[str, ...] = ()  # skills of MCP servers the agent starts with ("server/skill")
    # Approval rules (agents.policy.approval_rule): tool globs under "allow", "ask" and "deny".
    approve: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # Who may pick the agent: group names (docs/teams.md); empty: everybody.
    groups: tuple[str, ...] = ()
    prompt: str = ""
    extra: dict[str, Any] = field(default_factory=dict)  # unknown front-matter keys, kept as written
    line: int = 0  # line of the "## " heading, 1-based; 0 for the built-in agent


@dataclass(frozen=True)
class AgentError:
    """A problem in the agents file, precise enough to fix without guessing."""

    path: str
    line: int
    message: str
    agent: str | None = None
    key: str | None = None
    limit: bool = False  # hostile input (a size or nesting limit): the whole file is set aside

    def __str__(self) -> str:
        where = f"{self.path}:{self.line}" if self.line else self.path
        parts = [where]
        if self.agent is not None:
            parts.append(f'agent "{self.agent}"')
        if self.key is not None:
            parts.append(f'key "{self.key}"')
        parts.append(self.message)
        return ": ".join(parts)


@dataclass
class ParsedAgents:
    """The outcome of reading the agents file: the valid agents in file order and the errors.

    ``sections`` names every agent section in file order, valid or not, so a caller can keep
    the last valid definition of an agent whose section now has an error. ``unusable`` means
    the file as a whole could not be read: nothing in it, valid or not, is known.
    """

    path: str
    exists: bool
    agents: list[AgentSpec]
    errors: list[AgentError]
    sections: list[str] = field(default_factory=list)
    unusable: bool = False


BUILTIN_AGENT = AgentSpec(
    name="Assistant",
    description="Built-in default agent (no AGENTS.md found); may use every tool.",
    prompt=(
        "You are BooCode, a helpful assistant. Use the available tools when they help you answer "
        "accurately, and say so when you are unsure."
    ),
)

# What an agents file that exists but yields no usable agent falls back to: the same assistant
# with no tools at all. A broken file must never widen what the model may call.
LOCKED_AGENT = AgentSpec(
    name=BUILTIN_AGENT.name,
    description="AGENTS.md has errors and defines no valid agent: no tools until it is fixed.",
    tools=(),
    prompt=BUILTIN_AGENT.prompt,
)


class _NestedTooDeep(yaml.composer.ComposerError):
    """Front matter nested deeper than :data:`MAX_YAML_DEPTH`."""


class _FrontMatterLoader(yaml.SafeLoader):
    """A safe loader that reads ``*`` and ``!web_*`` as plain strings.

    In standard YAML ``*x`` is an alias and ``!x`` a tag, so ``tools: [*, !web_*]`` would be a
    syntax error. Agent front matter has no use for aliases or tags, and the pattern forms read
    best unquoted, so both are scanned as plain scalars here (quoted forms still work).
    """

    def fetch_alias(self) -> None:
        self.fetch_plain()

    def fetch_tag(self) -> None:
        self.fetch_plain()

    def compose_node(self, parent: yaml.Node | None, index: object) -> yaml.Node | None:
        # PyYAML composes nested collections recursively: a few hundred levels of "[[[..." exhaust
        # the stack of the thread that reads the file. Refuse long before that.
        depth = getattr(self, "_depth", 0) + 1
        if depth > MAX_YAML_DEPTH:
            raise _NestedTooDeep(
                None, None, f"nested deeper than {MAX_YAML_DEPTH} levels", self.peek_event().start_mark
            )
        self._depth = depth
        try:
            return super().compose_node(parent, index)
        finally:
            self._depth = depth - 1


# A lone "*", "!" or "&" resolves to the special "yaml" tag; here they are just strings.
_FrontMatterLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:yaml"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def load_agents(path: Path, *, display: str | None = None) -> ParsedAgents:
    """Read and parse the agents file at ``path``.

    A missing file yields the built-in default agent. ``display`` is the name used in error
    messages (defaults to the path as given).
    """
    source = display or str(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return ParsedAgents(path=source, exists=False, agents=[BUILTIN_AGENT], errors=[])
    except OSError as exc:
        return _unusable(source, 0, f"cannot be read: {exc.strerror or exc}")
    if len(data) > MAX_FILE_BYTES:
        return _unusable(source, 0, f"is {len(data)} bytes; the limit is {MAX_FILE_BYTES} bytes")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        return _unusable(source, line, f"is not valid UTF-8 (byte {exc.start})")
    return parse_agents_text(text, source=source)


def _unusable(source: str, line: int, message: str) -> ParsedAgents:
    error = AgentError(source, line, message + "; the agents loaded before are kept", limit=True)
    return ParsedAgents(path=source, exists=True, agents=[], errors=[error], unusable=True)


def parse_agents_text(text: str, *, source: str = "AGENTS.md") -> ParsedAgents:
    """Parse the text of an agents file; ``source`` names the file in error messages."""
    agents: list[AgentSpec] = []
    errors: list[AgentError] = []
    seen: dict[str, int] = {}
    sections: list[str] = []
    for line, name, body in _sections(text.splitlines()):
        name = _CLOSING_HASHES.sub("", name).strip()
        if not name:
            errors.append(AgentError(source, line, "agent heading has no name"))
            continue
        if len(name) > MAX_NAME_LENGTH:
            errors.append(
                AgentError(source, line, f"name is longer than {MAX_NAME_LENGTH} characters", agent=name)
            )
            continue
        if name in seen:
            errors.append(
                AgentError(
                    source, line, f"duplicate agent name (first defined at line {seen[name]})", agent=name
                )
            )
            continue
        seen[name] = line
        sections.append(name)
        spec, agent_errors = _parse_section(source, line, name, body)
        errors.extend(agent_errors)
        if spec is not None:
            agents.append(spec)
    unusable = any(error.limit for error in errors)
    return ParsedAgents(
        path=source, exists=True, agents=agents, errors=errors, sections=sections, unusable=unusable
    )


def _sections(lines: list[str]) -> list[tuple[int, str, list[str]]]:
    """Split lines into ``(heading line, name, body lines)``; ``## `` inside code fences is text."""
    sections: list[tuple[int, str, list[str]]] = []
    fence: str | None = None
    for number, line in enumerate(lines, start=1):
        fence_match = _FENCE.match(line)
        if fence_match:
            marker = fence_match.group("fence")
            if fence is None:
                fence = marker
            elif marker[0] == fence[0] and len(marker) >= len(fence):
                fence = None
        elif fence is None:
            heading = _HEADING.match(line.rstrip())
            if heading or line.rstrip() == "##":
                sections.append((number, heading.group("name") if heading else "", []))
                continue
        if sections:
            sections[-1][2].append(line)
    return sections


def _parse_section(
    source: str, heading_line: int, name: str, body: list[str]
) -> tuple[AgentSpec | None, list[AgentError]]:
    """Validate one agent's front matter and collect its prompt."""
    index = 0
    while index < len(body) and not body[index].strip():
        index += 1
    front: dict[str, Any] = {}
    key_lines: dict[str, int] = {}
    if index < len(body) and body[index].rstrip() == "---":
        open_line = heading_line + 1 + index
        close = next((i for i in range(index + 1, len(body)) if body[i].rstrip() == "---"), None)
        if close is None:
            message = f"front matter opened at line {open_line} is not closed with a '---' line"
            return None, [AgentError(source, open_line, message, agent=name)]
        yaml_text = "\n".join(body[index + 1 : close])
        first_yaml_line = open_line + 1
        loaded, error = _load_front_matter(source, name, yaml_text, first_yaml_line)
        if error is not None:
            return None, [error]
        front, key_lines = loaded
        index = close + 1
    prompt = "\n".join(body[index:]).strip("\n")

    errors: list[AgentError] = []

    def fail(key: str, message: str) -> None:
        errors.append(AgentError(source, key_lines.get(key, heading_line), message, agent=name, key=key))

    description = front.get("description", "")
    if description is None:
        description = ""
    if not isinstance(description, str):
        fail("description", f"must be a string, got {_describe(description)}")

    tools: tuple[str, ...] | None = None
    if "tools" in front:
        raw_tools = front["tools"]
        if not isinstance(raw_tools, list) or not all(isinstance(item, str) for item in raw_tools):
            fail(
                "tools",
                "must be a list of strings such as [view_file, grep, context7_*] "
                f"(use [] for no tools, or remove the key for all tools), got {_describe(raw_tools)}",
            )
        else:
            bad = [item for item in raw_tools if item.strip() in ("", "!")]
            if bad:
                fail("tools", f"empty pattern {bad[0]!r}")
            else:
                tools = tuple(raw_tools)

    model = front.get("model", "")
    if model is None:
        model = ""
    if not isinstance(model, str):
        fail("model", f"must be a string, got {_describe(model)}")

    temperature = _number(front, "temperature", DEFAULT_TEMPERATURE, TEMPERATURE_RANGE, fail)
    top_p = _number(front, "top_p", None, TOP_P_RANGE, fail)

    max_tool_calls = front.get("max_tool_calls", DEFAULT_MAX_TOOL_CALLS)
    low, high = MAX_TOOL_CALLS_RANGE
    if (
        isinstance(max_tool_calls, bool)
        or not isinstance(max_tool_calls, int)
        or not (low <= max_tool_calls <= high)
    ):
        fail("max_tool_calls", f"must be an integer from {low} to {high}, got {_describe(max_tool_calls)}")

    context_tokens = front.get("context")
    low, high = CONTEXT_TOKENS_RANGE
    whole = isinstance(context_tokens, int) and not isinstance(context_tokens, bool)
    if context_tokens is not None and not (whole and low <= context_tokens <= high):
        fail(
            "context",
            f"must be the model's context window in tokens, an integer from {low:,} to {high:,} "
            f"(such as 32768), got {_describe(context_tokens)}",
        )

    tool_search = front.get("toolSearch", "auto")
    if tool_search not in TOOL_SEARCH_MODES:
        fail("toolSearch", f"must be one of {', '.join(TOOL_SEARCH_MODES)}, got {_describe(tool_search)}")
    pinned = _names(front, "pinned", "[view_file, github_*]", fail)
    skills = _names(front, "skills", "[docs/style-guide, review]", fail)
    approve = _approval_rules(front, fail)
    groups = _names(front, "groups", "[engineering, support]", fail)
    if front.get("groups") == []:
        fail("groups", "is empty, so nobody could pick the agent: name a group, or remove the key")
    elif any(len(group) > MAX_GROUP_NAME for group in groups):
        fail("groups", f"has a name longer than {MAX_GROUP_NAME} characters, which no group has")

    if errors:
        return None, errors
    extra = {key: _json_safe(value) for key, value in front.items() if key not in KNOWN_KEYS}
    spec = AgentSpec(
        name=name,
        description=description.strip(),
        tools=tools,
        model=model.strip(),
        temperature=temperature if temperature is not None else DEFAULT_TEMPERATURE,
        max_tool_calls=max_tool_calls,
        top_p=top_p,
        context_tokens=context_tokens,
        tool_search=tool_search,
        pinned=pinned,
        skills=skills,
        approve=approve,
        groups=tuple(dict.fromkeys(groups)),
        prompt=prompt,
        extra=extra,
        line=heading_line,
    )
    return spec, []


def _names(
    front: dict[str, Any], key: str, example: str, fail: Callable[[str, str], None]
) -> tuple[str, ...]:
    """A list of non-empty strings (at most :data:`MAX_PATTERNS`) under ``key``, or ``()``."""
    value = front.get(key)
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(item, str) and item.strip() for item in value):
        fail(key, f"must be a list of non-empty strings such as {example}, got {_describe(value)}")
        return ()
    if len(value) > MAX_PATTERNS:
        fail(key, f"has {len(value)} entries; at most {MAX_PATTERNS}")
        return ()
    return tuple(item.strip() for item in value)


def _approval_rules(front: dict[str, Any], fail: Callable[[str, str], None]) -> dict[str, tuple[str, ...]]:
    """``approve:``: a mapping of "allow", "ask" and "deny" to lists of tool globs, or ``{}``."""
    value = front.get("approve")
    if value is None:
        return {}
    if not isinstance(value, dict):
        fail("approve", f'must map "allow", "ask" and "deny" to tool patterns, got {_describe(value)}')
        return {}
    unknown = [key for key in value if key not in APPROVAL_RULES]
    if unknown:
        fail("approve", f'has an unknown key "{unknown[0]}"; the keys are "allow", "ask" and "deny"')
        return {}
    rules = {}
    for key in APPROVAL_RULES:
        patterns = _names(
            value, key, "[github_create_*]", lambda name, why: fail("approve", f'"{name}" {why}')
        )
        if patterns:
            rules[key] = patterns
    return rules


def _load_front_matter(
    source: str, name: str, text: str, first_line: int
) -> tuple[tuple[dict[str, Any], dict[str, int]], AgentError | None]:
    """Load the YAML block; return (mapping, key -> file line) or an error naming the line."""
    empty: tuple[dict[str, Any], dict[str, int]] = ({}, {})
    try:
        node = yaml.compose(text, Loader=_FrontMatterLoader)
        value = yaml.load(text, Loader=_FrontMatterLoader)  # a SafeLoader subclass: no arbitrary objects
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        line = first_line + mark.line if mark is not None else first_line
        problem = getattr(exc, "problem", None) or str(exc)
        context = getattr(exc, "context", None)
        message = f"invalid YAML in front matter: {context + ', ' if context else ''}{problem}"
        limit = isinstance(exc, _NestedTooDeep)
        if limit:
            message += "; the agents loaded before are kept"
        return empty, AgentError(source, line, message, agent=name, limit=limit)
    if value is None:
        return empty, None
    if not isinstance(value, dict) or not isinstance(node, yaml.MappingNode):
        message = f"front matter must be a mapping of keys to values, got {_describe(value)}"
        return empty, AgentError(source, first_line, message, agent=name)
    key_lines: dict[str, int] = {}
    for key_node, _ in node.value:
        key = str(key_node.value)
        line = first_line + key_node.start_mark.line
        if key in key_lines:
            message = f"duplicate key (first set at line {key_lines[key]})"
            return empty, AgentError(source, line, message, agent=name, key=key)
        key_lines[key] = line
    return ({str(key): item for key, item in value.items()}, key_lines), None


def _number(
    front: dict[str, Any],
    key: str,
    default: float | None,
    bounds: tuple[float, float],
    fail: Callable[[str, str], None],
) -> float | None:
    """A float key within ``bounds`` (inclusive); ``None`` in the file means the default."""
    value = front.get(key, default)
    if value is None:
        return default
    low, high = bounds
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        fail(key, f"must be a number from {low:g} to {high:g}, got {_describe(value)}")
        return default
    if not low <= value <= high:
        fail(key, f"must be a number from {low:g} to {high:g}, got {value!r}")
        return default
    return float(value)


def _json_safe(value: Any) -> Any:
    """A YAML value as JSON can store it (dates and other scalars become strings)."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, list):
        return [_json_safe(item) for item in value]
    if isinstance(value, dict):
        return {str(key): _json_safe(item) for key, item in value.items()}
    if isinstance(value, date | datetime):
        return value.isoformat()
    return str(value)


def _describe(value: object) -> str:
    """A short description of a YAML value for error messages."""
    if value is None:
        return "nothing (null)"
    if isinstance(value, bool):
        return f"a boolean ({str(value).lower()})"
    if isinstance(value, str):
        return f"the string {value!r}"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, list):
        return f"a list {value!r}"[:120]
    if isinstance(value, dict):
        return "a mapping"
    return type(value).__name__

"""The ``Agent`` row: a mirror of one section of AGENTS.md (the file is the source of truth)."""

from __future__ import annotations

from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models

from agents.parser import DEFAULT_MAX_TOOL_CALLS, DEFAULT_TEMPERATURE, MAX_NAME_LENGTH, AgentSpec


class Agent(models.Model):
    """An agent: system prompt, model settings and the glob patterns for the tools it may use.

    Rows are written only by ``agents.roster.sync_agents()``; edit AGENTS.md instead.
    """

    name = models.CharField(max_length=MAX_NAME_LENGTH, unique=True)
    description = models.TextField(blank=True)
    tools = models.JSONField(
        null=True,
        blank=True,
        help_text="Glob patterns as written; null means no tools: key (every tool), [] means none.",
    )
    model = models.CharField(max_length=200, blank=True, help_text="Empty: the default model.")
    temperature = models.FloatField(default=DEFAULT_TEMPERATURE)
    max_tool_calls = models.PositiveSmallIntegerField(
        default=DEFAULT_MAX_TOOL_CALLS, validators=[MinValueValidator(1), MaxValueValidator(100)]
    )
    top_p = models.FloatField(null=True, blank=True)
    context_tokens = models.PositiveIntegerField(
        null=True, blank=True, help_text="context: the model's window in tokens when its server does not say."
    )
    tool_search = models.CharField(
        max_length=10, default="auto", help_text="toolSearch: auto, always or never (docs/tools.md)."
    )
    pinned = models.JSONField(
        default=list, blank=True, help_text="Tools always loaded with tool search (globs)."
    )
    skills = models.JSONField(default=list, blank=True, help_text="Skills of MCP servers it starts with.")
    approve = models.JSONField(
        default=dict, blank=True, help_text='Approval rules: tool globs under "allow", "ask" and "deny".'
    )
    groups = models.JSONField(
        default=list, blank=True, help_text="Who may pick the agent: group names (empty: everybody)."
    )
    prompt = models.TextField(blank=True, help_text="The system prompt (Markdown).")
    extra = models.JSONField(
        default=dict, blank=True, help_text="Unknown front-matter keys, kept as written."
    )
    position = models.PositiveIntegerField(default=0, help_text="Order in the file.")
    line = models.PositiveIntegerField(default=0, help_text="Line of the agent's heading in the file.")
    is_builtin = models.BooleanField(default=False, help_text="The built-in default (no agents file).")
    error = models.TextField(
        blank=True,
        help_text="Why the agent's section in AGENTS.md is invalid now; its last valid definition is in use.",
    )
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ("position", "name")

    def __str__(self) -> str:
        return self.name

    @property
    def tool_patterns(self) -> list[str] | None:
        """The agent's ``tools:`` patterns, or ``None`` when it may use every tool."""
        return None if self.tools is None else list(self.tools)

    def spec_fields(self) -> dict[str, object]:
        """The fields a sync compares and writes, as stored."""
        return {field: getattr(self, field) for field in SYNCED_FIELDS}

    @staticmethod
    def fields_from_spec(spec: AgentSpec, *, position: int, is_builtin: bool) -> dict[str, object]:
        """Row values for a parsed agent."""
        return {
            "description": spec.description,
            "tools": None if spec.tools is None else list(spec.tools),
            "model": spec.model,
            "temperature": spec.temperature,
            "max_tool_calls": spec.max_tool_calls,
            "top_p": spec.top_p,
            "context_tokens": spec.context_tokens,
            "tool_search": spec.tool_search,
            "pinned": list(spec.pinned),
            "skills": list(spec.skills),
            "approve": {key: list(patterns) for key, patterns in spec.approve.items()},
            "groups": list(spec.groups),
            "prompt": spec.prompt,
            "extra": spec.extra,
            "position": position,
            "line": spec.line,
            "is_builtin": is_builtin,
        }


SYNCED_FIELDS = (
    "description",
    "tools",
    "model",
    "temperature",
    "max_tool_calls",
    "top_p",
    "context_tokens",
    "tool_search",
    "pinned",
    "skills",
    "approve",
    "groups",
    "prompt",
    "extra",
    "position",
    "line",
    "is_builtin",
)

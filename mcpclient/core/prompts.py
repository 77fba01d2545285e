"""A server's prompts as their users see them: values, the argument check and the error.

Listing and getting prompts is :mod:`mcpclient.engine.prompts`; the chat takes these from here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# A prompt or argument name longer than a ``prompt`` frame may carry could never be used:
# such a prompt is left out of the listing (cutting the name would name another prompt).
MAX_NAME_CHARS = 200


MAX_ARGUMENTS = 50  # per prompt


class PromptError(Exception):
    """A prompt cannot be got; ``str()`` is a message for the person who asked."""


@dataclass(frozen=True)
class PromptArgument:
    """One argument a prompt takes (untrusted text from the server, display only)."""

    name: str
    description: str = ""
    required: bool = False


@dataclass(frozen=True)
class HubPrompt:
    """A prompt of a ready session."""

    server: str
    name: str
    title: str = ""
    description: str = ""
    arguments: tuple[PromptArgument, ...] = ()
    completions: bool = False  # the server declares completions: its arguments can be completed

    def as_json(self) -> dict[str, Any]:
        """The shape of ``GET /api/prompts`` (docs/protocol.md)."""
        return {
            "server": self.server,
            "name": self.name,
            "title": self.title,
            "description": self.description,
            "arguments": [
                {"name": a.name, "description": a.description, "required": a.required} for a in self.arguments
            ],
            "completions": self.completions,
        }


@dataclass(frozen=True)
class PromptMessage:
    """One message of a prompt as it enters the conversation: ``user`` or ``assistant``, and text."""

    role: str
    text: str


def argument_problem(prompt: HubPrompt, arguments: dict[str, str]) -> str | None:
    """What is wrong with ``arguments`` for ``prompt`` (unknown or missing ones), or ``None``."""
    known = {a.name for a in prompt.arguments}
    unknown = sorted(set(arguments) - known)
    if unknown:
        return f'The prompt "{prompt.name}" takes no argument {", ".join(repr(u) for u in unknown)}.'
    missing = [a.name for a in prompt.arguments if a.required and not arguments.get(a.name, "").strip()]
    if missing:
        return f'The prompt "{prompt.name}" needs {", ".join(repr(m) for m in missing)}.'
    return None

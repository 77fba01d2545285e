"""A server's skills as their users see them: values and the error (SEP-2640).

Listing, verifying and reading skills is :mod:`mcpclient.engine.skills`; the chat, the tools and
the worker's wire take these values from here. A :class:`SkillError`'s ``str()`` is for people
(and the model), its ``status`` HTTP-like: 404 unknown, 409 refused (not loadable, or content
that does not match the manifest), 502 server trouble.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


class SkillError(Exception):
    """A skill or one of its files cannot be served; ``str()`` is for people (and the model).

    ``status`` is HTTP-like: 404 unknown, 409 refused (not loadable, or content that does not
    match the manifest), 502 server trouble.
    """

    def __init__(self, message: str, status: int = 502) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class Skill:
    """One skill of a server as a person sees it (names and descriptions: untrusted server text).

    Its identity is ``(server, uri)``; ``label`` is how it is named within its server: the name,
    or, when two entries of the listing share it, the skill's path (the URI without its scheme
    and ``/SKILL.md``). ``problem`` says why it cannot be loaded ("" when it can).
    """

    server: str
    uri: str
    name: str
    label: str
    description: str = ""
    files: int = 0
    size: int = 0
    problem: str = ""

    def to_dict(self) -> dict[str, Any]:
        """The JSON shape of ``GET /api/skills/`` (docs/protocol.md)."""
        return {
            "server": self.server,
            "uri": self.uri,
            "name": self.name,
            "label": self.label,
            "description": self.description,
            "files": self.files,
            "size": self.size,
            "problem": self.problem,
        }


@dataclass(frozen=True)
class SkillText:
    """One verified file of a skill: its text (or a note for binary content) and where it is from."""

    server: str
    uri: str  # the skill's SKILL.md URI (with the server, its identity)
    name: str
    label: str
    path: str  # the file, relative to the skill's root ("SKILL.md" for the skill itself)
    file_uri: str
    mime_type: str
    size: int
    text: str | None = None
    note: str = ""
    others: tuple[str, ...] = ()  # the skill's other files (relative paths), with SKILL.md only

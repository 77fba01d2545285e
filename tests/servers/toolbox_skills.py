"""The toolbox's skills group: skills served by the ``io.modelcontextprotocol/skills`` extension (SEP-2640).

``python tests/servers/toolbox.py --feature skills`` adds it to the toolbox. The server declares the
extension in its capabilities and answers ``skills/list`` (in pages of :data:`PAGE_SIZE`) and
``skills/get`` with low-level request handlers; every file of every skill is an ordinary resource
(``resources/read``), and each entry's manifest carries the file's real SHA-256 digest and size,
except where a test needs it wrong:

- ``pdf-forms`` (``skill://pdf-forms/SKILL.md``): its SKILL.md names ``references/FORMS.md``;
- ``git-workflow`` under a prefix (``skill://team/git-workflow/SKILL.md``), with
  ``templates/commit.txt``;
- ``release-notes`` (``skill://release-notes/SKILL.md``), whose ``examples/changelog.md`` the
  manifest describes with a deliberately wrong digest (the size is right): a host must refuse it;
- ``daily-report`` (``skill://daily-report/SKILL.md``), listed with ``"resources": "dynamic"``
  (generated content, no digests), which BooCode lists with its problem and never loads;
- ``hidden-gem`` (``skill://hidden-gem/SKILL.md``) is not listed: ``skills/get`` answers for it, as
  the extension requires for a skill absent from a partial listing.

The tool ``add_skill(name)`` adds the skill ``skill://<name>/SKILL.md`` at runtime and announces that
the resources changed (``notifications/resources/list_changed`` on 2025-11-25, ``subscriptions/listen``
on 2026-07-28): the extension has no change notification of its own.
"""

from __future__ import annotations

import hashlib
from typing import Any

import common
import mcp.types as types
from common import READ_ONLY
from mcp import MCPError
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.resources import TextResource

EXTENSION = "io.modelcontextprotocol/skills"
PAGE_SIZE = 2
WRONG_DIGEST = "sha256:" + "0" * 64

PDF_FORMS = """---
name: pdf-forms
description: Fill in PDF forms with the toolbox, field by field.
license: Apache-2.0
metadata:
  version: "1.2"
---

# Filling PDF forms

1. Read the form's fields first.
2. The field names and their meaning are in `references/FORMS.md`.
3. Never guess a value: ask the person.
"""
FORMS = """# Form fields

- `name`: the person's full name
- `iban`: the bank account, checked before sending
"""
GIT_WORKFLOW = """---
name: git-workflow
description: Follow this team's Git conventions for branches and commits.
---

# Git workflow

Branch from `main` as `topic/<ticket>`. Write commit messages as `templates/commit.txt` shows.
"""
COMMIT = "<area>: <what changed, in the imperative>\n\n<why>\n"
RELEASE_NOTES = """---
name: release-notes
description: Write release notes in the house style.
---

# Release notes

Start from `examples/changelog.md`.
"""
CHANGELOG = "## 1.2.0\n\n- Faster exports.\n"
DAILY = """---
name: daily-report
description: Assemble today's report from live data.
---

# Daily report
"""
HIDDEN = """---
name: hidden-gem
description: A skill only reached by its URI.
---

# Hidden gem

Found by URI alone.
"""


def _digest(text: str) -> str:
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


class Skills:
    """The served skills: the files (resources) and each skill's entry as ``skills/list`` gives it."""

    def __init__(self, server: MCPServer) -> None:
        self.server = server
        self.entries: list[dict[str, Any]] = []
        self.unlisted: list[dict[str, Any]] = []

    def add(
        self,
        path: str,
        frontmatter: dict[str, Any],
        files: dict[str, str],
        *,
        wrong: tuple[str, ...] = (),
        listed: bool = True,
        dynamic: bool = False,
    ) -> None:
        """Serve the skill at ``skill://<path>``: each of ``files`` (relative path -> text) as a resource."""
        manifest = []
        for relative, text in files.items():
            uri = f"skill://{path}/{relative}"
            mime = "text/markdown" if relative.endswith(".md") else "text/plain"
            self.server.add_resource(TextResource(uri=uri, name=relative, text=text, mime_type=mime))
            digest = WRONG_DIGEST if relative in wrong else _digest(text)
            manifest.append({"uri": uri, "digest": digest, "size": len(text.encode("utf-8"))})
        entry = {
            "uri": f"skill://{path}/SKILL.md",
            "frontmatter": frontmatter,
            "resources": "dynamic" if dynamic else manifest,
        }
        (self.entries if listed else self.unlisted).append(entry)

    async def list(self, ctx: Any, params: types.PaginatedRequestParams | None) -> dict[str, Any]:
        page, next_cursor = common.page(self.entries, params, PAGE_SIZE)
        result: dict[str, Any] = {
            "resultType": "complete",
            "skills": page,
            "ttlMs": 0,
            "cacheScope": "private",
        }
        if next_cursor:
            result["nextCursor"] = next_cursor
        return result

    async def get(self, ctx: Any, params: GetSkillParams) -> dict[str, Any]:
        for entry in [*self.entries, *self.unlisted]:
            if entry["uri"] == params.uri:
                return {"resultType": "complete", "skill": entry, "ttlMs": 0, "cacheScope": "private"}
        raise MCPError(code=types.INVALID_PARAMS, message=f"No skill is served at {params.uri}")


class GetSkillParams(types.RequestParams):
    uri: str


def register(server: MCPServer) -> None:
    """Declare the extension and add the group's skills, their resources and ``add_skill``."""
    skills = Skills(server)
    skills.add(
        "pdf-forms",
        {
            "name": "pdf-forms",
            "description": "Fill in PDF forms with the toolbox, field by field.",
            "license": "Apache-2.0",
            "metadata": {"version": "1.2"},
        },
        {"SKILL.md": PDF_FORMS, "references/FORMS.md": FORMS},
    )
    skills.add(
        "team/git-workflow",
        {
            "name": "git-workflow",
            "description": "Follow this team's Git conventions for branches and commits.",
        },
        {"SKILL.md": GIT_WORKFLOW, "templates/commit.txt": COMMIT},
    )
    skills.add(
        "release-notes",
        {"name": "release-notes", "description": "Write release notes in the house style."},
        {"SKILL.md": RELEASE_NOTES, "examples/changelog.md": CHANGELOG},
        wrong=("examples/changelog.md",),
    )
    skills.add(
        "daily-report",
        {"name": "daily-report", "description": "Assemble today's report from live data."},
        {"SKILL.md": DAILY},
        dynamic=True,
    )
    skills.add(
        "hidden-gem",
        {"name": "hidden-gem", "description": "A skill only reached by its URI."},
        {"SKILL.md": HIDDEN},
        listed=False,
    )
    lowlevel = server._lowlevel_server
    lowlevel.extensions[EXTENSION] = {}
    lowlevel.add_request_handler("skills/list", types.PaginatedRequestParams, skills.list)
    lowlevel.add_request_handler("skills/get", GetSkillParams, skills.get)

    @server.tool(annotations=READ_ONLY)
    async def add_skill(name: str, ctx: Context) -> str:
        """Serve the skill ``skill://<name>/SKILL.md`` from now on and say the resources changed."""
        text = f"---\nname: {name}\ndescription: Added at runtime.\n---\n\n# {name}\n"
        skills.add(name, {"name": name, "description": "Added at runtime."}, {"SKILL.md": text})
        await ctx.session.send_resource_list_changed()  # a 2025 session (dropped on 2026-07-28)
        await ctx.notify_resources_changed()  # every subscriptions/listen stream (2026-07-28)
        return f"added {name}"

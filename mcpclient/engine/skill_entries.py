"""What one listed skill entry says, checked before anything is read (SEP-2640): pure functions.

An entry of ``skills/list`` (or ``skills/get``) carries the skill's frontmatter and a manifest
of its files; :func:`held` turns it into a :class:`HeldSkill` (or says why it is left out),
:func:`labelled` names entries that share a name by their path, :func:`relative` resolves a
file's path inside the skill's root (``..`` never leaves it), and :func:`frontmatter_of` reads a
``SKILL.md``'s YAML frontmatter (no aliases: a YAML bomb is refused). Listing and reading the
files is :mod:`mcpclient.engine.skills`.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field, replace
from typing import Any

import yaml

from mcpclient.core.skills import Skill, SkillError

# The extension's limits per skill: hosts must accept skills up to them; past them BooCode says why.
MAX_FILES = 512


MAX_SKILL_BYTES = 16 * 1024 * 1024


# A name longer than a frame or an AGENTS.md entry may carry could never be asked for: left out.
MAX_NAME_CHARS = 200


MAX_DESCRIPTION_CHARS = 1024  # the Agent Skills format's own limit for ``description``


MAX_URI_CHARS = 2048  # of a skill's or a file's URI, like a resource's


MAX_FRONTMATTER_BYTES = 64 * 1024  # of an entry's frontmatter as JSON, and of a SKILL.md's as YAML


SKILL_FILE = "SKILL.md"


_DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")


@dataclass(frozen=True)
class SkillFile:
    """One file of a skill's manifest: what its bytes must be."""

    uri: str
    digest: str
    size: int


@dataclass(frozen=True)
class HeldSkill:
    """A listed (or got) entry with what verification needs: the manifest and the frontmatter."""

    skill: Skill
    files: tuple[SkillFile, ...] = ()  # empty for a skill that cannot be loaded
    frontmatter: dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def root(self) -> str:
        """The skill's directory URI: its ``SKILL.md`` URI without ``/SKILL.md``."""
        return self.skill.uri[: -len(SKILL_FILE) - 1]


# --- reading entries ---------------------------------------------------------------------------
def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def plain_text(text: str) -> bool:
    """No control characters (a URI or a path that names something else when printed)."""
    return not any(ord(ch) < 32 or ord(ch) == 127 for ch in text)


def _usable_uri(uri: str) -> bool:
    return bool(uri) and len(uri) <= MAX_URI_CHARS and plain_text(uri)


def skill_path(uri: str) -> str:
    """A skill's path: its ``SKILL.md`` URI without the scheme and ``/SKILL.md``."""
    rest = uri.split("://", 1)[1] if "://" in uri else uri
    return rest[: -len(SKILL_FILE) - 1] if rest.endswith("/" + SKILL_FILE) else rest


def _manifest(raw: Any, uri: str) -> tuple[tuple[SkillFile, ...], str]:
    """The manifest of an entry and why it cannot be loaded ("" when it can)."""
    if raw == "dynamic":
        return (), (
            'its content is generated ("resources": "dynamic"), so there are no digests to verify it '
            "against; BooCode loads only skills whose files it can verify"
        )
    if not isinstance(raw, list):
        return (), 'its entry is invalid: "resources" must be a list of files or "dynamic"'
    if len(raw) > MAX_FILES:
        return (), f"it has {len(raw)} files, over the extension's limit of {MAX_FILES}"
    files: list[SkillFile] = []
    root = uri[: -len(SKILL_FILE)]  # "skill://name/"
    for position, item in enumerate(raw, 1):
        if not isinstance(item, dict):
            return (), f"its manifest is invalid: file {position} is not an object"
        file_uri, digest, size = item.get("uri"), item.get("digest"), item.get("size")
        if not isinstance(file_uri, str) or not _usable_uri(file_uri):
            return (), f"its manifest is invalid: file {position} has no usable URI"
        if file_uri != uri and not file_uri.startswith(root):
            return (), f"its manifest lists {file_uri}, which is outside the skill's directory"
        if not isinstance(digest, str) or not _DIGEST.match(digest):
            return (
                (),
                f'its manifest is invalid: {file_uri} has no "sha256:" digest (64 lowercase hex digits)',
            )
        if isinstance(size, bool) or not isinstance(size, int) or size < 0:
            return (), f"its manifest is invalid: {file_uri} has no size in bytes"
        files.append(SkillFile(file_uri, digest, size))
    if len({file.uri for file in files}) < len(files):
        return (), "its manifest lists a file twice"
    if not any(file.uri == uri for file in files):
        return (), f"its manifest does not list its {SKILL_FILE}"
    total = sum(file.size for file in files)
    if total > MAX_SKILL_BYTES:
        return (), f"its files add up to {total:,} bytes, over the extension's limit of {MAX_SKILL_BYTES:,}"
    return tuple(files), ""


def held(server: str, raw: Any) -> HeldSkill | str:
    """One ``skills/list`` or ``skills/get`` entry, or why it was left out (it cannot be named).

    The label is the name; :func:`labelled` changes it where names collide.
    """
    if not isinstance(raw, dict):
        return "an entry is not an object"
    uri, frontmatter = raw.get("uri"), raw.get("frontmatter")
    if not isinstance(uri, str) or not _usable_uri(uri):
        return "an entry has no usable URI"
    if not isinstance(frontmatter, dict):
        return f"{uri} has no frontmatter object"
    name, description = frontmatter.get("name"), frontmatter.get("description")
    if not isinstance(name, str) or not name.strip() or not plain_text(name):
        return f'{uri} has no "name" in its frontmatter'
    if len(name) > MAX_NAME_CHARS:
        return f"{uri} has a name over {MAX_NAME_CHARS} characters"
    files: tuple[SkillFile, ...] = ()
    if not uri.endswith(f"/{name}/{SKILL_FILE}") and uri.split("://", 1)[-1] != f"{name}/{SKILL_FILE}":
        problem = f'its URI does not end in "{name}/{SKILL_FILE}" as the extension requires'
    elif not isinstance(description, str):
        problem = 'its frontmatter has no "description"'
    else:
        files, problem = _manifest(raw.get("resources"), uri)
    try:
        size = len(json.dumps(frontmatter, ensure_ascii=False).encode("utf-8"))
    except (TypeError, ValueError, RecursionError):
        size = MAX_FRONTMATTER_BYTES + 1
    if not problem and size > MAX_FRONTMATTER_BYTES:
        problem = f"its frontmatter is over {MAX_FRONTMATTER_BYTES // 1024} KB"
    skill = Skill(
        server=server,
        uri=uri,
        name=name,
        label=name,
        description=_cut(" ".join(str(description or "").split()), MAX_DESCRIPTION_CHARS),
        files=len(files),
        size=sum(file.size for file in files),
        problem=problem,
    )
    return HeldSkill(skill, () if problem else files, frontmatter if not problem else {})


def labelled(entries: list[HeldSkill]) -> list[HeldSkill]:
    """``entries`` with same-named skills labelled by their paths (or URIs), so none hides another."""
    names: dict[str, int] = {}
    for entry in entries:
        names[entry.skill.name] = names.get(entry.skill.name, 0) + 1
    paths: dict[str, int] = {}
    for entry in entries:
        paths[skill_path(entry.skill.uri)] = paths.get(skill_path(entry.skill.uri), 0) + 1
    result = []
    for entry in entries:
        if names[entry.skill.name] == 1:
            result.append(entry)
            continue
        path = skill_path(entry.skill.uri)
        label = path if paths[path] == 1 and path != entry.skill.name else entry.skill.uri
        result.append(replace(entry, skill=replace(entry.skill, label=label)))
    return result


# --- reading a file ------------------------------------------------------------------------------
def relative(entry: HeldSkill, path: str) -> str:
    """The URI of ``path`` (relative to the skill's root, or a full URI) within the skill.

    ``..``, absolute paths and backslashes are refused: a skill's text must not reach outside it.
    """
    path = path.strip()
    if not path or path == SKILL_FILE:
        return entry.skill.uri
    if "://" in path:
        return path
    parts = path.split("/")
    escapes = path.startswith("/") or "\\" in path or any(part in ("", "..") for part in parts)
    if escapes or not plain_text(path):
        raise SkillError(
            f'MCP server "{entry.skill.server}": "{path}" is not a path within the skill '
            f'"{entry.skill.label}": write it relative to the skill, as its SKILL.md does (no "..", '
            'no leading "/").',
            404,
        )
    kept = [part for part in parts if part != "."]
    return entry.root + "/" + "/".join(kept)


class _NoAliases(yaml.SafeLoader):
    """YAML as JSON has it: no anchors or aliases (a few bytes could expand into gigabytes when
    compared) and no timestamps (frontmatter rendered as JSON carries dates as strings)."""

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            raise yaml.YAMLError("YAML aliases are not allowed in a skill's frontmatter")
        return super().compose_node(parent, index)


_NoAliases.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def frontmatter_of(text: str) -> dict[str, Any] | str:
    """The YAML frontmatter at the start of a ``SKILL.md``, or why there is none to read."""
    lines = text.lstrip("\ufeff").splitlines()
    if not lines or lines[0].strip() != "---":
        return "it does not begin with a YAML frontmatter block (---)"
    end = next((index for index, line in enumerate(lines[1:], 1) if line.strip() == "---"), None)
    if end is None:
        return "its frontmatter block is not closed (---)"
    source = "\n".join(lines[1:end])
    if len(source.encode("utf-8", errors="replace")) > MAX_FRONTMATTER_BYTES:
        return f"its frontmatter is over {MAX_FRONTMATTER_BYTES // 1024} KB"
    try:
        parsed = yaml.load(source, Loader=_NoAliases)  # a SafeLoader without aliases
    except (yaml.YAMLError, RecursionError) as exc:
        return f"its frontmatter is not valid YAML: {str(exc).splitlines()[0][:200]}"
    if not isinstance(parsed, dict):
        return "its frontmatter is not a mapping"
    return parsed


def same(a: Any, b: Any) -> bool:
    """JSON equality: numbers by value (1 == 1.0, as JSON has one number type), never a bool as one."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[key], b[key]) for key in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and a == b

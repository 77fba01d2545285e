"""Skills of MCP servers (``io.modelcontextprotocol/skills``, SEP-2640): listing, reading, verifying.

Real servers: the toolbox with its skills group (tests/servers/toolbox_skills.py) over stdio and
over Streamable HTTP as a "perUser" server; and the published
``agentskills-mcp-server`` (PyPI), installed alone by ``make test-deps`` in
tests/python/agentskills/.venv, serving a folder of skills the test writes. The rules for reading
an entry (what makes a skill unloadable, how names are told apart, the frontmatter check) are
tested on the functions themselves.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from pathlib import Path
from typing import Any

import anyio
import pytest

from mcpclient.core.skills import Skill, SkillError
from mcpclient.core.state import Status
from mcpclient.engine import skill_entries, skills
from mcpclient.engine.hub import Hub
from mcpclient.engine.skill_entries import HeldSkill
from tests.support.hubs import make_config
from tests.support.processes import PYTHON, ROOT, TEST_COMMANDS, TOOLBOX, HttpServer, free_port

PUBLISHED = ROOT / "tests" / "python" / "agentskills" / ".venv" / "bin" / "python"
RUNBOOK = "# Runbook\n\nPage the on-call engineer, then open an incident channel.\n"


def digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def entry(uri: str = "skill://pdf-forms/SKILL.md", **changes: Any) -> dict[str, Any]:
    """A valid ``skills/list`` entry (two files), with ``changes`` applied."""
    root = uri.rsplit("/", 1)[0]
    raw: dict[str, Any] = {
        "uri": uri,
        "frontmatter": {"name": root.rsplit("/", 1)[-1].split("://")[-1], "description": "Fill in forms."},
        "resources": [
            {"uri": uri, "digest": digest(b"a"), "size": 1},
            {"uri": f"{root}/references/FORMS.md", "digest": digest(b"bb"), "size": 2},
        ],
    }
    raw.update(changes)
    return raw


async def listed(hub: Hub, name: str = "box", user_id: int | None = None) -> skills.SkillCatalog:
    """The skill catalog of ``name`` once it has been listed."""
    connection = hub.connection(name) if user_id is None else hub.user_connection(name, user_id)
    assert connection is not None
    with anyio.fail_after(10):
        while not connection.skills.listed:
            await connection.skills.updated.wait()
    return connection.skills


# --- reading entries (no server) ---------------------------------------------------------------
def test_a_valid_entry_is_held_with_its_manifest_and_frontmatter() -> None:
    held = skill_entries.held("box", entry())
    assert isinstance(held, HeldSkill)
    assert held.skill == Skill(
        server="box",
        uri="skill://pdf-forms/SKILL.md",
        name="pdf-forms",
        label="pdf-forms",
        description="Fill in forms.",
        files=2,
        size=3,
    )
    assert held.root == "skill://pdf-forms" and held.frontmatter["name"] == "pdf-forms"


@pytest.mark.parametrize(
    ("changes", "problem"),
    [
        ({"resources": "dynamic"}, 'generated ("resources": "dynamic")'),
        ({"resources": None}, '"resources" must be a list of files or "dynamic"'),
        (
            {"resources": [{"uri": "skill://pdf-forms/x.md", "digest": digest(b""), "size": 0}]},
            "does not list its SKILL.md",
        ),
        (
            {"resources": [{"uri": "skill://pdf-forms/SKILL.md", "digest": "sha256:ABC", "size": 1}]},
            'no "sha256:" digest',
        ),
        (
            {"resources": [{"uri": "skill://pdf-forms/SKILL.md", "digest": digest(b"a"), "size": -1}]},
            "no size in bytes",
        ),
        (
            {"resources": [{"uri": "skill://other/SKILL.md", "digest": digest(b"a"), "size": 1}]},
            "outside the skill's directory",
        ),
        (
            {
                "resources": [
                    {"uri": f"skill://pdf-forms/{i}", "digest": digest(b""), "size": 0} for i in range(513)
                ]
            },
            "over the extension's limit of 512",
        ),
        (
            {
                "resources": [
                    {"uri": "skill://pdf-forms/SKILL.md", "digest": digest(b"a"), "size": 17 * 2**20}
                ]
            },
            "over the extension's limit of 16,777,216",
        ),
        ({"frontmatter": {"name": "other", "description": "x"}}, 'does not end in "other/SKILL.md"'),
        ({"frontmatter": {"name": "pdf-forms"}}, 'no "description"'),
        ({"frontmatter": {"name": "pdf-forms", "description": "x", "notes": "n" * 70_000}}, "over 64 KB"),
    ],
)
def test_an_entry_against_the_extensions_rules_is_held_with_its_problem(
    changes: dict[str, Any], problem: str
) -> None:
    held = skill_entries.held("box", entry(**changes))
    assert isinstance(held, HeldSkill)
    assert problem in held.skill.problem and held.files == ()


@pytest.mark.parametrize(
    ("raw", "why"),
    [
        ("not an object", "not an object"),
        (entry(uri=""), "no usable URI"),
        (entry(uri="skill://a\n/SKILL.md"), "no usable URI"),
        (entry(frontmatter=None), "no frontmatter object"),
        (entry(frontmatter={"description": "x"}), 'no "name"'),
        (entry(frontmatter={"name": "n" * 201, "description": "x"}), "over 200 characters"),
    ],
)
def test_an_entry_that_cannot_be_named_is_left_out(raw: Any, why: str) -> None:
    left_out = skill_entries.held("box", raw)
    assert isinstance(left_out, str) and why in left_out


def test_names_two_skills_share_are_told_apart_by_their_paths() -> None:
    entries = [
        skill_entries.held("box", entry("skill://acme/billing/refunds/SKILL.md")),
        skill_entries.held("box", entry("skill://acme/support/refunds/SKILL.md")),
        skill_entries.held("box", entry("skill://git-workflow/SKILL.md")),
    ]
    labelled = skill_entries.labelled([item for item in entries if isinstance(item, HeldSkill)])
    assert [item.skill.label for item in labelled] == [
        "acme/billing/refunds",
        "acme/support/refunds",
        "git-workflow",
    ]
    catalog = skills.SkillCatalog(entries=tuple(labelled))
    with pytest.raises(SkillError) as ambiguous:
        skills.find(catalog, "box", "refunds")
    assert ambiguous.value.status == 409
    assert '"acme/billing/refunds", "acme/support/refunds"' in str(ambiguous.value)
    assert skills.find(catalog, "box", "acme/support/refunds") is labelled[1]
    assert skills.find(catalog, "box", "skill://git-workflow/SKILL.md") is labelled[2]


def test_the_frontmatter_is_read_as_json_has_it() -> None:
    text = '---\nname: x\ndescription: "A: b"\ndate: 2026-01-02\nversion: 1.0\nflag: true\n---\n# Body\n'
    assert skill_entries.frontmatter_of(text) == {
        "name": "x",
        "description": "A: b",
        "date": "2026-01-02",  # no timestamps: rendered as JSON, a date is a string
        "version": 1.0,
        "flag": True,
    }
    # Aliases could make a few bytes into gigabytes when compared: refused.
    bomb = "---\na: &a [x, x]\nb: &b [*a, *a]\nc: [*b, *b]\n---\n"
    assert "aliases are not allowed" in str(skill_entries.frontmatter_of(bomb))
    no_block = skill_entries.frontmatter_of("# No frontmatter\n")
    assert no_block == "it does not begin with a YAML frontmatter block (---)"
    assert skill_entries.frontmatter_of("---\nname: x\n") == "its frontmatter block is not closed (---)"
    # JSON equality: one number type, booleans apart.
    assert skill_entries.same({"v": 1, "w": [1.0]}, {"v": 1.0, "w": [1]})
    assert not skill_entries.same({"v": True}, {"v": 1}) and not skill_entries.same({"v": "1"}, {"v": 1})


def test_a_path_never_leaves_its_skill() -> None:
    held = skill_entries.held("box", entry())
    assert isinstance(held, HeldSkill)
    assert skill_entries.relative(held, "") == "skill://pdf-forms/SKILL.md"
    assert skill_entries.relative(held, "./references/FORMS.md") == "skill://pdf-forms/references/FORMS.md"
    for path in ("../other/SKILL.md", "/etc/passwd", "references\\FORMS.md", "a//b"):
        with pytest.raises(SkillError) as refused:
            skill_entries.relative(held, path)
        assert refused.value.status == 404 and "not a path within the skill" in str(refused.value)


# --- the toolbox's skills ----------------------------------------------------------------------
@pytest.mark.processes
async def test_the_skills_are_listed_page_by_page(hub: Hub) -> None:
    await hub.start([make_config("box", {"command": PYTHON, "args": [str(TOOLBOX), "--feature", "skills"]})])
    assert hub.snapshots()[0].protocol_version == "2026-07-28"  # the revision the extension is for
    catalog = await listed(hub)
    assert catalog.supported and not catalog.error
    found = hub.skills(None)
    assert [(s.label, s.uri) for s in found] == [
        ("pdf-forms", "skill://pdf-forms/SKILL.md"),
        ("git-workflow", "skill://team/git-workflow/SKILL.md"),
        ("release-notes", "skill://release-notes/SKILL.md"),
        ("daily-report", "skill://daily-report/SKILL.md"),
    ]  # two pages of skills/list; hidden-gem is not listed
    assert found[0].description == "Fill in PDF forms with the toolbox, field by field."
    assert [(s.files, s.problem) for s in found[:3]] == [(2, ""), (2, ""), (2, "")]
    assert found[3].files == 0 and 'generated ("resources": "dynamic")' in found[3].problem
    with pytest.raises(SkillError) as refused:
        await hub.read_skill("box", "daily-report", "", None)
    assert refused.value.status == 409 and 'the skill "daily-report" cannot be loaded' in str(refused.value)


@pytest.mark.processes
async def test_a_skill_and_a_file_it_names_are_read_verified(hub: Hub) -> None:
    await hub.start([make_config("box", {"command": PYTHON, "args": [str(TOOLBOX), "--feature", "skills"]})])
    await listed(hub)

    text = await hub.read_skill("box", "pdf-forms", "", None)
    assert text.path == "SKILL.md" and text.file_uri == "skill://pdf-forms/SKILL.md"
    assert text.text is not None and text.text.startswith("---\nname: pdf-forms\n")
    assert "`references/FORMS.md`" in text.text and text.others == ("references/FORMS.md",)
    forms = await hub.read_skill("box", "pdf-forms", "references/FORMS.md", None)
    assert forms.text is not None and forms.text.startswith("# Form fields") and forms.others == ()
    nested = await hub.read_skill("box", "git-workflow", "templates/commit.txt", None)
    assert nested.file_uri == "skill://team/git-workflow/templates/commit.txt"

    # Not listed: reached by the URI of its SKILL.md alone (skills/get), as the extension requires.
    hidden = await hub.read_skill("box", "skill://hidden-gem/SKILL.md", "", None)
    assert hidden.name == "hidden-gem" and hidden.text is not None and "Found by URI alone." in hidden.text


@pytest.mark.processes
async def test_a_file_whose_digest_differs_is_refused_naming_what_differed(hub: Hub) -> None:
    await hub.start([make_config("box", {"command": PYTHON, "args": [str(TOOLBOX), "--feature", "skills"]})])
    await listed(hub)
    await hub.read_skill("box", "release-notes", "", None)  # its SKILL.md is as described

    with pytest.raises(SkillError) as refused:
        await hub.read_skill("box", "release-notes", "examples/changelog.md", None)
    real = digest(b"## 1.2.0\n\n- Faster exports.\n")
    assert refused.value.status == 409
    assert str(refused.value) == (
        'MCP server "box": skill "release-notes", file examples/changelog.md: its SHA-256 digest is '
        f"{real}, the skill's manifest says sha256:{'0' * 64}; the content was refused, not used."
    )
    # Nothing unverified is kept: asking again reads (and refuses) again.
    with pytest.raises(SkillError):
        await hub.read_skill("box", "release-notes", "examples/changelog.md", None)


@pytest.mark.processes
async def test_what_a_skill_does_not_list_is_never_read(hub: Hub) -> None:
    await hub.start([make_config("box", {"command": PYTHON, "args": [str(TOOLBOX), "--feature", "skills"]})])
    await listed(hub)
    cases = [
        ("pdf-forms", "references/OTHER.md", 404, 'has no file "references/OTHER.md" in its manifest'),
        ("pdf-forms", "../release-notes/SKILL.md", 404, "is not a path within the skill"),
        ("pdf-forms", "skill://release-notes/SKILL.md", 404, "in its manifest"),
        ("nope", "", 404, 'has no skill "nope" (it lists: "pdf-forms", "git-workflow", "release-notes", "'),
        ("skill://nowhere/SKILL.md", "", 404, "No skill is served at skill://nowhere/SKILL.md"),
    ]
    for skill, path, status, said in cases:
        with pytest.raises(SkillError) as refused:
            await hub.read_skill("box", skill, path, None)
        assert refused.value.status == status and said in str(refused.value), (skill, path, refused.value)
    with pytest.raises(SkillError) as unknown:
        await hub.read_skill("ghost", "pdf-forms", "", None)
    assert unknown.value.status == 404 and 'no MCP server "ghost"' in str(unknown.value)


@pytest.mark.processes
async def test_the_skills_are_listed_again_when_the_resources_change_and_on_reconnect(hub: Hub) -> None:
    await hub.start([make_config("box", {"command": PYTHON, "args": [str(TOOLBOX), "--feature", "skills"]})])
    catalog = await listed(hub)
    before = catalog.listings
    await hub.call_tool("box_add_skill", {"name": "extra"})
    with anyio.fail_after(10):
        while catalog.listings == before or "extra" not in [s.label for s in hub.skills(None)]:
            await catalog.updated.wait()
    assert (await hub.read_skill("box", "extra", "", None)).text is not None

    await hub.reconnect("box")  # a new session: a new catalog, listed again (the server restarted)
    again = await listed(hub)
    assert again is not catalog and [s.label for s in hub.skills(None)][-1] == "daily-report"


@pytest.mark.processes
async def test_a_server_without_the_extension_is_never_asked(hub: Hub) -> None:
    await hub.start(
        [make_config("box", {"command": PYTHON, "args": [str(TOOLBOX), "--feature", "resources"]})]
    )
    catalog = await listed(hub)
    assert not catalog.supported and hub.skills(None) == []
    with pytest.raises(SkillError) as refused:
        await hub.read_skill("box", "pdf-forms", "", None)
    assert refused.value.status == 409 and "declares no skills extension" in str(refused.value)


@pytest.mark.processes
@pytest.mark.django_db(transaction=True)
async def test_a_per_user_servers_skills_are_its_persons_only(hub: Hub) -> None:
    # The toolbox asks for no sign-in, so a person's session opens without one; nobody else's does.
    port = free_port()
    server = HttpServer([PYTHON, str(TOOLBOX), "--http", str(port), "--feature", "skills"], port, "/mcp")
    try:
        config = make_config("mine", {"type": "http", "url": server.url, "oauth": {"mode": "perUser"}})
        await hub.start([config])
        assert hub.snapshots()[0].status is Status.PER_USER
        await hub.open_user_sessions(1, ["mine"])
        await listed(hub, "mine", 1)
        await hub.load_skills(1, wait=5)

        assert [s.label for s in hub.skills(1)] == [
            "pdf-forms",
            "git-workflow",
            "release-notes",
            "daily-report",
        ]
        assert hub.skills(2) == [] and hub.skills(None) == []
        assert (await hub.read_skill("mine", "pdf-forms", "", 1)).text is not None
        for somebody_else in (2, None):
            with pytest.raises(SkillError) as refused:
                await hub.read_skill("mine", "pdf-forms", "", somebody_else)
            assert refused.value.status == 502 and "is unreachable" in str(refused.value)
    finally:
        await hub.stop()
        server.stop()


# --- a published server ------------------------------------------------------------------------
def _published_skills(folder: Path) -> Path:
    """Two skills in ``folder``, one with a binary file, and the server's configuration file."""
    incident = folder / "skills" / "incident-response"
    (incident / "references").mkdir(parents=True)
    (incident / "SKILL.md").write_text(
        "---\nname: incident-response\ndescription: Respond to production incidents step by step.\n"
        "metadata:\n  owner: ops\n---\n\n# Incident response\n\nRead `references/runbook.md` first.\n"
    )
    (incident / "references" / "runbook.md").write_text(RUNBOOK)
    logo = folder / "skills" / "brand-kit"
    (logo / "assets").mkdir(parents=True)
    (logo / "SKILL.md").write_text(
        "---\nname: brand-kit\ndescription: Use the brand's logo.\n---\n\nSee assets.\n"
    )
    (logo / "assets" / "logo.bin").write_bytes(bytes(range(256)))
    config = folder / "server.json"
    config.write_text(
        json.dumps(
            {
                "name": "Published skills",
                "skills": [
                    {"id": "incident-response", "provider": "fs", "options": {"root": "./skills"}},
                    {"id": "brand-kit", "provider": "fs", "options": {"root": "./skills"}},
                ],
            }
        )
    )
    return config


@pytest.mark.processes
async def test_the_published_agentskills_server_is_listed_and_read_verified(tmp_path: Path) -> None:
    config = _published_skills(tmp_path)
    hub = Hub(base_dir=ROOT, allowed_commands=[*TEST_COMMANDS, str(PUBLISHED)])
    server = {"command": str(PUBLISHED), "args": ["-m", "agentskills_mcp_server", "--config", str(config)]}
    try:
        async with asyncio.timeout(60):
            await hub.start([make_config("published", {**server, "cwd": str(tmp_path)})])
        [snapshot] = hub.snapshots()
        assert snapshot.status is Status.READY, snapshot.last_error
        assert snapshot.protocol_version == "2026-07-28"
        catalog = await listed(hub, "published")
        assert catalog.supported and not catalog.error
        assert sorted((s.label, s.uri, s.files, s.problem) for s in hub.skills(None)) == [
            ("brand-kit", "skill://brand-kit/SKILL.md", 2, ""),
            ("incident-response", "skill://incident-response/SKILL.md", 2, ""),
        ]

        text = await hub.read_skill("published", "incident-response", "", None)
        assert text.text is not None and "Read `references/runbook.md` first." in text.text
        assert text.others == ("references/runbook.md",)  # its frontmatter (metadata too) matched
        runbook = await hub.read_skill("published", "incident-response", "references/runbook.md", None)
        assert runbook.text == RUNBOOK
        logo = await hub.read_skill("published", "brand-kit", "assets/logo.bin", None)
        assert logo.text is None and logo.size == 256 and "binary content" in logo.note
    finally:
        await hub.stop()

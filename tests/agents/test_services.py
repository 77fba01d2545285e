"""Syncing AGENTS.md into Agent rows: create/update/delete, errors, reload on change."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from agents.models import Agent
from agents.roster import (
    default_agent,
    get_agent,
    list_agents,
    refresh_agents_if_changed,
    sync_agents,
)

pytestmark = pytest.mark.django_db

TWO_AGENTS = """\
Preamble.

## Helper
---
description: helps
tools: [*, !web_*]
temperature: 0.5
extra_key: kept
---
Be helpful.

## Reader
---
tools: [view_file, grep, list_dir]
max_tool_calls: 12
---
Read things.
"""


def write(path: Path, text: str) -> None:
    """Write ``text`` and move the mtime forward, as an editor saving a second later would."""
    before = path.stat().st_mtime_ns if path.exists() else 0
    path.write_text(text)
    if path.stat().st_mtime_ns <= before:
        os.utime(path, ns=(before + 1_000_000, before + 1_000_000))


def test_sync_creates_rows_that_mirror_the_file(agents_file):
    write(agents_file, TWO_AGENTS)
    report = sync_agents()
    assert report.created == ["Helper", "Reader"] and report.errors == []
    helper, reader = list_agents()
    assert (helper.name, helper.tools, helper.temperature, helper.prompt) == (
        "Helper",
        ["*", "!web_*"],
        0.5,
        "Be helpful.",
    )
    assert helper.extra == {"extra_key": "kept"} and helper.tool_patterns == ["*", "!web_*"]
    assert (reader.tools, reader.max_tool_calls, reader.temperature) == (
        ["view_file", "grep", "list_dir"],
        12,
        0.7,
    )
    assert default_agent().name == "Helper"
    assert get_agent("Reader") == reader and get_agent("Nobody") is None


def test_resync_is_idempotent_then_updates_and_deletes(agents_file):
    write(agents_file, TWO_AGENTS)
    sync_agents()
    again = sync_agents()
    assert again.unchanged == ["Helper", "Reader"] and not again.changed

    write(agents_file, "## Reader\n---\ntools: []\n---\nRead nothing.\n\n## New\n")
    report = sync_agents()
    assert (report.created, report.updated, report.deleted) == (["New"], ["Reader"], ["Helper"])
    reader = get_agent("Reader")
    assert reader.tools == [] and reader.position == 0 and reader.prompt == "Read nothing."
    assert [agent.name for agent in list_agents()] == ["Reader", "New"]


def test_a_bad_agent_is_reported_and_skipped_the_others_load(agents_file):
    write(agents_file, TWO_AGENTS + "\n## Broken\n---\nmax_tool_calls: 500\n---\n")
    report = sync_agents()
    assert [agent.name for agent in list_agents()] == ["Helper", "Reader"]
    [error] = report.errors
    assert str(error).endswith(
        'agent "Broken": key "max_tool_calls": must be an integer from 1 to 100, got 500'
    )
    assert "AGENTS.md:" in str(error)
    assert "1 error" in report.summary()


def test_missing_file_means_one_builtin_agent_with_all_tools(agents_file):
    report = sync_agents()
    assert not report.exists and report.errors == []
    [agent] = list_agents()
    assert agent.is_builtin and agent.tools is None and agent.name == "Assistant"


def test_a_file_without_valid_agents_falls_back_to_an_agent_without_tools_and_says_so(agents_file):
    write(agents_file, "## Only\n---\ntools: nope\n---\n")
    report = sync_agents()
    [agent] = list_agents()
    assert agent.name == "Assistant" and agent.tools == [] and "no valid agent" in agent.error
    assert len(report.errors) == 2 and "defines no valid agent" in str(report.errors[-1])


def test_editing_the_file_is_picked_up_without_restart(agents_file, django_assert_num_queries):
    write(agents_file, TWO_AGENTS)
    assert refresh_agents_if_changed() is not None  # first call in the process: syncs
    with django_assert_num_queries(0):
        assert refresh_agents_if_changed() is None  # unchanged: one stat(), no query

    write(agents_file, TWO_AGENTS.replace("max_tool_calls: 12", "max_tool_calls: 3"))
    report = refresh_agents_if_changed()
    assert report is not None and report.updated == ["Reader"]
    assert get_agent("Reader").max_tool_calls == 3

    agents_file.unlink()
    report = refresh_agents_if_changed()
    assert report is not None and [agent.name for agent in list_agents()] == ["Assistant"]


def test_agents_are_read_once_per_sync_then_from_memory(agents_file, django_assert_num_queries):
    write(agents_file, TWO_AGENTS)
    refresh_agents_if_changed()
    with django_assert_num_queries(1):  # the first read after a sync loads every row
        assert get_agent("Reader").max_tool_calls == 12
    with django_assert_num_queries(0):  # a turn resolves its agent without a query
        refresh_agents_if_changed()
        assert get_agent("Reader").max_tool_calls == 12
        assert default_agent().name == "Helper"
        assert [agent.name for agent in list_agents()] == ["Helper", "Reader"]
        assert get_agent("Nobody") is None

    write(agents_file, TWO_AGENTS.replace("max_tool_calls: 12", "max_tool_calls: 4"))
    refresh_agents_if_changed()  # this process synced: its copy is dropped
    assert get_agent("Reader").max_tool_calls == 4


def test_default_agent_syncs_when_there_are_no_rows(agents_file):
    write(agents_file, TWO_AGENTS)
    assert Agent.objects.count() == 0
    assert default_agent().name == "Helper"


def test_agents_sync_command_prints_the_report_and_errors(agents_file, capsys):
    write(agents_file, TWO_AGENTS + "\n## Twin\n\n## Twin\n")
    call_command("agents_sync")
    out, err = capsys.readouterr()
    assert "3 agents (3 created, 0 updated, 0 deleted), 1 error" in out
    assert "created: Helper, Reader, Twin" in out
    assert 'agent "Twin": duplicate agent name' in err
    with pytest.raises(CommandError, match="1 error"):
        call_command("agents_sync", "--strict")

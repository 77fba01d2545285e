"""Agents in the admin: read-only, with resolved tools, unmatched patterns and file errors."""

from __future__ import annotations

import pytest
from django.urls import reverse

from agents.models import Agent

pytestmark = pytest.mark.django_db

FILE = """\
## Reader
---
description: reads
tools: [view_file, gerp, list_dir]
toolSearch: always
pinned: [view_file]
---
Read.

## Everything
---
description: all of it
---

## Broken
---
temperature: 7
---
"""


@pytest.fixture
def synced(agents_file):
    agents_file.write_text(FILE)
    return agents_file


def test_changelist_syncs_the_file_and_shows_its_errors(admin_client, synced):
    response = admin_client.get(reverse("admin:agents_agent_changelist"))
    assert response.status_code == 200
    body = response.content.decode()
    assert "Reader" in body and "Everything" in body
    assert "key &quot;temperature&quot;: must be a number from 0 to 2, got 7" in body
    assert '<td class="field-unmatched">gerp</td>' in body  # a likely typo, flagged
    assert "all tools (no tools: key)" in body


def test_change_page_is_read_only_and_lists_resolved_tools(admin_client, synced):
    admin_client.get(reverse("admin:agents_agent_changelist"))
    reader = Agent.objects.get(name="Reader")
    url = reverse("admin:agents_agent_change", args=[reader.pk])
    body = admin_client.get(url).content.decode()
    assert "<code>view_file</code> (native)" in body and "<code>list_dir</code> (native)" in body
    assert "<code>grep</code>" not in body
    assert "view_file, gerp, list_dir" in body
    assert '<div class="readonly">always</div>' in body  # toolSearch
    assert 'name="_save"' not in body  # no save button: the file is the source

    assert admin_client.post(url, {"name": "Renamed"}).status_code == 403
    assert admin_client.get(reverse("admin:agents_agent_add")).status_code == 403
    assert admin_client.post(reverse("admin:agents_agent_delete", args=[reader.pk])).status_code == 403
    assert Agent.objects.get(pk=reader.pk).name == "Reader"


def test_the_models_window_is_shown_and_one_too_small_is_named_with_what_to_change(admin_client, agents_file):
    agents_file.write_text(
        "## Roomy\n---\ncontext: 32768\n---\nRead.\n\n"
        "## Cramped\n---\ncontext: 1024\n---\n" + "Follow these long rules carefully. " * 200 + "\n"
    )
    body = admin_client.get(reverse("admin:agents_agent_changelist")).content.decode()
    assert "32,768 tokens (agent context:)" in body
    assert "1,024 tokens (agent context:). Model" in body and "cannot hold agent &quot;Cramped&quot;" in body

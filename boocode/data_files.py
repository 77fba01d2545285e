"""The administrator's data files, created from the shipped examples on first start.

``data/mcp.json`` and ``data/AGENTS.md`` are the administrator's: untracked, so editing them as
the README says never dirties the checkout or conflicts with an update. The checkout ships
``data/mcp.example.json`` and ``data/AGENTS.example.md``; ``boocode_prepare`` (``make run``)
copies each to its live path (``BOOCODE_MCP_CONFIG``, ``BOOCODE_AGENTS_FILE``) when nothing is
there yet, and never touches a file that exists.
"""

from __future__ import annotations

import os
from pathlib import Path

from django.conf import settings


def create_from_examples() -> list[tuple[Path, Path]]:
    """Copy each example whose live file does not exist yet; the ``(example, live)`` pairs copied.

    The copy is written beside the live path and linked into place, so a concurrent first start
    or a crash leaves either no file or the whole example, never half of one.
    """
    created = []
    for example, live in (
        (settings.MCP_CONFIG_EXAMPLE, settings.MCP_CONFIG),
        (settings.AGENTS_FILE_EXAMPLE, settings.AGENTS_FILE),
    ):
        if live.exists():
            continue
        live.parent.mkdir(parents=True, exist_ok=True)
        partial = live.with_name(f".{live.name}.{os.getpid()}.new")
        partial.write_bytes(example.read_bytes())
        try:
            os.link(partial, live)  # fails if the file appeared meanwhile: it stays as it is
            created.append((example, live))
        except FileExistsError:
            pass
        finally:
            partial.unlink()
    return created

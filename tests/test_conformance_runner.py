"""The conformance runner's one judgement of its own: which timed runs may be tried once more."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def runner() -> Any:
    path = ROOT / "tests" / "conformance" / "run.py"
    spec = importlib.util.spec_from_file_location("conformance_run", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # (its dataclasses look their module up)
    spec.loader.exec_module(module)
    return module


def timing(status: str, delay: int, **flags: bool) -> dict[str, Any]:
    """The suite's retry-timing check as it writes it (sse-retry, SEP-1699)."""
    details = {"expectedRetryMs": 500, "actualDelayMs": delay, "tooEarly": False, "slightlyLate": False}
    return {
        "id": "client-sse-retry-timing",
        "status": status,
        "errorMessage": f"Client reconnected ({delay}ms instead of 500ms).",
        "details": {**details, **flags},
    }


PASSED = {"id": "client-sse-graceful-reconnect", "status": "SUCCESS"}
BROKEN = {"id": "client-sse-graceful-reconnect", "status": "FAILURE"}


@pytest.mark.parametrize(
    ("checks", "retried"),
    [
        ([PASSED, timing("WARNING", 726, slightlyLate=True)], True),  # late: the machine was busy
        ([PASSED, timing("FAILURE", 1200, slightlyLate=True, veryLate=True)], True),
        ([PASSED, timing("FAILURE", -45, tooEarly=True)], False),  # early: the client's own fault
        ([PASSED, timing("SUCCESS", 510)], False),  # nothing wrong
        # late, but something else failed too: that is not the machine's doing
        ([BROKEN, timing("WARNING", 726, slightlyLate=True)], False),
    ],
    ids=["slightly-late", "very-late", "too-early", "in-time", "late-and-broken"],
)
def test_only_a_run_that_merely_came_late_is_tried_again(
    runner: Any, tmp_path: Path, checks: list[dict[str, Any]], retried: bool
) -> None:
    (tmp_path / "sse-retry-123").mkdir()
    (tmp_path / "sse-retry-123" / "checks.json").write_text(json.dumps(checks))
    assert bool(runner.late_only(tmp_path)) is retried

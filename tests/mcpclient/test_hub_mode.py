"""BOOCODE_HUB: bad settings stop the process at start; what the worker sends survives the trip."""

from __future__ import annotations

import datetime as dt
import os
import subprocess

import msgpack
import pytest

from mcpclient.core.elicitation_form import parse_form
from mcpclient.core.results import ToolResult
from mcpclient.core.state import DiscoveredTool, HubTool, ServerSnapshot, Status
from mcpclient.worker import wire as worker_wire
from tests.support.processes import PYTHON, ROOT

pytestmark = pytest.mark.processes


def start(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """Run ``manage.py <args>`` with ``env`` on top of this process's environment (no Redis)."""
    full = {**os.environ, **env}
    full.pop("BOOCODE_REDIS_URL", None)
    return subprocess.run([PYTHON, "manage.py", *args], cwd=ROOT, env=full, capture_output=True, text=True)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("worker", "BOOCODE_HUB=worker needs BOOCODE_REDIS_URL"),
        ("elsewhere", "BOOCODE_HUB='elsewhere': expected inprocess or worker"),
    ],
)
def test_a_bad_hub_setting_stops_the_process_naming_the_variable(value: str, message: str) -> None:
    done = start("check", BOOCODE_HUB=value)
    assert done.returncode != 0
    assert message in done.stderr


def test_the_hub_worker_refuses_to_run_in_the_embedded_mode() -> None:
    done = start("hub_worker", BOOCODE_HUB="inprocess")
    assert done.returncode != 0
    assert "the hub worker runs with BOOCODE_HUB=worker" in done.stderr


def trip(value: object) -> object:
    """Through msgpack, as the Redis channel layer sends it."""
    return msgpack.unpackb(msgpack.packb(value))


def test_tools_states_results_and_forms_come_back_equal() -> None:
    tool = HubTool("tb_echo", "tb", "echo", "Echo", {"type": "object"}, None, icons=({"src": "x"},))
    assert worker_wire.tool_in(trip(worker_wire.tool_out(tool))) == tool
    snapshot = ServerSnapshot(
        name="tb",
        status=Status.READY,
        last_error="",
        connected_at=dt.datetime(2026, 11, 24, 3, 0, tzinfo=dt.UTC),
        protocol_version="2026-07-28",
        server_info={"name": "toolbox"},
        tools=(
            DiscoveredTool("echo", "Echo", {"type": "object"}, {"readOnlyHint": True}, icons=({"src": "y"},)),
        ),
        prefixed_names={"echo": "tb_echo"},
        warnings={},
        stderr_tail=("started",),
    )
    assert worker_wire.snapshot_in(trip(worker_wire.snapshot_out(snapshot))) == snapshot
    result = ToolResult(
        "out", is_error=True, parts=[{"type": "image", "data": "AA=="}], structured={"a": [1]}
    )
    back = worker_wire.result_in(trip(worker_wire.result_out(result)))
    assert (back, back.structured) == (result, {"a": [1]})
    form = parse_form(
        {
            "type": "object",
            "properties": {"colour": {"type": "string", "enum": ["red", "blue"]}, "age": {"type": "integer"}},
            "required": ["age"],
        },
        message="Tell me",
    )
    assert worker_wire.form_in(trip(worker_wire.form_out(form))) == form

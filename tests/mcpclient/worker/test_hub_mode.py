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


def test_every_envelope_comes_back_equal_and_a_broken_one_says_what_is_wrong() -> None:
    state = worker_wire.WorkerState(boot="b" * 32, version=3, tools=[], snapshots=[])
    envelopes = [
        worker_wire.Request("r1", "reply.1", "view", {"user_id": 7, "wait": 0.0}),
        worker_wire.Reply("r1", result={"ok": True}, state=state),
        worker_wire.Reply("r1", refused={"kind": "prompt", "message": "no"}),
        worker_wire.Reply("r1", error="KeyError: 'x'"),
        worker_wire.Call("c1", "reply.1", "tb_echo", {"text": "hi"}, 7, ask=True, approval=4, views=True),
        worker_wire.Call("c2", "reply.1", "tb_echo", {}, None, trace={"traceparent": "00-x"}, step=0.5),
        worker_wire.Cancel("c1"),
        worker_wire.Progress("c1", 1.0, None, "half"),
        worker_wire.Ask("c1", "a1", form={"message": "?"}),
        worker_wire.Ask("c1", "a1", link={"url": "https://example.com"}),
        worker_wire.AskEnd("c1", "a1"),
        worker_wire.AnswerMessage("c1", "a1", "accept", {"name": "x"}),
        worker_wire.LinkEnd("c1", "a1", "done"),
        worker_wire.StateMessage(state),
        worker_wire.Alive("b" * 32),
    ]
    for envelope in envelopes:
        assert type(envelope).decode(trip(envelope.out())) == envelope
    assert worker_wire.from_worker(trip(worker_wire.Alive("b").out())) == worker_wire.Alive("b")

    with pytest.raises(worker_wire.WireError, match=r"'hub\.call' message without 'reply'"):
        worker_wire.Call.decode({"type": "hub.call", "id": "x"})
    with pytest.raises(worker_wire.WireError, match="'user_id' is str, not a number"):
        worker_wire.Call.decode(
            {"type": "hub.call", "id": "x", "reply": "r", "name": "n", "arguments": {}, "user_id": "7"}
        )
    with pytest.raises(worker_wire.WireError, match="'id' is 200 characters long"):
        worker_wire.Cancel.decode({"type": "hub.cancel", "id": "x" * 200})
    with pytest.raises(worker_wire.WireError, match=r"not a message of the hub worker: 'hub\.call'"):
        worker_wire.from_worker({"type": "hub.call"})

"""A turn's trace down to the MCP request, and the MCP side's metrics, against a real MCP server.

The toolbox runs over Streamable HTTP (one server for the session, with its meta, writes and
questions groups); the scripted model asks for ``request_meta``, which answers with the
``_meta`` its request carried (tests/servers/toolbox_meta.py). Spans go over OTLP/HTTP to a real
receiver in the test (tests/support/otlp.py), which decodes them with opentelemetry-proto: the
tests check names, parents and that the ``traceparent`` the server received names BooCode's MCP
request span. The metrics are read from ``GET /metrics`` as Prometheus reads them. The hop
through the hub worker is tested in tests/mcpclient/runtime/test_hub_worker.py.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from boocode.chat.turn.loop import TurnRequest, run_turn
from mcpclient.core.state import Status
from mcpclient.engine.hub import Hub
from mcpclient.runtime import set_hub
from mcpclient.telemetry import tracing
from tests.support.accounts import new_conversation
from tests.support.hubs import make_config
from tests.support.llm import Call, ScriptedLLM, Text, ToolCalls
from tests.support.otlp import OtlpReceiver, Span, ancestry, exporting
from tests.support.processes import PYTHON, ROOT, HttpServer
from tests.support.scrape import TOKEN, scrape
from tests.support.tabs import logged_in

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.processes]

GROUPS = ("--feature", "meta", "--feature", "writes", "--feature", "questions")


@pytest.fixture
async def toolbox(
    hub: Hub, shared_http_toolbox: Callable[..., HttpServer], settings: Any
) -> AsyncIterator[Hub]:
    """The process hub with the session's toolbox (tools ``toolbox_*``, writes behind approval)."""
    settings.METRICS_TOKEN = TOKEN
    server = shared_http_toolbox(*GROUPS)
    await hub.start([make_config("toolbox", {"url": server.url, "writeTools": "approve"})])
    assert hub.snapshots()[0].status is Status.READY
    set_hub(hub)
    yield hub
    set_hub(None)


class Outputs:
    """A turn's ``emit`` that keeps the output of each tool result."""

    def __init__(self) -> None:
        self.results: list[str] = []

    async def __call__(self, event: dict[str, Any]) -> None:
        if event["type"] == "tool_result":
            self.results.append(event["call"]["output"])


def one(spans: list[Span], name: str) -> Span:
    [found] = [span for span in spans if span.name == name]
    return found


async def test_a_turn_is_one_trace_down_to_the_request_the_mcp_server_received(
    llm: ScriptedLLM, toolbox: Hub
) -> None:
    outputs = Outputs()
    with OtlpReceiver() as receiver:
        with exporting(receiver):
            llm.script(ToolCalls([Call("toolbox_request_meta", {})]), Text("Done."))
            assert await run_turn(TurnRequest(await new_conversation(), "what came?"), outputs) == "complete"
            assert tracing.flush()
        spans = receiver.wait_for(lambda spans: any(span.name == "turn" for span in spans))
        assert receiver.refused == 0

    turn = one(spans, "turn")
    assert turn.parent_id == "" and not turn.error
    assert turn.attributes["boocode.turn.status"] == "complete"
    assert turn.attributes["gen_ai.agent.name"] and turn.attributes["gen_ai.request.model"] == "test-model"
    assert turn.resource["service.name"] == "boocode" and turn.resource["boocode.process"] == "web"
    assert {span.trace_id for span in spans} == {turn.trace_id}

    models = [span for span in spans if span.name == "chat test-model"]
    assert len(models) == 2  # the answer asking for the call, then the one after its result
    for model in models:
        assert (model.parent_id, model.kind) == (turn.span_id, "client")
        assert model.attributes["boocode.outcome"] == "ok" and "gen_ai.first_token" in model.events
    assert models[0].attributes["gen_ai.response.finish_reasons"] == ("tool_calls",)

    call = one(spans, "execute_tool toolbox_request_meta")
    assert call.parent_id == turn.span_id and call.attributes["boocode.tool.server"] == "toolbox"
    request = one(spans, "tools/call request_meta")
    chain = ["tools/call request_meta", "execute_tool toolbox_request_meta", "turn"]
    assert ancestry(request, spans) == chain
    assert request.kind == "client"
    assert request.attributes["mcp.method.name"] == "tools/call"
    assert request.attributes["boocode.mcp.server"] == "toolbox"
    assert request.attributes["boocode.outcome"] == "ok"
    assert request.attributes["mcp.protocol.version"] == "2026-07-28"
    # The MCP SDK's own span per request is no trace of its own: the server is told BooCode's.
    assert not [span.name for span in spans if span.name.startswith("MCP ")]

    received = json.loads(outputs.results[0])
    version, trace_id, parent_id, flags = received["traceparent"].split("-")
    assert (version, trace_id, parent_id) == ("00", turn.trace_id, request.span_id)
    assert int(flags, 16) & 1  # sampled (W3C Trace Context level 2 may add its "random" flag)
    assert set(received) & {"tracestate", "baggage"} == set()  # nothing to carry, nothing invented


async def test_without_an_endpoint_nothing_is_traced_and_nothing_reaches_the_server(
    llm: ScriptedLLM, toolbox: Hub
) -> None:
    assert not tracing.enabled()
    outputs = Outputs()
    llm.script(ToolCalls([Call("toolbox_request_meta", {})]), Text("Done."))
    assert await run_turn(TurnRequest(await new_conversation(), "what came?"), outputs) == "complete"
    assert "traceparent" not in json.loads(outputs.results[0])


def test_a_web_process_without_an_endpoint_never_loads_the_sdk() -> None:
    """What Daphne imports, with no OTLP variable: no tracer provider, exporter or span processor."""
    env = {name: value for name, value in os.environ.items() if not name.startswith("OTEL_")}
    probe = (
        "import os, sys; os.environ.setdefault('DJANGO_SETTINGS_MODULE', 'boocode.settings')\n"
        "import boocode.asgi\n"
        "from mcpclient.telemetry import tracing\n"
        "loaded = [m for m in sys.modules if m.startswith(('opentelemetry.sdk.trace', "
        "'opentelemetry.exporter', 'mcpclient.telemetry.otlp'))]\n"
        "print(tracing.enabled(), sorted(loaded))\n"
    )
    done = subprocess.run(
        [PYTHON, "-c", probe], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "False []"


async def test_the_mcp_side_counts_calls_the_tool_step_and_the_servers_states(
    llm: ScriptedLLM, toolbox: Hub
) -> None:
    before = await scrape()
    llm.script(
        ToolCalls([Call("toolbox_echo", {"text": "hi"}), Call("toolbox_fail", {"message": "no"})]),
        Text("Done."),
    )
    assert await run_turn(TurnRequest(await new_conversation(), "go"), Outputs()) == "complete"
    after = await scrape()
    assert after.delta(before, "boocode_mcp_tool_calls_total", server="toolbox", outcome="ok") == 1
    assert after.delta(before, "boocode_mcp_tool_calls_total", server="toolbox", outcome="tool_error") == 1
    assert after.delta(before, "boocode_tool_calls_total", server="toolbox", outcome="ok") == 1
    assert after.delta(before, "boocode_tool_calls_total", server="toolbox", outcome="error") == 1
    assert after.delta(before, "boocode_tool_step_seconds_count") == 2
    assert after.delta(before, "boocode_tool_call_duration_seconds_count", server="toolbox") == 2
    assert after.value("boocode_mcp_server_status", server="toolbox", status="ready") == 1
    assert after.value("boocode_mcp_server_status", server="toolbox", status="unavailable") == 0
    assert after.value("boocode_mcp_server_tools", server="toolbox") == len(toolbox.tools())
    assert after.value("boocode_mcp_server_reconnect_attempts", server="toolbox") == 0


async def test_calls_waiting_for_approval_and_forms_waiting_for_a_person_are_counted(
    llm: ScriptedLLM, toolbox: Hub
) -> None:
    async with logged_in() as tab:
        before = await scrape()
        llm.script(ToolCalls([Call("toolbox_write_note", {"key": "a", "text": "b"})]), Text("Done."))
        await tab.send({"type": "user_message", "text": "write"})
        approval = (await tab.next("approval"))["approval"]
        waiting = await scrape()
        assert waiting.delta(before, "boocode_approvals_waiting") == 1
        answer = {"type": "approval_answer", "id": approval["id"], "decision": "approve", "remember": False}
        await tab.send(answer)
        assert (await tab.next("tool_result"))["call"]["output"] == "stored note 'a'"
        await tab.until_turn_end()
        approved = await scrape()
        assert approved.delta(before, "boocode_approvals_waiting") == 0
        assert approved.delta(before, "boocode_mcp_tool_calls_total", server="toolbox", outcome="ok") == 1
        # The person's time is not BooCode's: a call that waited for approval has no tool step.
        assert approved.delta(before, "boocode_tool_step_seconds_count") == 0

        llm.script(ToolCalls([Call("toolbox_ask_form", {})]), Text("Done."))
        await tab.send({"type": "user_message", "text": "ask me"})
        form = (await tab.next("elicitation"))["elicitation"]
        assert (await scrape()).delta(before, "boocode_questions_waiting") == 1
        await tab.send({"type": "elicitation_answer", "id": form["id"], "action": "decline"})
        assert (await tab.next("tool_result"))["call"]["output"] == "decline"
        await tab.until_turn_end()
        assert (await scrape()).delta(before, "boocode_questions_waiting") == 0

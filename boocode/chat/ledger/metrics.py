"""The chat's Prometheus metrics: turns, model requests, the tool calls of turns, what waits for a person.

They register in the process's one registry beside the MCP side's
(:mod:`mcpclient.telemetry.metrics`) and are served by ``GET /metrics`` (:mod:`boocode.metrics_view`):
every web process reports its own turns, sockets and waits (docs/operations.md says how to scrape
each one).

Costs: a counter and a histogram are touched once per turn, per model request and per tool call,
and once at a model answer's first token; nothing per streamed token after it. The open sockets,
approvals and questions are counted when scraped (``set_function`` in :mod:`boocode.chat.llm.status`,
:mod:`boocode.chat.calls.approvals` and :mod:`boocode.chat.calls.questions`), never kept up to date.
"""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

TURNS = Counter(
    "boocode_turns",
    "Turns ended in this process by status: complete, failed (the model or a server failed, or the turn "
    "was interrupted) or stopped (by a person)",
    ["status"],
)
TURN_SECONDS = Histogram(
    "boocode_turn_duration_seconds",
    "A turn from its start to its end (every model request and tool call in it)",
    buckets=(0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0, 300.0, 600.0),
)
MODEL_REQUESTS = Counter(
    "boocode_model_requests",
    "Streamed model requests by outcome: ok, cancelled, error (unexpected), or the failure's kind "
    "(connect, timeout, auth, model, rate_limit, server, request, malformed, disconnected, not_configured)",
    ["outcome"],
)
FIRST_TOKEN = Histogram(
    "boocode_model_first_token_seconds",
    "From a model request sent (retries included) to the first token of its answer, text or tool call",
    buckets=(0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0, 60.0),
)
TOOL_CALLS = Counter(
    "boocode_tool_calls",
    "Tool calls of turns by server (an MCP server's name, native, or unknown: a tool the agent does not "
    "have) and outcome: ok, error (the result is an error), cancelled (the turn stopped) or skipped "
    "(over the agent's limit per turn)",
    ["server", "outcome"],
)
TOOL_CALL_SECONDS = Histogram(
    "boocode_tool_call_duration_seconds",
    "A turn's tool call from its start to its result, waits for the person's approval or answers included",
    ["server"],
    buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0),
)
SOCKETS = Gauge(
    "boocode_websockets_open", "Chat websockets open in this process (signed in, on a conversation)"
)
APPROVALS_WAITING = Gauge(
    "boocode_approvals_waiting", "Tool calls of this process's turns waiting for their owner's approval"
)
QUESTIONS_WAITING = Gauge(
    "boocode_questions_waiting",
    "Forms and links MCP servers asked for during this process's tool calls, waiting for a person",
)

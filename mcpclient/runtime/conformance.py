"""One scenario of the official MCP conformance suite, played by the product's own hub.

The suite (``@modelcontextprotocol/conformance``, see docs/conformance.md) starts a mock MCP
server per scenario and runs ``manage.py mcp_conformance_client URL``; the environment names
the scenario (``MCP_CONFORMANCE_SCENARIO``) and, for some, adds JSON data
(``MCP_CONFORMANCE_CONTEXT``). This module knows what a client is expected to *do* in each
scenario (which tools to call, with which arguments) and nothing else: the connection is the
hub's, built with ``new_hub(persist=False)`` from the entry ``{"type": "http", "url": URL}``
(plus ``oauth.clientId`` / ``clientSecret`` when the context carries pre-registered
credentials) exactly as an mcp.json entry would be, and every call goes through
``Hub.call_tool``. The only difference from a served hub: nobody sits at a browser, so a
sign-in is answered by :class:`~mcpclient.engine.authorization.HeadlessConsent` and an elicitation
with the schema's defaults (the hub's behaviour for any call without a person). No protocol
code lives here, so a scenario that needs what the product lacks fails the way a user's
server would. The skills extension's scenarios (``sep-2640-*``) list the server's skills and,
where the scenario loads one, read each skill as ``load_skill`` does (``Hub.read_skill``: its
``SKILL.md``, then, only if that was verified, the files it names); a refusal is a note, since
refusing tampered content is what those scenarios check.

Lifecycle: :func:`run_scenario` starts the hub, which returns once the server is ready or has
failed (bounded by the entry's ``initTimeout``), makes the planned calls one after the other
(each bounded by the entry's ``timeout``) and stops the hub in a ``finally`` block, so the
session is closed even when a call fails. When the suite's per-scenario timeout kills the
process there is nothing else to clean up: the hub holds no stdio child and writes nothing.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from mcpclient.config.entries import parse_server
from mcpclient.core.results import ToolResult
from mcpclient.core.skills import SkillError
from mcpclient.core.state import DiscoveredTool, ServerSnapshot, Status
from mcpclient.core.words import counted
from mcpclient.engine.authorization import HeadlessConsent
from mcpclient.engine.hub import Hub
from mcpclient.runtime.composition import new_hub

SCENARIO_ENV = "MCP_CONFORMANCE_SCENARIO"
CONTEXT_ENV = "MCP_CONFORMANCE_CONTEXT"
# The name the mock server gets in the hub; tools are offered as "conformance_<tool>".
SERVER_NAME = "conformance"


class ConformanceError(ValueError):
    """The suite handed the command something it cannot use (e.g. a context that is not JSON)."""


@dataclass(frozen=True)
class PlannedCall:
    """One tool call a scenario expects: the tool's name on the server and its arguments."""

    tool: str
    arguments: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class CallOutcome:
    """What became of one planned call: the result, or why it could not be made."""

    call: PlannedCall
    result: ToolResult | None = None
    problem: str = ""  # set when the call failed or was not made

    def line(self) -> str:
        """One line for the command's output."""
        if self.problem:
            return f"{self.call.tool}: {self.problem}"
        output = self.result.output if self.result is not None else ""
        first = next((line.strip() for line in output.splitlines() if line.strip()), "")
        return f"{self.call.tool}: {first[:200]}"


@dataclass
class ScenarioReport:
    """What one run did: the server's state after connecting, each call, and remarks."""

    scenario: str
    snapshot: ServerSnapshot
    calls: list[CallOutcome] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def ready(self) -> bool:
        """True when the hub connected, initialized and listed the tools."""
        return self.snapshot.status is Status.READY

    @property
    def ok(self) -> bool:
        """True when the server became ready and every planned call returned a non-error result."""
        return self.ready and not any(outcome.problem for outcome in self.calls)

    def lines(self) -> list[str]:
        """Human-readable lines: the connection, then one per call, then remarks."""
        s = self.snapshot
        if self.ready:
            offered = sum(tool.offered for tool in s.tools)
            head = (
                f'MCP server "{s.name}" ready over {s.transport}, protocol {s.protocol_version}, '
                f"{offered:,} of {counted(len(s.tools), 'tool')} offered"
            )
        else:
            head = f'MCP server "{s.name}" {s.status.value}: {" ".join(s.last_error.split())}'
        return [head, *(outcome.line() for outcome in self.calls), *self.notes]

    def problems(self) -> list[str]:
        """Why the run is not ``ok`` (empty when it is)."""
        if not self.ready:
            return [
                f'MCP server "{self.snapshot.name}" {self.snapshot.status.value}: '
                f"{' '.join(self.snapshot.last_error.split())}"
            ]
        return [outcome.line() for outcome in self.calls if outcome.problem]


def parse_context(raw: str | None) -> dict[str, Any]:
    """The scenario's ``MCP_CONFORMANCE_CONTEXT`` (an empty dict when unset)."""
    if not raw:
        return {}
    try:
        context = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ConformanceError(f"{CONTEXT_ENV} is not valid JSON: {exc}") from None
    if not isinstance(context, dict):
        raise ConformanceError(f"{CONTEXT_ENV} must be a JSON object")
    return context


# -- what each scenario expects of a client -------------------------------------------------
# Read from the scenarios' sources (github.com/modelcontextprotocol/conformance,
# src/scenarios/client/) and the suite's reference client, examples/clients/typescript/
# everything-client.ts. A planner gets the tools as the hub discovered them.
Planner = Callable[[Sequence[DiscoveredTool]], list[PlannedCall]]


def _calls(*calls: PlannedCall) -> Planner:
    """A planner with a fixed list of calls (none: connect and list only)."""
    return lambda tools: list(calls)


def _every_offered_tool(arguments: Mapping[str, dict[str, Any]]) -> Planner:
    """Call every tool the hub offers, in listed order, as a model could.

    For scenarios that judge which tools a client keeps: the hub's own filters decide.
    """
    return lambda tools: [PlannedCall(t.name, dict(arguments.get(t.name, {}))) for t in tools if t.offered]


def _echo_focal_schema(tools: Sequence[DiscoveredTool]) -> list[PlannedCall]:
    """json-schema-2020-12-preservation: the focal tool's schema, as the hub kept it, to the echo tool."""
    focal = next((tool for tool in tools if tool.name == "json_schema_2020_12_tool"), None)
    if focal is None:
        return []  # the scenario reports the missing tools/list itself
    return [PlannedCall("json_schema_echo", {"schema": focal.input_schema})]


PLANS: dict[str, Planner] = {
    # Connect (initialize + tools/list) only.
    "initialize": _calls(),
    "request-metadata": _calls(),
    "json-schema-ref-no-deref": _calls(),
    # The check wants add_numbers called with two numbers.
    "tools_call": _calls(PlannedCall("add_numbers", {"a": 2, "b": 3})),
    # The tool sends elicitation/create; the check inspects the defaults in the answer.
    "elicitation-sep1034-client-defaults": _calls(PlannedCall("test_client_elicitation_defaults")),
    # The server closes the tool's SSE stream and answers on the GET stream after the retry delay.
    "sse-retry": _calls(PlannedCall("test_reconnection")),
    # Mcp-Method / Mcp-Name headers are checked on whatever the client sends.
    "http-standard-headers": _calls(PlannedCall("test_headers"), PlannedCall("my-hyphenated-tool")),
    # valid_tool must be called; the ten tools with a bad x-mcp-header must not be.
    "http-invalid-tool-headers": _every_offered_tool({"valid_tool": {"region": "us-west1"}}),
    "json-schema-2020-12-preservation": _echo_focal_schema,
    # Multi-round-trip requests: the first and third answer with resultType "input_required".
    "sep-2322-client-request-state": _calls(
        PlannedCall("test_mrtr_echo_state"),
        PlannedCall("test_mrtr_unrelated"),
        PlannedCall("test_mrtr_no_state"),
        PlannedCall("test_mrtr_no_result_type"),
    ),
}
# The skills extension (SEP-2640): the hub lists the skills; in these it also loads each one, as a
# model would with load_skill (no-prefetch checks that listing alone reads no file).
SKILL_LOADS = frozenset(
    {"sep-2640-client-verify-digest", "sep-2640-client-verify-size", "sep-2640-client-verify-frontmatter"}
)
SKILL_SCENARIOS = SKILL_LOADS | {"sep-2640-client-no-prefetch"}
PLANS.update({scenario: _calls() for scenario in SKILL_SCENARIOS})
MAX_SKILLS_LOADED = 10
# Every auth/* mock server offers "test-tool"; the suite's reference client lists and calls it.
AUTH_PLAN = _calls(PlannedCall("test-tool"))


def _context_calls(raw: object) -> list[PlannedCall]:
    """The calls a scenario names in its context (``{"toolCalls": [{"name", "arguments"}]}``)."""
    if not isinstance(raw, list):
        raise ConformanceError(f'{CONTEXT_ENV}: "toolCalls" must be a list')
    calls = []
    for index, item in enumerate(raw):
        if not (
            isinstance(item, dict)
            and isinstance(item.get("name"), str)
            and isinstance(item.get("arguments", {}), dict)
        ):
            raise ConformanceError(
                f'{CONTEXT_ENV}: "toolCalls[{index}]" must be an object with a "name" string '
                f'and an "arguments" object'
            )
        calls.append(PlannedCall(item["name"], dict(item.get("arguments", {}))))
    return calls


def planner_for(scenario: str, context: Mapping[str, Any]) -> Planner | None:
    """How to play ``scenario`` (None: unknown, so connect and list only)."""
    if "toolCalls" in context:
        # The suite names the calls (and the values whose encoding it checks): follow them.
        calls = _context_calls(context["toolCalls"])
        return lambda tools: calls
    if scenario.startswith("auth/"):
        return AUTH_PLAN
    return PLANS.get(scenario)


def entry_for(url: str, context: Mapping[str, Any], scenario: str = "") -> dict[str, Any]:
    """The mcp.json entry a user would write for the mock server.

    Pre-registered client credentials in the context (``client_id`` / ``client_secret``)
    become the entry's ``oauth.clientId`` / ``clientSecret``, as a user would copy them from
    the provider's console. The machine-to-machine scenarios get the grant a user would
    choose for such a server: ``client_credentials`` (``auth/client-credentials-*``; a
    ``private_key_pem`` becomes ``privateKey`` and ``private_key_jwt``), or
    ``identity_assertion`` when the context names an identity provider (``idp_*``, SEP-990).
    """
    entry: dict[str, Any] = {"type": "http", "url": url}

    def text(key: str) -> str | None:
        value = context.get(key)
        return value if isinstance(value, str) and value else None

    client_id = text("client_id")
    if client_id is None:
        return entry
    oauth: dict[str, Any] = {"clientId": client_id}
    if text("client_secret"):
        oauth["clientSecret"] = text("client_secret")
    if text("idp_id_token") and text("idp_token_endpoint") and text("idp_client_id"):
        oauth["grant"] = "identity_assertion"
        oauth["identityProvider"] = {
            "tokenEndpoint": text("idp_token_endpoint"),
            "clientId": text("idp_client_id"),
            "idToken": text("idp_id_token"),
        }
    elif text("private_key_pem") or scenario.startswith("auth/client-credentials"):
        oauth["grant"] = "client_credentials"
        if text("private_key_pem"):
            oauth["privateKey"] = text("private_key_pem")
            oauth["signingAlgorithm"] = text("signing_algorithm") or "RS256"
    entry["oauth"] = oauth
    return entry


# -- running ---------------------------------------------------------------------------------
def _not_offered(tool: str, snapshot: ServerSnapshot) -> str:
    found = next((t for t in snapshot.tools if t.name == tool), None)
    if found is None:
        return "not called: the server does not list this tool"
    return f"not called: the hub does not offer it ({' '.join(found.reject_reason.split())})"


async def run_scenario(
    url: str, *, scenario: str = "", context: Mapping[str, Any] | None = None
) -> ScenarioReport:
    """Connect the server at ``url`` through a hub and make the calls ``scenario`` expects.

    Raises ``ConfigError`` when ``url`` is not a usable entry and ``ConformanceError`` when the
    context names calls in a shape the command does not understand; everything the server or
    the hub does wrong is in the report.
    """
    context = context or {}
    planner = planner_for(scenario, context)
    config = parse_server(SERVER_NAME, entry_for(url, context, scenario), source="the conformance URL")
    hub = new_hub(persist=False)
    # Nobody to send to a browser: read the code from the authorization server's redirect.
    hub.consent_factory = HeadlessConsent
    try:
        await hub.start([config])
        snapshot = hub.snapshots()[0]
        report = ScenarioReport(scenario=scenario, snapshot=snapshot)
        if planner is None:
            report.notes.append(f'no plan for scenario "{scenario}": connected and listed the tools only')
        if not report.ready or planner is None:
            return report
        for call in planner(snapshot.tools):
            prefixed = snapshot.prefixed_names.get(call.tool, "")
            offered = any(t.name == call.tool and t.offered for t in snapshot.tools)
            if not offered or not prefixed:
                report.calls.append(CallOutcome(call, problem=_not_offered(call.tool, snapshot)))
                continue
            result = await hub.call_tool(prefixed, call.arguments)
            problem = ""
            if result.is_error:
                first = next((line.strip() for line in result.output.splitlines() if line.strip()), "")
                problem = f"error result: {first[:300] or '(no message)'}"
            report.calls.append(CallOutcome(call, result=result, problem=problem))
        if scenario in SKILL_SCENARIOS:
            await hub.load_skills(None, wait=config.timeout)
            report.notes += await _skills(hub, load=scenario in SKILL_LOADS)
        return report
    finally:
        await hub.stop()


async def _skills(hub: Hub, *, load: bool) -> list[str]:
    """The server's skills, listed; with ``load``, each loaded (SKILL.md, then the files it names)."""
    notes = []
    for skill in hub.skills(None)[:MAX_SKILLS_LOADED]:
        if not load:
            notes.append(f"skill {skill.label}: listed, not loaded (nothing asked for it)")
            continue
        try:
            text = await hub.read_skill(skill.server, skill.label, "", None)
            for path in text.others:
                await hub.read_skill(skill.server, skill.label, path, None)
        except SkillError as exc:
            notes.append(f"skill {skill.label}: refused: {exc}")
        else:
            notes.append(f"skill {skill.label}: loaded, with {len(text.others)} more files")
    return notes


def run_scenario_sync(
    url: str, *, scenario: str = "", context: Mapping[str, Any] | None = None
) -> ScenarioReport:
    """:func:`run_scenario` on a fresh event loop (for the management command)."""
    return asyncio.run(run_scenario(url, scenario=scenario, context=context))

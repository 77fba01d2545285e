"""What the hub worker and the web processes say to each other over the channel layer.

Invariants. Every message is msgpack-safe (dicts, lists, strings, numbers; datetimes as marked ISO
text). Each message is one of the typed envelopes here (:class:`Request`, :class:`Call`,
:class:`Reply`, …): a side builds one and sends its ``out()``, and the receiving side reads it with
its ``decode()``, which checks every field it needs (present, of its kind, ids and names bounded)
and raises :class:`WireError` naming what is wrong. The payloads inside go through this module's
``*_out`` / ``*_in`` pairs. Both are the one shape both sides use: a field is added here, on both
sides at once. Web processes send to the hub channel's group
(``settings.MCP_HUB_CHANNEL``); the worker answers on the caller's reply channel and broadcasts to
:func:`state_group`. The ``hub`` layer (:func:`hub_layer`) is Redis pub/sub, which delivers to
whoever listens now and keeps nothing, so each side subscribes before anything is sent to it. Its
channel names carry the Redis database's number: two deployments on one Redis database need
different ``BOOCODE_HUB_CHANNEL`` names. The worker says ``hub.alive`` every :data:`HEARTBEAT`
seconds; :data:`SILENT_AFTER` seconds without a word from it means it is gone.

The message types, their fields and who sends them: docs/deployment.md, *Messages between the processes*.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from channels.layers import get_channel_layer
from django.conf import settings

from mcpclient.core.elicitation import Link
from mcpclient.core.elicitation_form import Field, Form, Option
from mcpclient.core.mcp_apps import VISIBILITY
from mcpclient.core.prompts import HubPrompt, PromptArgument, PromptError
from mcpclient.core.resources import ReadResult, ResourceContent, ResourceEntry, ResourceError, TemplateEntry
from mcpclient.core.results import ToolResult
from mcpclient.core.skills import Skill, SkillError, SkillText
from mcpclient.core.state import DiscoveredTool, HubTool, ServerSnapshot, Status
from mcpclient.engine.prompts import Catalog as PromptCatalog
from mcpclient.engine.resources import ResourceCatalog

LAYER = "hub"  # the channel layer alias of the hop (Redis pub/sub, see settings.CHANNEL_LAYERS)
HEARTBEAT = 2.0  # seconds between the worker's ``hub.alive`` messages to the state group
SILENT_AFTER = 3 * HEARTBEAT  # seconds without a word from the worker before web processes give up on it


def hub_layer() -> Any:
    """The channel layer the web processes and the hub worker talk over."""
    return get_channel_layer(LAYER)


def state_group() -> str:
    """The group every web process of this deployment joins for the worker's state."""
    return f"{settings.MCP_HUB_CHANNEL}-state"


_MOMENT = "__moment"  # marks a datetime sent as ISO text


def tool_out(tool: HubTool) -> dict[str, Any]:
    """A tool as a plain dict."""
    return dataclasses.asdict(tool)


def tool_in(data: dict[str, Any]) -> HubTool:
    """A tool from :func:`tool_out`."""
    return HubTool(**{**data, "icons": tuple(data.get("icons") or ())})


def snapshot_out(snapshot: ServerSnapshot) -> dict[str, Any]:
    """A server snapshot as a plain dict (times as ISO text, status as its value)."""
    data = dataclasses.asdict(snapshot)
    data["status"] = snapshot.status.value
    for key, value in data.items():  # connected_at, and any moment a later field records
        if isinstance(value, dt.datetime):
            data[key] = {_MOMENT: value.isoformat()}
    return data


def snapshot_in(data: dict[str, Any]) -> ServerSnapshot:
    """A server snapshot from :func:`snapshot_out`."""
    tools = tuple(discovered_in(tool) for tool in data["tools"])
    moments = {
        key: dt.datetime.fromisoformat(value[_MOMENT])
        for key, value in data.items()
        if isinstance(value, dict) and _MOMENT in value
    }
    return ServerSnapshot(
        **{
            **data,
            **moments,
            "status": Status(data["status"]),
            "tools": tools,
            "stderr_tail": tuple(data["stderr_tail"]),
        }
    )


def result_out(result: ToolResult) -> dict[str, Any]:
    """A tool result as a plain dict (structured content included; its parts are not copied)."""
    return {field.name: getattr(result, field.name) for field in dataclasses.fields(result)}


def result_in(data: dict[str, Any]) -> ToolResult:
    """A tool result from :func:`result_out`."""
    return ToolResult(**data)


def form_out(form: Form) -> dict[str, Any]:
    """An elicitation form as a plain dict."""
    return dataclasses.asdict(form)


def form_in(data: dict[str, Any]) -> Form:
    """An elicitation form from :func:`form_out`."""
    fields = tuple(
        Field(**{**field, "options": tuple(Option(**option) for option in field["options"])})
        for field in data["fields"]
    )
    return Form(**{**data, "fields": fields})


# --- what a person's view of the sessions carries (``hub.request`` ``view``) ------------------
def discovered_in(data: dict[str, Any]) -> DiscoveredTool:
    """A server's listed tool from ``dataclasses.asdict``."""
    visibility = tuple(data.get("visibility", VISIBILITY))
    findings = tuple(data.get("findings") or ())
    icons = tuple(data.get("icons") or ())
    return DiscoveredTool(**{**data, "icons": icons, "visibility": visibility, "findings": findings})


def resources_out(catalog: ResourceCatalog) -> dict[str, Any]:
    """A connection's resource catalog as a plain dict (what was listed, not the signals)."""
    return {
        "resources": [dataclasses.asdict(entry) for entry in catalog.resources],
        "templates": [dataclasses.asdict(entry) for entry in catalog.templates],
        "supported": catalog.supported,
        "completions": catalog.completions,
        "error": catalog.error,
        "listings": catalog.listings,
    }


def resources_in(data: dict[str, Any]) -> ResourceCatalog:
    """A resource catalog from :func:`resources_out` (first listing done: the worker waited for it)."""
    catalog = ResourceCatalog(
        resources=tuple(ResourceEntry(**entry) for entry in data["resources"]),
        templates=tuple(
            TemplateEntry(**{**entry, "arguments": tuple(entry["arguments"])}) for entry in data["templates"]
        ),
        supported=data["supported"],
        completions=data["completions"],
        error=data["error"],
        listings=data["listings"],
    )
    catalog.mark_listed()
    return catalog


def prompt_out(prompt: HubPrompt) -> dict[str, Any]:
    """A prompt as a plain dict."""
    return dataclasses.asdict(prompt)


def prompt_in(data: dict[str, Any]) -> HubPrompt:
    """A prompt from :func:`prompt_out`."""
    arguments = tuple(PromptArgument(**argument) for argument in data["arguments"])
    return HubPrompt(**{**data, "arguments": arguments})


def prompts_out(catalog: PromptCatalog | None) -> dict[str, Any] | None:
    """A connection's prompt catalog as a plain dict (``None``: not watched yet)."""
    if catalog is None:
        return None
    return {
        "supported": catalog.supported,
        "error": catalog.error,
        "listings": catalog.listings,
        "prompts": [prompt_out(prompt) for prompt in catalog.prompts],
    }


def prompts_in(data: dict[str, Any] | None) -> PromptCatalog | None:
    """A prompt catalog from :func:`prompts_out`."""
    if data is None:
        return None
    catalog = PromptCatalog(
        supported=data["supported"],
        error=data["error"],
        listings=data["listings"],
        prompts=tuple(prompt_in(prompt) for prompt in data["prompts"]),
    )
    catalog.mark_listed()
    return catalog


def read_out(result: ReadResult) -> dict[str, Any]:
    """A capped ``resources/read`` result as a plain dict (bytes stay bytes: msgpack carries them)."""
    return dataclasses.asdict(result)


def read_in(data: dict[str, Any]) -> ReadResult:
    """A read result from :func:`read_out`."""
    contents = tuple(ResourceContent(**item) for item in data["contents"])
    return ReadResult(server=data["server"], uri=data["uri"], contents=contents)


def skill_out(skill: Skill) -> dict[str, Any]:
    """A listed skill as a plain dict (its manifest stays in the worker, where files are read)."""
    return dataclasses.asdict(skill)


def skill_in(data: dict[str, Any]) -> Skill:
    """A skill from :func:`skill_out`."""
    return Skill(**data)


def skill_text_out(text: SkillText) -> dict[str, Any]:
    """A verified skill file as a plain dict."""
    return dataclasses.asdict(text)


def skill_text_in(data: dict[str, Any]) -> SkillText:
    """A verified skill file from :func:`skill_text_out`."""
    return SkillText(**{**data, "others": tuple(data["others"])})


def refusal_out(exc: ResourceError | PromptError | SkillError) -> dict[str, Any]:
    """A refusal the person reads (a read, completion, prompt or skill that cannot be served)."""
    if isinstance(exc, ResourceError):
        return {"kind": "resource", "message": str(exc), "status": exc.status}
    if isinstance(exc, SkillError):
        return {"kind": "skill", "message": str(exc), "status": exc.status}
    return {"kind": "prompt", "message": str(exc)}


def refusal_in(data: dict[str, Any]) -> ResourceError | PromptError | SkillError:
    """The exception :func:`refusal_out` described, raised again on the caller's side."""
    if data["kind"] == "resource":
        return ResourceError(data["message"], data["status"])
    if data["kind"] == "skill":
        return SkillError(data["message"], data["status"])
    return PromptError(data["message"])


def link_out(link: Link) -> dict[str, Any]:
    """A URL-mode elicitation as a plain dict (its outcome travels in ``hub.link_end``)."""
    return {
        "message": link.message,
        "url": link.url,
        "tool": link.tool,
        "elicitation_id": link.elicitation_id,
        "required": link.required,
    }


def link_in(data: dict[str, Any]) -> Link:
    """A link from :func:`link_out` (on the running loop: it holds a future)."""
    return Link(**data)


# --- the envelopes: every message of the hop, typed, encoded and decoded here by both sides ---
MAX_ID = 128  # characters of a message's id, a form's ask id, a worker's boot id
MAX_CHANNEL = 512  # characters of a reply channel's name
MAX_NAME = (
    1024  # characters of a tool's prefixed name, a request's op, an answer's action or a link's outcome
)


class WireError(ValueError):
    """A channel-layer message that is not the envelope its ``type`` names; says what is wrong."""


def _present(message: Mapping[str, Any], kind: str, key: str) -> Any:
    try:
        return message[key]
    except KeyError as exc:  # (chained: the log names the missing key as KeyError does)
        raise WireError(f"a {kind!r} message without {key!r}") from exc


def _text(message: Mapping[str, Any], kind: str, key: str, limit: int) -> str:
    value = _present(message, kind, key)
    if not isinstance(value, str):
        raise WireError(f"a {kind!r} message whose {key!r} is {type(value).__name__}, not text")
    if len(value) > limit:
        raise WireError(f"a {kind!r} message whose {key!r} is {len(value)} characters long (at most {limit})")
    return value


def _person(message: Mapping[str, Any], kind: str) -> int | None:
    value = _present(message, kind, "user_id")
    if value is not None and (not isinstance(value, int) or isinstance(value, bool)):
        raise WireError(f"a {kind!r} message whose 'user_id' is {type(value).__name__}, not a number")
    return value


def _mapping(message: Mapping[str, Any], kind: str, key: str) -> dict[str, Any]:
    value = _present(message, kind, key)
    if not isinstance(value, dict):
        raise WireError(f"a {kind!r} message whose {key!r} is {type(value).__name__}, not a mapping")
    return value


def _number(message: Mapping[str, Any], kind: str, key: str, *, optional: bool = False) -> float | None:
    value = _present(message, kind, key)
    if value is None and optional:
        return None
    if not isinstance(value, int | float) or isinstance(value, bool):
        raise WireError(f"a {kind!r} message whose {key!r} is {type(value).__name__}, not a number")
    return value


def _optional_text(message: Mapping[str, Any], kind: str, key: str) -> str | None:
    value = _present(message, kind, key)
    if value is not None and not isinstance(value, str):
        raise WireError(f"a {kind!r} message whose {key!r} is {type(value).__name__}, not text")
    return value


@dataclass(frozen=True)
class WorkerState:
    """What the web processes mirror: shared tools, server snapshots, McpState version, boot id
    (tools and snapshots as :func:`tool_out` and :func:`snapshot_out` made them)."""

    boot: str
    version: int
    tools: list[dict[str, Any]]
    snapshots: list[dict[str, Any]]

    def out(self) -> dict[str, Any]:
        return {"boot": self.boot, "version": self.version, "tools": self.tools, "snapshots": self.snapshots}

    @classmethod
    def decode(cls, data: Any) -> WorkerState:
        if not isinstance(data, dict):
            raise WireError(f"a worker state that is {type(data).__name__}, not a mapping")
        kind = "state"
        version = _present(data, kind, "version")
        if not isinstance(version, int) or isinstance(version, bool):
            raise WireError(f"a worker state whose 'version' is {type(version).__name__}, not a number")
        tools, snapshots = _present(data, kind, "tools"), _present(data, kind, "snapshots")
        if not isinstance(tools, list) or not isinstance(snapshots, list):
            raise WireError("a worker state whose 'tools' or 'snapshots' is not a list")
        return cls(_text(data, kind, "boot", MAX_ID), version, tools, snapshots)


@dataclass(frozen=True)
class Request:
    """``hub.request`` (web → worker): an admin action or a query, answered with a :class:`Reply`."""

    TYPE: ClassVar[str] = "hub.request"
    id: str
    reply: str
    op: str
    args: dict[str, Any]

    def out(self) -> dict[str, Any]:
        return {"type": self.TYPE, "id": self.id, "reply": self.reply, "op": self.op, "args": self.args}

    @classmethod
    def decode(cls, message: Mapping[str, Any]) -> Request:
        kind = cls.TYPE
        args = message.get("args") or {}
        if not isinstance(args, dict):
            raise WireError(f"a {kind!r} message whose 'args' is {type(args).__name__}, not a mapping")
        return cls(
            _text(message, kind, "id", MAX_ID),
            _text(message, kind, "reply", MAX_CHANNEL),
            _text(message, kind, "op", MAX_NAME),
            args,
        )


@dataclass(frozen=True)
class Reply:
    """``hub.reply`` (worker → caller): a request's ``result`` (with the worker's ``state`` after a
    change), or ``refused`` (:func:`refusal_out`), or ``error``; a call's ``result`` (:func:`result_out`)."""

    TYPE: ClassVar[str] = "hub.reply"
    id: str
    result: Any = None
    state: WorkerState | None = None
    refused: dict[str, Any] | None = None
    error: str | None = None

    def out(self) -> dict[str, Any]:
        message: dict[str, Any] = {"type": self.TYPE, "id": self.id}
        if self.error is not None:
            message["error"] = self.error
        elif self.refused is not None:
            message["refused"] = self.refused
        else:
            message["result"] = self.result
        if self.state is not None:
            message["state"] = self.state.out()
        return message

    @classmethod
    def decode(cls, message: Mapping[str, Any]) -> Reply:
        kind = cls.TYPE
        refused = message.get("refused")
        if refused is not None and not isinstance(refused, dict):
            raise WireError(f"a {kind!r} message whose 'refused' is {type(refused).__name__}, not a mapping")
        error = message.get("error")
        return cls(
            _text(message, kind, "id", MAX_ID),
            result=message.get("result"),
            state=WorkerState.decode(message["state"]) if message.get("state") is not None else None,
            refused=refused,
            error=None if error is None else str(error),
        )


@dataclass(frozen=True)
class Call:
    """``hub.call`` (web → worker): a tool call. ``ask``: the caller has a person to ask;
    ``approval``: the person's approval it names; ``trace``: the caller's W3C trace context;
    ``step``: seconds of the tool step so far (the last three only when there is one)."""

    TYPE: ClassVar[str] = "hub.call"
    id: str
    reply: str
    name: str
    arguments: dict[str, Any]
    user_id: int | None
    ask: bool = False
    approval: int | None = None
    views: bool = False
    trace: dict[str, Any] | None = None
    step: float | None = None

    def out(self) -> dict[str, Any]:
        message: dict[str, Any] = {
            "type": self.TYPE,
            "id": self.id,
            "reply": self.reply,
            "name": self.name,
            "arguments": self.arguments,
            "user_id": self.user_id,
            "ask": self.ask,
            "approval": self.approval,
        }
        if self.views:
            message["views"] = True
        if self.trace:
            message["trace"] = self.trace
        if self.step is not None:
            message["step"] = self.step
        return message

    @classmethod
    def decode(cls, message: Mapping[str, Any]) -> Call:
        """The call, its required fields checked; an optional field of the wrong kind is left out
        (an approval that is not a row's id names none, and the worker refuses what needs one)."""
        kind = cls.TYPE
        approval, step, trace = message.get("approval"), message.get("step"), message.get("trace")
        return cls(
            _text(message, kind, "id", MAX_ID),
            _text(message, kind, "reply", MAX_CHANNEL),
            _text(message, kind, "name", MAX_NAME),
            _mapping(message, kind, "arguments"),
            _person(message, kind),
            ask=bool(message.get("ask")),
            approval=approval if isinstance(approval, int) and not isinstance(approval, bool) else None,
            views=message.get("views") is True,
            trace=trace if isinstance(trace, dict) else None,
            step=step if isinstance(step, int | float) and not isinstance(step, bool) else None,
        )


@dataclass(frozen=True)
class Cancel:
    """``hub.cancel`` (web → worker): the caller stopped waiting for call ``id``."""

    TYPE: ClassVar[str] = "hub.cancel"
    id: str

    def out(self) -> dict[str, Any]:
        return {"type": self.TYPE, "id": self.id}

    @classmethod
    def decode(cls, message: Mapping[str, Any]) -> Cancel:
        return cls(_text(message, cls.TYPE, "id", MAX_ID))


@dataclass(frozen=True)
class Progress:
    """``hub.progress`` (worker → caller): a call's progress."""

    TYPE: ClassVar[str] = "hub.progress"
    id: str
    progress: float
    total: float | None
    message: str | None

    def out(self) -> dict[str, Any]:
        return {
            "type": self.TYPE,
            "id": self.id,
            "progress": self.progress,
            "total": self.total,
            "message": self.message,
        }

    @classmethod
    def decode(cls, message: Mapping[str, Any]) -> Progress:
        kind = cls.TYPE
        progress = _number(message, kind, "progress")
        assert progress is not None
        return cls(
            _text(message, kind, "id", MAX_ID),
            progress,
            _number(message, kind, "total", optional=True),
            _optional_text(message, kind, "message"),
        )


@dataclass(frozen=True)
class Ask:
    """``hub.ask`` (worker → caller): a form (:func:`form_out`) or a link (:func:`link_out`) for the
    call's person."""

    TYPE: ClassVar[str] = "hub.ask"
    id: str
    ask: str
    form: dict[str, Any] | None = None
    link: dict[str, Any] | None = None

    def out(self) -> dict[str, Any]:
        shown = {"link": self.link} if self.link is not None else {"form": self.form}
        return {"type": self.TYPE, "id": self.id, "ask": self.ask, **shown}

    @classmethod
    def decode(cls, message: Mapping[str, Any]) -> Ask:
        kind = cls.TYPE
        ids = _text(message, kind, "id", MAX_ID), _text(message, kind, "ask", MAX_ID)
        if "link" in message:
            return cls(*ids, link=_mapping(message, kind, "link"))
        return cls(*ids, form=_mapping(message, kind, "form"))


@dataclass(frozen=True)
class AskEnd:
    """``hub.ask_end`` (worker → caller): the call ended before the person answered."""

    TYPE: ClassVar[str] = "hub.ask_end"
    id: str
    ask: str

    def out(self) -> dict[str, Any]:
        return {"type": self.TYPE, "id": self.id, "ask": self.ask}

    @classmethod
    def decode(cls, message: Mapping[str, Any]) -> AskEnd:
        return cls(_text(message, cls.TYPE, "id", MAX_ID), _text(message, cls.TYPE, "ask", MAX_ID))


@dataclass(frozen=True)
class AnswerMessage:
    """``hub.answer`` (web → worker): the person's answer to a forwarded form or link."""

    TYPE: ClassVar[str] = "hub.answer"
    id: str
    ask: str
    action: str
    content: Any = None

    def out(self) -> dict[str, Any]:
        return {
            "type": self.TYPE,
            "id": self.id,
            "ask": self.ask,
            "action": self.action,
            "content": self.content,
        }

    @classmethod
    def decode(cls, message: Mapping[str, Any]) -> AnswerMessage:
        kind = cls.TYPE
        return cls(
            _text(message, kind, "id", MAX_ID),
            _text(message, kind, "ask", MAX_ID),
            _text(message, kind, "action", MAX_NAME),
            message.get("content"),
        )


@dataclass(frozen=True)
class LinkEnd:
    """``hub.link_end`` (both ways): a link the person opened ended, and how."""

    TYPE: ClassVar[str] = "hub.link_end"
    id: str
    ask: str
    outcome: str

    def out(self) -> dict[str, Any]:
        return {"type": self.TYPE, "id": self.id, "ask": self.ask, "outcome": self.outcome}

    @classmethod
    def decode(cls, message: Mapping[str, Any]) -> LinkEnd:
        kind = cls.TYPE
        return cls(
            _text(message, kind, "id", MAX_ID),
            _text(message, kind, "ask", MAX_ID),
            _text(message, kind, "outcome", MAX_NAME),
        )


@dataclass(frozen=True)
class StateMessage:
    """``hub.state`` (worker → every web process): the worker's state after a change."""

    TYPE: ClassVar[str] = "hub.state"
    state: WorkerState

    def out(self) -> dict[str, Any]:
        return {"type": self.TYPE, "state": self.state.out()}

    @classmethod
    def decode(cls, message: Mapping[str, Any]) -> StateMessage:
        return cls(WorkerState.decode(_present(message, cls.TYPE, "state")))


@dataclass(frozen=True)
class Alive:
    """``hub.alive`` (worker → every web process): the worker's heartbeat, with its boot id."""

    TYPE: ClassVar[str] = "hub.alive"
    boot: str

    def out(self) -> dict[str, Any]:
        return {"type": self.TYPE, "boot": self.boot}

    @classmethod
    def decode(cls, message: Mapping[str, Any]) -> Alive:
        return cls(_text(message, cls.TYPE, "boot", MAX_ID))


ToWorker = Request | Call | Cancel | AnswerMessage | LinkEnd
FromWorker = Reply | Progress | Ask | AskEnd | LinkEnd | StateMessage | Alive
_FROM_WORKER: dict[str, Any] = {
    kind.TYPE: kind for kind in (Reply, Progress, Ask, AskEnd, LinkEnd, StateMessage, Alive)
}


def from_worker(message: Any) -> FromWorker:
    """A message a web process received, decoded by its ``type`` (:class:`WireError` when it is none)."""
    if not isinstance(message, dict):
        raise WireError(f"a message that is {type(message).__name__}, not a mapping")
    kind = message.get("type")
    envelope = _FROM_WORKER.get(kind) if isinstance(kind, str) else None
    if envelope is None:
        raise WireError(f"not a message of the hub worker: {kind!r}")
    decoded: FromWorker = envelope.decode(message)
    return decoded

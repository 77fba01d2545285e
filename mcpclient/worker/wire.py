"""What the hub worker and the web processes say to each other over the channel layer.

Invariants. Every message is msgpack-safe (dicts, lists, strings, numbers; datetimes as marked ISO
text), and this module's ``*_out`` / ``*_in`` pairs are the one shape both sides use: a field is
added here, on both sides at once. Web processes send to the hub channel's group
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
from typing import Any

from channels.layers import get_channel_layer
from django.conf import settings

from mcpclient.core.apps import VISIBILITY
from mcpclient.core.elicitation import Link
from mcpclient.core.elicitation_form import Field, Form, Option
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

"""What the hub worker and the web processes say to each other over the channel layer.

Channel-layer messages are msgpack: plain dicts, lists, strings and numbers. This module turns
the hub's dataclasses (tools, server snapshots, results, forms) into such values and back, so
both sides agree on one shape. Message types (``type`` keys) and who sends them:

web -> worker, to the group named after the hub channel (``settings.MCP_HUB_CHANNEL``), which
the worker joins with a channel of its own before it announces itself:
    ``hub.request`` ``{id, reply, op, args}``: ``state``, ``apply``, ``reconnect``,
    ``rediscover``, ``set_log_level``, ``open_user``, ``close_user``; answered by ``hub.reply``.
    ``hub.call`` ``{id, reply, name, arguments, user_id, ask}``: a tool call.
    ``hub.cancel`` ``{id}``: the caller stopped waiting (turn stopped, time budget spent).
    ``hub.answer`` ``{id, ask, action, content}``: the person's answer to a forwarded form.

worker -> one web process, on its reply channel:
    ``hub.reply`` ``{id, result}``, ``hub.progress`` ``{id, progress, total, message}``,
    ``hub.ask`` ``{id, ask, form}``, ``hub.ask_end`` ``{id, ask}`` (the call ended first).

worker -> every web process, on the group :func:`state_group` (the hub channel's name + ``-state``):
    ``hub.state`` ``{state}``: the tools and server states after every change, with the
    worker's ``boot`` id (a new id means the worker restarted: calls in flight are lost).
    ``hub.alive`` ``{boot}``: every :data:`HEARTBEAT` seconds. A web process that hears nothing
    from the worker for :data:`SILENT_AFTER` seconds fails its calls in flight and refuses new
    ones at once with a message saying the worker is not running.

The layer is the ``hub`` alias (:func:`hub_layer`): Redis pub/sub, which delivers to whoever
listens now and keeps nothing. Pub/sub channels are global to a Redis server (not per database):
two deployments on one Redis server need different ``BOOCODE_HUB_CHANNEL`` names.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from typing import Any

from mcpclient.elicitation_schema import Field, Form, Option
from mcpclient.hub import DiscoveredTool, HubTool, ServerSnapshot, Status
from mcpclient.results import ToolResult

LAYER = "hub"  # the channel layer alias of the hop (Redis pub/sub, see settings.CHANNEL_LAYERS)
HEARTBEAT = 2.0  # seconds between the worker's ``hub.alive`` messages to the state group
SILENT_AFTER = 3 * HEARTBEAT  # seconds without a word from the worker before web processes give up on it


def hub_layer() -> Any:
    """The channel layer the web processes and the hub worker talk over."""
    from channels.layers import get_channel_layer

    return get_channel_layer(LAYER)


def state_group() -> str:
    """The group every web process of this deployment joins for the worker's state."""
    from django.conf import settings

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
    tools = tuple(
        DiscoveredTool(**{**tool, "icons": tuple(tool.get("icons") or ())}) for tool in data["tools"]
    )
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
    """A tool result as a plain dict (structured content included)."""
    return dataclasses.asdict(result)


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

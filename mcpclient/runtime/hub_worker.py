"""The hub worker (``manage.py hub_worker``): one process that holds every MCP session for all web processes.

Invariants. :class:`HubWorker` drops a message it cannot read instead of ending the process. One
:class:`HubConsumer` handles messages one at a time, and every call and request runs as a task of
its own. A call runs inside :func:`~mcpclient.engine.progress.reporting` and, when its caller has a
person to ask, :func:`~mcpclient.engine.elicitation.asking`, whose callbacks forward progress,
forms and links to the caller's reply channel with the call's id; ``hub.cancel`` cancels its task
(the SDK tells the server), and a form still open when the call ends is withdrawn on the caller's
side (``hub.ask_end``). A call carrying ``trace`` (the caller's W3C trace context) runs with it
current, so its MCP request is a span of the caller's trace and the server hears of it; ``step``
(the tool step so far) lets this process observe the whole step (:mod:`mcpclient.telemetry`).
:data:`QUERIES` are answered without waiting for the hub's listeners; other requests reply with
the state once the listeners have finished. On SIGTERM or SIGINT the calls in
flight are answered with an error before the hub closes every session. Every state carries
:data:`BOOT`, this process's id, so web processes tell a restarted worker apart.

The tour: docs/deployment.md (*What runs where*, *Calls, cancellation and crashes*).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import time
import uuid
from typing import Any

from channels.consumer import AsyncConsumer, get_handler_name
from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from channels.worker import Worker

from mcpclient import runtime
from mcpclient.config.model import per_user
from mcpclient.core.approval import approval_refusal
from mcpclient.core.elicitation import Answer, Link
from mcpclient.core.elicitation_form import Form
from mcpclient.core.progress import Progress
from mcpclient.core.prompts import PromptError
from mcpclient.core.resources import ResourceError, make_ref
from mcpclient.core.results import ToolResult
from mcpclient.core.skills import SkillError
from mcpclient.engine.elicitation import asking
from mcpclient.engine.hub import Hub
from mcpclient.engine.progress import reporting
from mcpclient.engine.serving import server_names, session_for
from mcpclient.runtime import people, personal, signin
from mcpclient.telemetry import metrics, tracing
from mcpclient.worker import wire as worker_wire

logger = logging.getLogger(__name__)

BOOT = uuid.uuid4().hex  # this worker process's id, in every state it sends
# Requests answered without waiting for the hub's listeners and without the state: they change
# no server's state the caller must see first (a sign-in's session announces itself when it
# settles, like every change, on the state group).
QUERIES = frozenset({"view", "read_resource", "complete", "get_prompt", "skills", "read_skill", "signin"})


def state_of(hub: Hub) -> dict[str, Any]:
    """What the web processes mirror: shared tools, server snapshots, McpState version, boot id."""
    return {
        "boot": BOOT,
        "version": runtime.seen_version(),
        "tools": [worker_wire.tool_out(tool) for tool in hub.every_tool()],
        "snapshots": [worker_wire.snapshot_out(snapshot) for snapshot in hub.snapshots()],
    }


async def broadcast_state(hub: Hub) -> None:
    """Send the hub's state to every web process."""
    layer = worker_wire.hub_layer()
    await layer.group_send(worker_wire.state_group(), {"type": "hub.state", "state": state_of(hub)})


async def heartbeat() -> None:
    """Tell the web processes this worker is alive, every ``worker_wire.HEARTBEAT`` seconds."""
    layer = worker_wire.hub_layer()
    while True:
        try:
            await layer.group_send(worker_wire.state_group(), {"type": "hub.alive", "boot": BOOT})
        except Exception:  # Redis gone for a moment: the web processes see the silence
            logger.exception("could not send the hub worker's heartbeat")
        await asyncio.sleep(worker_wire.HEARTBEAT)


async def view_of(hub: Hub, user_id: int | None, wait: float) -> list[dict[str, Any]]:
    """The sessions ``user_id`` uses (shared ones, their own "perUser" ones), with their catalogs.

    A ready session's first listings are waited for, up to ``wait`` seconds (all at once).
    """
    found = []
    for name in server_names(hub, user_id):
        connection = session_for(hub, name, user_id)
        if connection is not None:
            found.append((per_user(connection.config), connection))
    await hub.load_catalogs(user_id, wait=wait)
    return [
        {
            "name": connection.name,
            "own": own,
            "status": connection.status.value,
            "reason": connection.reason,
            "tools": [dataclasses.asdict(tool) for tool in connection.tools] if own else [],
            "resources": worker_wire.resources_out(connection.resources),
            "prompts": worker_wire.prompts_out(connection.prompts),
        }
        for own, connection in found
    ]


async def _signin(args: dict[str, Any]) -> dict[str, Any]:
    """A sign-in step a web process forwarded: the flow lives here, with the session it opens."""
    step, back = args["step"], ""
    if step == "connect":
        outcome = await signin.connect(
            args["name"], args["user_id"], staff=args["staff"], return_to=args["return_to"]
        )
    elif step == "finish":
        outcome, back = await signin.finish(args["state"], args["user_id"], args["query"])
    elif step == "disconnect":
        outcome = await signin.disconnect(args["name"], args["user_id"], staff=args["staff"])
    else:
        raise ValueError(f"unknown sign-in step {step!r}")
    return {"outcome": dataclasses.asdict(outcome), "back": back}


class HubWorker(Worker):
    """Channels' :class:`~channels.worker.Worker`, which drops a message it cannot read.

    Channels' own listener raises on a message without a ``type`` (and on one the layer cannot
    decode), which ends the worker process and every call in flight with it; here the message
    is logged and the listener goes on.
    """

    async def listener(self, channel: str) -> None:
        while True:
            try:
                message = await self.channel_layer.receive(channel)
            except Exception:  # not msgpack, or not the layer's: nothing to answer
                logger.exception("the hub worker could not read a message")
                continue
            if not isinstance(message, dict) or not message.get("type"):
                logger.error("the hub worker dropped a message without a type")
                continue
            scope = {"type": "channel", "channel": channel}
            await self.get_or_create_application_instance(channel, scope).put(message)


class HubConsumer(AsyncConsumer):
    """Routes the hub channel's messages to the process's hub (one instance per worker)."""

    channel_layer_alias = worker_wire.LAYER

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        self.tasks: dict[str, asyncio.Task[Any]] = {}
        self.replies: dict[str, str] = {}  # call id -> its caller's reply channel
        self.answers: dict[tuple[str, str], asyncio.Future[Answer]] = {}
        self.links: dict[tuple[str, str], Link] = {}  # consented links, by (call id, ask id)
        self.following: set[asyncio.Task[None]] = set()
        self.scope = scope
        self.channel_layer = get_channel_layer(self.channel_layer_alias)
        _consumers.add(self)
        try:
            while True:
                await self.dispatch(await receive())
        finally:
            _consumers.discard(self)

    async def dispatch(self, message: dict[str, Any]) -> None:
        """Hand ``message`` to its handler; a message it cannot handle is logged and dropped.

        Leaner than ``AsyncConsumer``'s loop, which cost each call ~0.23 ms more through the
        worker (bench/hub_hop.py): the Worker's queue is the only input (no channel of the
        consumer's own, no ``asyncio.wait`` per message), and no database clean-up in a thread
        before every message: the handlers only start tasks, and what those run reaches the
        database through ``database_sync_to_async``, which closes stale connections itself.
        """
        try:
            name = get_handler_name(message)
            if not name.startswith("hub_"):
                raise ValueError(f"not a hub message: {message['type']!r}")
            await getattr(self, name)(message)
        except Exception:  # one bad message must not drop the calls in flight with the consumer
            logger.exception("the hub worker could not handle a %r message", message.get("type"))

    def _spawn(self, key: str, coroutine: Any) -> None:
        # Started at once, up to its first real wait: a call reaches its server one loop
        # iteration sooner (bench/hub_hop.py).
        task = asyncio.eager_task_factory(asyncio.get_running_loop(), coroutine)
        self.tasks[key] = task
        task.add_done_callback(lambda _: self.tasks.pop(key, None))

    async def hub_request(self, message: dict[str, Any]) -> None:
        """An admin action or a query: answered with ``hub.reply``."""
        self._spawn(message["id"], self._request(message))

    async def _request(self, message: dict[str, Any]) -> None:
        op, args = message["op"], message.get("args") or {}
        try:
            hub = await runtime.ensure_hub()
            # The person's groups as this process reads them (mcpclient.runtime.people): the
            # worker decides on its own read which servers are theirs to use.
            await people.refresh(args.get("user_id") if isinstance(args.get("user_id"), int) else None)
            if op == "state":
                result: Any = None
            elif op == "apply":
                result = None
            elif op == "reconnect":
                await hub.reconnect(args["name"])
                result = None
            elif op == "rediscover":
                await hub.rediscover(args["name"])
                result = None
            elif op == "set_log_level":
                result = await hub.set_log_level(args["name"], args["level"])
                await broadcast_state(hub)  # no state change: every admin shows the new note
            elif op == "open_user":
                # The person's own servers as the database says, read here, not taken on the
                # web process's word (mcpclient.runtime.personal).
                mine = await database_sync_to_async(personal.configs_for)(args["user_id"])
                await hub.set_personal(args["user_id"], mine)
                refused = await hub.open_user_sessions(args["user_id"], args["names"])
                tools = [worker_wire.tool_out(tool) for tool in hub.every_tool(args["user_id"])]
                result = {"tools": tools, "refused": refused}
            elif op == "close_user":
                await hub.close_user_session(args["name"], args["user_id"])
                result = None
            elif op == "view":
                result = await view_of(hub, args["user_id"], args["wait"])
            elif op == "read_resource":
                view = args.get("view") is True
                found = await hub.read_resource(args["server"], args["uri"], args["user_id"], view=view)
                result = worker_wire.read_out(found)
            elif op == "complete":
                ref = make_ref(args["ref"], args["name"])
                completions = await hub.complete(
                    args["server"], ref, args["argument"], args["context"], args["user_id"]
                )
                result = dataclasses.asdict(completions)
            elif op == "get_prompt":
                prompt, messages = await hub.get_prompt(
                    args["server"], args["name"], args["arguments"], args["user_id"]
                )
                result = {
                    "prompt": worker_wire.prompt_out(prompt),
                    "messages": [dataclasses.asdict(message) for message in messages],
                }
            elif op == "skills":
                await hub.load_skills(args["user_id"], wait=args["wait"])
                result = [worker_wire.skill_out(skill) for skill in hub.skills(args["user_id"])]
            elif op == "read_skill":
                text = await hub.read_skill(args["server"], args["skill"], args["path"], args["user_id"])
                result = worker_wire.skill_text_out(text)
            elif op == "signin":
                result = await _signin(args)
            else:
                raise ValueError(f"unknown hub request {op!r}")
            reply = {"result": result}
            if op not in QUERIES:
                await hub.drain_listeners()
                reply["state"] = state_of(hub)
        except (ResourceError, PromptError, SkillError) as exc:  # a refusal the person reads, not a failure
            reply = {"refused": worker_wire.refusal_out(exc)}
        except Exception as exc:  # the web process gets the error as text, the worker goes on
            logger.exception("hub request %s failed", op)
            reply = {"error": f"{type(exc).__name__}: {exc}"}
        await self.channel_layer.send(message["reply"], {"type": "hub.reply", "id": message["id"], **reply})

    async def hub_call(self, message: dict[str, Any]) -> None:
        """A tool call: progress, forms and links go back to the caller while it runs, then the result."""
        self.replies[message["id"]] = message["reply"]
        self._spawn(message["id"], self._call(message))

    async def hub_cancel(self, message: dict[str, Any]) -> None:
        """The caller stopped waiting: cancel the call (the SDK tells the server)."""
        task = self.tasks.get(message["id"])
        if task is not None:
            task.cancel()

    async def hub_answer(self, message: dict[str, Any]) -> None:
        """The person's answer to a forwarded form."""
        waiting = self.answers.get((message["id"], message["ask"]))
        if waiting is not None and not waiting.done():
            waiting.set_result(Answer(message["action"], message.get("content")))

    async def hub_link_end(self, message: dict[str, Any]) -> None:
        """The person's side ended a consented link (done, expired, stopped)."""
        link = self.links.pop((message["id"], message["ask"]), None)
        if link is not None:
            link.finish(message["outcome"])

    def _follow(self, call_id: str, ask_id: str, reply: str, link: Link) -> None:
        """Tell the caller how a consented link ends here (the server completed it, the call ended)."""
        self.links[(call_id, ask_id)] = link

        async def follow() -> None:
            outcome = await link.finished
            if self.links.pop((call_id, ask_id), None) is not None:  # not ended by the caller
                end = {"type": "hub.link_end", "id": call_id, "ask": ask_id, "outcome": outcome}
                await self.channel_layer.send(reply, end)

        task = asyncio.ensure_future(follow())
        self.following.add(task)
        task.add_done_callback(self.following.discard)

    async def _call(self, message: dict[str, Any]) -> None:
        call_id, reply = message["id"], message["reply"]
        layer = self.channel_layer

        async def report(update: Progress) -> None:
            await layer.send(
                reply,
                {
                    "type": "hub.progress",
                    "id": call_id,
                    "progress": update.progress,
                    "total": update.total,
                    "message": update.message,
                },
            )

        async def ask(form: Form | Link) -> Answer:
            ask_id = uuid.uuid4().hex
            waiting: asyncio.Future[Answer] = asyncio.get_running_loop().create_future()
            self.answers[(call_id, ask_id)] = waiting
            if isinstance(form, Link):
                shown = {"link": worker_wire.link_out(form)}
            else:
                shown = {"form": worker_wire.form_out(form)}
            try:
                await layer.send(reply, {"type": "hub.ask", "id": call_id, "ask": ask_id, **shown})
                answer = await waiting
                if isinstance(form, Link) and answer.action == "accept":
                    self._follow(call_id, ask_id, reply, form)
                return answer
            finally:
                del self.answers[(call_id, ask_id)]
                if not waiting.done():
                    await asyncio.shield(
                        layer.send(reply, {"type": "hub.ask_end", "id": call_id, "ask": ask_id})
                    )

        try:
            hub = await runtime.ensure_hub(max_age=runtime.TURN_CHECK_INTERVAL)
            await people.refresh(message["user_id"])
            refusal = await _unapproved(hub, message)
            if refusal:
                logger.warning("refused a call of %s: %s", message["name"], refusal)
                result = ToolResult.error(refusal)
            else:
                step = message.get("step")
                if isinstance(step, int | float):  # the tool step's time so far, in the web process
                    metrics.tool_step_began(time.monotonic() - step)
                with reporting(report), tracing.attached(message.get("trace")):
                    with asking(ask) if message.get("ask") else contextlib.nullcontext():
                        result = await hub.call_tool(
                            message["name"],
                            message["arguments"],
                            user_id=message["user_id"],
                            views=message.get("views") is True,
                        )
        except asyncio.CancelledError:
            return  # cancelled by its caller (who no longer waits) or by stop_calls (who answered)
        except Exception as exc:  # a bug must reach the caller as text, not leave it waiting
            logger.exception('tool call "%s" failed in the hub worker', message["name"])
            result = ToolResult.error(f'MCP tool "{message["name"]}" failed in the hub worker: {exc}')
        finally:
            self.replies.pop(call_id, None)
        await layer.send(
            reply, {"type": "hub.reply", "id": call_id, "result": worker_wire.result_out(result)}
        )

    async def stop_calls(self) -> None:
        """The worker is stopping: answer every call in flight with an error, then cancel it."""
        stopped = ToolResult.error("The MCP hub worker stopped during the call; try again once it is back.")
        for call_id, reply in list(self.replies.items()):
            await self.channel_layer.send(
                reply, {"type": "hub.reply", "id": call_id, "result": worker_wire.result_out(stopped)}
            )
        for task in list(self.tasks.values()):
            task.cancel()


_consumers: set[HubConsumer] = set()


async def _unapproved(hub: Hub, message: dict[str, Any]) -> str:
    """Why the call may not run for want of approval ("" when it may), decided here, where it runs.

    The web process asked the person; a call that needs approval by the tool's current
    definition runs only with the approval it names, checked against the record of it
    (:func:`mcpclient.core.approval.approval_refusal`).
    """
    name, user_id, views = message["name"], message["user_id"], message.get("views") is True
    tool = next((tool for tool in hub.tools(user_id, views=views) if tool.prefixed_name == name), None)
    if tool is None or not tool.approval_reason:
        return ""  # (an unknown tool: the hub's own answer says why)
    approval = message.get("approval")
    named = approval if isinstance(approval, int) and not isinstance(approval, bool) else None
    return await approval_refusal(tool.approval_reason, name, message["arguments"], user_id, named)


async def stop_all_calls() -> None:
    """Answer and cancel the calls in flight of every consumer (the worker is stopping)."""
    for consumer in list(_consumers):
        await consumer.stop_calls()


async def poll_changes(interval: float) -> None:
    """Apply changes made by any process (McpState version, mcp.json) every ``interval`` s."""
    while True:
        await asyncio.sleep(interval)
        try:
            await runtime.ensure_hub()
        except Exception:  # a broken database moment must not end the worker
            logger.exception("could not check for MCP server changes")

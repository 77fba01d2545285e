"""The hub worker's side (``manage.py hub_worker``): one process holds every MCP session for all
web processes.

:func:`serve` runs it: the hub channel's listener (:class:`HubWorker`), its consumer
(:class:`HubConsumer`), the heartbeat and the poll for changes, until SIGTERM or SIGINT. What it
needs of the process that runs it (the process-wide hub, the people's groups and own servers,
the sign-in steps, its ``/metrics``) it is given as a :class:`WorkerHost`
(:func:`mcpclient.runtime.worker_host.worker_host` builds it), so this package stays below the
runtime and makes no ORM query of its own. Every message is read and written as an envelope of
:mod:`mcpclient.worker.wire`.

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
import signal
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol, cast

from channels.consumer import AsyncConsumer, get_handler_name
from channels.layers import get_channel_layer
from channels.routing import ChannelNameRouter
from channels.worker import Worker
from django.conf import settings

from mcpclient.config.model import ServerConfig, per_user
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
from mcpclient.telemetry import metrics, tracing
from mcpclient.worker import wire as worker_wire

logger = logging.getLogger(__name__)

BOOT = uuid.uuid4().hex  # this worker process's id, in every state it sends
# Requests answered without waiting for the hub's listeners and without the state: they change
# no server's state the caller must see first (a sign-in's session announces itself when it
# settles, like every change, on the state group).
QUERIES = frozenset({"view", "read_resource", "complete", "get_prompt", "skills", "read_skill", "signin"})


class MetricsRunner(Protocol):
    """The worker's ``/metrics`` server while it runs (aiohttp's ``AppRunner``)."""

    async def cleanup(self) -> None: ...


@dataclass(frozen=True)
class WorkerHost:
    """What the hub worker needs of the process that runs it (built by the runtime, which composes
    the hub and reads the database: :mod:`mcpclient.runtime.worker_host`)."""

    # The process-wide hub, started on first use; changes made elsewhere applied when the last
    # check is older than ``max_age`` seconds.
    ensure_hub: Callable[[float], Awaitable[Hub]]
    seen_version: Callable[[], int]  # the McpState version the hub last applied
    check_interval: float  # seconds a call reuses the last check (and between polls for changes)
    refresh_person: Callable[[int | None], Awaitable[None]]  # read a person's groups again if old
    personal_configs: Callable[[int], Awaitable[list[ServerConfig]]]  # a person's own servers
    signin: Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]  # a forwarded sign-in step
    # Run the hub for every web process: each new state goes to them through the given sender.
    serve_for_web_processes: Callable[[Callable[[Hub], Awaitable[None]]], None]
    serve_metrics: Callable[[], Awaitable[MetricsRunner | None]]  # its /metrics, when configured
    freeze_start_up: Callable[[], object]  # the start-up heap out of the collector's way


def state_of(hub: Hub, version: int) -> worker_wire.WorkerState:
    """What the web processes mirror: shared tools, server snapshots, McpState ``version``, boot id."""
    return worker_wire.WorkerState(
        boot=BOOT,
        version=version,
        tools=[worker_wire.tool_out(tool) for tool in hub.every_tool()],
        snapshots=[worker_wire.snapshot_out(snapshot) for snapshot in hub.snapshots()],
    )


def state_sender(host: WorkerHost) -> Callable[[Hub], Awaitable[None]]:
    """How the hub's state is sent to every web process (after every change, and at start)."""

    async def broadcast_state(hub: Hub) -> None:
        layer = worker_wire.hub_layer()
        state = state_of(hub, host.seen_version())
        await layer.group_send(worker_wire.state_group(), worker_wire.StateMessage(state).out())

    return broadcast_state


async def heartbeat() -> None:
    """Tell the web processes this worker is alive, every ``worker_wire.HEARTBEAT`` seconds."""
    layer = worker_wire.hub_layer()
    while True:
        try:
            await layer.group_send(worker_wire.state_group(), worker_wire.Alive(BOOT).out())
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

    def __init__(self, host: WorkerHost) -> None:
        self.host = host
        self.send_state = state_sender(host)

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
        request = worker_wire.Request.decode(message)
        self._spawn(request.id, self._request(request))

    async def _request(self, request: worker_wire.Request) -> None:
        op, args, host = request.op, request.args, self.host
        try:
            hub = await host.ensure_hub(0.0)
            # The person's groups as this process reads them (mcpclient.runtime.people): the
            # worker decides on its own read which servers are theirs to use.
            await host.refresh_person(args.get("user_id") if isinstance(args.get("user_id"), int) else None)
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
                await self.send_state(hub)  # no state change: every admin shows the new note
            elif op == "open_user":
                # The person's own servers as the database says, read here, not taken on the
                # web process's word (mcpclient.runtime.personal).
                mine = await host.personal_configs(args["user_id"])
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
                result = await host.signin(args)
            else:
                raise ValueError(f"unknown hub request {op!r}")
            reply = worker_wire.Reply(request.id, result=result)
            if op not in QUERIES:
                await hub.drain_listeners()
                reply = dataclasses.replace(reply, state=state_of(hub, host.seen_version()))
        except (ResourceError, PromptError, SkillError) as exc:  # a refusal the person reads, not a failure
            reply = worker_wire.Reply(request.id, refused=worker_wire.refusal_out(exc))
        except Exception as exc:  # the web process gets the error as text, the worker goes on
            logger.exception("hub request %s failed", op)
            reply = worker_wire.Reply(request.id, error=f"{type(exc).__name__}: {exc}")
        await self.channel_layer.send(request.reply, reply.out())

    async def hub_call(self, message: dict[str, Any]) -> None:
        """A tool call: progress, forms and links go back to the caller while it runs, then the result."""
        call = worker_wire.Call.decode(message)
        self.replies[call.id] = call.reply
        self._spawn(call.id, self._call(call))

    async def hub_cancel(self, message: dict[str, Any]) -> None:
        """The caller stopped waiting: cancel the call (the SDK tells the server)."""
        task = self.tasks.get(worker_wire.Cancel.decode(message).id)
        if task is not None:
            task.cancel()

    async def hub_answer(self, message: dict[str, Any]) -> None:
        """The person's answer to a forwarded form."""
        answer = worker_wire.AnswerMessage.decode(message)
        waiting = self.answers.get((answer.id, answer.ask))
        if waiting is not None and not waiting.done():
            waiting.set_result(Answer(cast(Any, answer.action), answer.content))  # (as the caller sent it)

    async def hub_link_end(self, message: dict[str, Any]) -> None:
        """The person's side ended a consented link (done, expired, stopped)."""
        ended = worker_wire.LinkEnd.decode(message)
        link = self.links.pop((ended.id, ended.ask), None)
        if link is not None:
            link.finish(cast(Any, ended.outcome))

    def _follow(self, call_id: str, ask_id: str, reply: str, link: Link) -> None:
        """Tell the caller how a consented link ends here (the server completed it, the call ended)."""
        self.links[(call_id, ask_id)] = link

        async def follow() -> None:
            outcome = await link.finished
            if self.links.pop((call_id, ask_id), None) is not None:  # not ended by the caller
                end = worker_wire.LinkEnd(call_id, ask_id, outcome)
                await self.channel_layer.send(reply, end.out())

        task = asyncio.ensure_future(follow())
        self.following.add(task)
        task.add_done_callback(self.following.discard)

    async def _call(self, call: worker_wire.Call) -> None:
        call_id, reply, host = call.id, call.reply, self.host
        layer = self.channel_layer

        async def report(update: Progress) -> None:
            sent = worker_wire.Progress(call_id, update.progress, update.total, update.message)
            await layer.send(reply, sent.out())

        async def ask(form: Form | Link) -> Answer:
            ask_id = uuid.uuid4().hex
            waiting: asyncio.Future[Answer] = asyncio.get_running_loop().create_future()
            self.answers[(call_id, ask_id)] = waiting
            if isinstance(form, Link):
                shown = worker_wire.Ask(call_id, ask_id, link=worker_wire.link_out(form))
            else:
                shown = worker_wire.Ask(call_id, ask_id, form=worker_wire.form_out(form))
            try:
                await layer.send(reply, shown.out())
                answer = await waiting
                if isinstance(form, Link) and answer.action == "accept":
                    self._follow(call_id, ask_id, reply, form)
                return answer
            finally:
                del self.answers[(call_id, ask_id)]
                if not waiting.done():
                    await asyncio.shield(layer.send(reply, worker_wire.AskEnd(call_id, ask_id).out()))

        try:
            hub = await host.ensure_hub(host.check_interval)
            await host.refresh_person(call.user_id)
            refusal = await _unapproved(hub, call)
            if refusal:
                logger.warning("refused a call of %s: %s", call.name, refusal)
                result = ToolResult.error(refusal)
            else:
                if call.step is not None:  # the tool step's time so far, in the web process
                    metrics.tool_step_began(time.monotonic() - call.step)
                with reporting(report), tracing.attached(call.trace):
                    with asking(ask) if call.ask else contextlib.nullcontext():
                        result = await hub.call_tool(
                            call.name, call.arguments, user_id=call.user_id, views=call.views
                        )
        except asyncio.CancelledError:
            return  # cancelled by its caller (who no longer waits) or by stop_calls (who answered)
        except Exception as exc:  # a bug must reach the caller as text, not leave it waiting
            logger.exception('tool call "%s" failed in the hub worker', call.name)
            result = ToolResult.error(f'MCP tool "{call.name}" failed in the hub worker: {exc}')
        finally:
            self.replies.pop(call_id, None)
        await layer.send(reply, worker_wire.Reply(call_id, result=worker_wire.result_out(result)).out())

    async def stop_calls(self) -> None:
        """The worker is stopping: answer every call in flight with an error, then cancel it."""
        stopped = ToolResult.error("The MCP hub worker stopped during the call; try again once it is back.")
        for call_id, reply in list(self.replies.items()):
            answered = worker_wire.Reply(call_id, result=worker_wire.result_out(stopped))
            await self.channel_layer.send(reply, answered.out())
        for task in list(self.tasks.values()):
            task.cancel()


_consumers: set[HubConsumer] = set()


async def _unapproved(hub: Hub, call: worker_wire.Call) -> str:
    """Why the call may not run for want of approval ("" when it may), decided here, where it runs.

    The web process asked the person; a call that needs approval by the tool's current
    definition runs only with the approval it names, checked against the record of it
    (:func:`mcpclient.core.approval.approval_refusal`).
    """
    name, user_id = call.name, call.user_id
    tool = next((tool for tool in hub.tools(user_id, views=call.views) if tool.prefixed_name == name), None)
    if tool is None or not tool.approval_reason:
        return ""  # (an unknown tool: the hub's own answer says why)
    return await approval_refusal(tool.approval_reason, name, call.arguments, user_id, call.approval)


async def stop_all_calls() -> None:
    """Answer and cancel the calls in flight of every consumer (the worker is stopping)."""
    for consumer in list(_consumers):
        await consumer.stop_calls()


async def poll_changes(host: WorkerHost) -> None:
    """Apply changes made by any process (McpState version, mcp.json) every ``check_interval`` s."""
    while True:
        await asyncio.sleep(host.check_interval)
        try:
            await host.ensure_hub(0.0)
        except Exception:  # a broken database moment must not end the worker
            logger.exception("could not check for MCP server changes")


async def serve(host: WorkerHost, announce: Callable[[str], None]) -> None:
    """Run the hub worker until SIGTERM or SIGINT; ``announce`` is told once it listens.

    The web processes send to the group named after the hub channel. The worker joins it with a
    channel of its own before the hub starts, whose state changes announce this worker: pub/sub
    drops what is sent before anyone listens, and a web process calls as soon as it hears of a
    worker (messages wait in the channel's queue until read). On the way out the calls in flight
    are answered, then the hub closes every session.
    """
    tracing.configure("hub_worker", settings.VERSION)  # only with an OTLP endpoint (docs/operations.md)
    layer = worker_wire.hub_layer()
    channel = settings.MCP_HUB_CHANNEL
    name = await layer.new_channel(prefix=f"{channel}.worker.")
    await layer.group_add(channel, name)
    broadcast_state = state_sender(host)
    host.serve_for_web_processes(broadcast_state)
    hub = await host.ensure_hub(0.0)
    worker = HubWorker(
        application=ChannelNameRouter({name: HubConsumer.as_asgi(host=host)}),
        channels=[name],
        channel_layer=layer,
    )
    main = asyncio.current_task()
    assert main is not None
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, main.cancel)
    metrics_runner = await host.serve_metrics()
    host.freeze_start_up()  # the hub and its sessions are up: out of the collector's way (runtime/heap.py)
    announce(f'hub worker listening on channel "{channel}"')
    await broadcast_state(hub)  # web processes learn of this boot (calls to an earlier one fail)
    tasks = [
        asyncio.ensure_future(worker.handle()),
        asyncio.ensure_future(worker.application_checker()),
        asyncio.ensure_future(poll_changes(host)),
        asyncio.ensure_future(heartbeat()),
    ]
    try:
        await asyncio.gather(*tasks)
    except asyncio.CancelledError:
        logger.info("hub worker stopping")
    finally:
        with contextlib.suppress(Exception):
            await stop_all_calls()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await hub.stop()
        if metrics_runner is not None:
            await metrics_runner.cleanup()
        tracing.shutdown()  # what is still batched goes out

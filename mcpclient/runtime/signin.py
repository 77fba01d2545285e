"""Connecting and disconnecting OAuth servers: what the views and the chat turn ask of the hub.

Lifecycle
---------
*Connect* (:func:`connect`, on the hub's loop): the hub opens a new session whose sign-in
goes to the person's browser (:class:`~mcpclient.engine.authorization.BrowserConsent`). Whichever
comes first decides the answer: the authorization URL (the view redirects the browser there),
or the session settling without one (tokens still valid: connected; or a failure that names
the step). The session then waits, up to ``BOOCODE_OAUTH_CONSENT_TIMEOUT``, for BooCode's
callback: :func:`finish` hands the authorization response to it and waits until the server
is ready or has failed. A "shared" server is connected by an administrator for everybody; a
"perUser" server by each person for themselves, and only their sessions see their tokens.

*Turns* (:func:`open_sessions`): before a turn lists its tools, the person's sessions with the
"perUser" servers they connected are opened if they are not (closed when idle, or after a
restart). A server that needs a new sign-in is not retried until they connect again.

*Disconnect* (:func:`disconnect`): the session closes and the tokens are revoked where the
provider supports it (RFC 7009), then deleted.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any, cast

from channels.db import database_sync_to_async

from mcpclient.config.model import ServerConfig, opens_by_itself, per_user
from mcpclient.core.state import Status
from mcpclient.core.words import counted
from mcpclient.engine import authorization
from mcpclient.engine.api import HubApi
from mcpclient.engine.connection import ServerConnection
from mcpclient.engine.hub import Hub
from mcpclient.engine.serving import allowed
from mcpclient.runtime import people, personal
from mcpclient.runtime.composition import TURN_CHECK_INTERVAL, ensure_hub, get_hub, remote
from mcpclient.worker.client import REQUEST_TIMEOUT, WorkerUnavailable


@dataclass(frozen=True)
class Outcome:
    """What a connect or callback came to: a URL to send the browser to, or a message."""

    url: str = ""
    message: str = ""
    ok: bool = False


def _settled(connection: ServerConnection) -> Outcome:
    if connection.status is Status.READY:
        tools = counted(sum(tool.offered for tool in connection.tools), "tool")
        return Outcome(message=f'MCP server "{connection.name}" is connected ({tools}).', ok=True)
    return Outcome(
        message=connection.reason or f'MCP server "{connection.name}" is {connection.status.value}.'
    )


async def connect(name: str, user_id: int, *, staff: bool, return_to: str = "/") -> Outcome:
    """Start signing in to server ``name`` (see the module docstring). Runs on the hub's loop."""
    hub = await ensure_hub()
    await _read_person(hub, user_id)  # (their own servers sign in too)
    config = hub.config(name, user_id)
    # An administrator connects a shared server for everybody, whoever may use it; a person's own
    # session only with a server their groups allow (mcpclient.core.access). To anyone else a
    # server their groups do not allow is one that does not exist: the same answer, word for word.
    own = config is not None and per_user(config)
    barred = config is not None and (own or not staff) and not allowed(hub, config, user_id)
    if config is None or not config.enabled or config.oauth is None or barred:
        return Outcome(message=f'"{name}" is not an enabled MCP server that signs in with OAuth.')
    if not own and not staff:
        return Outcome(message=f'MCP server "{name}" is shared: an administrator connects it for everybody.')
    if remote():  # the flow needs the session it opens: it runs where the sessions live
        outcome, _ = await _in_worker(
            hub, "connect", config.init_timeout, name=name, user_id=user_id, staff=staff, return_to=return_to
        )
        return outcome
    connection, consent = await cast(Hub, hub).authorize(name, user_id=user_id)  # (not remote: a Hub)
    consent.return_to = return_to
    settled = asyncio.ensure_future(connection.wait_settled())
    first: set[asyncio.Future[Any]] = {consent.url, settled}
    try:
        done, _ = await asyncio.wait(first, timeout=config.init_timeout, return_when=asyncio.FIRST_COMPLETED)
    finally:
        settled.cancel()
    if consent.url in done and consent.url.exception() is None:
        return Outcome(url=consent.url.result())
    if settled in done or connection.status is not Status.CONNECTING:
        return _settled(connection)
    return Outcome(message=f'MCP server "{name}" did not answer within {config.init_timeout:g} s.')


async def finish(state: str, user_id: int, query: dict[str, str]) -> tuple[Outcome, str]:
    """The callback: deliver the authorization response, wait for the session to settle.

    Returns the outcome and where the person started the sign-in ("/" for an unknown link).
    """
    if remote():  # the consent waits in the hub worker, with the session it belongs to
        remote_hub = await ensure_hub(max_age=TURN_CHECK_INTERVAL)
        return await _in_worker(remote_hub, "finish", FINISH_WAIT, state=state, user_id=user_id, query=query)
    try:
        consent = authorization.complete(state, user_id, query)
    except authorization.UnknownConsent as exc:
        return Outcome(message=str(exc)), "/"
    back = consent.return_to
    hub = cast(Hub | None, get_hub())  # (not remote: a Hub)
    connection = None
    if hub is not None:
        connection = (
            hub.user_connection(consent.server, consent.owner_id)
            if consent.owner_id is not None
            else hub.connection(consent.server)
        )
    if connection is None or connection.consent is not consent:
        return Outcome(
            message=f'The sign-in to MCP server "{consent.server}" was abandoned; connect again.'
        ), back
    try:
        async with asyncio.timeout(connection.config.init_timeout):
            await connection.wait_settled()
    except TimeoutError:
        return Outcome(message=f'MCP server "{consent.server}" is still connecting.'), back
    return _settled(connection), back


async def disconnect(name: str, user_id: int, *, staff: bool) -> Outcome:
    """Close the session, revoke and delete the tokens: the person's own, or the shared ones."""
    hub = await ensure_hub()
    await _read_person(hub, user_id)
    config = hub.config(name, user_id)
    # As for connect: a server the person's groups do not allow answers as one that does not exist.
    barred = config is not None and (per_user(config) or not staff) and not allowed(hub, config, user_id)
    if config is None or config.oauth is None or barred:
        return Outcome(message=f'"{name}" is not an MCP server that signs in with OAuth.')
    owner = user_id if per_user(config) else None
    if owner is None and not staff:
        return Outcome(message=f'MCP server "{name}" is shared: an administrator disconnects it.')
    if remote():  # the session and its token store live in the hub worker
        outcome, _ = await _in_worker(hub, "disconnect", 0.0, name=name, user_id=user_id, staff=staff)
        return outcome
    url = config.url or ""
    local = cast(Hub, hub)  # (not remote: a Hub)
    connection = local.user_connection(name, user_id) if owner is not None else local.connection(name)
    if connection is not None and connection.auth is not None:
        url = connection.auth.store.url
    store = authorization.CredentialStore(name, owner, url, own=config.owner_id is not None)
    done = await authorization.revoke(store)
    await hub.close_user_session(name, owner)
    return Outcome(message=f'MCP server "{name}" disconnected: {done}.', ok=True)


# How long a callback waits for the hub worker: its session settles within the server's
# ``initTimeout`` (the default 60 s), which the web process does not look up for a callback.
FINISH_WAIT = 90.0


async def _in_worker(hub: Any, step: str, wait: float, **args: Any) -> tuple[Outcome, str]:
    """Run a sign-in step in the hub worker (``BOOCODE_HUB=worker``): its outcome and where to go back."""
    try:
        done = await hub.request("signin", timeout=wait + REQUEST_TIMEOUT, step=step, **args)
    except (WorkerUnavailable, RuntimeError) as exc:
        return Outcome(message=f"Signing in could not go on: {exc}."), "/"
    return Outcome(**done["outcome"]), done["back"] or "/"


def remember_person(user_id: int, groups: frozenset[str], own_servers: bool, read_at: float) -> None:
    """What a caller already off the event loop read of ``user_id`` with its own statement (the
    chat turn's one read: their groups, and whether they have servers of their own), kept, so
    that the :func:`open_sessions` that follows reads nothing; their own servers are read here
    (sync ORM) when they have some and the last read is older than its cache's age."""
    people.remember(user_id, groups, read_at)
    if own_servers:
        personal.read_now(user_id)
    else:
        personal.remember_none(user_id, read_at)


async def _read_person(hub: HubApi, user_id: int) -> list[ServerConfig]:
    """Read ``user_id``'s groups (which servers are theirs to use) and own servers for ``hub``;
    their own servers' configurations."""
    await people.refresh(user_id)
    mine = await personal.read(user_id)
    await hub.set_personal(user_id, mine)
    return mine


async def open_sessions(hub: HubApi, user_id: int | None) -> list[str]:
    """Open ``user_id``'s sessions with the "perUser" servers they connected, their own processes
    of the ``"scope": "perUser"`` stdio servers and their own servers (before a turn); what could
    not be opened, said for them.
    """
    if user_id is None:
        return []
    await _read_person(hub, user_id)
    servers = [config for config in hub.per_user_servers() if allowed(hub, config, user_id)]
    servers += hub.personal_servers(user_id)  # (none under the name of a shared server they may use)
    if not servers:
        return []
    names = [config.name for config in servers if opens_by_itself(config)]
    if len(names) < len(servers):  # servers they sign in to: only those they connected
        connected = await database_sync_to_async(_signed_in)(user_id)
        names += [config.name for config in servers if config.name in connected[config.owner_id is not None]]
    return await hub.open_user_sessions(user_id, names)


def _signed_in(user_id: int) -> tuple[set[str], set[str]]:
    """The shared "perUser" servers and the own servers ``user_id`` holds tokens for. Sync ORM."""
    return authorization.signed_in_servers(user_id), authorization.signed_in_servers(user_id, own=True)


async def person_hub(user_id: int | None, *, max_age: float = 0.0, wait: float = 0.0) -> HubApi:
    """The running hub with ``user_id``'s sessions open and their resource and prompt catalogs at hand.

    ``max_age`` as for :func:`~mcpclient.runtime.ensure_hub`; ``wait``: how long a session's
    first listing may be waited for (through the hub worker the catalogs are fetched here).
    """
    hub = await ensure_hub(max_age=max_age)
    await open_sessions(hub, user_id)
    await hub.load_catalogs(user_id, wait=wait)
    return hub


def account_states(user_id: int) -> list[dict[str, Any]]:
    """The "perUser" servers and where this person stands with each (the chat's Accounts list)."""
    hub = get_hub()
    if hub is None:
        return []
    connected = authorization.signed_in_servers(user_id)
    people.load(user_id)
    states = []
    for config in hub.per_user_servers():
        if opens_by_itself(config) or not allowed(hub, config, user_id):
            continue  # nothing to connect: each person's own session opens with their turn
        connection = hub.user_connection(config.name, user_id)
        if connection is not None and connection.status is not Status.DISABLED:
            status, reason = connection.status.value, connection.reason
        elif config.name in connected:
            status, reason = "signed_in", ""
        else:
            status, reason = "not_connected", ""
        tools = sum(tool.offered for tool in connection.tools) if connection is not None else 0
        states.append({"name": config.name, "status": status, "reason": reason, "tool_count": tools})
    return states


def own_servers(user_id: int) -> list[dict[str, Any]]:
    """The person's own servers and where each stands (the chat's *Your servers*; sync ORM)."""
    hub = get_hub()

    def state_of(name: str) -> tuple[str, str, int] | None:
        connection = hub.user_connection(name, user_id) if hub is not None else None
        if connection is None or connection.status is Status.DISABLED:
            return None
        return connection.status.value, connection.reason, sum(tool.offered for tool in connection.tools)

    return personal.listing(user_id, state_of)

"""The JSON endpoints of MCP resources and completions (docs/protocol.md, *Resources*).

``/api/resources/`` lists what the picker offers (with a search), ``/api/resources/read/``
reads one resource for the viewer, ``/api/complete/`` asks a server for completions of a
template's or a prompt's argument. All need a login; a ``conversation`` must be the person's
own (else 404) and narrows the servers to those its agent can reach
(:func:`boocode.chat.wire.attachments.reachable_servers`). A "perUser" server is only ever asked
through the person's own session. The views are async: they run on the server's loop, where
the hub lives, and never hold a worker thread while a server answers.
"""

from __future__ import annotations

import json
from typing import Any

from asgiref.sync import sync_to_async
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.http import require_safe

from boocode.chat.models import Conversation
from boocode.chat.turn import agent_choice, conversations
from boocode.chat.wire.attachments import MAX_SERVER_CHARS, MAX_URI_CHARS, reachable_servers
from boocode.chat.wire.rendering import render_markdown
from mcpclient.core.resources import ResourceContent, ResourceError, make_ref
from mcpclient.runtime.signin import person_hub

MAX_RESULTS = 200  # resources (and as many templates) in one answer of the picker
MAX_QUERY_CHARS = 200
MAX_VALUE_CHARS = 1000
LISTING_WAIT = 5.0  # seconds a first listing may take before the picker answers without it
# Markdown longer than this is shown as text: rendering takes about 1 s per 100 000 characters.
MAX_MARKDOWN_CHARS = 200_000


def _error(message: str, status: int) -> JsonResponse:
    return JsonResponse({"error": message}, status=status)


def _agent_patterns(user_id: int, raw_id: str) -> tuple[bool, Any]:
    """``(found, patterns)`` of the conversation's agent (``found`` False: not the person's own)."""
    try:
        number = int(raw_id)
    except ValueError:
        return False, None
    if not Conversation.objects.filter(pk=number, owner_id=user_id).exists():
        return False, None
    agent_choice.agent_names()  # AGENTS.md read again if it changed
    try:
        agent = agent_choice.resolve_agent(conversations.conversation_agent_name(number), user_id)
    except agent_choice.AgentUnavailable:
        return True, []  # fail closed: the agent is gone, so are its servers
    return True, agent.tools


async def _reachable(request: HttpRequest, user_id: int, hub: Any) -> list[str] | JsonResponse:
    raw_id = request.GET.get("conversation", "")
    if not raw_id:
        return reachable_servers(hub, user_id)
    found, patterns = await sync_to_async(_agent_patterns)(user_id, raw_id)
    if not found:
        return _error("No such conversation.", 404)
    return reachable_servers(hub, user_id, patterns)


def _matches(words: list[str], *fields: str) -> bool:
    haystack = " ".join(fields).casefold()
    return all(word in haystack for word in words)


@require_safe
@login_required
async def resources_api(request: HttpRequest) -> HttpResponse:
    """``{"servers", "resources", "templates"}``: what the person may attach, searched by ``q``.

    ``q``'s words must all appear in a resource's name, title, URI or description (any case).
    Each server says whether it offers completions and why its listing failed, if it did.
    """
    user = await request.auser()
    query = request.GET.get("q", "")[:MAX_QUERY_CHARS]
    words = query.casefold().split()
    hub = await person_hub(user.pk, wait=LISTING_WAIT)
    reachable = await _reachable(request, user.pk, hub)
    if isinstance(reachable, JsonResponse):
        return reachable
    servers, found, templates = [], [], []
    for name in reachable:
        try:
            catalog = await hub.resource_catalog(name, user.pk, wait=LISTING_WAIT)
        except ResourceError:
            continue  # went down meanwhile
        if not catalog.supported:
            continue
        servers.append({"name": name, "completions": catalog.completions, "error": catalog.error})
        found += [
            entry.to_dict()
            for entry in catalog.resources
            if _matches(words, entry.name, entry.title, entry.uri, entry.description)
        ]
        templates += [
            entry.to_dict()
            for entry in catalog.templates
            if _matches(words, entry.name, entry.title, entry.uri_template, entry.description)
        ]
    return JsonResponse(
        {
            "servers": servers,
            "resources": found[:MAX_RESULTS],
            "templates": templates[:MAX_RESULTS],
            "truncated": len(found) > MAX_RESULTS or len(templates) > MAX_RESULTS,
        }
    )


def _text_param(request: HttpRequest, name: str, limit: int) -> str | JsonResponse:
    value = request.GET.get(name, "")
    if not value.strip():
        return _error(f'"{name}" is required.', 400)
    if len(value) > limit:
        return _error(f'"{name}" is limited to {limit} characters.', 400)
    return value


@require_safe
@login_required
async def read_resource_api(request: HttpRequest) -> HttpResponse:
    """``{"server", "uri", "contents": [{uri, mimeType, text | blob, size, note}]}`` (capped at 5 MB).

    ``server`` must be one the person may use (404 otherwise, like an unknown URI); a server
    that is down answers 502 with the reason.
    """
    user = await request.auser()
    server = _text_param(request, "server", MAX_SERVER_CHARS)
    uri = _text_param(request, "uri", MAX_URI_CHARS)
    for value in (server, uri):
        if isinstance(value, JsonResponse):
            return value
    assert isinstance(server, str) and isinstance(uri, str)
    hub = await person_hub(user.pk)
    reachable = await _reachable(request, user.pk, hub)
    if isinstance(reachable, JsonResponse):
        return reachable
    if server not in reachable:
        return _not_here(hub, server, user.pk)
    try:
        result = await hub.read_resource(server, uri, user.pk)
    except ResourceError as exc:
        return _error(str(exc), exc.status)
    # Rendering is CPU work: in a thread, so the loop (the hub, every socket) never waits on it.
    viewables = sync_to_async(_viewables, thread_sensitive=False)
    return JsonResponse({"server": server, "uri": uri, "contents": await viewables(result.contents)})


def _viewables(contents: tuple[ResourceContent, ...]) -> list[dict[str, Any]]:
    return [viewable(item) for item in contents]


def viewable(item: ResourceContent) -> dict[str, Any]:
    """An item for the viewer; Markdown also as ``html``, rendered and sanitised like answers.

    Markdown over :data:`MAX_MARKDOWN_CHARS` stays text (with a note): a server must not be able
    to keep the process rendering for minutes.
    """
    shaped = item.to_dict()
    mime = item.mime_type.split(";", 1)[0].strip().lower()
    if item.text is not None and (mime == "text/markdown" or item.uri.lower().endswith((".md", ".markdown"))):
        if len(item.text) > MAX_MARKDOWN_CHARS:
            shaped["note"] = f"Over {MAX_MARKDOWN_CHARS} characters: shown as text, not rendered."
        else:
            shaped["html"] = render_markdown(item.text)
    return shaped


def _not_here(hub: Any, server: str, user_id: int) -> JsonResponse:
    """Why ``server`` cannot serve this person here: unknown (404), down (502), out of reach (404)."""
    try:
        hub.listed_resources(server, user_id)
    except ResourceError as exc:
        return _error(str(exc), exc.status)
    return _error(f'MCP server "{server}" is not reachable by this conversation\'s agent.', 404)


@require_safe
@login_required
async def complete_api(request: HttpRequest) -> HttpResponse:
    """``{"values", "total", "hasMore"}``: ``completion/complete`` for one argument.

    ``server``; ``ref`` (``resource`` with ``name`` a template's URI, or ``prompt`` with a
    prompt's name); ``argument`` and its partial ``value``; ``context`` (optional JSON object
    of the arguments already filled in).
    """
    user = await request.auser()
    params = {}
    for key, limit in (("server", MAX_SERVER_CHARS), ("ref", 20), ("name", MAX_URI_CHARS), ("argument", 200)):
        value = _text_param(request, key, limit)
        if isinstance(value, JsonResponse):
            return value
        params[key] = value
    value = request.GET.get("value", "")
    if len(value) > MAX_VALUE_CHARS:
        return _error(f'"value" is limited to {MAX_VALUE_CHARS} characters.', 400)
    context = _context(request.GET.get("context", ""))
    if isinstance(context, JsonResponse):
        return context
    try:
        ref = make_ref(params["ref"], params["name"])
    except ResourceError as exc:
        return _error(str(exc), exc.status)
    hub = await person_hub(user.pk)
    reachable = await _reachable(request, user.pk, hub)
    if isinstance(reachable, JsonResponse):
        return reachable
    server = params["server"]
    if server not in reachable:
        return _not_here(hub, server, user.pk)
    try:
        argument = {"name": params["argument"], "value": value}
        found = await hub.complete(server, ref, argument, context, user.pk)
    except ResourceError as exc:
        return _error(str(exc), exc.status)
    return JsonResponse(found.to_dict())


def _context(raw: str) -> dict[str, str] | JsonResponse | None:
    if not raw:
        return None
    if len(raw) > 10 * MAX_VALUE_CHARS:
        return _error('"context" is too long.', 400)
    try:
        parsed = json.loads(raw)
    except ValueError:
        return _error('"context" must be a JSON object of strings.', 400)
    if not isinstance(parsed, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in parsed.items()
    ):
        return _error('"context" must be a JSON object of strings.', 400)
    return parsed

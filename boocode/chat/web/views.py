"""Chat pages: the conversation list and the chat page, plus small form endpoints.

Every view requires a login and only ever reads the user's own conversations (another
user's id is a 404). Every response gets the strict default Content-Security-Policy
(SECURE_CSP: scripts and styles from /static only, images only from there or ``data:`` URLs);
the chat page adds its websocket to ``connect-src``. POSTs are CSRF-checked (the middleware).

The JSON endpoints under ``/api/`` and the exports are documented in docs/protocol.md. Views
that talk to the model server or the MCP hub are async: they run on the server's loop, where
the hub lives, and never hold a worker thread while the network answers.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from functools import wraps
from typing import Any

from asgiref.sync import async_to_sync, sync_to_async
from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseBadRequest, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils.http import content_disposition_header, url_has_allowed_host_and_scheme
from django.views.decorators.http import require_http_methods, require_POST, require_safe

from boocode.chat.llm import client as llm_client
from boocode.chat.llm.client import LLMSettings
from boocode.chat.llm.model_windows import server_window
from boocode.chat.models import MODEL_NAME_LENGTH, Conversation
from boocode.chat.storable import text_problem
from boocode.chat.turn import agent_choice, conversations
from boocode.chat.turn.loop import MAX_MESSAGE_CHARS
from boocode.chat.turn.registry import registry
from boocode.chat.web import exports, server_views
from boocode.chat.web.search import search_conversations
from boocode.chat.wire import payloads
from boocode.chat.wire.events import group_emitter
from boocode.security.headers import policy_header, with_sources
from mcpclient.runtime import ensure_hub, personal
from mcpclient.runtime.signin import account_states, own_servers


def with_csp(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """Set the chat page's policy: the default one, plus its websocket in ``connect-src``."""

    @wraps(view)
    def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        response = view(request, *args, **kwargs)
        # Spelled out: not every browser lets 'self' cover ws:/wss: yet.
        scheme = "wss" if request.is_secure() else "ws"
        policy = with_sources(settings.SECURE_CSP, "connect-src", f"{scheme}://{request.get_host()}")
        if settings.MCP_APPS_ORIGIN:  # MCP Apps views are framed from their own origin
            policy = with_sources(policy, "frame-src", "'self'", settings.MCP_APPS_ORIGIN)
        response["Content-Security-Policy"] = policy_header(policy)
        return response

    return wrapper


def _owned(request: HttpRequest, conversation_id: int) -> Conversation:
    return get_object_or_404(Conversation, pk=conversation_id, owner=request.user)


def _wants_json(request: HttpRequest) -> bool:
    return "application/json" in request.headers.get("accept", "")


@require_safe
@login_required
@with_csp
def index(request: HttpRequest) -> HttpResponse:
    """A new conversation (the landing: its first message creates it); the others in the sidebar."""
    return _page(request, None)


@require_safe
@login_required
@with_csp
def conversation(request: HttpRequest, conversation_id: int) -> HttpResponse:
    """The chat page of one conversation."""
    return _page(request, _owned(request, conversation_id))


def _page(request: HttpRequest, current: Conversation | None) -> HttpResponse:
    agents_info = agent_choice.agents_info(request.user.pk)
    agents = [agent["name"] for agent in agents_info]
    current_agent = current.agent_name if current and current.agent_name else (agents[0] if agents else "")
    default_model = _default_model(agents_info, current_agent)
    llm = LLMSettings.from_settings(current.model if current and current.model else default_model)
    recent = list(conversations.conversations_for(request.user)[:200])
    return render(
        request,
        "chat/page.html",
        {
            "conversation": current,
            "conversations": recent,
            "conversation_groups": conversations.conversation_groups(recent),
            "agents": agents,
            "agents_info": agents_info,
            "current_agent": current_agent,
            "conversation_model": current.model if current else "",
            "llm_default_model": default_model,
            "llm_configured": llm.configured,
            "llm_model": llm.model,
            "llm_server_model": settings.LLM_MODEL,  # the status line's fallback (agents without model:)
            "max_message_chars": MAX_MESSAGE_CHARS,
            "accounts": account_states(request.user.pk),
            "own_servers_on": personal.feature_on(),
            "own_servers": own_servers(request.user.pk) if personal.feature_on() else [],
            "own_server_draft": request.session.pop(server_views.DRAFT_KEY, None),
            "theme": conversations.user_theme(request.user),
            "is_staff": request.user.is_staff,
        },
    )


def _default_model(agents_info: list[dict[str, Any]], agent_name: str) -> str:
    """The model a conversation of ``agent_name`` uses unless it picks one: the agent's, else the setting."""
    agent = next((info for info in agents_info if info["name"] == agent_name), None)
    return (agent["model"] if agent else "") or settings.LLM_MODEL


@require_http_methods(["GET", "HEAD", "POST"])
@login_required
@with_csp
def new_conversation(request: HttpRequest) -> HttpResponse:
    """GET: the landing page (the composer, no conversation yet: the first message makes one).

    POST: create a conversation (optionally with an agent) and open it; ``{"id", "url"}`` to
    JSON callers.
    """
    if request.method != "POST":
        return _page(request, None)
    agent = request.POST.get("agent", "")
    if agent and agent not in agent_choice.agent_names(request.user.pk):
        agent = ""
    created = conversations.create_conversation(owner=request.user, agent_name=agent)
    if _wants_json(request):
        return JsonResponse({"id": created.pk, "url": reverse("chat:conversation", args=[created.pk])})
    return redirect("chat:conversation", conversation_id=created.pk)


@require_POST
@login_required
def rename_conversation(request: HttpRequest, conversation_id: int) -> HttpResponse:
    """Rename; answers JSON to ``fetch`` callers, else redirects back. A bad title is a 400."""
    target = _owned(request, conversation_id)
    title = request.POST.get("title", "")
    problem = text_problem(title, "title")
    if problem is not None:
        if _wants_json(request):
            return JsonResponse({"error": problem}, status=400)
        return HttpResponseBadRequest(problem, content_type="text/plain; charset=utf-8")
    renamed = conversations.rename_conversation(conversation=target, title=title)
    if _wants_json(request):
        return JsonResponse({"id": renamed.pk, "title": renamed.title})
    return redirect("chat:conversation", conversation_id=renamed.pk)


@require_POST
@login_required
def delete_conversation(request: HttpRequest, conversation_id: int) -> HttpResponse:
    """Stop its turn if one runs, delete it, go to the conversation list."""
    target = _owned(request, conversation_id)
    # Sync views run in a worker thread; async_to_sync runs this on the server's event loop,
    # where the turn task lives.
    async_to_sync(_stop_turn)(target.pk)
    target.delete()
    return redirect("chat:index")


async def _stop_turn(conversation_id: int) -> None:
    # A turn of another web process is asked to stop too; only this process's can be waited for.
    if await registry.stop(conversation_id):
        async with asyncio.timeout(10):
            await registry.wait(conversation_id)


@require_POST
@login_required
def set_agent(request: HttpRequest, conversation_id: int) -> HttpResponse:
    """Choose the conversation's agent (used from the next turn on)."""
    target = _owned(request, conversation_id)
    agent = request.POST.get("agent", "")
    if agent not in agent_choice.agent_names(request.user.pk):
        if _wants_json(request):
            return JsonResponse({"error": f'Unknown agent "{agent}"'}, status=400)
        raise Http404("unknown agent")
    conversations.set_conversation_agent(conversation=target, agent_name=agent)
    if _wants_json(request):
        return JsonResponse({"id": target.pk, "agent": agent})
    return redirect("chat:conversation", conversation_id=target.pk)


@require_safe
@login_required
def older_messages(request: HttpRequest, conversation_id: int) -> HttpResponse:
    """``{"messages", "more"}``: the page of current messages before ``?before=<message id>``.

    The ``history`` frame holds only the newest messages (docs/protocol.md, *Sizes*); the page
    reads the rest from here as the person scrolls up.
    """
    _owned(request, conversation_id)
    try:
        before = int(request.GET.get("before", ""))
    except ValueError:
        return JsonResponse({"error": "before: a message id is required"}, status=400)
    messages, more = payloads.messages_page(conversation_id, before)
    return JsonResponse({"messages": messages, "more": more})


@require_safe
@login_required
def whole_message(request: HttpRequest, conversation_id: int, message_id: int) -> HttpResponse:
    """One message object whole: what a ``large`` summary in a frame left out."""
    _owned(request, conversation_id)
    message = payloads.whole_message(conversation_id, message_id)
    if message is None:
        raise Http404("no such message")
    return JsonResponse(message)


@require_safe
@login_required
def whole_call(request: HttpRequest, conversation_id: int, call_id: int) -> HttpResponse:
    """One tool call object whole: what a ``large`` one in a frame left out."""
    _owned(request, conversation_id)
    call = payloads.whole_call(conversation_id, call_id)
    if call is None:
        raise Http404("no such tool call")
    return JsonResponse(call)


@require_safe
@login_required
def tool_output(request: HttpRequest, conversation_id: int, call_id: int) -> HttpResponse:
    """The full output of a tool call, as plain text."""
    call = conversations.tool_output(request.user.pk, call_id)
    if call is None or call.message.conversation_id != conversation_id:
        raise Http404("no such tool call")
    response = HttpResponse(call.output, content_type="text/plain; charset=utf-8")
    response["Content-Security-Policy"] = "default-src 'none'; sandbox"
    return response


# --- the model -------------------------------------------------------------------------------
@require_safe
@login_required
async def models_api(request: HttpRequest) -> HttpResponse:
    """``{"models", "default", "error", "window"}``: the server's models (cached 60 s), the
    default one and its context window as the server says it (``None``: it does not say;
    :func:`boocode.chat.llm.model_windows.server_window`).

    ``?conversation=<id>`` (the user's own, else 404): the default is that conversation's
    agent's ``model:``; without it, the default agent's. Either falls back to BOOCODE_LLM_MODEL.
    """
    user = await request.auser()
    agent_name = ""
    raw_id = request.GET.get("conversation", "")
    if raw_id:
        conversation = await _owned_async(user, raw_id)
        agent_name = conversation.agent_name
    default = await sync_to_async(_agent_default_model)(agent_name, user.pk)
    llm = LLMSettings.from_settings(default)
    if not llm.base_url:
        error = "No model server is configured: set BOOCODE_LLM_BASE_URL."
        return JsonResponse({"models": [], "default": default, "error": error, "window": None})
    models, error = await llm_client.model_list(llm)
    window = await server_window(llm, default) if not error else None
    return JsonResponse({"models": models, "default": default, "error": error, "window": window})


def _agent_default_model(agent_name: str, user_id: int) -> str:
    """The ``model:`` of ``agent_name`` (or the person's default agent), else BOOCODE_LLM_MODEL."""
    agent_choice.agent_names()  # AGENTS.md read again if it changed
    try:
        agent = agent_choice.resolve_agent(agent_name, user_id)
    except agent_choice.AgentUnavailable:
        agent = None
    return (agent.model if agent is not None else "") or settings.LLM_MODEL


async def _owned_async(user: Any, conversation_id: Any) -> Conversation:
    try:
        number = int(conversation_id)
    except (TypeError, ValueError):
        raise Http404("no such conversation") from None
    conversation = await Conversation.objects.filter(pk=number, owner_id=user.pk).afirst()
    if conversation is None:
        raise Http404("no such conversation")
    return conversation


@require_POST
@login_required
async def set_model(request: HttpRequest, conversation_id: int) -> HttpResponse:
    """Choose the conversation's model (``model=""``: back to the default); ``{"id", "model"}``.

    A name the server's model list does not hold is refused (400) when the list can be read;
    when it cannot, the name is accepted (the first turn will tell).
    """
    user = await request.auser()
    target = await _owned_async(user, conversation_id)
    model = " ".join(request.POST.get("model", "").split())
    problem = text_problem(model, "model name")
    if problem is None and len(model) > MODEL_NAME_LENGTH:
        problem = f"A model name is at most {MODEL_NAME_LENGTH} characters."
    if problem is None and model:
        models, _ = await llm_client.model_list(LLMSettings.from_settings(model))
        if models and model not in models:
            problem = f'The model server offers no model "{model}". It offers: {", ".join(models[:20])}'
    if problem is not None:
        if _wants_json(request):
            return JsonResponse({"error": problem}, status=400)
        return HttpResponseBadRequest(problem, content_type="text/plain; charset=utf-8")
    await sync_to_async(conversations.set_conversation_model)(conversation=target, model=model)
    # Every open tab follows (picker and status line), and this frame comes after any a turn sent
    # with the old model, so a late one cannot leave the old name on the page.
    info = await sync_to_async(payloads.conversation_info)(target)
    await group_emitter(target.pk)({"type": "conversation", "conversation": info})
    if _wants_json(request):
        return JsonResponse({"id": target.pk, "model": target.model})
    return redirect("chat:conversation", conversation_id=target.pk)


# --- agents ----------------------------------------------------------------------------------
@require_safe
@login_required
async def agents_api(request: HttpRequest) -> HttpResponse:
    """``{"agents": [...]}``: each agent, its description, model and the tools it may use now.

    Live: AGENTS.md is read again if it changed, and mcp.json too (the hub applies an edited
    file before this answers), so the picker follows both files at once.
    """
    user = await request.auser()
    await _apply_server_changes()
    agents = await sync_to_async(agent_choice.agents_info)(user.pk)
    return JsonResponse({"agents": agents})


async def _apply_server_changes() -> None:
    """Let the hub apply an edited mcp.json (where this process runs the hub)."""
    if not settings.MCP_AUTOSTART:
        return  # no hub in this process (tests, commands): the servers' state is what it is
    await ensure_hub()


# --- search and exports ----------------------------------------------------------------------
@require_safe
@login_required
def search_api(request: HttpRequest) -> HttpResponse:
    """``{"results": [...]}``: the user's conversations whose title or messages hold ``q``'s words."""
    return JsonResponse({"results": search_conversations(request.user.pk, request.GET.get("q", ""))})


def _attachment(body: str, content_type: str, name: str) -> HttpResponse:
    response = HttpResponse(body, content_type=content_type)
    response["Content-Disposition"] = content_disposition_header(True, name)
    # Never rendered, whatever a browser thinks of the content.
    response["Content-Security-Policy"] = "default-src 'none'; sandbox"
    response["X-Content-Type-Options"] = "nosniff"
    return response


@require_safe
@login_required
def export_markdown(request: HttpRequest, conversation_id: int) -> HttpResponse:
    """The conversation as a Markdown file (superseded messages left out)."""
    target = _owned(request, conversation_id)
    return _attachment(
        exports.markdown_text(target), "text/markdown; charset=utf-8", exports.filename(target, "md")
    )


@require_safe
@login_required
def export_json(request: HttpRequest, conversation_id: int) -> HttpResponse:
    """The conversation as a JSON file (superseded messages left out)."""
    target = _owned(request, conversation_id)
    return _attachment(exports.json_text(target), "application/json", exports.filename(target, "json"))


# --- preferences -----------------------------------------------------------------------------
@require_POST
@login_required
def set_theme(request: HttpRequest) -> HttpResponse:
    """Remember the user's theme (``system``, ``light`` or ``dark``); ``{"theme"}``, or back to the page."""
    theme = request.POST.get("theme", "")
    try:
        conversations.set_user_theme(user=request.user, theme=theme)
    except ValueError as exc:
        if _wants_json(request):
            return JsonResponse({"error": str(exc)}, status=400)
        return HttpResponseBadRequest(str(exc), content_type="text/plain; charset=utf-8")
    if _wants_json(request):
        return JsonResponse({"theme": theme})
    back = request.headers.get("referer", "")
    if not url_has_allowed_host_and_scheme(back, {request.get_host()}, request.is_secure()):
        back = reverse("chat:index")
    return redirect(back)

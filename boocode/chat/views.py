"""Chat pages: the conversation list and the chat page, plus small form endpoints.

Every view requires a login and only ever reads the user's own conversations (another
user's id is a 404). Every response gets the strict default Content-Security-Policy
(SECURE_CSP: scripts and styles from /static only, images only from there or ``data:`` URLs);
the chat page adds its websocket to ``connect-src``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from functools import wraps
from typing import Any

from asgiref.sync import async_to_sync
from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseBadRequest, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST, require_safe

from boocode.chat import services
from boocode.chat.llm import LLMSettings
from boocode.chat.models import Conversation
from boocode.chat.text import text_problem
from boocode.chat.turns import MAX_MESSAGE_CHARS, registry
from boocode.security.headers import policy_header, with_sources
from mcpclient.signin import account_states


def with_csp(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """Set the chat page's policy: the default one, plus its websocket in ``connect-src``."""

    @wraps(view)
    def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        response = view(request, *args, **kwargs)
        # Spelled out: not every browser lets 'self' cover ws:/wss: yet.
        scheme = "wss" if request.is_secure() else "ws"
        policy = with_sources(settings.SECURE_CSP, "connect-src", f"{scheme}://{request.get_host()}")
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
    """The most recent conversation, or an empty page offering a new one."""
    latest = services.conversations_for(request.user).first()
    if latest is not None:
        return redirect("chat:conversation", conversation_id=latest.pk)
    return _page(request, None)


@require_safe
@login_required
@with_csp
def conversation(request: HttpRequest, conversation_id: int) -> HttpResponse:
    """The chat page of one conversation."""
    return _page(request, _owned(request, conversation_id))


def _page(request: HttpRequest, current: Conversation | None) -> HttpResponse:
    agents = services.agent_names()
    llm = LLMSettings.from_settings()
    return render(
        request,
        "chat/page.html",
        {
            "conversation": current,
            "conversations": services.conversations_for(request.user)[:200],
            "agents": agents,
            "current_agent": (
                current.agent_name if current and current.agent_name else (agents[0] if agents else "")
            ),
            "llm_configured": llm.configured,
            "llm_model": llm.model,
            "max_message_chars": MAX_MESSAGE_CHARS,
            "accounts": account_states(request.user.pk),
        },
    )


@require_POST
@login_required
def new_conversation(request: HttpRequest) -> HttpResponse:
    """Create a conversation (optionally with an agent) and open it."""
    agent = request.POST.get("agent", "")
    if agent and agent not in services.agent_names():
        agent = ""
    created = services.create_conversation(owner=request.user, agent_name=agent)
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
    renamed = services.rename_conversation(conversation=target, title=title)
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
    if registry.cancel(conversation_id):
        async with asyncio.timeout(10):
            await registry.wait(conversation_id)


@require_POST
@login_required
def set_agent(request: HttpRequest, conversation_id: int) -> HttpResponse:
    """Choose the conversation's agent (used from the next turn on)."""
    target = _owned(request, conversation_id)
    agent = request.POST.get("agent", "")
    if agent not in services.agent_names():
        if _wants_json(request):
            return JsonResponse({"error": f'Unknown agent "{agent}"'}, status=400)
        raise Http404("unknown agent")
    services.set_conversation_agent(conversation=target, agent_name=agent)
    if _wants_json(request):
        return JsonResponse({"id": target.pk, "agent": agent})
    return redirect("chat:conversation", conversation_id=target.pk)


@require_safe
@login_required
def tool_output(request: HttpRequest, conversation_id: int, call_id: int) -> HttpResponse:
    """The full output of a tool call, as plain text."""
    call = services.tool_output(request.user.pk, call_id)
    if call is None or call.message.conversation_id != conversation_id:
        raise Http404("no such tool call")
    response = HttpResponse(call.output, content_type="text/plain; charset=utf-8")
    response["Content-Security-Policy"] = "default-src 'none'; sandbox"
    return response

"""*Your servers* on the chat page: a person adds and removes remote MCP servers of their own
(:mod:`mcpclient.runtime.personal`; docs/teams.md, *Servers of one's own*).

``POST /servers/add/`` and ``POST /servers/<id>/remove/`` are forms of the page (back to ``next``
with a message); ``GET /api/servers/`` lists the person's servers and where each stands. A
refused form keeps what was typed (in the session, for the next page) except a header's value,
a secret that is never sent back to the browser.
"""

from __future__ import annotations

from typing import Any

from asgiref.sync import sync_to_async
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_POST, require_safe

from mcpclient.runtime import ensure_hub, personal
from mcpclient.runtime.signin import open_sessions, own_servers

DRAFT_KEY = "own_server_draft"  # the session's copy of a refused form (no header value)
DRAFT_FIELDS = ("name", "url", "transport", "sign_in", "header_name")


def _back(request: HttpRequest) -> str:
    target = request.POST.get("next") or "/"
    secure = request.is_secure()
    if url_has_allowed_host_and_scheme(target, allowed_hosts={request.get_host()}, require_https=secure):
        return target
    return "/"


def _draft(post: Any) -> personal.Draft:
    return personal.Draft(
        name=str(post.get("name", ""))[: personal.MAX_NAME * 4],
        url=str(post.get("url", ""))[: personal.MAX_URL * 2],
        transport=str(post.get("transport", "http")),
        sign_in=str(post.get("sign_in", "none")),
        header_name=str(post.get("header_name", ""))[:400],
        header_value=str(post.get("header_value", ""))[: personal.MAX_HEADER_VALUE * 2],
        writes=post.get("writes") == "on",
    )


async def _apply(user_id: int) -> None:
    """The hub takes the person's servers as they are now (a removed one's session closes)."""
    await open_sessions(await ensure_hub(), user_id)


@require_POST
@login_required
async def add_server(request: HttpRequest) -> HttpResponse:
    """Add a server of the person's own; back to the page with what happened."""
    user = await request.auser()
    draft = _draft(request.POST)
    try:
        row = await sync_to_async(personal.add)(user.pk, draft)
    except personal.PersonalServerError as exc:
        kept = {field: getattr(draft, field) for field in DRAFT_FIELDS}
        kept |= {"writes": draft.writes, "error": str(exc), "field": exc.field}
        await sync_to_async(request.session.__setitem__)(DRAFT_KEY, kept)
        await sync_to_async(messages.error)(request, f"The server was not added: {exc}")
        return redirect(_back(request))
    await sync_to_async(request.session.pop)(DRAFT_KEY, None)
    await _apply(user.pk)
    then = (
        "Connect it to sign in; its tools come with your next message."
        if row.sign_in == "oauth"
        else "Its tools come with your next message."
    )
    await sync_to_async(messages.success)(request, f'Your server "{row.name}" was added. {then}')
    return redirect(_back(request))


@require_POST
@login_required
async def remove_server(request: HttpRequest, server_id: int) -> HttpResponse:
    """Remove one of the person's servers (its header value and OAuth tokens go with it)."""
    user = await request.auser()
    name = await sync_to_async(personal.remove)(user.pk, server_id)
    if name is None:
        raise Http404("no such server of yours")
    await _apply(user.pk)
    await sync_to_async(messages.success)(request, f'Your server "{name}" was removed.')
    return redirect(_back(request))


@require_safe
@login_required
def servers_api(request: HttpRequest) -> JsonResponse:
    """``{"enabled", "servers": [...]}``: the person's servers and where each stands."""
    return JsonResponse({"enabled": personal.feature_on(), "servers": own_servers(request.user.pk)})

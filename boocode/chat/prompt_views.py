"""``GET /api/prompts``: what the composer's ``/`` menu offers (docs/protocol.md)."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.http import require_safe

from boocode.chat import prompt_insertion


@require_safe
@login_required
async def prompts_api(request: HttpRequest) -> HttpResponse:
    """``{"commands", "prompts"}``: the console commands and the MCP prompts the person may use now.

    Prompts come from the ready shared servers and the person's own "perUser" sessions (opened
    here if they signed in); see :mod:`boocode.chat.prompt_insertion` for why agents do not filter them.
    """
    user = await request.auser()
    hub = await prompt_insertion.running_hub(user.pk)
    return JsonResponse(prompt_insertion.menu(hub, user.pk))

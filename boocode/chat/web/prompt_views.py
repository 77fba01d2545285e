"""``GET /api/prompts``: what the composer's ``/`` menu offers; ``POST /api/prompts/get/``: one
prompt's messages for the composer (docs/protocol.md)."""

from __future__ import annotations

import json

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.http import require_POST, require_safe

from boocode.chat.turn import prompt_insertion
from mcpclient.core.prompts import PromptError


@require_safe
@login_required
async def prompts_api(request: HttpRequest) -> HttpResponse:
    """``{"commands", "prompts"}``: the console commands and the MCP prompts the person may use now.

    Prompts come from the ready shared servers and the person's own "perUser" sessions (opened
    here if they signed in); see :mod:`boocode.chat.turn.prompt_insertion` for why agents do not filter them.
    """
    user = await request.auser()
    hub = await prompt_insertion.running_hub(user.pk)
    return JsonResponse(prompt_insertion.menu(hub, user.pk))


@require_POST
@login_required
async def prompt_get_api(request: HttpRequest) -> HttpResponse:
    """The prompt ``server``/``name`` with ``arguments`` (a JSON object of strings) for the composer.

    Checked like a ``prompt`` frame (:func:`prompt_insertion.checked_frame`): 400 with ``code`` and
    ``error`` when it is not one the person may use with those arguments, 502 when the server
    could not give it; else what :func:`prompt_insertion.prompt_for_composer` says.
    """
    user = await request.auser()
    try:
        arguments = json.loads(request.POST.get("arguments") or "{}")
    except ValueError:
        return JsonResponse({"code": "bad_frame", "error": '"arguments" must be a JSON object.'}, status=400)
    frame = {"server": request.POST.get("server"), "name": request.POST.get("name"), "arguments": arguments}
    hub = await prompt_insertion.running_hub(user.pk)
    try:
        checked = prompt_insertion.checked_frame(frame, hub, user.pk)
    except prompt_insertion.BadPrompt as exc:
        return JsonResponse({"code": exc.code, "error": str(exc)}, status=400)
    try:
        return JsonResponse(await prompt_insertion.prompt_for_composer(checked, user.pk))
    except PromptError as exc:
        return JsonResponse({"code": "prompt_failed", "error": str(exc)}, status=502)

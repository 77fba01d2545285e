"""The JSON endpoints of MCP servers' skills (docs/protocol.md, *Skills*).

``GET /api/skills/`` lists what the composer's ``/`` menu offers next to the prompts;
``GET /api/skills/read/`` reads one skill's ``SKILL.md`` for the viewer (an attached skill's chip),
verified like every skill file (:mod:`mcpclient.engine.skills`). Both need a login and list or read
only what the person may use: the skills of the ready shared servers and of their own "perUser"
sessions, never anybody else's. Skills are not narrowed by a conversation's agent (a skill is
text, like a prompt; see :mod:`boocode.tools.skills`). The views are async: they run on the
server's loop, where the hub lives.
"""

from __future__ import annotations

from asgiref.sync import sync_to_async
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.http import require_safe

from boocode.chat.web.resource_views import viewable
from boocode.chat.wire.attachments import MAX_SERVER_CHARS, MAX_URI_CHARS
from mcpclient.core.resources import ResourceContent
from mcpclient.core.skills import SkillError
from mcpclient.engine.api import HubApi
from mcpclient.runtime import ensure_hub
from mcpclient.runtime.signin import open_sessions

MAX_RESULTS = 500  # skills in one answer of the menu
LISTING_WAIT = 5.0  # seconds a first listing may take before the menu answers without it


def _error(message: str, status: int) -> JsonResponse:
    return JsonResponse({"error": message}, status=status)


async def _person_hub(user_id: int) -> HubApi:
    """The hub with the person's own sessions open (their skills are asked for by the caller)."""
    hub = await ensure_hub()
    await open_sessions(hub, user_id)
    return hub


@require_safe
@login_required
async def skills_api(request: HttpRequest) -> HttpResponse:
    """``{"skills": [{server, uri, name, label, description, files, size, problem}], "truncated"}``.

    In server (configuration) order, then as each server lists them; a skill that cannot be
    loaded is listed with its ``problem``, so the person learns why.
    """
    user = await request.auser()
    hub = await _person_hub(user.pk)
    await hub.load_skills(user.pk, wait=LISTING_WAIT)
    found = hub.skills(user.pk)
    return JsonResponse(
        {"skills": [skill.to_dict() for skill in found[:MAX_RESULTS]], "truncated": len(found) > MAX_RESULTS}
    )


@require_safe
@login_required
async def read_skill_api(request: HttpRequest) -> HttpResponse:
    """``{"server", "uri", "name", "contents": [{uri, mimeType, text, html?, note}]}``: a skill's SKILL.md,
    its frontmatter (``text/yaml``) and then its Markdown.

    ``server`` and ``skill`` (its label, name or SKILL.md URI) are required. A skill the person
    may not use is unknown (404); one that cannot be loaded or fails verification is 409 with
    the reason; a server in trouble 502.
    """
    user = await request.auser()
    server, skill = request.GET.get("server", ""), request.GET.get("skill", "")
    for name, value, limit in (("server", server, MAX_SERVER_CHARS), ("skill", skill, MAX_URI_CHARS)):
        if not value.strip():
            return _error(f'"{name}" is required.', 400)
        if len(value) > limit:
            return _error(f'"{name}" is limited to {limit} characters.', 400)
    hub = await _person_hub(user.pk)
    try:
        text = await hub.read_skill(server, skill, "", user.pk)
    except SkillError as exc:
        return _error(str(exc), exc.status)
    head, body = split_frontmatter(text.text or "")
    item = ResourceContent(uri=text.file_uri, mime_type=text.mime_type or "text/markdown", text=body)
    # Rendering is CPU work: in a thread, so the loop (the hub, every socket) never waits on it.
    shown = [await sync_to_async(viewable, thread_sensitive=False)(item)]
    if head:  # as text (the viewer shows it preformatted), never as Markdown
        shown.insert(0, ResourceContent(uri=text.file_uri, mime_type="text/yaml", text=head).to_dict())
    return JsonResponse({"server": server, "uri": text.uri, "name": text.label, "contents": shown})


def split_frontmatter(text: str) -> tuple[str, str]:
    """A SKILL.md's YAML frontmatter (without its ``---`` lines) and the Markdown after it.

    Shown apart: Markdown would read the frontmatter's closing ``---`` as a heading's underline.
    """
    lines = text.splitlines(keepends=True)
    if not lines or lines[0].strip() != "---":
        return "", text
    end = next((index for index, line in enumerate(lines[1:], 1) if line.strip() == "---"), None)
    if end is None:
        return "", text
    return "".join(lines[1:end]).rstrip("\n"), "".join(lines[end + 1 :]).lstrip("\n")

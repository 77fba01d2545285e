"""MCP Apps: a tool call's view, served as a document for a sandboxed frame (docs/apps.md).

``GET /c/<conversation>/calls/<call>/view/`` answers the owner of the conversation with the
HTML of the call's ``ui://`` view, read through the hub in the person's own session (a
"perUser" server's too), under a Content-Security-Policy built only from what the resource
declares in ``_meta.ui.csp`` (:meth:`mcpclient.core.apps.ViewPolicy.content_security_policy`):
no network, no frames, no plugins unless declared, ``sandbox allow-scripts`` so the document
never runs in BooCode's origin (no cookies, no storage, no access to the page), and only
BooCode's page may frame it. What cannot be shown is a small page saying why, under the same
policy. The session keeps the document it read until the server's resources are listed again
(:func:`mcpclient.engine.resources.read`); the tool's result and input reach the view from the
page, never through this URL.
"""

from __future__ import annotations

import html
import logging

from asgiref.sync import sync_to_async
from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_safe

from boocode.chat.models import ToolCall
from mcpclient.core import apps
from mcpclient.engine.resources import ReadResult, ResourceError
from mcpclient.runtime.signin import person_hub

logger = logging.getLogger(__name__)

# A view larger than this is not served (a read is capped at 5 MB; a cut document is refused too).
MAX_VIEW_BYTES = 4 * 1024 * 1024


class ViewUnavailable(Exception):
    """The call's view cannot be shown; the message says why (a sentence a person reads)."""

    def __init__(self, message: str, status: int = 502) -> None:
        super().__init__(message)
        self.status = status


def _the_call(user_id: int, conversation_id: int, call_id: int) -> ToolCall | None:
    return (
        ToolCall.objects.filter(
            pk=call_id, message__conversation_id=conversation_id, message__conversation__owner_id=user_id
        )
        .only("id", "server", "view")
        .first()
    )


def view_document(result: ReadResult, uri: str) -> tuple[str, apps.ViewPolicy]:
    """The HTML of the view ``uri`` in a read, and its policy; :class:`ViewUnavailable` if unfit."""
    item = next((content for content in result.contents if content.uri == uri), None)
    if item is None and len(result.contents) == 1:
        item = result.contents[0]  # a server that answers with another spelling of the URI
    if item is None:
        raise ViewUnavailable(f"The server returned no content for {uri}.")
    mime = "".join(item.mime_type.split()).lower()
    if mime != apps.MIME_TYPE:
        shown = item.mime_type[:80] or "none"
        raise ViewUnavailable(f'The view {uri} is not an MCP Apps document (its type is "{shown}").')
    if item.text is not None:
        text = item.text
        size = len(text.encode("utf-8"))
    elif item.data is not None:
        size = len(item.data)
        try:
            text = item.data.decode("utf-8")
        except UnicodeDecodeError:
            raise ViewUnavailable(f"The view {uri} is not UTF-8 text.") from None
    else:
        raise ViewUnavailable(f"The view {uri} could not be kept: {item.note or 'it is empty'}.")
    if item.cut or size > MAX_VIEW_BYTES:
        raise ViewUnavailable(f"The view {uri} is larger than {MAX_VIEW_BYTES // (1024 * 1024)} MB.")
    return text, apps.view_policy(item.meta)


def _respond(body: str, policy: apps.ViewPolicy, status: int = 200) -> HttpResponse:
    response = HttpResponse(body, content_type="text/html; charset=utf-8", status=status)
    response["Content-Security-Policy"] = policy.content_security_policy()
    response["X-Frame-Options"] = "SAMEORIGIN"  # (and frame-ancestors 'self' in the policy)
    response["Cache-Control"] = "private, no-store"
    response["Referrer-Policy"] = "no-referrer"
    # The frame's "allow" grants what the view declared; everything else stays off here too.
    declared = set(policy.permissions)
    features = apps.PERMISSIONS.values()
    response["Permissions-Policy"] = ", ".join(
        f"{feature}=(self)" if feature in declared else f"{feature}=()" for feature in features
    )
    return response


def _unavailable(message: str, status: int) -> HttpResponse:
    body = (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>View unavailable</title>'
        "<style>body{font:14px system-ui,sans-serif;margin:12px;color:#555}</style></head>"
        f"<body><p>{html.escape(message)}</p></body></html>"
    )
    return _respond(body, apps.ViewPolicy(), status)


@require_safe
@login_required
async def call_view(request: HttpRequest, conversation_id: int, call_id: int) -> HttpResponse:
    """The view document of one of the person's tool calls (see the module docstring)."""
    user = await request.auser()
    call = await sync_to_async(_the_call)(user.pk, conversation_id, call_id)
    if call is None or not call.view:
        return _unavailable("This tool call has no view.", 404)
    if not settings.MCP_APPS:
        return _unavailable("Views are turned off on this BooCode (BOOCODE_APPS).", 404)
    hub = await person_hub(user.pk)
    config = hub.config(call.server)
    if config is None:
        gone = f'The MCP server "{call.server}" is no longer configured; its result is below.'
        return _unavailable(gone, 404)
    if not config.apps:
        return _unavailable(f'Views of the MCP server "{call.server}" are turned off ("apps": false).', 404)
    try:
        result = await hub.read_resource(call.server, call.view, user.pk, view=True)
        text, policy = view_document(result, call.view)
    except ResourceError as exc:
        return _unavailable(f"The view could not be read: {exc}", exc.status)
    except ViewUnavailable as exc:
        return _unavailable(str(exc), exc.status)
    if policy.note:
        logger.info('view %s of MCP server "%s": %s', call.view, call.server, policy.note)
    return _respond(text, policy)


"""MCP Apps: a tool call's view, served as a document for a sandboxed frame (docs/mcp_apps.md).

``GET /c/<conversation>/calls/<call>/view/`` answers the owner of the conversation with the
HTML of the call's ``ui://`` view, read through the hub in the person's own session (a
"perUser" server's too), under a Content-Security-Policy built only from what the resource
declares in ``_meta.ui.csp`` (:meth:`mcpclient.core.mcp_apps.ViewPolicy.content_security_policy`):
no network, no frames, no plugins unless declared, no workers and no WebRTC at all,
``sandbox allow-scripts`` so the document never runs in BooCode's origin (no cookies, no storage,
no access to the page), and only BooCode's page may frame it; a declared origin the egress
policy refuses (a private, loopback or metadata address:
:func:`mcpclient.engine.egress.refused_origins`) is left out. The document's
first script is :data:`GUARD` (``view_guard.js``): it takes WebRTC out of the view's realm and
keeps the view from making nested documents that could bring it back (:func:`guarded`). What
cannot be shown is a small page saying why, under the same policy. The session keeps the document it
read until the server's resources are listed again (:func:`mcpclient.engine.resources.read`);
the tool's result and input reach the view from the page, never through this URL.

With ``BOOCODE_APPS_ORIGIN`` views are served from that origin instead (a second host name of
this BooCode): ``GET <origin>/apps/views/<token>/`` (:func:`origin_view`), where the token is
the call signed by BooCode (:func:`boocode.chat.wire.payloads.view_url`, good for
:data:`TOKEN_MAX_AGE`) since the session cookie does not go there, and only BooCode's own origin
(``BOOCODE_PUBLIC_URL``) may frame it. The document still runs sandboxed, in an opaque origin:
views of different servers never share one.
"""

from __future__ import annotations

import html
import logging
import re
from pathlib import Path
from urllib.parse import urlsplit

from asgiref.sync import sync_to_async
from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.core import signing
from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_safe

from boocode.chat.models import ToolCall
from boocode.chat.wire.payloads import VIEW_TOKEN_SALT
from mcpclient.core import mcp_apps
from mcpclient.core.egress import declared
from mcpclient.core.resources import ReadResult, ResourceError
from mcpclient.engine.api import refused_origins
from mcpclient.runtime.signin import person_hub

logger = logging.getLogger(__name__)

# A view larger than this is not served (a read is capped at 5 MB; a cut document is refused too).
MAX_VIEW_BYTES = 4 * 1024 * 1024
TOKEN_MAX_AGE = 24 * 3600  # seconds a view's address on BOOCODE_APPS_ORIGIN works
# The first script of every view (what it closes: its own comments, docs/mcp_apps.md).
GUARD = Path(__file__).with_name("view_guard.js").read_text(encoding="utf-8")
_DOCTYPE = re.compile(r"\A\ufeff?\s*<!doctype[^>]*>", re.IGNORECASE)  # (a doctype ends at its first ">")
_DECLARATIVE = re.compile(r"shadowroot(mode|clonable|delegatesfocus|serializable)", re.IGNORECASE)


class ViewUnavailable(Exception):
    """The call's view cannot be shown; the message says why (a sentence a person reads)."""

    def __init__(self, message: str, status: int = 502) -> None:
        super().__init__(message)
        self.status = status


def _the_call(user_id: int | None, conversation_id: int, call_id: int) -> tuple[ToolCall, int] | None:
    """The call of ``conversation_id`` (owned by ``user_id``, when given) and its owner's id."""
    found = ToolCall.objects.filter(pk=call_id, message__conversation_id=conversation_id)
    if user_id is not None:
        found = found.filter(message__conversation__owner_id=user_id)
    call = (
        found.only("id", "server", "view", "message__conversation__owner_id")
        .select_related("message__conversation")
        .first()
    )
    return (call, call.message.conversation.owner_id) if call is not None else None


def view_document(result: ReadResult, uri: str) -> tuple[str, mcp_apps.ViewPolicy]:
    """The HTML of the view ``uri`` in a read, and its policy; :class:`ViewUnavailable` if unfit."""
    item = next((content for content in result.contents if content.uri == uri), None)
    if item is None and len(result.contents) == 1:
        item = result.contents[0]  # a server that answers with another spelling of the URI
    if item is None:
        raise ViewUnavailable(f"The server returned no content for {uri}.")
    mime = "".join(item.mime_type.split()).lower()
    if mime != mcp_apps.MIME_TYPE:
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
    return text, mcp_apps.view_policy(item.meta)


def guarded(text: str, policy: mcp_apps.ViewPolicy) -> str:
    """The view's HTML with the guard as its first script and its declarative shadow roots disabled.

    The guard goes right after the doctype (before it, the document would lose standards mode),
    or first when there is none; the attributes that make a ``<template>`` a declarative shadow
    root are renamed wherever they are spelt, so every shadow root is one the guard watches.
    """
    frames = "true" if policy.domains.get("frameDomains") else "false"
    script = f"<script>{GUARD.replace('__ALLOW_FRAMES__', frames)}</script>"
    text = _DECLARATIVE.sub(r"inert\g<0>", text)
    doctype = _DOCTYPE.match(text)
    at = doctype.end() if doctype else 0
    return text[:at] + script + text[at:]


def _framed_by() -> str:
    """Who may frame a view: BooCode's page (its own origin, or PUBLIC_URL's from the views' origin)."""
    if not settings.MCP_APPS_ORIGIN:
        return "'self'"
    public = urlsplit(settings.PUBLIC_URL)
    return f"{public.scheme}://{public.netloc}"


def _respond(body: str, policy: mcp_apps.ViewPolicy, status: int = 200) -> HttpResponse:
    response = HttpResponse(body, content_type="text/html; charset=utf-8", status=status)
    response["Content-Security-Policy"] = policy.content_security_policy(_framed_by())
    # Browsers follow the policy's frame-ancestors and ignore X-Frame-Options next to it; the
    # header is for the few that know only it (it cannot name another origin).
    response["X-Frame-Options"] = "DENY" if settings.MCP_APPS_ORIGIN else "SAMEORIGIN"
    response["Cache-Control"] = "private, no-store"
    response["Referrer-Policy"] = "no-referrer"
    # The frame's "allow" grants what the view declared; everything else stays off here too.
    declared = set(policy.permissions)
    features = mcp_apps.PERMISSIONS.values()
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
    return _respond(body, mcp_apps.ViewPolicy(), status)


@require_safe
@login_required
async def call_view(request: HttpRequest, conversation_id: int, call_id: int) -> HttpResponse:
    """The view document of one of the person's tool calls (see the module docstring)."""
    if settings.MCP_APPS_ORIGIN:  # served from there only
        return _unavailable("Views are served from their own origin (BOOCODE_APPS_ORIGIN).", 404)
    user = await request.auser()
    found = await sync_to_async(_the_call)(user.pk, conversation_id, call_id)
    return await _serve(found)


@require_safe
async def origin_view(request: HttpRequest, token: str) -> HttpResponse:
    """A view document on ``BOOCODE_APPS_ORIGIN``, for the call its signed token names."""
    apps_host = urlsplit(settings.MCP_APPS_ORIGIN).netloc if settings.MCP_APPS_ORIGIN else None
    if apps_host is None or request.get_host().lower() != apps_host:
        return _unavailable("This tool call has no view here.", 404)
    try:
        conversation_id, call_id = signing.loads(token, salt=VIEW_TOKEN_SALT, max_age=TOKEN_MAX_AGE)
    except signing.SignatureExpired:
        return _unavailable("This view's address has expired; reload the conversation.", 403)
    except (signing.BadSignature, TypeError, ValueError):
        return _unavailable("This view's address is not valid.", 403)
    return await _serve(await sync_to_async(_the_call)(None, conversation_id, call_id))


async def _serve(found: tuple[ToolCall, int] | None) -> HttpResponse:
    """The call's view, read through its owner's session (see the module docstring)."""
    if found is None or not found[0].view:
        return _unavailable("This tool call has no view.", 404)
    call, owner_id = found
    if not settings.MCP_APPS:
        return _unavailable("Views are turned off on this BooCode (BOOCODE_APPS).", 404)
    hub = await person_hub(owner_id)
    config = hub.config(call.server)
    # A server whose groups the person is no longer in is, to them, one that does not exist.
    if config is None or not hub.allowed(config, owner_id):
        gone = f'The MCP server "{call.server}" is no longer configured; its result is below.'
        return _unavailable(gone, 404)
    if not config.apps:
        return _unavailable(f'Views of the MCP server "{call.server}" are turned off ("apps": false).', 404)
    try:
        result = await hub.read_resource(call.server, call.view, owner_id, view=True)
        text, policy = view_document(result, call.view)
    except ResourceError as exc:
        return _unavailable(f"The view could not be read: {exc}", exc.status)
    except ViewUnavailable as exc:
        return _unavailable(str(exc), exc.status)
    # The person's browser is sent only where BooCode itself may connect on a server's word: its own
    # server's endpoints as declared, public addresses, and what BOOCODE_EGRESS_ALLOW allows.
    policy = policy.without(await refused_origins(policy.origins(), declared(config.url)))
    if policy.note:
        logger.info('view %s of MCP server "%s": %s', call.view, call.server, policy.note)
    return _respond(guarded(text, policy), policy)

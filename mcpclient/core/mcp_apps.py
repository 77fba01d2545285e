"""MCP Apps (the ``io.modelcontextprotocol/ui`` extension): what a tool's ``_meta.ui`` says.

A tool may point at a view (``_meta.ui.resourceUri``, a ``ui://`` resource of its server whose
MIME type is :data:`MIME_TYPE`) and say who may use it (``_meta.ui.visibility``): ``"model"``
(offered to the model) and ``"app"`` (callable from its server's views). Both come from the
server and are untrusted: a value that does not fit is ignored (the defaults apply) and said in
the tool's note, never an error that costs the tool. The flat ``_meta["ui/resourceUri"]`` of
earlier drafts is read when ``ui.resourceUri`` is absent.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

EXTENSION = "io.modelcontextprotocol/ui"
MIME_TYPE = "text/html;profile=mcp-app"
SCHEME = "ui://"
MODEL = "model"
APP = "app"
VISIBILITY = (MODEL, APP)  # the spec's default, and the order they are kept in
MAX_URI_CHARS = 2048
LEGACY_URI_KEY = "ui/resourceUri"


def settings() -> dict[str, Any]:
    """What a host advertises under ``capabilities.extensions`` to say it renders views."""
    return {"mimeTypes": [MIME_TYPE]}


@dataclass(frozen=True)
class ToolUi:
    """A tool's view and visibility, checked; ``note`` says what was ignored ("" when nothing)."""

    resource_uri: str = ""
    visibility: tuple[str, ...] = VISIBILITY
    note: str = ""


def _uri_problem(value: Any) -> str:
    if not isinstance(value, str):
        return f"it is not a string but {type(value).__name__}"
    if not value.startswith(SCHEME):
        return f'it does not start with "{SCHEME}"'
    if len(value) > MAX_URI_CHARS:
        return f"it is longer than {MAX_URI_CHARS} characters"
    if any(char <= " " or char == "\x7f" for char in value):
        return "it holds spaces or control characters"
    return ""


def tool_ui(meta: Mapping[str, Any] | None) -> ToolUi:
    """The view and visibility a tool's ``_meta`` declares (the defaults where it declares none)."""
    if not isinstance(meta, Mapping):
        return ToolUi()
    ui = meta.get("ui")
    notes: list[str] = []
    if ui is not None and not isinstance(ui, Mapping):
        return ToolUi(note=f"_meta.ui ignored: it is not an object but {type(ui).__name__}")
    ui = ui or {}
    uri_key = "_meta.ui.resourceUri"
    uri = ui.get("resourceUri")
    if uri is None and LEGACY_URI_KEY in meta:
        uri_key, uri = f'_meta["{LEGACY_URI_KEY}"]', meta[LEGACY_URI_KEY]
    resource_uri = ""
    if uri is not None:
        if problem := _uri_problem(uri):
            notes.append(f"{uri_key} ignored: {problem}")
        else:
            resource_uri = uri
    visibility: tuple[str, ...] = VISIBILITY
    declared = ui.get("visibility")
    if declared is not None:
        if not isinstance(declared, list):
            notes.append(f"_meta.ui.visibility ignored: it is not a list but {type(declared).__name__}")
        else:
            unknown = [item for item in declared if item not in VISIBILITY]
            if unknown:
                shown = ", ".join(repr(item)[:40] for item in unknown[:3])
                notes.append(f"_meta.ui.visibility: unknown {shown} left out")
            visibility = tuple(kind for kind in VISIBILITY if kind in declared)
    return ToolUi(resource_uri=resource_uri, visibility=visibility, note="; ".join(notes))


def visibility_note(visibility: tuple[str, ...]) -> str:
    """Why a tool the server lists is not offered to the model, by its visibility ("" if it is)."""
    if MODEL in visibility:
        return ""
    if APP in visibility:
        return '_meta.ui.visibility is ["app"]: only its server\'s views call it'
    return "_meta.ui.visibility is []: neither the model nor a view may call it"


# --- a view's own declarations: where it may connect, load from and frame, what it may use ----
MAX_DOMAINS = 32  # per list; more are ignored
MAX_DOMAIN_CHARS = 255
CSP_KEYS = {  # _meta.ui.csp key -> the directives it opens
    "connectDomains": ("connect-src",),
    "resourceDomains": ("script-src", "style-src", "img-src", "font-src", "media-src"),
    "frameDomains": ("frame-src",),
    "baseUriDomains": ("base-uri",),
}
PERMISSIONS = {  # _meta.ui.permissions key -> the Permissions Policy feature of the frame's "allow"
    "camera": "camera",
    "microphone": "microphone",
    "geolocation": "geolocation",
    "clipboardWrite": "clipboard-write",
}
# An origin as CSP writes it: a scheme the web uses, a host (its leftmost label may be "*"), a port.
_ORIGIN = re.compile(r"(https|http|wss|ws)://(\*\.)?[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)*(:[0-9]{1,5})?/?")


@dataclass(frozen=True)
class ViewPolicy:
    """What a view's resource declares in ``_meta.ui``, checked: its CSP domains and permissions.

    ``note`` says what was ignored. Only origins are kept (``https://cdn.example.com``,
    ``https://*.example.com``, ``wss://live.example.com:8443``): a keyword (``'unsafe-eval'``,
    ``*``, ``data:``), a path or anything else that would widen the policy is left out.
    """

    domains: dict[str, tuple[str, ...]] = field(default_factory=dict)
    permissions: tuple[str, ...] = ()
    prefers_border: bool | None = None
    note: str = ""

    def content_security_policy(self, frame_ancestors: str = "'self'") -> str:
        """The view document's policy: the spec's restrictive default, opened only where declared.

        ``sandbox allow-scripts`` keeps the document in an opaque origin even when it is opened
        outside its frame; workers are refused, and WebRTC is blocked where the browser knows
        ``webrtc`` (the host's first script in the document closes it in every browser);
        ``frame_ancestors`` (BooCode's page: ``'self'``, or its origin when views are served
        from an origin of their own) are the only pages that may frame it.
        """
        sources = {
            "default-src": ["'none'"],
            "script-src": ["'unsafe-inline'"],
            "style-src": ["'unsafe-inline'"],
            "img-src": ["data:", "blob:"],
            "font-src": ["data:"],
            "media-src": ["data:", "blob:"],
            "connect-src": [],
            "frame-src": [],
            "base-uri": [],
        }
        for key, directives in CSP_KEYS.items():
            for directive in directives:
                sources[directive].extend(self.domains.get(key, ()))
        policy = {name: values or ["'none'"] for name, values in sources.items()}
        policy |= {
            "worker-src": ["'none'"],  # (the view's origin is opaque: no worker script could be its own)
            "webrtc": ["'block'"],  # where the browser applies it; the view's guard closes it in any
            "object-src": ["'none'"],
            "form-action": ["'none'"],
            "frame-ancestors": [frame_ancestors],
            "sandbox": ["allow-scripts"],
        }
        return "; ".join(" ".join([name, *values]) for name, values in policy.items())

    def allow_attribute(self) -> str:
        """The frame's ``allow`` attribute: only the features the view declared ("" for none)."""
        return "; ".join(self.permissions)

    def origins(self) -> list[str]:
        """Every origin the view declares, once each."""
        return list(dict.fromkeys(origin for origins in self.domains.values() for origin in origins))

    def without(self, refused: Mapping[str, str]) -> ViewPolicy:
        """This policy without the origins ``refused`` names (origin: why), said in its note."""
        if not refused:
            return self
        domains = {
            key: kept
            for key, origins in self.domains.items()
            if (kept := tuple(origin for origin in origins if origin not in refused))
        }
        said = "; ".join(f"{origin} left out: {why}" for origin, why in refused.items())
        return replace(self, domains=domains, note="; ".join(filter(None, [self.note, said])))


def view_policy(meta: Mapping[str, Any] | None) -> ViewPolicy:
    """The policy a view's resource content declares in its ``_meta.ui`` (defaults: nothing)."""
    ui = meta.get("ui") if isinstance(meta, Mapping) else None
    if not isinstance(ui, Mapping):
        return ViewPolicy()
    notes: list[str] = []
    domains: dict[str, tuple[str, ...]] = {}
    csp = ui.get("csp")
    if csp is not None and not isinstance(csp, Mapping):
        notes.append(f"_meta.ui.csp ignored: it is not an object but {type(csp).__name__}")
        csp = None
    for key in CSP_KEYS:
        declared = (csp or {}).get(key)
        if declared is None:
            continue
        if not isinstance(declared, list):
            notes.append(f"_meta.ui.csp.{key} ignored: it is not a list")
            continue
        kept = [item for item in declared[:MAX_DOMAINS] if _is_origin(item)]
        if len(kept) < len(declared):
            left = len(declared) - len(kept)
            notes.append(f"_meta.ui.csp.{key}: {left} left out (not an origin, or past {MAX_DOMAINS})")
        if kept:
            domains[key] = tuple(dict.fromkeys(item.rstrip("/") for item in kept))
    declared_permissions = ui.get("permissions")
    permissions: list[str] = []
    if isinstance(declared_permissions, Mapping):
        permissions = [feature for key, feature in PERMISSIONS.items() if key in declared_permissions]
    elif declared_permissions is not None:
        notes.append("_meta.ui.permissions ignored: it is not an object")
    border = ui.get("prefersBorder")
    return ViewPolicy(
        domains=domains,
        permissions=tuple(permissions),
        prefers_border=border if isinstance(border, bool) else None,
        note="; ".join(notes),
    )


def _is_origin(value: Any) -> bool:
    return isinstance(value, str) and len(value) <= MAX_DOMAIN_CHARS and _ORIGIN.fullmatch(value) is not None

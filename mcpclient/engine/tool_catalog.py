"""The tools one person sees: prefixed names over the sessions' tools, the model's and the views'.

:func:`tool_catalog` names every tool of the given sessions in configuration order
(:func:`~mcpclient.core.naming.assign_names`: a name never changes while its server stays) and
gathers the ready sessions' usable tools into a :class:`Catalog`; the hub builds one for everyone
and one per person whose own sessions or server ``groups`` change what they see
(:meth:`~mcpclient.engine.hub.Hub.tools`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from mcpclient.core.naming import assign_names
from mcpclient.core.state import HubTool, Status
from mcpclient.engine.connection import ServerConnection


@dataclass(frozen=True)
class Catalog:
    """The tools one person sees: the model's (offered) and the views' (MCP Apps), each by name."""

    tools: list[HubTool] = field(default_factory=list)
    index: dict[str, tuple[str, str]] = field(default_factory=dict)
    view_tools: list[HubTool] = field(default_factory=list)
    view_index: dict[str, tuple[str, str]] = field(default_factory=dict)
    every: list[HubTool] = field(default_factory=list)  # both, each once

    @classmethod
    def of(cls, every: list[HubTool]) -> Catalog:
        """Split ``every`` (sorted) into the model's tools and the views' tools."""
        tools = [tool for tool in every if tool.model]
        view_tools = [tool for tool in every if tool.app]
        return cls(
            tools,
            {tool.prefixed_name: (tool.server, tool.name) for tool in tools},
            view_tools,
            {tool.prefixed_name: (tool.server, tool.name) for tool in view_tools},
            every,
        )


def tool_catalog(
    order: Sequence[str], connections: dict[str, ServerConnection]
) -> tuple[dict[tuple[str, str], tuple[str, str]], Catalog]:
    """Prefixed names over the tools of ``connections`` (in ``order``), and the usable tools.

    Returns ``{(server, tool): (prefixed, warning)}`` and the catalog of ready servers' tools:
    those offered to the model and those a view may call (``_meta.ui.visibility`` holds "app" and
    the session renders views), sorted by prefixed name.
    """
    names_in_order = [name for name in order if name in connections]
    names_in_order += [name for name in connections if name not in names_in_order]
    pairs = [(name, tool.name) for name in names_in_order for tool in connections[name].tools]
    names = {(n.server, n.tool): (n.prefixed, n.warning) for n in assign_names(pairs)}
    tools: list[HubTool] = []
    for name in names_in_order:
        connection = connections[name]
        if connection.status is not Status.READY:
            continue
        for tool in connection.tools:
            app = tool.app_callable and connection.apps
            if not tool.offered and not app:
                continue
            prefixed, warning = names[(name, tool.name)]
            tools.append(
                HubTool(
                    prefixed_name=prefixed,
                    server=name,
                    name=tool.name,
                    description=tool.description,
                    input_schema=tool.input_schema,
                    annotations=tool.annotations,
                    read_only=tool.read_only,
                    warning=warning,
                    title=tool.title,
                    icons=tool.icons,
                    output_schema=tool.output_schema,
                    approval_reason=tool.approval_reason,
                    # A view only where the session said it renders them (BOOCODE_APPS, "apps").
                    ui_resource_uri=tool.ui_resource_uri if connection.apps else "",
                    model=tool.offered,
                    app=app,
                    digest=tool.digest,
                )
            )
    tools.sort(key=lambda tool: tool.prefixed_name)
    return names, Catalog.of(tools)

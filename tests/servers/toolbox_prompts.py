"""The toolbox's prompts group: prompts with and without arguments, completions, list changes.

``python tests/servers/toolbox.py --feature prompts`` adds it to the toolbox. Run as a script,
this module serves the toolbox with the group (``--handshake-only``: a 2025-11-25 server that
refuses ``server/discover``; ``--without-prompts``: no prompts capability at all; ``--http
PORT``: over Streamable HTTP instead of stdio).

- ``prompts/list`` answers in pages of :data:`PAGE_SIZE`, so every listing pages;
- ``greeting``: no arguments, one user message;
- ``code_review``: ``language`` (required, completed from :data:`LANGUAGES`), ``code``
  (required) and ``focus`` (optional);
- ``briefing``: a user message, an assistant message and a user message embedding the text
  resource ``toolbox://notes/brief.txt``, then an image (a 1-pixel PNG);
- ``broken``: fails on the server (an error the person must be able to read);
- the tools ``add_prompt`` and ``remove_prompt`` change the list at runtime and announce it both
  ways (``notifications/prompts/list_changed`` on 2025-11-25, ``subscriptions/listen`` on
  2026-07-28).

The completion handler answers ``ref/prompt`` and hands any other reference to the handler
registered before it (the resources group's templates), so the groups can be combined when
this one is added last.
"""

from __future__ import annotations

import argparse
import base64
import os
import sys
from typing import Annotated, Any

import anyio
import mcp.types as types
from mcp import MCPError
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.prompts.base import AssistantMessage, Message, Prompt, UserMessage
from pydantic import Field

PAGE_SIZE = 2
LANGUAGES = ("python", "pascal", "perl", "php", "rust", "ruby", "go")
BRIEF_URI = "toolbox://notes/brief.txt"
BRIEF_TEXT = "The launch moved to Thursday. Ada owns the checklist."
PNG_1PX = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
)
READ_ONLY = types.ToolAnnotations(read_only_hint=True)


def _paged_prompts(server: MCPServer) -> Any:
    async def handler(ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListPromptsResult:
        prompts = await server.list_prompts()
        start = int(params.cursor) if params and params.cursor else 0
        end = start + PAGE_SIZE
        return types.ListPromptsResult(
            prompts=prompts[start:end], next_cursor=str(end) if end < len(prompts) else None
        )

    return handler


def _completion(previous: Any) -> Any:
    async def handler(ctx: Any, params: types.CompleteRequestParams) -> types.CompleteResult:
        ref, argument = params.ref, params.argument
        if isinstance(ref, types.PromptReference):
            if ref.name == "code_review" and argument.name == "language":
                found = [name for name in LANGUAGES if name.startswith(argument.value.lower())]
                return types.CompleteResult(
                    completion=types.Completion(values=found, total=len(found), has_more=False)
                )
            return types.CompleteResult(completion=types.Completion(values=[]))
        if previous is not None:
            return await previous.handler(ctx, params)
        raise MCPError(code=types.INVALID_PARAMS, message="no completions for this reference")

    return handler


def register(server: MCPServer) -> None:
    """Add the group's prompts, paged listing, completion handler and tools to ``server``."""

    @server.prompt(title="Greeting", description="Say hello to the team.")
    def greeting() -> str:
        return "Say hello to the team in one short sentence."

    @server.prompt(title="Code review", description="Review a piece of code.")
    def code_review(
        language: Annotated[str, Field(description="The programming language")],
        code: Annotated[str, Field(description="The code to review")],
        focus: Annotated[str, Field(description="What to look at first (optional)")] = "",
    ) -> str:
        extra = f" Focus on {focus}." if focus else ""
        return f"Please review this {language} code:\n{code}{extra}"

    @server.prompt(title="Briefing", description="A short exchange and the launch notes.")
    def briefing() -> list[Message]:
        return [
            UserMessage("I need a briefing on the launch."),
            AssistantMessage("Here are the launch notes; ask me anything about them."),
            UserMessage(
                types.EmbeddedResource(
                    type="resource",
                    resource=types.TextResourceContents(
                        uri=BRIEF_URI, mime_type="text/plain", text=BRIEF_TEXT
                    ),
                )
            ),
            UserMessage(
                types.ImageContent(
                    type="image", data=base64.b64encode(PNG_1PX).decode(), mime_type="image/png"
                )
            ),
        ]

    @server.prompt(description="Always fails on the server.")
    def broken() -> str:
        raise MCPError(code=types.INTERNAL_ERROR, message="the briefing database is down")

    @server.tool(annotations=READ_ONLY)
    async def add_prompt(name: str, ctx: Context, notify: bool = True) -> str:
        """Add the prompt ``name`` at runtime and (unless ``notify`` is false) announce the change."""

        def added() -> str:
            return f"I am the prompt {name}"

        server.add_prompt(Prompt.from_function(added, name=name, description=f"added at runtime: {name}"))
        if notify:
            await ctx.session.send_prompt_list_changed()  # a 2025 session (dropped on 2026-07-28)
            await ctx.notify_prompts_changed()  # every subscriptions/listen stream (2026-07-28)
        return f"added {name}"

    @server.tool(annotations=READ_ONLY)
    async def remove_prompt(name: str, ctx: Context) -> str:
        """Remove the prompt ``name`` at runtime and announce the change."""
        server.remove_prompt(name)
        await ctx.session.send_prompt_list_changed()
        await ctx.notify_prompts_changed()
        return f"removed {name}"

    lowlevel = server._lowlevel_server
    lowlevel.add_request_handler("prompts/list", types.PaginatedRequestParams, _paged_prompts(server))
    previous = lowlevel.get_request_handler("completion/complete")
    lowlevel.add_request_handler("completion/complete", types.CompleteRequestParams, _completion(previous))


async def _no_discover(ctx: Any, params: Any) -> types.DiscoverResult:
    raise MCPError(code=types.METHOD_NOT_FOUND, message="Method not found: server/discover")


async def _serve_stdio_handshake_only(server: MCPServer) -> None:
    from mcp.server.runner import serve_loop
    from mcp.server.stdio import stdio_server

    lowlevel = server._lowlevel_server
    async with stdio_server() as (read, write), lowlevel.lifespan(lowlevel) as state:
        await serve_loop(
            lowlevel, read, write, lifespan_state=state, init_options=lowlevel.create_initialization_options()
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--handshake-only", action="store_true", help="a 2025-11-25 server")
    parser.add_argument("--without-prompts", action="store_true", help="no prompts capability")
    parser.add_argument("--http", type=int, metavar="PORT")
    options = parser.parse_args()
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from toolbox import build_server  # run as a script: this folder is on sys.path

    server = build_server(features=() if options.without_prompts else ("prompts",))
    lowlevel = server._lowlevel_server
    if options.without_prompts:
        for method in ("prompts/list", "prompts/get", "completion/complete"):
            lowlevel._request_handlers.pop(method, None)
    if options.handshake_only:
        lowlevel.add_request_handler("server/discover", types.RequestParams, _no_discover)
    server.settings.log_level = "WARNING"
    if options.http:
        server.run("streamable-http", host="127.0.0.1", port=options.http)
    elif options.handshake_only:
        anyio.run(_serve_stdio_handshake_only, server)
    else:
        server.run()


if __name__ == "__main__":
    main()

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

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # for common.py, even when run via runpy

import common
import mcp.types as types
from common import PNG_1PX, READ_ONLY
from mcp import MCPError
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.prompts.base import AssistantMessage, Message, Prompt, UserMessage
from pydantic import Field

PAGE_SIZE = 2
LANGUAGES = ("python", "pascal", "perl", "php", "rust", "ruby", "go")
BRIEF_URI = "toolbox://notes/brief.txt"
BRIEF_TEXT = "The launch moved to Thursday. Ada owns the checklist."


def _paged_prompts(server: MCPServer) -> Any:
    async def handler(ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListPromptsResult:
        prompts, next_cursor = common.page(await server.list_prompts(), params, PAGE_SIZE)
        return types.ListPromptsResult(prompts=prompts, next_cursor=next_cursor)

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--handshake-only", action="store_true", help="a 2025-11-25 server")
    parser.add_argument("--without-prompts", action="store_true", help="no prompts capability")
    common.add_transport_flags(parser)
    options = parser.parse_args()
    # Imported here, not at the top: the toolbox imports this module for ``--feature prompts``.
    from toolbox import build_server

    server = build_server(features=() if options.without_prompts else ("prompts",))
    if options.without_prompts:
        for method in ("prompts/list", "prompts/get", "completion/complete"):
            server._lowlevel_server._request_handlers.pop(method, None)
    common.serve(server, http=options.http, handshake_only=options.handshake_only)


if __name__ == "__main__":
    main()

"""What a resource or prompt listing keeps of a server's display text (untrusted and unbounded).

Names, titles, descriptions and MIME types are cut; a URI, URI template, prompt name or argument
name too long to be used is left out rather than cut (a cut one would name something else).
"""

from __future__ import annotations

from typing import Any

import mcp.types as types

from mcpclient.core import prompts as core_prompts
from mcpclient.engine import prompts, resources


class Pages:
    """A client whose listings are one page each."""

    def __init__(self, listed: list[types.Resource], templates: list[types.ResourceTemplate]) -> None:
        self.listed, self.templates = listed, templates

    async def list_resources(self, **_: Any) -> types.ListResourcesResult:
        return types.ListResourcesResult(resources=self.listed)

    async def list_resource_templates(self, **_: Any) -> types.ListResourceTemplatesResult:
        return types.ListResourceTemplatesResult(resource_templates=self.templates)


async def test_resource_listings_cut_display_text_and_leave_out_unusable_uris() -> None:
    huge = "x" * 100_000
    client = Pages(
        [
            types.Resource(uri="box://ok", name=huge, title=huge, description=huge, mime_type=huge),
            types.Resource(uri="box://" + "u" * resources.MAX_URI_CHARS, name="too long"),
        ],
        [
            types.ResourceTemplate(uri_template="box://{city}", name=huge, description=huge),
            types.ResourceTemplate(uri_template="box://{a}" + "t" * resources.MAX_URI_CHARS, name="too long"),
        ],
    )

    [entry], [template] = await resources.list_everything(client, "box")  # type: ignore[arg-type]

    assert entry.uri == "box://ok" and template.uri_template == "box://{city}"
    for item in (entry, template):
        assert len(item.name) == resources.MAX_NAME_CHARS and item.name.endswith("…")
        assert len(item.description) == resources.MAX_DESCRIPTION_CHARS
        assert len(item.mime_type) <= resources.MAX_MIME_CHARS
    assert len(entry.title) == resources.MAX_NAME_CHARS


def test_prompt_listings_cut_titles_and_leave_out_names_no_frame_could_carry() -> None:
    huge = "y" * 100_000
    fine = types.Prompt(
        name="review",
        title=huge,
        description=huge,
        arguments=[types.PromptArgument(name="code", description=huge)],
    )
    long_name = types.Prompt(name="p" * (core_prompts.MAX_NAME_CHARS + 1))
    long_argument = types.Prompt(
        name="ok", arguments=[types.PromptArgument(name="a" * (core_prompts.MAX_NAME_CHARS + 1))]
    )

    assert [p.name for p in (fine, long_name, long_argument) if prompts._usable(p)] == ["review"]
    shown = prompts._hub_prompt("box", fine, completions=False)
    assert len(shown.title) == prompts.MAX_TITLE_CHARS
    assert len(shown.description) == prompts.MAX_TEXT_CHARS
    assert len(shown.arguments[0].description) == prompts.MAX_TEXT_CHARS

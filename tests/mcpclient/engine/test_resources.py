"""Resources, templates and completions through the hub (mcpclient/engine/resources.py).

Real servers: the toolbox with its resources group over stdio (2026-07-28) and as a
2025-11-25 server (``--handshake-only``), over Streamable HTTP, and without the capability.
"""

from __future__ import annotations

import base64

import pytest

from mcpclient.core.resources import ResourceError, make_ref
from mcpclient.core.results import MAX_OUTPUT_BYTES
from mcpclient.core.state import Status
from mcpclient.engine import resources
from mcpclient.engine.hub import Hub
from tests.support.hubs import make_config
from tests.support.processes import PYTHON, ROOT, HttpServer, free_port

pytestmark = pytest.mark.processes

SCRIPT = ROOT / "tests" / "servers" / "toolbox_resources.py"
STATIC = {
    "toolbox://notes/readme.txt",
    "toolbox://docs/guide.md",
    "toolbox://data/config.json",
    "toolbox://images/dot.png",
    "toolbox://images/logo.svg",
    "toolbox://data/large.txt",
}


def entry(*extra: str, **keys: object) -> dict[str, object]:
    return {"command": PYTHON, "args": [str(SCRIPT), *extra], **keys}


async def catalog(hub: Hub, name: str = "box") -> resources.ResourceCatalog:
    found = await resources.catalog_of(hub, name, None, wait=10)
    assert found.listed and not found.error, found.error
    return found


@pytest.mark.parametrize("era", ["2026-07-28", "2025-11-25"])
async def test_every_page_of_resources_and_the_templates_are_listed(hub: Hub, era: str) -> None:
    extra = ("--handshake-only",) if era == "2025-11-25" else ()
    await hub.start([make_config("box", entry(*extra))])
    assert hub.snapshots()[0].protocol_version == era

    listed = await catalog(hub)

    # Six static resources in pages of two: all three pages were read.
    assert {r.uri for r in listed.resources} == STATIC
    [template] = listed.templates
    assert (template.uri_template, template.arguments) == ("toolbox://cities/{city}", ("city",))
    readme = next(r for r in listed.resources if r.uri == "toolbox://notes/readme.txt")
    assert (readme.name, readme.title, readme.mime_type) == ("readme", "Read me", "text/plain")


@pytest.mark.parametrize("era", ["2026-07-28", "2025-11-25"])
async def test_a_resource_added_at_runtime_is_listed_again(hub: Hub, era: str) -> None:
    extra = ("--handshake-only",) if era == "2025-11-25" else ()
    await hub.start([make_config("box", entry(*extra))])
    listed = await catalog(hub)
    before = listed.listings

    assert (await hub.call_tool("box_add_resource", {"name": "fresh"})).output == "added fresh"

    async def seen() -> None:
        while "toolbox://added/fresh" not in {r.uri for r in listed.resources}:
            listed._listed.clear()
            await listed._listed.wait()

    import anyio

    with anyio.fail_after(10):
        await seen()
    assert listed.listings > before


async def test_reads_text_json_and_blobs_and_caps_what_is_too_large(hub: Hub) -> None:
    await hub.start([make_config("box", entry())])
    await catalog(hub)

    text = await resources.read(hub, "box", "toolbox://notes/readme.txt", None)
    assert [(c.text, c.mime_type) for c in text.contents] == [
        ("The toolbox reads you this note.", "text/plain")
    ]
    image = await resources.read(hub, "box", "toolbox://images/dot.png", None)
    [blob] = image.contents
    assert blob.data is not None and blob.data.startswith(b"\x89PNG") and blob.text is None
    assert "binary content: image/png" in image.model_text()
    assert base64.b64decode(blob.to_dict()["blob"]) == blob.data
    templated = await resources.read(hub, "box", "toolbox://cities/Paris", None)
    assert templated.model_text() == "Paris is a city in Europe."

    large = await resources.read(hub, "box", "toolbox://data/large.txt", None)
    [cut] = large.contents
    assert cut.text is not None
    assert len(cut.text.encode()) < MAX_OUTPUT_BYTES + 200
    assert cut.text.endswith(f"the limit is {MAX_OUTPUT_BYTES} bytes]")


async def test_unknown_resources_and_servers_are_clear_errors(hub: Hub) -> None:
    await hub.start([make_config("box", entry())])
    await catalog(hub)

    with pytest.raises(ResourceError) as missing:
        await resources.read(hub, "box", "toolbox://nothing/here", None)
    assert missing.value.status == 404 and "toolbox://nothing/here" in str(missing.value)
    with pytest.raises(ResourceError) as unknown:
        await resources.read(hub, "nobody", "toolbox://notes/readme.txt", None)
    assert unknown.value.status == 404 and '"nobody"' in str(unknown.value)


async def test_a_server_that_went_away_is_an_error_not_a_crash(hub: Hub) -> None:
    await hub.start([make_config("box", entry())])
    await catalog(hub)
    await hub.call_tool("box_crash", {})
    await hub.wait_until(lambda: hub.snapshots()[0].status is Status.UNAVAILABLE, 10)

    with pytest.raises(ResourceError) as down:
        await resources.read(hub, "box", "toolbox://notes/readme.txt", None)
    assert down.value.status == 502 and "unreachable" in str(down.value)


async def test_completions_for_a_template_argument(hub: Hub) -> None:
    await hub.start([make_config("box", entry())])
    listed = await catalog(hub)
    assert listed.completions

    ref = make_ref("resource", "toolbox://cities/{city}")
    found = await resources.complete(hub, "box", ref, {"name": "city", "value": "be"}, None, None)
    assert found.values == ("Berlin", "Bern") and found.total == 2 and not found.has_more
    with pytest.raises(ResourceError) as bad:
        await resources.complete(hub, "box", ref, {"name": "country", "value": ""}, None, None)
    assert bad.value.status == 400 and "country" in str(bad.value)


async def test_a_server_without_the_capabilities_is_never_asked(hub: Hub) -> None:
    await hub.start([make_config("bare", entry("--without-resources"))])
    assert hub.snapshots()[0].status is Status.READY

    listed = await resources.catalog_of(hub, "bare", None, wait=5)
    assert (listed.supported, listed.completions, listed.resources, listed.listings) == (False, False, (), 0)
    with pytest.raises(ResourceError) as no_resources:
        await resources.read(hub, "bare", "toolbox://notes/readme.txt", None)
    assert no_resources.value.status == 409
    with pytest.raises(ResourceError) as no_completions:
        ref = make_ref("resource", "toolbox://cities/{city}")
        await resources.complete(hub, "bare", ref, {"name": "city", "value": ""}, None, None)
    assert no_completions.value.status == 409


async def test_over_streamable_http(hub: Hub) -> None:
    port = free_port()
    server = HttpServer([PYTHON, str(SCRIPT), "--http", str(port)], port, "/mcp")
    try:
        await hub.start([make_config("web", {"type": "http", "url": server.url})])
        listed = await catalog(hub, "web")
        assert {r.uri for r in listed.resources} == STATIC
        read = await resources.read(hub, "web", "toolbox://docs/guide.md", None)
        assert read.contents[0].text.startswith("# Toolbox guide")
    finally:
        await hub.stop()
        server.stop()


@pytest.mark.npx
async def test_server_everything_resources_templates_and_completion(hub: Hub) -> None:
    import anyio

    config = make_config(
        "every",
        {
            "command": "npx",
            "args": ["-y", "@modelcontextprotocol/server-everything"],
            "cwd": str(ROOT / "tests" / "node"),
        },
    )
    with anyio.fail_after(60):
        await hub.start([config])
    assert hub.snapshots()[0].status is Status.READY, hub.snapshots()[0].last_error
    listed = await catalog(hub, "every")

    # Its docs folder as static Markdown/text resources, and the dynamic text and blob templates.
    uris = {r.uri for r in listed.resources}
    assert any(uri.startswith("demo://resource/static/document/") for uri in uris), uris
    templates = {t.uri_template: t.arguments for t in listed.templates}
    assert templates["demo://resource/dynamic/text/{resourceId}"] == ("resourceId",)
    assert "demo://resource/dynamic/blob/{resourceId}" in templates

    text = await resources.read(hub, "every", "demo://resource/dynamic/text/3", None)
    assert text.contents[0].text.startswith("Resource 3: This is a plaintext resource")
    blob = await resources.read(hub, "every", "demo://resource/dynamic/blob/3", None)
    assert blob.contents[0].data is not None and blob.contents[0].text is None
    document = next(r for r in listed.resources if r.mime_type == "text/markdown")
    read = await resources.read(hub, "every", document.uri, None)
    assert read.contents[0].text

    assert listed.completions
    ref = make_ref("resource", "demo://resource/dynamic/text/{resourceId}")
    found = await resources.complete(hub, "every", ref, {"name": "resourceId", "value": "7"}, None, None)
    assert found.values == ("7",)
    none = await resources.complete(hub, "every", ref, {"name": "resourceId", "value": "x"}, None, None)
    assert none.values == ()


async def test_resource_links_and_embedded_resources_become_parts_for_the_viewer(hub: Hub) -> None:
    await hub.start([make_config("box", entry())])

    result = await hub.call_tool("box_link_resource", {})

    linked = [(p["type"], p["uri"], p["name"]) for p in result.parts if p["type"] != "image"]
    assert linked == [
        ("resource_link", "toolbox://docs/guide.md", "guide"),
        ("resource_link", "toolbox://images/dot.png", "dot"),
        ("resource", "toolbox://data/config.json", ""),
    ]
    assert "[resource: toolbox://docs/guide.md]" in result.output  # the model reads the link as before


@pytest.mark.django_db(transaction=True)
async def test_a_per_user_server_is_read_through_the_persons_own_session_only(hub: Hub) -> None:
    # The toolbox asks for no sign-in, so a person's session opens without one; nobody else's does.
    port = free_port()
    server = HttpServer([PYTHON, str(SCRIPT), "--http", str(port)], port, "/mcp")
    try:
        config = make_config("mine", {"type": "http", "url": server.url, "oauth": {"mode": "perUser"}})
        await hub.start([config])
        assert hub.snapshots()[0].status is Status.PER_USER
        await hub.open_user_sessions(1, ["mine"])
        assert hub.user_connection("mine", 1).status is Status.READY

        assert resources.visible_servers(hub, 1) == ["mine"]
        assert resources.visible_servers(hub, 2) == [] and resources.visible_servers(hub, None) == []
        read = await resources.read(hub, "mine", "toolbox://notes/readme.txt", 1)
        assert read.contents[0].text == "The toolbox reads you this note."
        for somebody_else in (2, None):
            with pytest.raises(ResourceError) as refused:
                await resources.read(hub, "mine", "toolbox://notes/readme.txt", somebody_else)
            assert refused.value.status == 502 and "Connect your account" in str(refused.value)
            with pytest.raises(ResourceError):
                ref = make_ref("resource", "toolbox://cities/{city}")
                await resources.complete(hub, "mine", ref, {"name": "city", "value": ""}, None, somebody_else)
    finally:
        await hub.stop()
        server.stop()

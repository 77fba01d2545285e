"""Tool search: the ranker, the command, and deferred tools in a real turn.

The ranker runs with the embedding model the test install carries (``make install-semantic`` is
part of the test dependencies) and, where a test says so, lexically only. The turns run through
the real stack: the toolbox over stdio (its tools as server ``tb``), the scripted model over HTTP,
AGENTS.md written by the test.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import AsyncClient

from boocode.chat.models import Conversation
from boocode.chat.turn.loop import TurnRequest, run_turn
from boocode.tools import embedding, ranking
from boocode.tools.deferred import SEARCH_TOOL, used_in
from mcpclient.engine.hub import Hub
from mcpclient.runtime import set_hub
from tests.support.hubs import make_config
from tests.support.llm import Call, ScriptedLLM, Text, ToolCalls
from tests.support.processes import toolbox_entry


@pytest.fixture(autouse=True)
def semantic(settings: Any) -> None:
    """The embedding model on (the test settings turn it off for every other test)."""
    settings.TOOL_SEARCH_SEMANTIC = True


CATALOG = {
    "servers": {
        "files": {
            "description": "Read and write files on the local disk",
            "tools": [
                {
                    "name": "read_text_file",
                    "description": "Read the complete contents of a file as text.",
                    "inputSchema": {"type": "object", "properties": {"path": {"type": "string"}}},
                },
                {
                    "name": "move_file",
                    "description": "Move or rename files and directories.",
                    "inputSchema": {
                        "type": "object",
                        "properties": {"source": {"type": "string"}, "destination": {"type": "string"}},
                    },
                },
                {"name": "directoryTree", "description": "A recursive tree view of files and directories."},
            ],
        },
        "weather": {
            "description": "Weather forecasts",
            "tools": [
                {
                    "name": "get_forecast",
                    "description": "Get the weather forecast for a location.",
                    "inputSchema": {
                        "type": "object",
                        "properties": {"latitude": {"type": "number"}, "longitude": {"type": "number"}},
                    },
                },
                {"name": "get_alerts", "description": "Get weather alerts for a US state."},
            ],
        },
        "tracker": {
            "description": "An issue tracker",
            "tools": [
                {"name": "create_issue", "title": "Create issue", "description": "Open a new issue."},
                {"name": "list_pull_requests", "description": "List the pull requests of a repository."},
            ],
        },
    }
}


def catalog_index(*, semantic: bool = True) -> ranking.Index:
    found = [
        ranking.Candidate.from_listing(server, tool, entry["description"])
        for server, entry in CATALOG["servers"].items()
        for tool in entry["tools"]
    ]
    return ranking.Index(found, embedding.encoder() if semantic else None)


def top(index: ranking.Index, query: str, limit: int = 3) -> list[str]:
    return [f"{hit.server}/{hit.name}" for hit in index.rank(query, limit=limit)]


@pytest.mark.parametrize("semantic", [True, False])
def test_names_are_split_into_words_and_matched_with_their_fields(semantic: bool) -> None:
    index = catalog_index(semantic=semantic)
    assert top(index, "show the directory tree of my project")[0] == "files/directoryTree"
    assert top(index, "list pull requests")[0] == "tracker/list_pull_requests"
    assert top(index, "rename report.txt to final.txt")[0] == "files/move_file"
    assert ranking.split_name("listPullRequests") == "list Pull Requests"
    assert ranking.words("get_issue-Comments") == ["issue", "comment"]


def test_the_semantic_model_finds_a_request_that_shares_no_word() -> None:
    assert embedding.encoder() is not None, "the test install carries the embedding model"
    index = catalog_index()
    assert top(index, "will it rain in Paris tomorrow?")[0] == "weather/get_forecast"
    assert top(index, "report a bug to the team")[0] == "tracker/create_issue"
    lexical = catalog_index(semantic=False)
    assert "weather/get_forecast" not in top(lexical, "will it rain in Paris tomorrow?")


@pytest.mark.parametrize("semantic", [True, False])
def test_no_tool_fits_is_an_empty_answer_not_a_guess(semantic: bool) -> None:
    index = catalog_index(semantic=semantic)
    assert index.rank("book me a table for two at an italian restaurant tonight") == []
    assert index.rank("") == []


def test_a_tool_that_shares_nothing_with_the_request_is_never_found() -> None:
    """Lexically, one tool shares a word ("rename"); the others score 0 and are not listed, not
    even to fill the five asked for, nor when the conversation used them recently."""
    index = catalog_index(semantic=False)
    every = [
        f"{server}_{tool['name']}" for server, entry in CATALOG["servers"].items() for tool in entry["tools"]
    ]
    for recent in ([], every):
        hits = index.rank("rename report.txt to final.txt", limit=5, recent=recent)
        assert [f"{hit.server}/{hit.name}" for hit in hits] == ["files/move_file"]


def test_the_values_a_request_carries_do_not_decide_which_tool_it_needs() -> None:
    stripped = ranking.without_values
    assert stripped("read the file ~/notes/todo.txt") == "read the file"
    assert stripped("create an issue titled 'Login broken on Safari'") == "create an issue titled"
    assert stripped("refund pi_3Nabc, it's a duplicate") == "refund it's a duplicate"
    assert stripped("~/notes/todo.txt") == "~/notes/todo.txt"  # (nothing else to go on)
    tools = [
        ranking.Candidate(key="read", server="files", name="read_text_file", description="Read a file."),
        ranking.Candidate(key="todos", server="tasks", name="list_todos", description="List to-dos."),
    ]
    index = ranking.Index(tools, embedding.encoder())
    assert index.rank("read the file ~/notes/todo.txt", limit=1)[0].key == "read"


def test_texts_are_embedded_in_batches_of_similar_length_and_come_back_in_order() -> None:
    encoder = embedding.encoder()
    assert encoder is not None
    texts = ["a much longer text about listing the pull requests of a repository " * 3, "short", "mid length"]
    together = encoder.encode(texts)
    for number, text in enumerate(texts):
        assert abs(float(together[number] @ encoder.encode([text])[0]) - 1.0) < 1e-4


def test_the_model_is_checked_before_it_is_used(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(embedding, "MODEL_SHA256", "0" * 64)
    with pytest.raises(embedding.ModelUnavailable, match=r"model\.safetensors is not the expected file"):
        embedding.load()


def test_the_command_ranks_a_catalog_file_for_each_request(tmp_path: Path, capsys: Any) -> None:
    catalog, requests = tmp_path / "catalog.json", tmp_path / "queries.txt"
    catalog.write_text(json.dumps(CATALOG))
    requests.write_text("what's the weather forecast for Oslo\n\nbook a flight to Rome\n")
    call_command("tool_search", catalog=str(catalog), queries=str(requests), limit=2, json=True)
    first, second = (json.loads(line) for line in capsys.readouterr().out.splitlines())
    assert (first[0]["server"], first[0]["tool"]) == ("weather", "get_forecast")
    assert len(first) == 2 and first[0]["score"] >= first[1]["score"] > 0
    assert second == []  # no tool fits

    call_command("tool_search", catalog=str(catalog), queries=str(requests), limit=1)
    assert "  1. weather / get_forecast" in capsys.readouterr().out

    bad = tmp_path / "bad.json"
    for content, why in (
        ("{", "the catalog is not JSON"),
        ('{"servers": {}}', 'expected {"servers"'),
        ('{"servers": {"x": {"tools": [{"title": "no name"}]}}}', 'server "x", tool 0: expected an object'),
    ):
        bad.write_text(content)
        with pytest.raises(CommandError, match=re.escape(why)):
            call_command("tool_search", catalog=str(bad), queries=str(requests))
    with pytest.raises(CommandError, match=r"queries\.txt: the queries file cannot be read"):
        call_command("tool_search", catalog=str(catalog), queries=str(tmp_path / "none" / "queries.txt"))
    with pytest.raises(CommandError, match=r"--limit must be from 1 to 100"):
        call_command("tool_search", catalog=str(catalog), queries=str(requests), limit=0)


def test_the_history_says_what_was_used_and_found_most_recent_first() -> None:
    found = json.dumps({"tools": [{"name": "tb_add"}, {"name": "tb_echo"}]})
    history = [
        {"role": "assistant", "tool_calls": [{"id": "1", "function": {"name": "tb_echo"}}]},
        {"role": "tool", "tool_call_id": "1", "content": "x"},
        {"role": "assistant", "tool_calls": [{"id": "2", "function": {"name": SEARCH_TOOL}}]},
        {"role": "tool", "tool_call_id": "2", "content": found},
    ]
    assert used_in(history) == ["tb_echo", "tb_add"]


# --- deferred tools in a turn ----------------------------------------------------------------------


@pytest.fixture
async def search_hub(hub: Hub) -> AsyncIterator[Hub]:
    await hub.start([make_config("tb", toolbox_entry())])
    set_hub(hub)
    yield hub
    set_hub(None)


def names(hub: Hub) -> set[str]:
    return {tool.prefixed_name for tool in hub.tools()}


def offered(request: dict[str, Any]) -> list[str]:
    return [tool["function"]["name"] for tool in request.get("tools") or []]


async def turn(conversation: int, text: str, user_id: int) -> str:
    async def emit(event: dict[str, Any]) -> None:
        pass

    return await run_turn(TurnRequest(conversation, text, user_id=user_id), emit)


@pytest.mark.django_db(transaction=True)
@pytest.mark.processes
async def test_a_search_loads_what_it_found_for_the_next_step_and_the_conversation_keeps_it(
    llm: ScriptedLLM, search_hub: Hub, agents_file: Callable[[str], Path]
) -> None:
    agents_file("## Searcher\n---\ntoolSearch: always\npinned: [tb_echo]\n---\nFind your tools.\n")
    user = await get_user_model().objects.acreate(username="alice")
    conversation = (await Conversation.objects.acreate(owner=user)).pk
    llm.script(
        ToolCalls([Call(SEARCH_TOOL, {"query": "add two numbers together", "limit": 2})]),
        ToolCalls([Call("tb_add", {"a": 2, "b": 3})]),
        Text("5."),
    )
    assert await turn(conversation, "what is 2 + 3?", user.pk) == "complete"
    first, second, third = (offered(request) for request in llm.requests[-3:])
    assert first == ["tb_echo", SEARCH_TOOL]  # the pinned tool and the search, nothing else
    assert second[0] == "tb_echo" and "tb_add" in second and second[-1] == SEARCH_TOOL
    assert len(second) <= 4  # the pinned one, two found, the search
    answer = json.loads(llm.requests[-2]["messages"][-1]["content"])
    assert answer["tools"][0]["name"] == "tb_add" and answer["note"].startswith("These tools are loaded")
    assert "tb_add" in third

    llm.script(Text("Still here."))
    assert await turn(conversation, "and now?", user.pk) == "complete"
    assert offered(llm.requests[-1])[:2] == ["tb_echo", "tb_add"]  # kept: used recently

    llm.script(ToolCalls([Call(SEARCH_TOOL, {"query": "order a pizza with extra cheese"})]), Text("No."))
    assert await turn(conversation, "order me a pizza", user.pk) == "complete"
    answer = json.loads(llm.requests[-1]["messages"][-1]["content"])
    assert answer["tools"] == [] and answer["note"].startswith("No tool fits")


@pytest.mark.django_db(transaction=True)
@pytest.mark.processes
async def test_a_tool_called_by_name_stays_loaded_for_the_rest_of_the_turn(
    llm: ScriptedLLM, search_hub: Hub, agents_file: Callable[[str], Path]
) -> None:
    agents_file("## Searcher\n---\ntoolSearch: always\n---\nFind your tools.\n")
    user = await get_user_model().objects.acreate(username="carol")
    conversation = (await Conversation.objects.acreate(owner=user)).pk
    llm.script(
        ToolCalls([Call("tb_add", {"a": 2, "b": 3})]),  # not loaded: known from elsewhere, called by name
        ToolCalls([Call("tb_echo", {"text": "5"})]),
        Text("5."),
    )
    assert await turn(conversation, "what is 2 + 3?", user.pk) == "complete"
    first, second, third = (offered(request) for request in llm.requests[-3:])
    assert first == [SEARCH_TOOL]
    assert second == ["tb_add", SEARCH_TOOL]
    assert third == ["tb_echo", "tb_add", SEARCH_TOOL]  # the most recent first, both kept


@pytest.mark.django_db(transaction=True)
@pytest.mark.processes
async def test_the_agents_api_says_whose_tools_are_searched(
    search_hub: Hub, agents_file: Callable[[str], Path], settings: Any
) -> None:
    """The page's agent card then says "Searches N tools" (static/chat/pickers.js)."""
    agents_file(
        "## Auto\n---\ndescription: the default\n---\nA.\n\n"
        "## Finder\n---\ntoolSearch: always\n---\nF.\n\n"
        "## Plain\n---\ntoolSearch: never\n---\nP.\n"
    )
    client = AsyncClient()
    await client.aforce_login(await get_user_model().objects.acreate(username="dave"))

    async def searched() -> dict[str, bool]:
        return {a["name"]: a["searched"] for a in (await client.get("/api/agents/")).json()["agents"]}

    assert await searched() == {"Auto": False, "Finder": True, "Plain": False}
    settings.TOOL_SEARCH_TOOLS = 5  # past the limit, ranked with the embedding model
    assert await searched() == {"Auto": True, "Finder": True, "Plain": False}
    settings.TOOL_SEARCH_SEMANTIC = False  # lexical only: every tool while they fit
    assert await searched() == {"Auto": False, "Finder": True, "Plain": False}


@pytest.mark.django_db(transaction=True)
@pytest.mark.processes
async def test_search_follows_list_changes_and_auto_turns_on_past_the_budget(
    llm: ScriptedLLM, search_hub: Hub, agents_file: Callable[[str], Path], settings: Any
) -> None:
    agents_file("## Auto\n---\ndescription: search past the budget\n---\nHelp.\n")
    user = await get_user_model().objects.acreate(username="bob")
    conversation = (await Conversation.objects.acreate(owner=user)).pk
    settings.TOOL_SEARCH_TOOLS = 1000  # under the budget: every tool is offered, no search
    llm.script(Text("ok"))
    assert await turn(conversation, "hi", user.pk) == "complete"
    everything = offered(llm.requests[-1])
    assert SEARCH_TOOL not in everything and "tb_echo" in everything

    settings.TOOL_SEARCH_TOOLS = 5  # past it: deferred
    added = await search_hub.call_tool("tb_add_tool", {"name": "translate_to_klingon"})
    assert added.output == "added translate_to_klingon"
    await search_hub.wait_until(lambda: "tb_translate_to_klingon" in names(search_hub), 5)
    query = {"query": "translate this sentence to klingon"}
    llm.script(ToolCalls([Call(SEARCH_TOOL, query)]), Text("found"))
    assert await turn(conversation, "say it in klingon", user.pk) == "complete"
    assert offered(llm.requests[-2]) == [SEARCH_TOOL]
    answer = json.loads(llm.requests[-1]["messages"][-1]["content"])
    assert answer["tools"][0]["name"] == "tb_translate_to_klingon"

    await search_hub.call_tool("tb_remove_tool", {"name": "translate_to_klingon"})
    await search_hub.wait_until(lambda: "tb_translate_to_klingon" not in names(search_hub), 5)
    llm.script(ToolCalls([Call(SEARCH_TOOL, query)]), Text("gone"))
    assert await turn(conversation, "again", user.pk) == "complete"
    answer = json.loads(llm.requests[-1]["messages"][-1]["content"])
    assert "tb_translate_to_klingon" not in [tool["name"] for tool in answer["tools"]]


class CountingEncoder:
    """The real encoder, counting the texts it embeds."""

    def __init__(self) -> None:
        self.real = embedding.encoder()
        self.texts = 0

    def encode(self, texts: list[str]) -> Any:
        self.texts += len(texts)
        return self.real.encode(texts)


def test_embeddings_are_computed_once_and_kept_on_disk_for_the_next_process(
    settings: Any, tmp_path: Path
) -> None:
    settings.DATA_DIR = tmp_path
    counting = CountingEncoder()
    texts = ["read a file", "send an email", "read a file"]
    first = ranking.Embeddings()
    vectors = first.of(counting, texts)  # type: ignore[arg-type]
    assert vectors.shape == (3, embedding.DIMENSIONS) and counting.texts == 2  # (once per text)
    assert ranking.Embeddings.path().exists()
    restarted = ranking.Embeddings()
    again = restarted.of(counting, texts)  # type: ignore[arg-type]
    assert counting.texts == 2 and (again == vectors).all()  # read from disk, not embedded again
    ranking.Embeddings.path().write_bytes(b"not an npz file")
    broken = ranking.Embeddings()
    broken.of(counting, ["read a file"])  # type: ignore[arg-type]
    assert counting.texts == 3  # an unreadable file is ignored: embedded again


def test_an_index_being_built_is_waited_for_not_built_twice(monkeypatch: pytest.MonkeyPatch) -> None:
    builds = []
    real = ranking.Index.__post_init__
    release = threading.Event()

    def slow(self: ranking.Index) -> None:
        builds.append(1)
        release.wait(5)
        real(self)

    monkeypatch.setattr(ranking.Index, "__post_init__", slow)
    tools = [ranking.Candidate(key="x_unique", server="x", name="unique", description="a tool seen once")]
    results: list[ranking.Index] = []
    threads = [threading.Thread(target=lambda: results.append(ranking.index_for(tools))) for _ in range(2)]
    for thread in threads:
        thread.start()
    release.set()
    for thread in threads:
        thread.join(10)
    assert len(builds) == 1 and len(results) == 2 and results[0] is results[1]


@pytest.mark.django_db(transaction=True)
@pytest.mark.processes
async def test_the_servers_tools_are_indexed_when_they_change_not_at_the_first_search(
    search_hub: Hub, settings: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from boocode.tools.deferred import candidates, warmer
    from boocode.tools.registry import available_tools
    from boocode.tools.tool import NATIVE_SOURCE

    settings.DATA_DIR = tmp_path
    monkeypatch.setattr(ranking, "EMBEDDINGS", ranking.Embeddings())  # (nothing embedded yet)
    monkeypatch.setattr(ranking, "_indexes", ranking.OrderedDict())
    monkeypatch.setattr(warmer, "searched", False)
    # The toolbox's tools are few and small: no agent defers them whatever its window, so
    # nothing is embedded (nor the model loaded) until a turn of this process has deferred.
    warmer.changed()  # (what the hub calls after a change)
    assert warmer.running is not None
    await warmer.running
    assert not ranking.Embeddings.path().exists()
    # Past the settings' limits (any agent with toolSearch: auto defers them), or once a turn
    # has searched, a change embeds them at once.
    settings.TOOL_SEARCH_TOOLS = 1
    warmer.changed()
    assert warmer.running is not None
    await warmer.running
    assert ranking.Embeddings.path().exists()
    tools = [tool for tool in available_tools() if tool.source != NATIVE_SOURCE]
    counting = CountingEncoder()
    texts = [text for candidate in candidates(tools) for text in candidate.semantic_texts()]
    ranking.Embeddings().of(counting, texts)  # type: ignore[arg-type]  # (a new process reading the disk)
    assert counting.texts == 0  # every tool was embedded when the servers changed

    settings.TOOL_SEARCH_SEMANTIC = False
    warmer.running = None
    warmer.changed()
    assert warmer.running is None  # lexical only: nothing to prepare


def test_auto_defers_without_the_model_only_what_cannot_all_be_offered(settings: Any) -> None:
    from boocode.tools.deferred import search_on
    from boocode.tools.tool import MAX_MODEL_TOOLS, Tool

    async def run(arguments: dict[str, Any]) -> Any:
        raise AssertionError("never called")

    def tools(count: int) -> list[Tool]:
        return [
            Tool(
                name=f"s_t{n}", description="a tool", parameters={}, read_only=True, source="s", executor=run
            )
            for n in range(count)
        ]

    assert ranking.by_meaning(), "the test install carries the embedding model"
    assert search_on("auto", tools(45))  # past BOOCODE_TOOL_SEARCH_TOOLS (40): searched by meaning
    settings.TOOL_SEARCH_SEMANTIC = False  # lexical only: every tool while they fit
    assert not ranking.by_meaning()
    assert not search_on("auto", tools(45))
    assert not search_on("auto", tools(45), tokens=100_000)
    assert search_on("auto", tools(45), tokens=100)  # past their share of the model's window
    assert search_on("auto", tools(MAX_MODEL_TOOLS + 1))  # past what one request carries
    assert search_on("always", tools(1)) and not search_on("never", tools(MAX_MODEL_TOOLS + 1))


def test_a_servers_tool_named_like_the_search_tool_is_left_out() -> None:
    from boocode.tools.deferred import DeferredTools
    from boocode.tools.tool import Tool

    async def run(arguments: dict[str, Any]) -> Any:
        raise AssertionError("never called")

    clash = Tool(
        name=SEARCH_TOOL, description="a server's", parameters={}, read_only=True, source="tool", executor=run
    )
    other = Tool(name="tb_echo", description="echo", parameters={}, read_only=True, source="tb", executor=run)
    deferred = DeferredTools([clash, other], pinned=["*"], history=[], current=lambda: [clash, other])
    assert deferred.tools == [other] and [tool.source for tool in deferred.offered()] == ["tb", "native"]


def test_a_request_of_several_steps_is_ranked_for_its_first_step_too() -> None:
    assert (
        ranking.first_step("find the failing CI job, then open an issue about it")
        == "find the failing CI job"
    )
    assert ranking.first_step("read the file and summarise it") == "read the file"
    assert ranking.first_step("list pull requests") == ""
    index = catalog_index()
    first = top(index, "show me the tree of files in my project, then open an issue about it", limit=5)
    assert first[0] == "files/directoryTree" and "tracker/create_issue" in first

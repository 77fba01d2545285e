"""No frame size locks a conversation: a live Daphne, its 1 MiB websocket limit, real frames.

Daphne closes a socket it is asked to send a frame over 1 MiB with 1011, so a conversation whose
``history`` passes that could never be opened again. The conversation here holds what the probe
used, about 9 MB in all: two answers with one 49,000-character Python block each (highlighted
HTML is 12.8 times the code), 40 messages of 30,000 characters, one 600,000-character answer, a 6 MB
prompt inserted as a user message, and a tool call with 3 MB of structured content. It must
open (every frame under the limit), page back to its first message over HTTP, and give every
summarised object whole at its URL. A live turn streaming a 600,000-character answer in one
piece must keep its frames small and the socket open.
"""

from __future__ import annotations

import asyncio
import json
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from boocode.chat.wire.sizes import DELTA_CHARS
from tests.support.live import Live, live_server
from tests.support.llm import MODEL, ScriptedLLM, Text
from tests.support.tabs import Tab

pytestmark = pytest.mark.processes

DAPHNE_LIMIT = 1024 * 1024  # bytes of one websocket message (Daphne's default)

# Each message's text starts with its own marker, so a page can be checked against the rows.
_SEED = """
import json
from boocode.chat.models import Message, ToolCall
conversation = {conversation}
code = "\\n".join(f"def f{{i}}(x): return x * {{i}}  # {{'w' * 20}}" for i in range(1200))[:49000]
python = "```python\\n" + code + "\\n```"
rows = []
for i in range(2):
    rows.append(("user", f"m-code-q{{i}} show me code"))
    rows.append(("assistant", f"m-code-a{{i}}\\n" + python))
for i in range(40):
    rows.append(("user" if i % 2 == 0 else "assistant", f"m-long-{{i}} " + "lorem ipsum " * 2500))
rows.append(("user", "m-prompt " + "P" * 6_000_000))
rows.append(("assistant", "m-huge " + "answer text " * 50_000))
made = [Message.objects.create(conversation_id=conversation, role=role, content=text) for role, text in rows]
tool_host = Message.objects.create(conversation_id=conversation, role="assistant", content="m-tool calling")
ToolCall.objects.create(
    message=tool_host, call_id="c1", name="catalog_dump", arguments="{{}}", status="done",
    output="ok", structured={{"rows": ["r" * 1000] * 3000}},
)
Message.objects.create(conversation_id=conversation, role="user", content="m-last the newest message")
"""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Live, ScriptedLLM]]:
    with ScriptedLLM() as llm:
        env = {"BOOCODE_LLM_BASE_URL": llm.base_url, "BOOCODE_LLM_MODEL": MODEL}
        with live_server(
            tmp_path_factory.mktemp("frames"), {"big": {"sessions": 1}, "turns": {"sessions": 1}}, env
        ) as live:
            live.django(_SEED.format(conversation=live.accounts["big"]["conversation"]))
            yield live, llm


def _account(live: Live, name: str) -> dict[str, Any]:
    made = live.accounts[name]
    return {"cookie": made["sessions"][0], "conversation": made["conversation"]}


def _get(live: Live, account: dict[str, Any], path: str) -> Any:
    request = urllib.request.Request(
        f"http://127.0.0.1:{live.port}{path}",
        headers={"Cookie": f"sessionid={account['cookie']}", "Accept": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=60) as response:
        return json.load(response)


def _stored(live: Live, conversation: int) -> dict[int, str]:
    """Each stored message's marker (its first word), by id, read in another process."""
    out = Path(live.env["BOOCODE_DATA_DIR"]) / "markers.json"
    live.django(
        "import json\nfrom boocode.chat.models import Message\n"
        f"rows = Message.objects.filter(conversation_id={conversation}).values_list('id', 'content')\n"
        f"open({str(out)!r}, 'w').write(json.dumps({{i: c.split()[0] for i, c in rows}}))"
    )
    return {int(key): value for key, value in json.loads(out.read_text()).items()}


def test_a_nine_megabyte_conversation_opens_and_pages_back_to_its_first_message(
    server: tuple[Live, ScriptedLLM],
) -> None:
    live, _llm = server
    account = _account(live, "big")
    stored = _stored(live, account["conversation"])

    async def open_it() -> dict[str, Any]:
        async with Tab.live(live.port, account) as tab:
            history = tab.history
            # The socket is still open after the history: it answers a frame.
            await tab.send({"type": "cancel"})
            assert (await tab.next("error"))["code"] == "not_running"
            return history

    history = asyncio.run(open_it())
    assert len(json.dumps(history)) < DAPHNE_LIMIT // 2
    assert history["more"] is True
    assert history["messages"][-1]["content"].startswith("m-last")

    seen = {message["id"]: message for message in history["messages"]}
    before, more, pages = history["messages"][0]["id"], True, 0
    while more:
        page = _get(live, account, f"/c/{account['conversation']}/messages/?before={before}")
        assert page["messages"], "a page with more behind it holds at least one message"
        ids = [message["id"] for message in page["messages"]]
        assert ids == sorted(ids) and ids[-1] < before  # oldest first, all older than asked
        seen.update({message["id"]: message for message in page["messages"]})
        before, more, pages = ids[0], page["more"], pages + 1
    assert pages >= 1
    assert sorted(seen) == sorted(stored)  # every message, once, in pages back to the first
    assert {seen[i]["content"].split()[0] for i in seen} == set(stored.values())

    large = {i: message for i, message in seen.items() if message["large"]}
    markers = {stored[i] for i in large}
    assert markers == {"m-prompt", "m-huge", "m-code-a0", "m-code-a1"}, markers
    for message_id, summary in large.items():
        whole = _get(live, account, summary["body_url"])
        assert whole["large"] is False
        assert len(whole["content"].encode("utf-16-le")) // 2 == summary["content_length"]
        assert whole["content"].startswith(summary["content"])
        if stored[message_id].startswith("m-code-a"):
            assert whole["html"].count("<span") > 1000  # highlighted: why it is large

    # A message with a small text keeps its place; its 3 MB tool call is what is summarised.
    [tool_host] = [message for i, message in seen.items() if stored[i] == "m-tool"]
    [call] = tool_host["tool_calls"]
    assert call["large"] is True and call["structured"] is None
    assert _get(live, account, call["call_url"])["structured"] == {"rows": ["r" * 1000] * 3000}


def test_a_600000_character_answer_in_one_piece_streams_in_small_frames(
    server: tuple[Live, ScriptedLLM],
) -> None:
    live, llm = server
    account = _account(live, "turns")
    answer = "".join(f"{i:07d} " for i in range(75_000))  # 600,000 characters, one chunk
    llm.script(Text(answer, chunk_size=len(answer)))

    async def turn() -> tuple[list[dict[str, Any]], dict[str, Any]]:
        async with Tab.live(live.port, account) as tab:
            await tab.send({"type": "user_message", "text": "write a lot"})
            end = await tab.until_turn_end()
            assert end["status"] == "complete", end
            frames = list(tab.frames)
        async with Tab.live(live.port, account) as again:  # and the conversation opens again
            return frames, again.history

    frames, history = asyncio.run(turn())
    for frame in frames:
        assert len(json.dumps(frame)) < DAPHNE_LIMIT // 2, frame["type"]
    deltas = [frame for frame in frames if frame["type"] == "text_delta"]
    assert len(deltas) >= len(answer) // DELTA_CHARS
    assert all(len(frame["text"]) <= DELTA_CHARS for frame in deltas)
    offset = 0
    for frame in deltas:  # contiguous pieces that make up the whole answer
        assert frame["offset"] == offset
        offset += len(frame["text"])
    assert "".join(frame["text"] for frame in deltas) == answer
    [complete] = [frame["message"] for frame in frames if frame["type"] == "message_complete"]
    assert complete["large"] is True and complete["content_length"] == len(answer)
    assert _get(live, account, complete["body_url"])["content"] == answer
    assert history["messages"][-1]["id"] == complete["id"] and history["messages"][-1]["large"] is True

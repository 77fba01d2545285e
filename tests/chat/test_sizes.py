"""Frame sizes: every object a frame carries is bounded (boocode/chat/wire/sizes.py), and the last guard.

The live case (Daphne's 1 MiB limit, a 9 MB conversation, a 600,000-character answer) is
tests/security/test_frame_sizes.py; these are the rules one by one.
"""

from __future__ import annotations

import json

import pytest

from boocode.chat.models import Message
from boocode.chat.web import consumers
from boocode.chat.wire import sizes
from boocode.chat.wire.sizes import (
    APPROVAL_PREVIEW_CHARS,
    CALL_INLINE_BYTES,
    DELTA_CHARS,
    MESSAGE_INLINE_BYTES,
    SUMMARY_CHARS,
    bounded_approval,
    bounded_call,
    bounded_frame,
    bounded_message,
    delta_pieces,
    encoded_size,
)
from tests.support.accounts import conversation_of, login, new_conversation
from tests.support.tabs import Tab, logged_in_tab


def _message(content: str, **extra: object) -> dict[str, object]:
    return {
        "id": 1,
        "role": "assistant",
        "status": "complete",
        "content": content,
        "html": "",
        "tool_calls": [],
        "body_url": "/c/1/messages/1/",
        "large": False,
        **extra,
    }


def _call(structured: object = None, images: list[str] | None = None) -> dict[str, object]:
    return {
        "id": 7,
        "message_id": 1,
        "arguments": "{}",
        "output": "ok",
        "structured": structured,
        "images": images or [],
        "resources": [{"kind": "resource_link", "uri": "x://y"}],
        "call_url": "/c/1/calls/7/",
        "large": False,
    }


def test_a_small_message_goes_out_as_it_is() -> None:
    message = _message("hello")
    assert bounded_message(message) is message


def test_a_long_text_goes_out_as_a_summary_with_its_whole_length() -> None:
    text = "é" * (MESSAGE_INLINE_BYTES + 1) + "𝄞"  # one astral character: two UTF-16 units
    summary = bounded_message(_message(text, html="<p>x</p>"))
    assert summary["large"] is True
    assert summary["content"] == text[:SUMMARY_CHARS] and summary["html"] == ""
    assert summary["content_length"] == MESSAGE_INLINE_BYTES + 3
    assert encoded_size(summary) < 20_000


def test_text_that_escapes_to_more_than_the_budget_is_summarised() -> None:
    # 30,000 characters of non-ASCII text are 180,000 bytes once escaped: over the 128 KiB budget.
    text = "ü" * 30_000
    assert len(text) < MESSAGE_INLINE_BYTES < encoded_size(text)
    assert bounded_message(_message(text))["large"] is True
    assert bounded_message(_message("u" * 30_000))["large"] is False


def test_a_large_tool_call_loses_structured_content_images_and_links_not_its_previews() -> None:
    small = _call({"a": 1})
    assert bounded_call(small) is small
    big = bounded_call(_call({"rows": ["r" * 1000] * 200}, images=["data:image/png;base64,AAAA"]))
    assert big["large"] is True
    assert (big["structured"], big["images"], big["resources"]) == (None, [], [])
    assert (big["output"], big["arguments"], big["call_url"]) == ("ok", "{}", "/c/1/calls/7/")
    assert encoded_size(big) <= CALL_INLINE_BYTES


def test_a_message_with_many_large_calls_is_bounded_call_by_call_first() -> None:
    calls = [_call({"rows": ["r" * 1000] * 200}) for _ in range(3)]
    bounded = bounded_message(_message("short", tool_calls=calls))
    assert bounded["large"] is False
    assert all(call["large"] for call in bounded["tool_calls"])
    # ... and one whose calls are still too many for the budget is summarised whole.
    many = [_call({"k": "v" * 10_000}) for _ in range(20)]
    assert bounded_message(_message("short", tool_calls=many))["large"] is True


def test_an_approval_with_huge_arguments_shows_their_beginning() -> None:
    approval = {"id": "a1", "arguments": {"path": "/tmp/x", "content": "z" * 200_000}}
    bounded = bounded_approval(approval)
    whole = json.dumps(approval["arguments"], ensure_ascii=False, indent=2)
    assert bounded["arguments"] == whole[:APPROVAL_PREVIEW_CHARS]
    assert bounded["arguments_length"] == len(whole)
    small = {"id": "a2", "arguments": {"path": "/tmp/x"}}
    assert bounded_approval(small) is small


def test_frames_are_bounded_by_kind_and_others_pass_untouched() -> None:
    text = "x" * (MESSAGE_INLINE_BYTES + 10)
    for kind in ("message", "message_start", "message_complete"):
        assert bounded_frame({"type": kind, "message": _message(text)})["message"]["large"] is True
    big = _call({"rows": ["r" * 1000] * 200})
    for kind in ("tool_call", "tool_result"):
        assert bounded_frame({"type": kind, "call": big})["call"]["large"] is True
    other = {"type": "status", "servers": []}
    assert bounded_frame(other) is other


def test_streamed_text_is_cut_into_pieces_of_at_most_delta_chars() -> None:
    text = "a" * (2 * DELTA_CHARS + 5)
    pieces = delta_pieces(text)
    assert [len(piece) for piece in pieces] == [DELTA_CHARS, DELTA_CHARS, 5]
    assert "".join(pieces) == text
    assert delta_pieces("short") == ["short"]


@pytest.mark.django_db(transaction=True)
async def test_a_frame_over_the_limit_is_replaced_by_an_error_the_page_can_act_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Every frame is bounded where it is built; this is the guard behind that. With the limit
    # set below the size of a history frame, the history is what trips it.
    monkeypatch.setattr(consumers, "MAX_SENT_FRAME_BYTES", 300)
    assert sizes.MAX_SENT_FRAME_BYTES < 1024 * 1024  # the real limit is under Daphne's 1 MiB
    # Connected by hand, not logged_in_tab(): the first frame is this error, not the greeting.
    cookie = await login("alice")
    tab = Tab(await conversation_of("alice"), cookie)
    connected, _ = await tab.ws.connect(timeout=5)
    assert connected
    frame = await tab.ws.receive_json_from(timeout=5)
    assert (frame["type"], frame["code"]) == ("error", "frame_too_large")
    assert "too large" in frame["message"]
    await tab.ws.disconnect()


@pytest.mark.django_db(transaction=True)
async def test_a_history_over_the_limit_leaves_its_oldest_messages_to_the_older_pages(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The open forms and approvals a history carries can only travel in it; old messages can
    # be read page by page. With the limit below the whole history, the oldest ones give way.
    limit = 3000
    monkeypatch.setattr(consumers, "MAX_SENT_FRAME_BYTES", limit)
    conversation = await new_conversation("alice")
    for index in range(10):
        text = f"m{index} " + "w" * 200
        await Message.objects.acreate(conversation_id=conversation, role="user", content=text)
    tab = await logged_in_tab("alice", conversation)
    await tab.close()
    history = tab.history
    contents = [message["content"].split()[0] for message in history["messages"]]
    assert 1 <= len(contents) < 10 and contents == [f"m{index}" for index in range(10 - len(contents), 10)]
    assert history["more"] is True
    assert encoded_size(history) <= limit

"""A conversation of about 5 MB opens and scrolls on a phone and a laptop.

Its history is far over the websocket's 1 MiB: the page gets the newest messages in the
``history`` frame, reads the whole of each summarised (``large``) message over HTTP, and reads
older messages as the person scrolls up, until the first one (docs/protocol.md, *Sizes*).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest

from tests.support.browser import WIDTHS, Site, overflowing, screenshot

pytestmark = pytest.mark.browser

# Markers start each message (and end the long answer), so the page can be checked for them.
_SEED = """
from django.contrib.auth import get_user_model
from boocode.chat.models import Conversation, Message
owner = get_user_model().objects.get(username="admin")
conversation = Conversation.objects.create(owner=owner, title="A very long conversation")
code = "\\n".join(f"def f{i}(x): return x * {i}  # {'w' * 20}" for i in range(1200))[:49000]
rows = [("user", "m-first the oldest message")]
for i in range(2):
    rows.append(("user", f"m-code-q{i} show me code"))
    rows.append(("assistant", f"m-code-a{i}\\n```python\\n" + code + "\\n```"))
for i in range(40):
    rows.append(("user" if i % 2 == 0 else "assistant", f"m-long-{i} " + "lorem ipsum " * 2500))
rows.append(("user", "m-prompt " + "a pasted log line " * 175_000))
rows.append(("assistant", "m-huge " + "answer text " * 50_000 + "END-OF-HUGE"))
rows.append(("user", "m-last the newest message"))
Message.objects.bulk_create([Message(conversation=conversation, role=r, content=t) for r, t in rows])
result = conversation.pk
"""


def _scroll_up_until(page: Any, text: str, within: float = 90.0) -> None:
    """Scroll the messages to the top again and again (each time the page reads older ones)."""
    target = page.locator("article.message", has_text=text)
    deadline = time.monotonic() + within
    while not target.count():
        assert time.monotonic() < deadline, f"{text!r} never arrived while scrolling up"
        page.evaluate("document.getElementById('messages').scrollTop = 0")
        page.wait_for_timeout(200)  # a poll of the page's own state, with the deadline above


@pytest.mark.parametrize("width", WIDTHS)
def test_a_five_megabyte_conversation_opens_and_scrolls_to_its_first_message(
    open_page: Callable[..., Any], site: Site, width: int
) -> None:
    conversation = site.db(_SEED)
    size = site.db(
        "from django.db.models.functions import Length\nfrom django.db.models import Sum\n"
        "from boocode.chat.models import Message\n"
        f"result = Message.objects.filter(conversation_id={conversation})"
        ".aggregate(n=Sum(Length('content')))['n']"
    )
    assert size > 5_000_000
    page = open_page(width)
    page.goto(f"{site.url}/c/{conversation}/")

    page.locator("article.message", has_text="m-last").wait_for()
    # The 600,000-character answer came as a summary: its whole text is read and shown.
    huge = page.locator("article.message", has_text="m-huge")
    huge.locator(".message-body", has_text="END-OF-HUGE").wait_for(timeout=60_000)
    assert "large" not in (huge.get_attribute("class") or "")
    assert page.locator("#chat-error").is_hidden()
    # The page stays at the newest message while the whole answer above it arrives.
    assert page.locator("article.message", has_text="m-last").is_visible()
    assert (
        page.evaluate(
            "(() => { const m = document.getElementById('messages');"
            " return m.scrollHeight - m.scrollTop - m.clientHeight; })()"
        )
        < 80
    )
    screenshot(page, "large-conversation-newest")

    _scroll_up_until(page, "m-first")
    # The highlighted code answers (HTML over the budget) arrive whole too.
    for marker in ("m-code-a0", "m-code-a1"):
        answer = page.locator("article.message", has_text=marker)
        answer.locator(".message-body pre").first.wait_for(timeout=60_000)
    assert page.locator("article.message").count() == 1 + 4 + 40 + 3
    assert page.locator(".show-earlier").is_hidden()
    assert overflowing(page) == []
    screenshot(page, "large-conversation-first")

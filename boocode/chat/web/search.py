"""Searching a user's conversations: their titles and the text of their current messages.

On PostgreSQL the words are matched with full-text search (``to_tsvector('simple', ...)``,
each word as a prefix, all words required), using the GIN indexes of migration 0002 (the
expressions here are exactly the indexed ones). Elsewhere (SQLite) each word must appear in the
title or in one message, case-insensitively (``LIKE``). Only the user's own conversations are
searched, superseded messages and console/notice entries are left out, and the answer is plain
text: a snippet is the matching message's words around the first match, never HTML.
"""

from __future__ import annotations

import re
from typing import Any

from django.db import connection
from django.db.models import BooleanField, Max, Q, QuerySet
from django.db.models.expressions import RawSQL

from boocode.chat.models import Conversation, Message
from boocode.chat.wire.rendering import markdown_text

MAX_RESULTS = 50
SNIPPET_CHARS = 160
MAX_QUERY_CHARS = 200
MAX_WORDS = 8
_WORD = re.compile(r"\w+")


def query_words(query: str) -> list[str]:
    """The words searched for: letters, digits and underscores, at most :data:`MAX_WORDS`."""
    words: list[str] = []
    for word in _WORD.findall(query[:MAX_QUERY_CHARS].lower()):
        if word not in words:
            words.append(word)
    return words[:MAX_WORDS]


def _full_text() -> bool:
    return connection.vendor == "postgresql"


def _matches(column: str, table: str, words: list[str]) -> Q:
    """A condition on ``column`` that holds when every word is in it (full text or LIKE)."""
    if _full_text():
        tsquery = " & ".join(f"{word}:*" for word in words)
        expression = RawSQL(
            f"to_tsvector('simple'::regconfig, {table}.{column}) @@ to_tsquery('simple'::regconfig, %s)",
            [tsquery],
            output_field=BooleanField(),
        )
        return Q(expression)
    condition = Q()
    for word in words:
        condition &= Q(**{f"{column}__icontains": word})
    return condition


def _matching_messages(user_id: int, words: list[str]) -> QuerySet[Message]:
    return Message.objects.filter(
        _matches("content", "chat_message", words),
        conversation__owner_id=user_id,
        superseded_at__isnull=True,
        role__in=(Message.Role.USER, Message.Role.ASSISTANT),
    )


def search_conversations(user_id: int, query: str) -> list[dict[str, Any]]:
    """At most :data:`MAX_RESULTS` of the user's conversations matching ``query``, latest first.

    Each result: ``id``, ``title``, ``snippet`` (plain text, at most :data:`SNIPPET_CHARS`
    characters: the last matching message around its first match, or the title's match) and
    ``updated_at``.
    """
    words = query_words(query)
    if not words:
        return []
    hits = dict(
        _matching_messages(user_id, words)
        .values("conversation_id")
        .annotate(last=Max("id"))
        .values_list("conversation_id", "last")
    )
    conversations = list(
        Conversation.objects.filter(owner_id=user_id)
        .filter(_matches("title", "chat_conversation", words) | Q(pk__in=list(hits)))
        .order_by("-updated_at", "-id")[:MAX_RESULTS]
    )
    wanted = [hits[c.pk] for c in conversations if c.pk in hits]
    texts = dict(Message.objects.filter(pk__in=wanted).values_list("id", "content"))
    results = []
    for conversation in conversations:
        text = texts.get(hits.get(conversation.pk, 0), "")
        results.append(
            {
                "id": conversation.pk,
                "title": conversation.title,
                "snippet": snippet(text, words) if text else "",
                "updated_at": conversation.updated_at.isoformat(),
            }
        )
    return results


# A message's first characters are enough to find a snippet; a whole 100 KB answer is not parsed.
SNIPPET_SOURCE_CHARS = 20_000


def snippet(text: str, words: list[str], limit: int = SNIPPET_CHARS) -> str:
    """``text`` as plain words, at most ``limit`` characters around the first of ``words`` found."""
    plain = markdown_text(text[:SNIPPET_SOURCE_CHARS]) or " ".join(text[:SNIPPET_SOURCE_CHARS].split())
    lowered = plain.lower()
    found = [index for index in (lowered.find(word) for word in words) if index >= 0]
    start = min(found) if found else 0
    if len(plain) <= limit:
        return plain
    begin = max(0, min(start - limit // 3, len(plain) - limit))
    if begin:  # start at a word when one begins close by
        space = plain.find(" ", begin, min(start, begin + 20))
        begin = space + 1 if space >= 0 else begin
    prefix = "…" if begin else ""
    room = limit - len(prefix)
    body = plain[begin : begin + room]
    if begin + room < len(plain):
        body = body[: room - 1]
        space = body.rfind(" ")
        if space > room // 2:
            body = body[:space]
        body += "…"
    return prefix + body

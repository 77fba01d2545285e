"""Text the database cannot store: NUL characters and unpaired UTF-16 surrogates.

PostgreSQL refuses NUL in text columns; a lone surrogate (JSON ``"\\ud800"``) cannot be
encoded as UTF-8 at all, so SQLite and PostgreSQL both refuse it. What a user types is
checked at the door (:func:`text_problem`: a clear error, nothing stored); what a model or a
tool produces is stored with each such character replaced by U+FFFD (:func:`storable`),
which keeps the UTF-16 length, so streamed offsets stay valid.
"""

from __future__ import annotations

import re
from typing import Any

_SURROGATE = re.compile("[\ud800-\udfff]")
REPLACEMENT = "\ufffd"


def text_problem(text: str, what: str) -> str | None:
    """Why ``text`` (called ``what`` in the message) cannot be stored, or ``None`` if it can.

    Names the first offending character and its position (1-based, in characters).
    """
    nul = text.find("\x00")
    surrogate = None if text.isascii() else _SURROGATE.search(text)
    if surrogate is not None and (nul < 0 or surrogate.start() < nul):
        code = ord(surrogate.group())
        return (
            f"The {what} contains an unpaired surrogate (U+{code:04X}) at character "
            f"{surrogate.start() + 1}, which is not valid Unicode text; remove it and try again."
        )
    if nul >= 0:
        return (
            f"The {what} contains a NUL character (U+0000) at character {nul + 1}, "
            "which cannot be stored; remove it and try again."
        )
    return None


def storable(text: str) -> str:
    """``text`` with NUL characters and unpaired surrogates replaced by U+FFFD."""
    if "\x00" in text:
        text = text.replace("\x00", REPLACEMENT)
    if not text.isascii():  # O(1) in CPython: most text pays nothing more
        text = _SURROGATE.sub(REPLACEMENT, text)
    return text


def storable_json(value: Any) -> Any:
    """``value`` (decoded JSON) with :func:`storable` applied to every string in it."""
    if isinstance(value, str):
        return storable(value)
    if isinstance(value, list):
        return [storable_json(item) for item in value]
    if isinstance(value, dict):
        return {
            storable(key) if isinstance(key, str) else key: storable_json(item) for key, item in value.items()
        }
    return value

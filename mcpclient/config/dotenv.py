"""An entry's ``envFile``: the dotenv dialect read, without expanding anything."""

from __future__ import annotations

import re

ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def parse_env_file(text: str) -> dict[str, str]:
    """Parse dotenv ``KEY=VALUE`` lines strictly.

    Supported: blank lines, ``#`` comments, an ``export `` prefix, unquoted values (trimmed,
    `` #`` starts a comment), single quotes (literal) and double quotes (``\\n``, ``\\t``,
    ``\\"``, ``\\\\`` escapes; may span lines). Values are never interpolated. Raises
    ``ValueError("line N: ...")`` without repeating the line, which may hold a secret.
    """
    values: dict[str, str] = {}
    lines = text.splitlines()
    index = 0
    while index < len(lines):
        number = index + 1
        line = lines[index].strip()
        index += 1
        if not line or line.startswith("#"):
            continue
        if line.startswith("export ") or line.startswith("export\t"):
            line = line[len("export") :].lstrip()
        key, sep, rest = line.partition("=")
        key = key.rstrip()
        if not sep:
            raise ValueError(f"line {number}: expected KEY=VALUE")
        if not ENV_NAME_RE.match(key):
            raise ValueError(f"line {number}: invalid variable name")
        rest = rest.lstrip()
        if rest[:1] in ("'", '"'):
            quote = rest[0]
            body = rest[1:]
            # A double-quoted value may continue on the next lines until its closing quote.
            while True:
                end = _closing_quote(body, quote)
                if end is not None or quote == "'" or index >= len(lines):
                    break
                body += "\n" + lines[index]
                index += 1
            if end is None:
                raise ValueError(f"line {number}: unterminated {quote} quote")
            trailing = body[end + 1 :].strip()
            if trailing and not trailing.startswith("#"):
                raise ValueError(f"line {number}: unexpected text after the closing quote")
            value = body[:end]
            if quote == '"':
                value = _unescape_double_quoted(value)
        else:
            value = re.split(r"\s#", rest, maxsplit=1)[0].strip()
        values[key] = value
    return values


def _closing_quote(body: str, quote: str) -> int | None:
    position = 0
    while position < len(body):
        char = body[position]
        if char == "\\" and quote == '"':
            position += 2
            continue
        if char == quote:
            return position
        position += 1
    return None


_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", '"': '"', "\\": "\\", "$": "$"}


def _unescape_double_quoted(value: str) -> str:
    return re.sub(r"\\(.)", lambda m: _ESCAPES.get(m.group(1), "\\" + m.group(1)), value, flags=re.S)

"""A tool call's arguments, checked before anything runs: parsed from the model's JSON and validated
against the tool's JSON schema, so the model gets a precise, local error (``Invalid arguments for
view_file: at 'start_line': ...``) instead of a server round trip.

Validation never runs a regular expression of a tool's schema: jsonschema would use Python's
backtracking ``re`` on the loop, where ``"^(a+)+$"`` and a crafted argument stall every user.
``pattern`` and ``patternProperties`` are left to the server.
"""

from __future__ import annotations

import json
import logging
from functools import lru_cache
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError, ValidationError, relevance
from jsonschema.protocols import Validator
from jsonschema.validators import validator_for
from referencing.exceptions import Unresolvable

from boocode.tools.tool import Tool
from mcpclient.core.results import ToolResult

logger = logging.getLogger(__name__)

MAX_REPORTED_ERRORS = 5
# Keywords whose value is a map of names to subschemas: the names are data, never keywords.
_SCHEMA_MAPS = frozenset({"properties", "$defs", "definitions", "dependentSchemas"})
# Keywords whose value is data to compare, not a schema.
_DATA_KEYWORDS = frozenset({"enum", "const", "default", "examples"})


def _without_regexes(schema: Any) -> Any:
    """``schema`` without the keywords that would run its regular expressions.

    jsonschema evaluates ``pattern`` and ``patternProperties`` with Python's ``re``, which
    backtracks and holds the GIL; validation runs on the event loop, so a schema pattern such as
    ``"^(a+)+$"`` and a crafted argument would stall every user. The server checks them anyway.
    Where ``patternProperties`` goes, ``additionalProperties`` and ``unevaluatedProperties`` go
    too: names the patterns allowed must not be refused as additional.
    """
    if isinstance(schema, list):
        return [_without_regexes(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    result: dict[str, Any] = {}
    for key, value in schema.items():
        if key in _DATA_KEYWORDS:
            result[key] = value
        elif (key == "pattern" and isinstance(value, str)) or (
            key == "patternProperties" and isinstance(value, dict)
        ):
            continue
        elif key in _SCHEMA_MAPS and isinstance(value, dict):
            result[key] = {name: _without_regexes(sub) for name, sub in value.items()}
        else:
            result[key] = _without_regexes(value)
    if isinstance(schema.get("patternProperties"), dict):
        result.pop("additionalProperties", None)
        result.pop("unevaluatedProperties", None)
    return result


@lru_cache(maxsize=512)
def _validator(schema_json: str) -> Validator | None:
    """A compiled validator for a schema (by its canonical JSON), or None if the schema is broken."""
    schema = _without_regexes(json.loads(schema_json))
    cls = validator_for(schema, default=Draft202012Validator)
    try:
        cls.check_schema(schema)
    except SchemaError as exc:
        # The server will judge the arguments itself; a broken schema must not block the tool.
        logger.warning("tool schema is not valid JSON Schema, arguments are not checked: %s", exc.message)
        return None
    return cls(schema)


def _location(error: ValidationError) -> str:
    """``items[0].name`` style path of the failing value ('' at the top level)."""
    text = ""
    for part in error.absolute_path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


def _shorten(text: str, limit: int = 300) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def validate_arguments(tool: Tool, arguments: dict[str, Any]) -> str | None:
    """``None`` when ``arguments`` satisfy the tool's schema, else a message naming each field."""
    try:
        schema_json = json.dumps(tool.parameters, sort_keys=True)
    except (TypeError, ValueError):
        return None
    validator = _validator(schema_json)
    if validator is None:
        return None
    try:
        errors = sorted(validator.iter_errors(arguments), key=relevance, reverse=True)
    except Unresolvable as exc:
        # A $ref to another document (never fetched) or to nowhere: leave the check to the server.
        logger.warning("tool %s: unresolvable schema reference, arguments not checked: %s", tool.name, exc)
        return None
    if not errors:
        return None
    problems = []
    for error in errors[:MAX_REPORTED_ERRORS]:
        where = _location(error)
        message = _shorten(error.message)
        problems.append(f"at '{where}': {message}" if where else message)
    more = len(errors) - MAX_REPORTED_ERRORS
    if more > 0:
        problems.append(f"and {more} more")
    return f"Invalid arguments for {tool.name}: " + "; ".join(problems)


def parse_arguments(name: str, arguments: dict[str, Any] | str | None) -> dict[str, Any] | ToolResult:
    """The arguments as a dict, or an error result the model can act on."""
    if arguments is None:
        return {}
    if isinstance(arguments, str):
        if not arguments.strip():
            return {}  # some models send "" for a tool without parameters
        try:
            arguments = json.loads(arguments)
        except json.JSONDecodeError as exc:
            return ToolResult.error(
                f"Invalid arguments for {name}: not valid JSON ({exc.msg} at line {exc.lineno} "
                f"column {exc.colno}); send a JSON object"
            )
        except RecursionError:
            return ToolResult.error(
                f"Invalid arguments for {name}: JSON nested too deeply; send a flat object"
            )
    if not isinstance(arguments, dict):
        return ToolResult.error(
            f"Invalid arguments for {name}: expected a JSON object, got {type(arguments).__name__}"
        )
    try:  # a "\ud800" escape decodes to text no server can receive (and one crashed on it)
        json.dumps(arguments, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError as exc:
        return ToolResult.error(
            f"Invalid arguments for {name}: an unpaired surrogate (U+{ord(exc.object[exc.start]):04X}) "
            "is not valid Unicode text"
        )
    return arguments

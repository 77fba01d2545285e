"""The form of an elicitation: the requested schema read into fields, and answers checked against it.

MCP restricts an elicitation's ``requestedSchema`` to a flat object whose properties are
primitives (2025-11-25, ``PrimitiveSchemaDefinition``): a string (optionally with ``format``
``email`` / ``uri`` / ``date`` / ``date-time`` and length limits), a number or integer (with
``minimum`` / ``maximum``), a boolean, a single-select enum (``enum``, ``enum`` + legacy
``enumNames``, or ``oneOf`` of ``{"const", "title"}``) and a multi-select enum (an ``array``
whose ``items`` carry ``enum`` or ``anyOf`` of ``{"const", "title"}``). :func:`parse_form`
reads such a schema into :class:`Field` objects and refuses anything else with a
:class:`FormError` that says what is wrong.

:func:`complete_answer` is SEP-1034 plus validation: fields left empty get the schema's
``default`` (string, integer, number, enum, boolean and multi-select defaults alike), then
every value is checked against its field, so what goes back to the server always matches
what it asked for. :func:`defaults_answer` is the answer given when no person is there to ask.

Pure functions, no I/O: the hub's elicitation callback and the chat (which checks a
person's answer before accepting it) share them.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import math
import re
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import urlsplit

Kind = Literal["string", "integer", "number", "boolean", "enum", "multi"]

# A form is shown to a person and sent over the websocket: keep servers' forms human-sized.
MAX_FIELDS = 50
MAX_OPTIONS = 500
MAX_TEXT = 4000  # characters of a message, title or description shown
# Bytes of the form as a page is sent it (JSON, ASCII escapes): within a websocket frame's
# bounds (boocode's history frame carries the forms still open).
MAX_FORM_BYTES = 256 * 1024
STRING_FORMATS = frozenset({"email", "uri", "date", "date-time"})
_EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")


class FormError(ValueError):
    """The requested schema is not a flat object of primitives (``str()`` says why)."""


class AnswerError(ValueError):
    """An answer does not match the form; ``problems`` lists each mismatch for the person, and
    ``fields`` the ones that belong to a field of the form, by the field's name (the page shows
    each at its field)."""

    def __init__(self, problems: list[str], fields: dict[str, str] | None = None) -> None:
        super().__init__("; ".join(problems))
        self.problems = problems
        self.fields = fields or {}


@dataclass(frozen=True)
class Option:
    """One choice of an enum field: the value sent back and the label shown."""

    value: str
    title: str


@dataclass(frozen=True)
class Field:
    """One property of the requested schema, as the form shows it."""

    name: str
    kind: Kind
    title: str
    description: str = ""
    required: bool = False
    default: Any = None  # None: no (usable) default
    options: tuple[Option, ...] = ()
    format: str = ""
    min_length: int | None = None
    max_length: int | None = None
    minimum: float | None = None
    maximum: float | None = None
    min_items: int | None = None
    max_items: int | None = None

    def payload(self) -> dict[str, Any]:
        """The field for a client (docs/protocol.md, ``elicitation`` frame)."""
        return {
            "name": self.name,
            "type": self.kind,
            "title": self.title,
            "description": self.description,
            "required": self.required,
            "default": self.default,
            "options": [{"value": o.value, "title": o.title} for o in self.options],
            "format": self.format or None,
            "min_length": self.min_length,
            "max_length": self.max_length,
            "minimum": self.minimum,
            "maximum": self.maximum,
            "min_items": self.min_items,
            "max_items": self.max_items,
        }


@dataclass(frozen=True)
class Form:
    """What a server asks for: its message and the fields of the requested schema."""

    message: str
    fields: tuple[Field, ...] = field(default_factory=tuple)
    server: str = ""
    tool: str = ""


def _text(value: Any, limit: int = MAX_TEXT) -> str:
    if not isinstance(value, str):
        return ""
    return value if len(value) <= limit else value[: limit - 1] + "…"


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return value if math.isfinite(value) else None


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _countable(options: list[Any], name: str) -> None:
    """Refuse a list of options over :data:`MAX_OPTIONS` before anything is built from it."""
    if len(options) > MAX_OPTIONS:
        raise FormError(f'field "{name}": more than {MAX_OPTIONS} options')


def _titled_options(entries: Any, name: str) -> tuple[Option, ...]:
    """``oneOf`` / ``anyOf`` entries of ``{"const": str, "title": str}``."""
    if not isinstance(entries, list) or not entries:
        raise FormError(f'field "{name}": expected a non-empty list of {{"const", "title"}} options')
    _countable(entries, name)
    options = []
    for entry in entries:
        if not isinstance(entry, dict) or not isinstance(entry.get("const"), str):
            raise FormError(f'field "{name}": every option needs a string "const"')
        options.append(Option(entry["const"], _text(entry.get("title")) or entry["const"]))
    return tuple(options)


def _plain_options(values: Any, titles: Any, name: str) -> tuple[Option, ...]:
    """``enum`` values (strings), titled by the legacy ``enumNames`` when it fits."""
    if not isinstance(values, list) or not values:
        raise FormError(f'field "{name}": "enum" must be a non-empty list of strings')
    _countable(values, name)
    if not all(isinstance(v, str) for v in values):
        raise FormError(f'field "{name}": "enum" must be a non-empty list of strings')
    fits = isinstance(titles, list) and len(titles) == len(values) and all(isinstance(t, str) for t in titles)
    if not fits:
        titles = values
    return tuple(Option(value, _text(title) or value) for value, title in zip(values, titles, strict=True))


def _field(name: str, schema: Any, required: bool) -> Field:
    if not isinstance(schema, dict):
        raise FormError(f'field "{name}": expected a schema object')
    kind = schema.get("type")
    common: dict[str, Any] = {
        "name": name,
        "title": _text(schema.get("title")) or name,
        "description": _text(schema.get("description")),
        "required": required,
    }
    if kind == "string" and ("enum" in schema or "oneOf" in schema):
        if "oneOf" in schema:
            options = _titled_options(schema["oneOf"], name)
        else:
            options = _plain_options(schema["enum"], schema.get("enumNames"), name)
        made = Field(kind="enum", options=options, **common)
    elif kind == "string":
        fmt = schema.get("format")
        made = Field(
            kind="string",
            format=fmt if fmt in STRING_FORMATS else "",
            min_length=_count(schema.get("minLength")),
            max_length=_count(schema.get("maxLength")),
            **common,
        )
    elif kind in ("integer", "number"):
        minimum, maximum = _number(schema.get("minimum")), _number(schema.get("maximum"))
        made = Field(kind=kind, minimum=minimum, maximum=maximum, **common)
    elif kind == "boolean":
        made = Field(kind="boolean", **common)
    elif kind == "array":
        items = schema.get("items")
        if not isinstance(items, dict):
            raise FormError(f'field "{name}": an array is allowed only as a multi-select with "items"')
        if "anyOf" in items:
            options = _titled_options(items["anyOf"], name)
        elif items.get("type") == "string" and "enum" in items:
            options = _plain_options(items["enum"], None, name)
        else:
            raise FormError(f'field "{name}": an array is allowed only as a multi-select of string options')
        made = Field(
            kind="multi",
            options=options,
            min_items=_count(schema.get("minItems")),
            max_items=_count(schema.get("maxItems")),
            **common,
        )
    else:
        shown = kind if isinstance(kind, str) else type(kind).__name__ if kind is not None else "no type"
        raise FormError(
            f'field "{name}": type {shown!r} is not allowed (only string, number, integer, boolean, '
            "enums and multi-select enums, without nesting)"
        )
    default = schema.get("default")
    if default is not None and not _problem(made, _normalised(made, default)):
        made = dataclasses.replace(made, default=_normalised(made, default))
    return made


def parse_form(schema: Any, *, message: str = "", server: str = "", tool: str = "") -> Form:
    """The form a requested schema describes; :class:`FormError` when it is not a flat object of primitives.

    A ``default`` that does not fit its own field (a string default of an integer field, a value
    outside the enum) is left out: it is neither shown nor applied.
    """
    if not isinstance(schema, dict) or schema.get("type") != "object":
        raise FormError('the requested schema must be an object schema ("type": "object")')
    properties = schema.get("properties", {})
    if not isinstance(properties, dict):
        raise FormError('the requested schema\'s "properties" must be an object')
    if len(properties) > MAX_FIELDS:
        raise FormError(f"the requested schema has more than {MAX_FIELDS} fields")
    required = schema.get("required") or []
    if not isinstance(required, list) or not all(isinstance(name, str) for name in required):
        raise FormError('the requested schema\'s "required" must be a list of field names')
    unknown = [name for name in required if name not in properties]
    if unknown:
        raise FormError(f'"required" names fields the schema does not have: {", ".join(unknown)}')
    fields = tuple(_field(name, sub, name in required) for name, sub in properties.items())
    form = Form(message=_text(message), fields=fields, server=server, tool=tool)
    size = len(json.dumps([form.message, *(made.payload() for made in fields)]))
    if size > MAX_FORM_BYTES:
        raise FormError(f"the form would be {size:,} bytes to show, over the {MAX_FORM_BYTES:,} a page gets")
    return form


def _normalised(made: Field, value: Any) -> Any:
    """``value`` in the field's own type where that loses nothing (``3.0`` for an integer is ``3``)."""
    if made.kind == "integer" and isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def _empty(made: Field, value: Any) -> bool:
    """A value the person left empty: absent, null, an empty string, no choice of a multi-select."""
    if value is None:
        return True
    if made.kind in ("string", "enum", "integer", "number") and value == "":
        return True
    return made.kind == "multi" and value == []


def _problem(made: Field, value: Any) -> str | None:
    """Why ``value`` does not fit ``made`` (``None`` when it does)."""
    label = f'"{made.title}"'
    if made.kind in ("string", "enum"):
        if not isinstance(value, str):
            return f"{label} must be text"
        if made.kind == "enum":
            return None if value in {o.value for o in made.options} else f"{label} must be one of the choices"
        return _string_problem(made, value, label)
    if made.kind in ("integer", "number"):
        number = _number(value)
        if number is None:
            return f"{label} must be a number"
        if made.kind == "integer" and not isinstance(number, int):
            return f"{label} must be a whole number"
        if made.minimum is not None and number < made.minimum:
            return f"{label} must be at least {made.minimum:g}"
        if made.maximum is not None and number > made.maximum:
            return f"{label} must be at most {made.maximum:g}"
        return None
    if made.kind == "boolean":
        return None if isinstance(value, bool) else f"{label} must be true or false"
    # multi-select
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        return f"{label} must be a list of choices"
    allowed = {o.value for o in made.options}
    if any(item not in allowed for item in value) or len(set(value)) != len(value):
        return f"{label} must be distinct values among the choices"
    if made.min_items is not None and len(value) < made.min_items:
        return f"{label} needs at least {made.min_items} choices"
    if made.max_items is not None and len(value) > made.max_items:
        return f"{label} allows at most {made.max_items} choices"
    return None


def _string_problem(made: Field, value: str, label: str) -> str | None:
    if made.min_length is not None and len(value) < made.min_length:
        return f"{label} must be at least {made.min_length} characters"
    if made.max_length is not None and len(value) > made.max_length:
        return f"{label} must be at most {made.max_length} characters"
    if made.format == "email" and not _EMAIL.match(value):
        return f"{label} must be an email address"
    if made.format == "uri":
        parts = urlsplit(value)
        if not parts.scheme or not (parts.netloc or parts.path):
            return f"{label} must be a URI (with a scheme, e.g. https://)"
    if made.format == "date":
        try:
            dt.date.fromisoformat(value)
        except ValueError:
            return f"{label} must be a date (YYYY-MM-DD)"
    if made.format == "date-time":
        try:
            dt.datetime.fromisoformat(value)
        except ValueError:
            return f"{label} must be a date and time (YYYY-MM-DDTHH:MM:SS)"
    return None


def complete_answer(form: Form, content: Any) -> dict[str, Any]:
    """``content`` with the defaults applied to fields left empty, checked field by field (SEP-1034).

    Raises :class:`AnswerError` naming every problem: content that is not an object, a field
    the form does not have, a required field left empty without a default, a value that does
    not fit its field.
    """
    if content is None:
        content = {}
    if not isinstance(content, dict):
        raise AnswerError(["the answer must be an object of field values"])
    names = {f.name for f in form.fields}
    problems = [f'unknown field "{_text(str(name), 100)}"' for name in content if name not in names]
    fields: dict[str, str] = {}
    answer: dict[str, Any] = {}
    for made in form.fields:
        value = content.get(made.name)
        if _empty(made, value):
            if made.default is None:
                if made.required:
                    fields[made.name] = f'"{made.title}" is required'
                continue
            value = made.default
        value = _normalised(made, value)
        problem = _problem(made, value)
        if problem:
            fields[made.name] = problem
        else:
            answer[made.name] = value
    if problems or fields:
        raise AnswerError(problems + list(fields.values()), fields)
    return answer


def defaults_answer(form: Form) -> dict[str, Any] | None:
    """The answer made of the schema's defaults alone, or ``None`` when a required field has none."""
    try:
        return complete_answer(form, {})
    except AnswerError:
        return None

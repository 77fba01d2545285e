"""Reading an elicitation's requested schema into a form, and checking answers against it (SEP-1034)."""

from __future__ import annotations

from typing import Any

import pytest

from mcpclient.core.elicitation_form import (
    MAX_FORM_BYTES,
    AnswerError,
    FormError,
    complete_answer,
    defaults_answer,
    parse_form,
)

EVERY_KIND = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "title": "Name", "minLength": 2, "maxLength": 5},
        "email": {"type": "string", "format": "email"},
        "site": {"type": "string", "format": "uri"},
        "born": {"type": "string", "format": "date"},
        "age": {"type": "integer", "minimum": 0, "maximum": 150, "default": 30},
        "score": {"type": "number", "default": 95.5},
        "ok": {"type": "boolean", "default": True},
        "plain": {"type": "string", "enum": ["a", "b"], "default": "b"},
        "legacy": {"type": "string", "enum": ["x", "y"], "enumNames": ["Ex", "Why"]},
        "titled": {
            "type": "string",
            "oneOf": [{"const": "r", "title": "Red"}, {"const": "g", "title": "Green"}],
        },
        "many": {
            "type": "array",
            "items": {"type": "string", "enum": ["p", "q", "s"]},
            "maxItems": 2,
            "default": ["p"],
        },
        "many_titled": {"type": "array", "items": {"anyOf": [{"const": "1", "title": "One"}]}, "minItems": 1},
    },
    "required": ["name"],
}


def test_every_primitive_kind_becomes_a_field() -> None:
    form = parse_form(EVERY_KIND, message="Hello")
    kinds = {f.name: f.kind for f in form.fields}
    assert kinds == {
        "name": "string",
        "email": "string",
        "site": "string",
        "born": "string",
        "age": "integer",
        "score": "number",
        "ok": "boolean",
        "plain": "enum",
        "legacy": "enum",
        "titled": "enum",
        "many": "multi",
        "many_titled": "multi",
    }
    fields = {f.name: f for f in form.fields}
    assert [(o.value, o.title) for o in fields["legacy"].options] == [("x", "Ex"), ("y", "Why")]
    assert [(o.value, o.title) for o in fields["titled"].options] == [("r", "Red"), ("g", "Green")]
    assert fields["name"].required and not fields["age"].required
    assert (fields["email"].format, fields["age"].maximum, fields["many"].max_items) == ("email", 150, 2)
    assert fields["age"].payload()["default"] == 30


def test_defaults_fill_what_was_left_empty() -> None:
    form = parse_form(EVERY_KIND)
    answer = complete_answer(form, {"name": "Ada", "plain": "", "age": None})
    assert answer == {"name": "Ada", "age": 30, "score": 95.5, "ok": True, "plain": "b", "many": ["p"]}
    # A whole number typed as 41.0 is an integer.
    assert complete_answer(form, {"name": "Ada", "age": 41.0})["age"] == 41
    # Without a person, the defaults alone: here "name" is required and has none.
    assert defaults_answer(form) is None


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        ({}, '"Name" is required'),
        ({"name": "A"}, '"Name" must be at least 2 characters'),
        ({"name": "Adaaaa"}, '"Name" must be at most 5 characters'),
        ({"name": 5}, '"Name" must be text'),
        ({"name": "Ada", "email": "no-at"}, '"email" must be an email address'),
        ({"name": "Ada", "site": "example"}, '"site" must be a URI'),
        ({"name": "Ada", "born": "1815-13-10"}, '"born" must be a date'),
        ({"name": "Ada", "age": 1.5}, '"age" must be a whole number'),
        ({"name": "Ada", "age": True}, '"age" must be a number'),
        ({"name": "Ada", "age": 151}, '"age" must be at most 150'),
        ({"name": "Ada", "ok": "yes"}, '"ok" must be true or false'),
        ({"name": "Ada", "plain": "c"}, '"plain" must be one of the choices'),
        ({"name": "Ada", "many": ["p", "q", "s"]}, '"many" allows at most 2 choices'),
        ({"name": "Ada", "many": ["p", "z"]}, '"many" must be distinct values among the choices'),
        ({"name": "Ada", "intruder": 1}, 'unknown field "intruder"'),
    ],
)
def test_answers_that_do_not_fit_are_refused_with_the_reason(content: dict[str, Any], problem: str) -> None:
    with pytest.raises(AnswerError) as caught:
        complete_answer(parse_form(EVERY_KIND), content)
    assert any(problem in text for text in caught.value.problems), caught.value.problems


def test_an_answer_must_be_an_object() -> None:
    with pytest.raises(AnswerError, match="must be an object"):
        complete_answer(parse_form(EVERY_KIND), ["Ada"])


@pytest.mark.parametrize(
    ("schema", "reason"),
    [
        ({"type": "array"}, 'must be an object schema ("type": "object")'),
        ({"type": "object", "properties": {"a": {"type": "object"}}}, "type 'object' is not allowed"),
        ({"type": "object", "properties": {"a": {"$ref": "#/x"}}}, "type 'no type' is not allowed"),
        (
            {"type": "object", "properties": {"a": {"type": "array", "items": {"type": "number"}}}},
            "multi-select of string options",
        ),
        ({"type": "object", "properties": {"a": {"type": "string", "enum": [1, 2]}}}, "list of strings"),
        ({"type": "object", "properties": {"a": {"type": "string"}}, "required": ["b"]}, "does not have: b"),
    ],
)
def test_schemas_that_are_not_flat_objects_of_primitives_are_refused(
    schema: dict[str, Any], reason: str
) -> None:
    with pytest.raises(FormError) as caught:
        parse_form(schema)
    assert reason in str(caught.value)


def test_a_default_that_does_not_fit_its_field_is_left_out() -> None:
    form = parse_form(
        {
            "type": "object",
            "properties": {
                "age": {"type": "integer", "default": "thirty"},
                "color": {"type": "string", "enum": ["red"], "default": "blue"},
            },
        }
    )
    assert [f.default for f in form.fields] == [None, None]
    assert defaults_answer(form) == {}


def test_a_form_too_large_to_send_a_page_is_refused() -> None:
    # 50 fields of 100 options with 100-character titles: within the counts, 1 MB to show.
    title = "t" * 100
    options = [{"const": f"o{index}", "title": title} for index in range(100)]

    def schema(fields: int) -> dict[str, Any]:
        field = {"type": "string", "oneOf": options}
        return {"type": "object", "properties": {f"f{n}": field for n in range(fields)}}

    with pytest.raises(FormError, match=f"over the {MAX_FORM_BYTES:,} a page gets"):
        parse_form(schema(50))
    assert len(parse_form(schema(5)).fields) == 5

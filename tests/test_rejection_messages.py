"""A rejected call says where and why: the JSON Pointer of the first value
that fails, the keyword and its bound, the value itself, and the tool the
text names, so that a model asked to retry (or a person) knows what to fix."""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pytest
from corpus import jsts_groups, maskbench_groups

from constrained import ToolCallStreamParser, parse_tool_calls
from constrained.errors import SchemaError
from constrained.frames.accepts import explain, frame_accepts
from constrained.frames.normalize import normalize_schema
from constrained.schema.validation import explain_error, json_pointer, validator_for

SKU = r"^[A-Z]{3}-\d{4}$"
ORDER = {"name": "create_order", "parameters": {"type": "object", "properties": {
    "items": {"type": "array", "items": {"type": "object", "properties": {
        "sku": {"type": "string", "pattern": SKU}, "qty": {"type": "integer"}}, "required": ["sku", "qty"]}},
    "priority": {"type": "string", "enum": ["express", "standard"]}}, "required": ["items"]}}
MEETING = {"name": "ScheduleMeeting", "parameters": {"type": "object", "properties": {
    "title": {"type": "string"}, "duration_minutes": {"type": "integer", "minimum": 15}},
    "required": ["title", "duration_minutes"]}}
MOVE = {"name": "move", "parameters": {"type": "object", "properties": {
    "speed": {"type": "number", "maximum": 2.5}}, "required": ["speed"]}}
TOOLS = [ORDER, MEETING, MOVE]
DIALECTS = ("qwen3_coder", "hermes", "gemma4")


def written(dialect: str, name: str, arguments: dict[str, Any]) -> str:
    """The call as each dialect's template writes it, by hand: the renderer
    refuses calls that do not validate."""
    if dialect == "hermes":
        return f"<tool_call>\n{json.dumps({'name': name, 'arguments': arguments})}\n</tool_call>"
    if dialect == "qwen3_coder":
        body = "".join(
            f"<parameter={key}>\n{value if isinstance(value, str) else json.dumps(value)}\n</parameter>\n"
            for key, value in arguments.items()
        )
        return f"<tool_call>\n<function={name}>\n{body}</function>\n</tool_call>"
    return f"<|tool_call>call:{name}{gemma(arguments)}<tool_call|>"


def gemma(value: Any) -> str:
    if isinstance(value, str):
        return f'<|"|>{value}<|"|>'
    if isinstance(value, list):
        return "[" + ",".join(map(gemma, value)) + "]"
    if isinstance(value, dict):
        return "{" + ",".join(f"{key}:{gemma(item)}" for key, item in value.items()) + "}"
    return json.dumps(value)


CASES = [
    ("create_order", {"items": [{"sku": "ABC-1234", "qty": "two"}]},
     '/items/0/qty: "two" is not an integer', "/items/0/qty", "type"),
    ("create_order", {"items": [{"sku": "AB-1", "qty": 2}]},
     "/items/0/sku: \"AB-1\" does not match the pattern '^[A-Z]{3}-\\d{4}$'", "/items/0/sku", "pattern"),
    ("ScheduleMeeting", {"title": "Sync", "duration_minutes": 10},
     "/duration_minutes: 10 is less than the minimum 15", "/duration_minutes", "minimum"),
    ("create_order", {"items": [{"sku": "ABC-1234", "qty": 2}], "priority": "expres"},
     '/priority: "expres" is not one of "express", "standard"', "/priority", "enum"),
    ("move", {"speed": 5}, "/speed: 5 is greater than the maximum 2.5", "/speed", "maximum"),
]


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize(("name", "arguments", "reason", "pointer", "keyword"), CASES, ids=[c[2] for c in CASES])
def test_a_value_that_fails_is_named_by_pointer_keyword_and_bound(dialect, name, arguments, reason, pointer, keyword):
    text = written(dialect, name, arguments)
    result = parse_tool_calls(text, TOOLS, dialect)
    assert result.tool_calls == [] and result.content == text
    (error,) = result.errors
    assert (error.reason, error.tool, error.pointer, error.keyword) == (reason, name, pointer, keyword)
    assert error.to_json()["pointer"] == pointer and error.to_json()["keyword"] == keyword


@pytest.mark.parametrize(
    ("dialect", "text", "reason"),
    [
        ("gemma4", '<|tool_call>call:create_order{items:[{sku:<|"|>ABC-1234<|"|>,qty:2}',
         "the call is not closed with '<tool_call|>'"),
        ("qwen3_coder", '<tool_call>\n<function=create_order>\n<parameter=items>\n[{"sku": "ABC-1234"',
         "the call is not closed with '</tool_call>'"),
        ("hermes", '<tool_call>\n{"name": "create_order", "arguments": {"items": [{"sku": "ABC',
         "the call is not closed with '</tool_call>', and is incomplete without it: the call is not valid JSON: "
         "Unterminated string starting at: line 2 column 58 (char 58)"),
        ("hermes", '<tool_call>\n{"name": "create_order", "arguments": {"items": [}}\n</tool_call>',
         "the call is not valid JSON: Expecting value: line 2 column 50 (char 50)"),
    ],
)
def test_a_broken_call_carries_the_tool_its_text_names(dialect, text, reason):
    (error,) = parse_tool_calls(text, TOOLS, dialect).errors
    assert (error.reason, error.tool, error.pointer, error.keyword) == (reason, "create_order", None, None)


def test_a_call_marker_in_fenced_code_names_no_tool():
    text = "```\n" + written("hermes", "create_order", {"items": []}) + "\n```"
    (error,) = parse_tool_calls(text, TOOLS, "hermes").errors
    assert error.tool is None


@pytest.mark.parametrize("dialect", DIALECTS)
def test_the_stream_reports_the_same_reason(dialect):
    text = written(dialect, "create_order", {"items": [{"sku": "ABC-1234", "qty": "two"}]})
    stream = ToolCallStreamParser(TOOLS, dialect)
    deltas = [delta for i in range(0, len(text), 5) for delta in stream.feed(text[i : i + 5])] + stream.close()
    reported = [error["reason"] for delta in deltas for error in delta.get("tool_call_errors", [])]
    assert reported == ['/items/0/qty: "two" is not an integer']
    (error,) = stream.result.errors
    assert (error.reason, error.tool, error.pointer) == (reported[0], "create_order", "/items/0/qty")


def tool(parameter: dict[str, Any]) -> dict[str, Any]:
    return {"name": "f", "parameters": {"type": "object", "properties": {"v": parameter}}}


@pytest.mark.parametrize(
    ("parameter", "value", "reason"),
    [
        ({"type": ["integer", "null"], "minimum": 10}, 5, "/v: 5 is less than the minimum 10"),
        ({"type": ["integer", "null"], "minimum": 10}, "x", '/v: "x" is not an integer or null'),
        ({"type": "number", "exclusiveMinimum": 0}, 0, "/v: 0 is not greater than the exclusive minimum 0"),
        ({"type": "number", "exclusiveMaximum": 1}, 1, "/v: 1 is not less than the exclusive maximum 1"),
        ({"type": "number", "multipleOf": 0.5}, 0.3, "/v: 0.3 is not a multiple of 0.5"),
        ({"type": "string", "minLength": 3}, "ab", '/v: "ab" is shorter than the minimum length 3'),
        ({"type": "string", "maxLength": 3}, "abcd", '/v: "abcd" is longer than the maximum length 3'),
        ({"type": "string", "format": "date"}, "2024-13-01", "/v: \"2024-13-01\" does not match the format 'date'"),
        ({"type": "array", "minItems": 2}, [1], "/v: [1] has fewer than the minimum 2 items"),
        ({"type": "array", "maxItems": 1}, [1, 2], "/v: [1, 2] has more than the maximum 1 items"),
        ({"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]}, {},
         '/v: {} lacks the required property "x"'),
        ({"type": "object", "properties": {"x": {"type": "integer"}}}, {"x": 1, "y": 2},
         '/v: {"x": 1, "y": 2} has the property "y", which is not allowed (additionalProperties)'),
        ({"type": "object", "additionalProperties": {"type": "integer"}}, {"a/b~c": "x"},
         '/v/a~1b~0c: "x" is not an integer'),
        ({"const": "on"}, "off", '/v: "off" is not "on"'),
        ({"enum": [f"value-{i}" for i in range(40)]}, "nope",
         '/v: "nope" is not one of "value-0", "value-1", "value-2", "value-3", "value-4", "value-5", ... (40 in all)'),
        ({"type": "string", "maxLength": 3}, "x" * 200, '/v: "' + "x" * 76 + '... is longer than the maximum length 3'),
        # a union: the option the discriminator and the value's type leave, else that none takes it
        ({"anyOf": [
            {"type": "object", "properties": {"k": {"const": "a"}, "n": {"type": "integer"}}, "required": ["k"]},
            {"type": "object", "properties": {"k": {"const": "b"}, "n": {"type": "string"}}, "required": ["k"]}]},
         {"k": "a", "n": "s"}, '/v/n: "s" is not an integer'),
        ({"anyOf": [{"type": "string", "pattern": "^a"}, {"type": "string", "pattern": "^b"}]}, "c",
         '/v: "c" matches none of the 2 options'),
        # relaxed by the grammar, said by the validation of the full schema
        ({"type": "array", "uniqueItems": True}, [1, 1], "/v: [1, 1] has repeated items (uniqueItems)"),
        ({"type": "string", "pattern": "^(?=z)"}, "a", "/v: \"a\" does not match the pattern '^(?=z)'"),
        ({"type": "object", "dependentRequired": {"a": ["b"]}}, {"a": 1}, "/v: 'b' is a dependency of 'a'"),
    ],
    ids=repr,
)
def test_each_keyword_is_said_with_its_bound(parameter, value, reason):
    text = written("hermes", "f", {"v": value})
    (error,) = parse_tool_calls(text, [tool(parameter)], "hermes").errors
    assert error.reason == reason
    assert error.pointer == reason.split(":")[0] and "\n" not in error.reason


def test_pointers_escape_tilde_and_slash():
    assert json_pointer(["a/b", "c~d", 0]) == "/a~1b/c~0d/0"
    assert json_pointer([]) == ""


def test_a_raw_text_that_does_not_read_is_said_as_a_string():
    text = written("qwen3_coder", "ScheduleMeeting", {"title": "Sync", "duration_minutes": "ten"})
    (error,) = parse_tool_calls(text, TOOLS, "qwen3_coder").errors
    assert error.reason == '/duration_minutes: "ten" is not an integer'


def shown_pointer(pointer: str) -> str:
    return pointer.replace("\n", "\\n").replace("\t", "\\t") or "/"


def corpus_cases():
    for group in jsts_groups(optional=True) + maskbench_groups()[::4]:
        try:
            normalized = normalize_schema(group.schema, strict=False)
        except (SchemaError, RecursionError):
            continue
        yield group, normalized


def test_the_explanation_agrees_with_the_frames_verdict():
    """Whatever the frames refuse, the explanation names a failure (and
    nothing where they accept): the message comes from the same checks."""
    checked = 0
    for group, normalized in corpus_cases():
        for case in group.tests:
            accepted = frame_accepts(normalized.root, case.data, normalized.definitions)
            failure = explain(normalized.root, case.data, normalized.definitions)
            assert (failure is None) == accepted, (group.source, group.description, case.description)
            if failure is not None:
                assert failure.message.startswith(f"{shown_pointer(failure.pointer)}: ") and "\n" not in failure.message
            checked += 1
    assert checked > 1000


def test_every_validation_error_is_said_in_one_line_at_its_pointer():
    checked = 0
    for group in jsts_groups(optional=True):
        if not isinstance(group.schema, dict):
            continue
        for case in group.tests:
            try:
                error = jsonschema.exceptions.best_match(validator_for(group.schema).iter_errors(case.data))
            except Exception:  # a reference or pattern the validator cannot follow: said elsewhere
                continue
            if error is None:
                continue
            failure = explain_error(error)
            assert failure.pointer == json_pointer(error.absolute_path)
            assert failure.message.startswith(f"{shown_pointer(failure.pointer)}: ") and "\n" not in failure.message
            assert len(failure.message) < 400
            checked += 1
    assert checked > 500

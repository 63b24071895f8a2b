"""Example arguments (``constrained.frames.examples``): the plainest values a
tool's parameters accept, checked with ``jsonschema`` against the schema
as given, or none when a required value cannot be written."""

from __future__ import annotations

import jsonschema
import pytest
from corpus import bfcl_functions, mcp_calls

from constrained.frames.examples import example_arguments, warm_up_arguments
from constrained.frames.toolset import normalize_tool_set, normalize_tools


def tool(parameters: dict) -> dict:
    return {"type": "function", "function": {"name": "t", "parameters": parameters}}


def example(parameters: dict) -> dict | None:
    return example_arguments(normalize_tools([tool(parameters)])[0])


@pytest.mark.parametrize(
    ("parameters", "expected"),
    [
        ({"type": "object", "properties": {"n": {"type": "integer", "minimum": 5, "multipleOf": 3}}}, {"n": 6}),
        ({"type": "object", "properties": {"x": {"type": "number", "maximum": -2}}}, {"x": -2}),
        ({"type": "object", "properties": {"x": {"type": "number", "exclusiveMinimum": 0.5}}}, {"x": 1.5}),
        ({"type": "object", "properties": {"d": {"type": "string", "format": "date"}}}, {"d": "2024-05-01"}),
        ({"type": "object", "properties": {"s": {"type": "string", "minLength": 3}}}, {"s": "xxx"}),
        ({"type": "object", "properties": {"e": {"enum": ["b", "a"]}, "f": {"type": "boolean"}}}, {"e": "b", "f": True}),
        ({"type": "object", "properties": {"l": {"type": "array", "items": {"type": "integer"}, "minItems": 2}}},
         {"l": [1, 1]}),
        ({"type": "object", "properties": {"u": {"anyOf": [{"type": "string", "pattern": "^a+$"}, {"type": "null"}]}}},
         {"u": None}),
    ],
)
def test_each_value_is_the_plainest_the_frame_accepts(parameters, expected):
    assert example(parameters) == expected
    jsonschema.validate(expected, parameters)


def test_an_optional_key_without_an_example_is_left_out_a_required_one_gives_none():
    pattern = {"type": "string", "pattern": "^[a-z]{3}$"}
    assert example({"type": "object", "properties": {"p": pattern, "q": {"type": "integer"}}}) == {"q": 1}
    assert example({"type": "object", "properties": {"p": pattern}, "required": ["p"]}) is None


def test_mcp_corpus_examples_are_valid_for_their_schemas():
    """Every example written for an MCP corpus tool validates against the
    tool's schema as given, and most tools have one."""
    tools = {tool.name: tool for call in mcp_calls() for tool in call.tools}
    written = 0
    for normalized in normalize_tools(list(tools.values()), strict=False):
        arguments = example_arguments(normalized)
        if arguments is not None:
            written += 1
            jsonschema.validate(arguments, normalized.parameters)
    assert written > 0.8 * len(tools), (written, len(tools))


def test_most_bfcl_tools_have_an_example():
    by_name = {function["name"]: function for function in bfcl_functions()[::5]}
    tools = normalize_tool_set(list(by_name.values()), strict=False).tools
    assert sum(example_arguments(tool) is not None for tool in tools) > 0.9 * len(tools)


def test_the_warm_up_s_other_examples_write_fractions_and_negative_numbers_where_any_number_goes():
    """The other examples the warm-up writes: 0.5 where any number goes (its
    text reaches a leading zero, a point and a decimal) and 0 where any
    integer goes (a leading zero, after which no digit may come), then -0.5
    and -1 (a minus); numbers under bounds or a multipleOf keep their
    plainest value."""
    parameters = {"type": "object", "properties": {
        "x": {"type": "number"}, "n": {"type": "integer"}, "b": {"type": "number", "minimum": 2},
        "m": {"type": "integer", "multipleOf": 3}, "t": {"type": "integer", "maximum": 0},
        "l": {"type": "array", "items": {"type": "number"}, "minItems": 1}}}
    normalized = normalize_tools([tool(parameters)])[0]
    fractions = example_arguments(normalized, "fractions")
    negative = example_arguments(normalized, "negative")
    assert fractions == {"x": 0.5, "n": 0, "b": 2, "m": 3, "t": 0, "l": [0.5, 0.5]}
    assert negative == {"x": -0.5, "n": -1, "b": 2, "m": 3, "t": 0, "l": [-0.5, -0.5]}
    for arguments in (fractions, negative):
        jsonschema.validate(arguments, parameters)


def test_an_array_and_a_map_have_two_members_where_they_may():
    """So the warm-up walks the masks after a comma."""
    parameters = {"type": "object", "properties": {
        "l": {"type": "array", "items": {"type": "string"}},
        "one": {"type": "array", "items": {"type": "string"}, "maxItems": 1},
        "m": {"type": "object", "additionalProperties": {"type": "integer"}},
        "small": {"type": "object", "additionalProperties": {"type": "integer"}, "maxProperties": 1}}}
    assert example(parameters) == {"l": ["x", "x"], "one": ["x"], "m": {"x": 1, "y": 1}, "small": {}}
    jsonschema.validate(example(parameters), parameters)


def test_the_warm_up_s_calls_drop_each_optional_key_and_write_each_enum_value():
    """The warm-up's calls of a tool: the example, then with fractions and
    negative numbers where any number goes, then without each optional key
    in turn and with each optional key alone, then with every enum at each
    other value (up to 8), nested ones too, with booleans false, values of
    any type of other types along the way, then with arrays empty and of
    one item; each valid, none twice."""
    parameters = {"type": "object", "properties": {
        "mode": {"enum": ["fast", "slow", "safe", "sure"]}, "n": {"type": "integer"}, "note": {"type": "string"},
        "tags": {"type": "array", "items": {"enum": ["a", "b"]}}, "on": {"type": "boolean"}, "any": {}},
        "required": ["mode"]}
    calls = warm_up_arguments(normalize_tools([tool(parameters)])[0])
    plain = {"mode": "fast", "n": 1, "note": "x", "tags": ["a", "a"], "on": True, "any": "x"}
    optional = ("n", "note", "tags", "on", "any")
    assert calls == [
        plain,
        {**plain, "n": 0},
        {**plain, "n": -1},
        *({k: v for k, v in plain.items() if k != key} for key in optional),
        *({"mode": "fast", key: plain[key]} for key in optional),
        {**plain, "mode": "slow", "tags": ["b", "b"], "on": False, "any": ["x", "x"]},
        {**plain, "mode": "safe", "any": 1},
        {**plain, "mode": "sure", "any": {"x": "x"}},
        {**plain, "tags": []},
        {**plain, "tags": ["a"]},
    ]
    for arguments in calls:
        jsonschema.validate(arguments, parameters)
    many = {"type": "object", "properties": {"k": {"enum": [f"v{i}" for i in range(20)]}}, "required": ["k"]}
    assert len(warm_up_arguments(normalize_tools([tool(many)])[0])) == 8

"""Declared keys holding ':' in gemma4 and functiongemma:
written as literals by the constraint, read back by the schema-aware parser
(the longest declared key followed by ':'), streamed, and still refused
when they hold what no key can."""

from __future__ import annotations

import json
from typing import Any

import pytest

import constrained
from constrained import CompileError, ToolCallStreamParser, compile_tools, parse_tool_calls, render_tool_calls
from constrained.dialects import get_dialect
from constrained.dialects.representable import unrepresentable
from constrained.frames.toolset import normalize_tool

GEMMAS = ["gemma4", "functiongemma"]


def _tool(name: str, properties: dict[str, Any], required: list[str], **extra: Any) -> dict[str, Any]:
    parameters = {"type": "object", "properties": properties, "required": required, **extra}
    return {"type": "function", "function": {"name": name, "parameters": parameters}}


VEHICLE = {
    "type": "object",
    "properties": {"nc:Make": {"type": "string"}, "a": {"type": "integer"}, "a:b": {"type": "integer"}},
}
CARD = _tool(
    "card",
    {
        "vcard:fn": {"type": "string"},
        "xmpDM:duration": {"type": "number"},
        "nc:Vehicle": VEHICLE,
        "a": {"type": "string"},
        "a:b": {"type": "string"},
        "tiff:ImageLength": {"type": "integer"},
    },
    ["vcard:fn"],
)
# Keys a value could start: `a` beside `a:1` and `a:true`, keys ending or starting with ':'.
PREFIXES = _tool(
    "prefixes",
    {
        "a": {"anyOf": [{"type": "integer"}, {"type": "boolean"}]},
        "a:1": {"type": "integer"},
        "a:true": {"type": "boolean"},
        ":": {"type": "integer"},
        "::": {"type": "integer"},
        "a:": {"type": "integer"},
        ":a": {"type": "integer"},
    },
    [],
)
# Nested through a $ref, a union, an array and an enum, in an open object.
NESTED = _tool(
    "nested",
    {
        "ietf-dots-telemetry:telemetry": {"$ref": "#/$defs/telemetry"},
        "items": {"type": "array", "items": {"$ref": "#/$defs/telemetry"}},
        "either": {
            "anyOf": [
                {"type": "object", "properties": {"x:y": {"type": "string"}}, "required": ["x:y"], "additionalProperties": False},
                {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"], "additionalProperties": False},
            ]
        },
        "fixed": {"enum": [{"dc:title": "t", "dc:creator": {"foaf:name": "n"}}, "none"]},
        "free": {},
    },
    [],
    additionalProperties={"type": "string"},
    **{"$defs": {"telemetry": {"type": "object", "properties": {"ietf:low": {"type": "integer"}, "ietf": {"type": "string"}}}}},
)
TOOLS = [CARD, PREFIXES, NESTED]

CALLS = [
    ("card", {"vcard:fn": "Jo: {x}, <y>", "xmpDM:duration": 1.5, "tiff:ImageLength": 480}),
    ("card", {"vcard:fn": "a", "nc:Vehicle": {"nc:Make": "VW", "a": 1, "a:b": 2}, "a": "1", "a:b": "2"}),
    ("card", {"vcard:fn": "", "a:b": "a:b:"}),
    ("card", {"vcard:fn": "only a", "a": "x"}),
    ("prefixes", {"a": 1, "a:1": 1}),
    ("prefixes", {"a": 12, "a:1": 3}),
    ("prefixes", {"a": True, "a:true": False}),
    ("prefixes", {"a:true": True}),
    ("prefixes", {":": 1, "::": 2, "a:": 3, ":a": 4, "a": 5}),
    ("nested", {"ietf-dots-telemetry:telemetry": {"ietf:low": 3, "ietf": "s"}, "plain": "p"}),
    ("nested", {"items": [{"ietf:low": 1}, {"ietf": "x"}, {}], "either": {"x:y": "v"}}),
    ("nested", {"either": {"x": 2}, "fixed": {"dc:title": "t", "dc:creator": {"foaf:name": "n"}}}),
    ("nested", {"fixed": "none", "free": {"k": [1, {"v": None}]}}),
]


@pytest.fixture(scope="module", params=GEMMAS)
def compiled(request):
    return request.param, compile_tools(TOOLS, request.param, tokenizer=request.param, tool_choice="required")


def _text(dialect: str, name: str, arguments: dict[str, Any]) -> str:
    return render_tool_calls([{"name": name, "arguments": arguments}], TOOLS, dialect=dialect)


def _arguments(result: constrained.ParseResult) -> list[tuple[str, dict[str, Any]]]:
    return [(c["function"]["name"], json.loads(c["function"]["arguments"])) for c in result.tool_calls]


@pytest.mark.parametrize("name, arguments", CALLS)
def test_declared_colon_keys_are_accepted_and_read_back(compiled, name, arguments):
    dialect, ct = compiled
    text = _text(dialect, name, arguments)
    assert ct.check(text).accepted, text
    result = parse_tool_calls(text, TOOLS, dialect)
    assert result.errors == [] and result.content == ""
    assert _arguments(result) == [(name, arguments)]


def test_calls_in_a_row_read_back(compiled):
    dialect, ct = compiled
    text = render_tool_calls([{"name": n, "arguments": a} for n, a in CALLS], TOOLS, dialect=dialect)
    assert ct.check(text).accepted
    assert _arguments(parse_tool_calls(text, TOOLS, dialect)) == CALLS


def test_the_call_of_the_issue_is_accepted():
    tools = [_tool("t", {"vcard:fn": {"type": "string"}}, ["vcard:fn"])]
    ct = compile_tools(tools, "gemma4", tokenizer="gemma4", tool_choice="required")
    text = '<|tool_call>call:t{vcard:fn:<|"|>x<|"|>}<tool_call|>'
    assert ct.check(text).accepted
    assert _arguments(parse_tool_calls(text, tools, "gemma4")) == [("t", {"vcard:fn": "x"})]


@pytest.mark.parametrize(
    "body",
    [
        "card{vcard:fn:<q>,x:y:<q>z<q>}",  # an undeclared key with ':' in a closed object
        "nested{x:y:<q>z<q>}",  # ... and in an open one (extra keys are bare)
        "card{vcard:fn:<q>x<q>,a:b:1}",  # a:b is a string
        "card{vcard:<q>x<q>}",  # a declared key cut short
        "card{vcard:fn:fn:<q>x<q>}",
        "nested{either:{x:y:1}}",
        "nested{free:{k:v:1}}",  # untyped values keep bare keys
    ],
)
def test_undeclared_colon_keys_are_rejected(compiled, body):
    dialect, ct = compiled
    chosen = get_dialect(dialect)
    text = f"{chosen.markup.open}call:{body.replace('<q>', chosen.string_delimiter)}{chosen.markup.close}"
    assert not ct.check(text).accepted
    result = parse_tool_calls(text, TOOLS, dialect)
    assert result.tool_calls == [] and len(result.errors) == 1


def test_longest_declared_key_wins_only_when_followed_by_colon():
    dialect = get_dialect("gemma4")
    tool = normalize_tool(constrained.load_tools([PREFIXES])[0])
    reader = dialect.for_tools({tool.name: tool})
    assert reader.parse_body("call:prefixes{a:1:7}")[1][0][0] == "a:1"
    assert reader.parse_body("call:prefixes{a:17}")[1][0][0] == "a"
    assert reader.parse_body("call:prefixes{a:true:false}")[1][0][0] == "a:true"
    # Without the tools, keys are bare: read up to their first ':'.
    with pytest.raises(constrained.dialects.segments.Malformed):
        dialect.parse_body("call:prefixes{a:1:7}")
    assert dialect.parse_body("call:prefixes{a:17}")[1][0][0] == "a"


def _stream(dialect: str, text: str, size: int) -> tuple[dict[int, str], ToolCallStreamParser]:
    stream = ToolCallStreamParser(TOOLS, dialect)
    fragments: dict[int, str] = {}
    deltas = []
    for start in range(0, len(text), size):
        deltas += stream.feed(text[start : start + size])
    deltas += stream.close()
    for delta in deltas:
        for call in delta.get("tool_calls", []):
            fragments[call["index"]] = fragments.get(call["index"], "") + call["function"]["arguments"]
    return fragments, stream


@pytest.mark.parametrize("dialect", GEMMAS)
@pytest.mark.parametrize("size", [1, 2, 3, 7, 10_000])
def test_streamed_fragments_equal_the_final_arguments(dialect, size):
    text = render_tool_calls([{"name": n, "arguments": a} for n, a in CALLS], TOOLS, dialect=dialect)
    fragments, stream = _stream(dialect, text, size)
    assert stream.result is not None and stream.result.errors == []
    assert [fragments[i] for i in range(len(CALLS))] == [c["function"]["arguments"] for c in stream.result.tool_calls]
    assert [json.loads(f) for f in fragments.values()] == [a for _, a in CALLS]


@pytest.mark.parametrize("dialect", GEMMAS)
def test_an_open_string_streams_under_its_colon_key(dialect):
    delimiter = get_dialect(dialect).string_delimiter
    stream = ToolCallStreamParser(TOOLS, dialect)
    head = f"{get_dialect(dialect).markup.open}call:card{{a:b:{delimiter}hel"
    deltas = stream.feed(head)
    sent = "".join(c["function"]["arguments"] for d in deltas for c in d.get("tool_calls", []))
    assert sent == '{"a:b": "hel'


@pytest.mark.parametrize("dialect", GEMMAS)
@pytest.mark.parametrize("key", ["a{b", "a<b", "a:{", "a,b:c", "a:[b]", "", "x:}"])
def test_keys_no_gemma_key_can_hold_are_refused(dialect, key):
    with pytest.raises(CompileError, match="a bare key may not be empty or hold any of"):
        compile_tools([_tool("t", {key: {"type": "string"}}, [])], dialect, tokenizer=dialect)


@pytest.mark.parametrize("dialect", GEMMAS)
def test_a_nested_key_holding_a_delimiter_is_refused(dialect):
    inner = {"type": "object", "properties": {"ok:key": {"type": "object", "properties": {"bad<key": {"type": "string"}}}}}
    with pytest.raises(CompileError, match="bad<key"):
        compile_tools([_tool("t", {"o": inner}, [])], dialect, tokenizer=dialect)


@pytest.mark.parametrize("dialect", GEMMAS)
def test_declared_colon_keys_are_representable_undeclared_ones_not(dialect):
    tokenizer = constrained.load_tokenizer(dialect)
    tool = normalize_tool(constrained.load_tools([NESTED])[0])
    declared = {"ietf-dots-telemetry:telemetry": {"ietf:low": 1}, "either": {"x:y": "v"}}
    assert unrepresentable(dialect, tool, declared, tokenizer) is None
    assert "undeclared key 'x:y'" in (unrepresentable(dialect, tool, {"x:y": "v"}, tokenizer) or "")
    assert "undeclared key 'k:v'" in (unrepresentable(dialect, tool, {"free": {"k:v": 1}}, tokenizer) or "")

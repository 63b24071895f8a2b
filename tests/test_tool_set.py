"""One sloppy tool or field never takes a tool set down.

The policy: an optional member no value satisfies may not appear (with a
warning); a tool that cannot be read (malformed, unsatisfiable required key,
a bad definition, a name used twice) or written in the dialect is left out
of the grammar, named in ``CompiledTools.left_out`` and ``warnings``, and
the other tools compile; the parser and the renderer agree. Discriminated
unions (Pydantic, FastMCP) are exact.
"""

from __future__ import annotations

import json
import zlib
from typing import Annotated, Literal

import pytest
from pydantic import BaseModel, Field

from constrained import ToolCallStreamParser, compile_tools, parse_tool_calls, render_tool_calls
from constrained.compiler import CompiledTools
from constrained.dialects import DIALECTS
from constrained.errors import CompileError, SchemaError, ToolDefinitionError, UnsatisfiableSchemaError
from constrained.frames.model import ObjectFrame, UnionFrame
from constrained.frames.toolset import normalize_tool_set, normalize_tools
from constrained.qa.fuzz import FuzzSummary, WalkOptions, fuzz

ALL_DIALECTS = sorted(DIALECTS)


def tool(name: str, properties: dict, required: list[str]) -> dict:
    return {"type": "function", "function": {"name": name, "description": f"{name} tool",
                                             "parameters": {"type": "object", "properties": properties, "required": required}}}


GOOD = [tool(f"lookup_{i}", {"q": {"type": "string"}, "n": {"type": "integer", "minimum": 0}}, ["q"]) for i in range(18)]
BAD_OPTIONAL = tool("set_mode", {"q": {"type": "string"}, "flag": {"type": "boolean", "enum": ["True", "False", "dontcare"]}}, ["q"])
BAD_REQUIRED = tool("pick_level", {"level": {"type": "integer", "enum": ["1", "2", "3"]}}, ["level"])
TWENTY = GOOD + [BAD_OPTIONAL, BAD_REQUIRED]


def call(name: str, arguments: dict) -> dict:
    return {"name": name, "arguments": arguments}


def text_of(dialect: str, name: str, arguments: dict, tools=None) -> str:
    """The call as the dialect writes it (rendered with a well-formed stand-in
    for a tool that cannot be rendered itself)."""
    return render_tool_calls([call(name, arguments)], tools or TWENTY, dialect)


@pytest.fixture(scope="module", params=ALL_DIALECTS)
def twenty(request) -> CompiledTools:
    return compile_tools(TWENTY, request.param, DIALECTS[request.param].default_tokenizer, tool_choice="required")


def test_twenty_tools_with_one_bad_field_and_one_uncallable_tool_compile(twenty):
    assert [t.name for t in twenty.tools] == [f"lookup_{i}" for i in range(18)] + ["set_mode"]
    [left_out] = twenty.left_out
    assert (left_out.name, left_out.path) == ("pick_level", "/properties/level")
    assert "required key 'level'" in left_out.reason and "no enum/const value" in left_out.reason
    by_keyword = {(w.tool, w.warning.keyword): w.warning for w in twenty.warnings}
    optional = by_keyword[("set_mode", "unsatisfiable")]
    assert optional.path == "/properties/flag" and "'flag'" in optional.message and "may not appear" in optional.message
    left = by_keyword[("pick_level", "tool")]
    assert left.path == "/properties/level" and "left out" in left.message
    assert "pick_level" in str(left_out) and "/properties/level" in str(left_out)


def test_the_good_tools_are_constrained_and_the_parser_agrees(twenty):
    dialect = twenty.dialect
    for name, arguments in [("lookup_0", {"q": "a", "n": 3}), ("lookup_17", {"q": "b"}), ("set_mode", {"q": "c"})]:
        text = text_of(dialect, name, arguments)
        assert twenty.check(text).accepted, text
        for tools in (twenty, TWENTY):
            parsed = parse_tool_calls(text, tools, dialect)
            assert [json.loads(c["function"]["arguments"]) for c in parsed.tool_calls] == [arguments]
    # Still enforced: types and required keys of the good tools.
    assert not twenty.check(text_of(dialect, "lookup_3", {"q": "a", "n": -1})).accepted
    assert not twenty.check(text_of(dialect, "lookup_3", {"n": 1})).accepted


@pytest.mark.parametrize("tools_as", ["compiled", "given"])
def test_a_left_out_tool_or_forbidden_key_is_an_error_not_a_call(twenty, tools_as):
    dialect = twenty.dialect
    tools = twenty if tools_as == "compiled" else TWENTY
    # The renderer refuses to write a call of a left-out tool, with the reason.
    with pytest.raises(ToolDefinitionError, match="pick_level.*left out.*required key 'level'"):
        render_tool_calls([call("pick_level", {"level": 1})], TWENTY, dialect)
    stand_in = [tool("pick_level", {"level": {"type": "integer"}}, ["level"])]
    uncallable = render_tool_calls([call("pick_level", {"level": 1})], stand_in, dialect)
    forbidden = render_tool_calls([call("set_mode", {"q": "c", "flag": True})],
                                  [tool("set_mode", {"q": {"type": "string"}, "flag": {"type": "boolean"}}, ["q"])], dialect)
    for text, reason in [(uncallable, "was left out of the tool set: required key 'level'"), (forbidden, "flag")]:
        assert not twenty.check(text).accepted
        parsed = parse_tool_calls(text, tools, dialect)
        assert parsed.tool_calls == [] and parsed.content == text
        [error] = parsed.errors
        assert reason in error.reason
        stream = ToolCallStreamParser(tools, dialect)
        deltas = [d for piece in (text[:7], text[7:]) for d in stream.feed(piece)] + stream.close()
        if text is uncallable:
            assert not any("tool_calls" in d for d in deltas)
        elif any("tool_calls" in d for d in deltas):
            # Streamed before the undeclared key showed: reported when it ends.
            assert any("tool_call_errors" in d for d in deltas), deltas
        assert stream.result is not None and stream.result.errors[0].reason == error.reason


def test_bad_tools_raise_restores_the_strict_policy():
    with pytest.raises(UnsatisfiableSchemaError, match="pick_level"):
        compile_tools(TWENTY, "hermes", "qwen3", bad_tools="raise")
    with pytest.raises(CompileError, match="unknown bad_tools"):
        compile_tools(TWENTY, "hermes", "qwen3", bad_tools="ignore")


def test_every_kind_of_bad_tool_is_left_out_by_name_and_pointer():
    tools = [
        GOOD[0],
        tool("typo", {"x": {"type": "strnig"}}, []),
        {"type": "function", "function": {"description": "no name"}},
        tool("twice", {}, []),
        tool("twice", {"y": {"type": "string"}}, []),
        {"name": "listy", "parameters": {"type": "array"}},
        tool("odd_key", {"a>b": {"type": "string"}}, []),
    ]
    compiled = compile_tools(tools, "qwen3_coder", "qwen3")
    assert [t.name for t in compiled.tools] == ["lookup_0"]
    left = {(t.name, t.path): t for t in compiled.left_out}
    assert set(left) == {("typo", "/properties/x"), ("tools[2]", ""), ("twice", ""), ("listy", ""),
                         ("odd_key", "/properties/a>b")}
    assert "unknown type 'strnig'" in left[("typo", "/properties/x")].reason
    assert "tool has no name" in left[("tools[2]", "")].reason
    assert "defined twice" in left[("twice", "")].reason
    assert "must be an object schema" in left[("listy", "")].reason
    assert "cannot be written in dialect 'qwen3_coder'" in left[("odd_key", "/properties/a>b")].reason
    assert len([w for w in compiled.warnings if w.warning.keyword == "tool"]) == len(compiled.left_out) == 6


def test_a_tool_the_dialect_cannot_write_is_left_out_and_the_parser_agrees():
    tools = [GOOD[0], tool("marked", {"k": {"type": "string", "enum": ["say <tool_call> now"]}}, ["k"])]
    compiled = compile_tools(tools, "hermes", "qwen3", tool_choice="required")
    assert [t.name for t in compiled.tools] == ["lookup_0"]
    [left_out] = compiled.left_out
    assert left_out.path == "/properties/k/enum" and "special token" in left_out.reason
    text = render_tool_calls([call("marked", {"k": "say <tool_call> now"})], tools, "hermes")
    assert not compiled.check(text).accepted
    parsed = parse_tool_calls(text, compiled, "hermes")
    assert parsed.tool_calls == [] and "left out" in parsed.errors[0].reason


def test_tool_choice_naming_a_left_out_tool_or_no_tool_left():
    with pytest.raises(CompileError, match="tool_choice names tool 'pick_level', which was left out: required key"):
        compile_tools(TWENTY, "qwen3_coder", "qwen3", tool_choice="pick_level")
    with pytest.raises(CompileError, match="none of the 2 tools can be compiled: .*pick_level.*typo"):
        compile_tools([BAD_REQUIRED, tool("typo", {"x": {"type": "strnig"}}, [])], "qwen3_coder", "qwen3")
    # One tool given: its own error, as before.
    with pytest.raises(SchemaError, match="unknown type 'strnig'"):
        compile_tools([tool("typo", {"x": {"type": "strnig"}}, [])], "qwen3_coder", "qwen3")


def test_left_out_tools_survive_save_and_load(tmp_path):
    compiled = compile_tools(TWENTY, "gemma4", "gemma4")
    compiled.save(tmp_path / "tools.ct.json")
    loaded = CompiledTools.load(tmp_path / "tools.ct.json", tokenizer=compiled.tokenizer)
    assert loaded.left_out == compiled.left_out and loaded.warnings == compiled.warnings
    text = render_tool_calls([call("pick_level", {"level": 1})], [tool("pick_level", {"level": {"type": "integer"}}, ["level"])], "gemma4")
    assert "left out" in parse_tool_calls(text, loaded, "gemma4").errors[0].reason


def test_normalize_tool_set_keeps_the_good_tools_and_normalize_tools_still_raises():
    tool_set = normalize_tool_set(TWENTY)
    assert len(tool_set.tools) == 19 and [t.name for t in tool_set.left_out] == ["pick_level"]
    with pytest.raises(UnsatisfiableSchemaError):
        normalize_tools(TWENTY)


# -- discriminated unions -------------------------------------------------------------------


class GetItem(BaseModel):
    operation: Literal["GetItem"] = "GetItem"
    table: str
    key: str


class PutItem(BaseModel):
    operation: Literal["PutItem"] = "PutItem"
    table: str
    key: str
    value: str = ""


class DeleteItem(BaseModel):
    operation: Literal["DeleteItem"] = "DeleteItem"
    table: str
    key: str


class Table(BaseModel):
    """Run one operation on a table."""

    request: Annotated[GetItem | PutItem | DeleteItem, Field(discriminator="operation")]


def branches(tools) -> tuple[ObjectFrame, ...]:
    [normalized] = normalize_tools(tools)
    union = normalized.root.property("request")
    assert isinstance(union, UnionFrame)
    return union.options


def test_pydantic_discriminated_union_is_exact():
    schema = Table.model_json_schema()
    assert "discriminator" in schema["properties"]["request"]
    options = branches([Table])
    assert all("operation" in option.required for option in options)
    compiled = compile_tools([Table], "qwen3_coder", "qwen3", tool_choice="required")
    assert not [w for w in compiled.warnings if w.warning.keyword == "oneOf"]
    good = {"request": {"operation": "PutItem", "table": "t", "key": "k", "value": "v"}}
    # Without the key, GetItem and DeleteItem would both match: oneOf fails.
    ambiguous = {"request": {"table": "t", "key": "k"}}
    for arguments, accepted in [(good, True), (ambiguous, False)]:
        text = render_tool_calls([call("Table", arguments)], [Table], "qwen3_coder")
        assert compiled.check(text).accepted is accepted
        assert bool(parse_tool_calls(text, compiled, "qwen3_coder").tool_calls) is accepted


def test_one_of_with_a_const_key_in_every_branch_requires_it():
    kinds = [{"type": "object", "properties": {"kind": {"const": k}, "size": {"type": "integer"}}} for k in ("a", "b")]
    parameters = {"type": "object", "properties": {"shape": {"oneOf": kinds}}, "required": ["shape"]}
    tools = [{"name": "draw", "parameters": parameters}]
    assert all(option.required == ("kind",) for option in branches_of(tools, "shape"))
    compiled = compile_tools(tools, "hermes", "qwen3", tool_choice="required")
    assert not [w for w in compiled.warnings if w.warning.keyword == "oneOf"]


def test_one_of_without_a_shared_const_key_is_still_relaxed_with_a_warning():
    kinds = [{"type": "object", "properties": {"kind": {"const": "a"}}}, {"type": "object", "properties": {"size": {"type": "integer"}}}]
    tools = [{"name": "draw", "parameters": {"type": "object", "properties": {"shape": {"oneOf": kinds}}}}]
    assert all(option.required == () for option in branches_of(tools, "shape"))
    compiled = compile_tools(tools, "hermes", "qwen3")
    assert [w for w in compiled.warnings if w.warning.keyword == "oneOf"]


def branches_of(tools, key: str):
    [normalized] = normalize_tools(tools)
    return normalized.root.property(key).options


@pytest.mark.parametrize("dialect", ALL_DIALECTS)
def test_walks_through_a_discriminated_union_never_finish_invalid(dialect):
    """Before, the relaxed oneOf let walks finish with calls the validation
    refused ("valid under each of ..."); now every finished walk is valid."""
    compiled = compile_tools([Table], dialect, DIALECTS[dialect].default_tokenizer, tool_choice="required")
    summary = FuzzSummary(keep=3)
    summary.merge(fuzz(compiled, 12, zlib.crc32(dialect.encode()), WalkOptions(budget=400)))
    assert summary.ok and summary.invalid == 0, [run.to_json() for run in summary.failures]
    assert summary.finished >= 6, summary.counts()

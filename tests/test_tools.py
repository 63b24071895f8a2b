"""Tool loading: every accepted form, every error, the BFCL type mapping, and
the real MCP and BFCL definitions in the corpus (tests/corpus/)."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from corpus import CORPUS
from pydantic import BaseModel, Field

from constrained.errors import ToolDefinitionError
from constrained.tools import Tool, load_tools, load_tools_file

JSON_SCHEMA_TYPES = {"object", "array", "string", "number", "integer", "boolean", "null"}
BFCL_ONLY_TYPES = {
    "dict", "float", "tuple", "list", "bool", "any", "Any", "byte", "short", "long",
    "Bigint", "double", "char", "String", "ArrayList", "Array", "Queue", "Stack",
    "HashMap", "Hashtable",
}

WEATHER_PARAMS = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "description": "City name"},
        "days": {"type": "integer"},
    },
    "required": ["city"],
}


def all_types(node: object) -> list[object]:
    """Every ``type`` value that is a name or list of names, anywhere in a tree
    (a property named "type" has a dict value and is not collected)."""
    found: list[object] = []
    if isinstance(node, dict):
        declared = node.get("type")
        if isinstance(declared, str):
            found.append(declared)
        elif isinstance(declared, list):
            found.extend(declared)
        for value in node.values():
            found.extend(all_types(value))
    elif isinstance(node, list):
        for value in node:
            found.extend(all_types(value))
    return found


# --- accepted forms -------------------------------------------------------


def test_openai_tools_list() -> None:
    source = [{"type": "function", "function": {
        "name": "get_weather", "description": "Weather now", "parameters": WEATHER_PARAMS}}]
    assert load_tools(source) == [Tool("get_weather", "Weather now", WEATHER_PARAMS, "openai")]


def test_openai_single_dict() -> None:
    source = {"type": "function", "function": {"name": "f", "parameters": WEATHER_PARAMS}}
    assert load_tools(source) == [Tool("f", "", WEATHER_PARAMS, "openai")]


def test_bare_function_list_and_single() -> None:
    fn = {"name": "get_weather", "description": "Weather now", "parameters": WEATHER_PARAMS}
    expected = [Tool("get_weather", "Weather now", WEATHER_PARAMS, "function")]
    assert load_tools([fn]) == expected
    assert load_tools(fn) == expected


def test_mcp_tool_forms() -> None:
    tool = {"name": "echo", "title": "Echo", "description": "Echo it",
            "inputSchema": WEATHER_PARAMS, "annotations": {"readOnlyHint": True}}
    expected = [Tool("echo", "Echo it", WEATHER_PARAMS, "mcp")]
    assert load_tools(tool) == expected
    assert load_tools([tool]) == expected
    assert load_tools({"tools": [tool], "nextCursor": None}) == expected
    envelope = {"jsonrpc": "2.0", "id": 1, "result": {"tools": [tool]}}
    assert load_tools(envelope) == expected


def test_missing_parameters_means_no_arguments() -> None:
    no_args = {"type": "object", "properties": {}}
    assert load_tools({"name": "ping"})[0].parameters == no_args
    assert load_tools({"name": "ping", "description": "Ping"}) == [Tool("ping", "Ping", no_args, "function")]
    openai = load_tools({"type": "function", "function": {"name": "ping"}})
    assert openai == [Tool("ping", "", no_args, "openai")]


def test_boolean_parameters_become_equivalent_dicts() -> None:
    assert load_tools({"name": "a", "parameters": True})[0].parameters == {}
    assert load_tools({"name": "b", "parameters": False})[0].parameters == {"not": {}}


def test_object_type_in_a_type_list_is_accepted() -> None:
    params = {"type": ["object", "null"], "properties": {}}
    assert load_tools({"name": "f", "parameters": params})[0].parameters == params


def test_mixed_list() -> None:
    class Point(BaseModel):
        x: int

    tools = load_tools([
        {"type": "function", "function": {"name": "a", "parameters": WEATHER_PARAMS}},
        {"name": "b", "parameters": WEATHER_PARAMS},
        {"name": "c", "inputSchema": WEATHER_PARAMS},
        Point,
        {"name": "d", "parameters": {"type": "dict", "properties": {}}},
    ])
    assert [(t.name, t.source) for t in tools] == [
        ("a", "openai"), ("b", "function"), ("c", "mcp"), ("Point", "pydantic"), ("d", "bfcl")]


def test_function_names_keep_their_dots() -> None:
    tools = load_tools({"name": "math.factorial", "parameters": {"type": "dict", "properties": {}}})
    assert tools[0].name == "math.factorial"


# --- pydantic -------------------------------------------------------------


class Address(BaseModel):
    """Where someone lives.

        Indented continuation lines are dedented.
    """

    street: str
    zip_code: str | None = None


class Person(BaseModel):
    name: str = Field(description="Full name")
    address: Address
    tags: list[str] = []


class TreeNode(BaseModel):
    """A node of a tree."""

    value: int
    children: list[TreeNode] = []


def test_pydantic_model_with_nested_model() -> None:
    [tool] = load_tools(Person)
    assert tool.name == "Person"
    assert tool.source == "pydantic"
    assert tool.description == ""  # not BaseModel's own docstring
    assert tool.parameters == Person.model_json_schema()
    assert tool.parameters["type"] == "object"
    assert "Address" in tool.parameters["$defs"]
    assert tool.parameters["properties"]["address"] == {"$ref": "#/$defs/Address"}


def test_pydantic_docstring_is_cleaned() -> None:
    [tool] = load_tools([Address])
    assert tool.description == "Where someone lives.\n\nIndented continuation lines are dedented."


def test_pydantic_self_referencing_model() -> None:
    [tool] = load_tools(TreeNode)
    assert tool.name == "TreeNode"
    assert tool.description == "A node of a tree."
    params = tool.parameters
    assert params == TreeNode.model_json_schema()
    node = params["$defs"]["TreeNode"]
    assert node["properties"]["children"]["items"] == {"$ref": "#/$defs/TreeNode"}


def test_pydantic_description_falls_back_to_schema() -> None:
    class Described(BaseModel):
        model_config = {"json_schema_extra": {"description": "From the schema"}}
        x: int

    assert load_tools(Described)[0].description == "From the schema"


def test_pydantic_schema_failure_names_the_model() -> None:
    class Unschemable(BaseModel):
        callback: Callable[[], None]

    with pytest.raises(ToolDefinitionError, match="tool 'Unschemable': model_json_schema"):
        load_tools(Unschemable)


def test_pydantic_schema_is_a_copy() -> None:
    [tool] = load_tools(Person)
    tool.parameters["properties"].clear()
    assert Person.model_json_schema()["properties"]


# --- format= --------------------------------------------------------------


def test_format_bfcl_labels_a_plain_function() -> None:
    tools = load_tools({"name": "f", "parameters": WEATHER_PARAMS}, format="bfcl")
    assert tools == [Tool("f", "", WEATHER_PARAMS, "bfcl")]


def test_format_function_maps_bfcl_types_with_a_warning() -> None:
    # Type names are mapped in every form; forcing "function" labels
    # the tool so, and the mapped names are reported as warnings.
    fn = {"name": "f", "parameters": {"type": "dict", "properties": {}}}
    [tool] = load_tools(fn, format="function")
    assert (tool.source, tool.parameters) == ("function", {"type": "object", "properties": {}})
    assert [(w.path, w.keyword) for w in tool.warnings] == [("", "type")]


@pytest.mark.parametrize(("entry", "fmt", "label", "found"), [
    ({"name": "f", "parameters": WEATHER_PARAMS}, "openai", "tool 'f'", "keys: 'name', 'parameters'"),
    ({"type": "function", "function": {"name": "g"}}, "mcp", "tool 'g'", "keys: 'type', 'function'"),
    ({"name": "h", "inputSchema": WEATHER_PARAMS}, "function", "tool 'h'", "keys: 'name', 'inputSchema'"),
    ({"name": "p"}, "pydantic", "tool 'p'", "keys: 'name'"),
    (TreeNode, "openai", "tools[0]", "class TreeNode"),
])
def test_format_rejects_other_forms(entry: object, fmt: str, label: str, found: str) -> None:
    with pytest.raises(ToolDefinitionError) as info:
        load_tools([entry], format=fmt)
    message = str(info.value)
    assert message.startswith(f"{label}: cannot recognise the tool definition ({found})")
    assert message.endswith(f"expected a tool definition in format {fmt!r}")


def test_unknown_format() -> None:
    with pytest.raises(ToolDefinitionError, match="unknown tool format 'yaml'"):
        load_tools([], format="yaml")


# --- errors ---------------------------------------------------------------


@pytest.mark.parametrize(("entries", "message"), [
    ([{"name": "ok"}, {"description": "nameless", "parameters": {}}],
     "tools[1]: tool has no name"),
    ([{"name": "ok"}, {"name": ""}], "tools[1]: tool name must be a non-empty string, got ''"),
    ([{"name": "ok"}, {"name": "ok2"}, {"name": 7}], "tools[2]: tool name must be a non-empty string, got 7"),
    ([{"type": "function", "function": {"description": "x"}}], "tools[0]: tool has no name"),
    ([{"name": "ok"}, {"inputSchema": {}}], "tools[1]: tool has no name"),
    ([{"name": "a"}, {"name": "b"}, {"name": "a"}], "tool 'a' is defined twice: tools[0] and tools[2]"),
    ([{"name": "x", "parameters": ["a"]}],
     "tool 'x': parameters must be a JSON object or boolean schema, got list"),
    ([{"name": "x", "inputSchema": "{}"}],
     "tool 'x': parameters must be a JSON object or boolean schema, got str"),
    ([{"name": "x", "parameters": None}],
     "tool 'x': parameters must be a JSON object or boolean schema, got NoneType"),
    ([{"name": "x", "parameters": {"type": "string"}}],
     "tool 'x': parameters must be an object schema, got type 'string'"),
    ([{"name": "x", "parameters": {"type": ["string", "null"]}}],
     "tool 'x': parameters must be an object schema, got type ['string', 'null']"),
    ([{"name": "x", "parameters": {"type": "float"}}],
     "tool 'x': parameters must be an object schema, got type 'number'"),
    ([{"name": "x", "description": 3}], "tool 'x': description must be a string, got int"),
    ([{"type": "function", "function": "f"}], "tools[0]: 'function' must be an object, got str"),
    ([{"name": "ok"}, {"title": "T", "schema": {}}],
     "tools[1]: cannot recognise the tool definition (keys: 'title', 'schema')"),
    ([{}], "tools[0]: cannot recognise the tool definition (keys: none)"),
    ([{"name": "ok"}, "get_weather"], "tools[1]: cannot recognise the tool definition (str)"),
    (42, "tools[0]: cannot recognise the tool definition (int)"),
    ({"jsonrpc": "2.0", "id": 1, "error": {"code": -1}},
     "JSON-RPC response has no result object (keys: 'jsonrpc', 'id', 'error')"),
    ({"tools": {"name": "x"}}, "'tools' must be a list of tools, got dict"),
])
def test_errors(entries: object, message: str) -> None:
    with pytest.raises(ToolDefinitionError) as info:
        load_tools(entries)
    assert str(info.value).startswith(message)


def test_error_is_a_value_error() -> None:
    with pytest.raises(ValueError):
        load_tools([{"name": ""}])


# --- inputs are never mutated ----------------------------------------------


def test_inputs_are_not_mutated() -> None:
    source = [
        {"type": "function", "function": {"name": "a", "parameters": WEATHER_PARAMS}},
        {"name": "b", "inputSchema": WEATHER_PARAMS},
        {"name": "c", "parameters": {"type": "dict", "properties": {
            "x": {"type": "float"}, "y": {"type": "any"}}}},
        {"name": "d"},
    ]
    before = copy.deepcopy(source)
    tools = load_tools(source)
    assert source == before
    for tool in tools:
        tool.parameters.setdefault("properties", {})["added"] = {}
    assert source == before
    assert "added" not in WEATHER_PARAMS["properties"]


def test_default_parameters_are_not_shared() -> None:
    first = load_tools({"name": "a"})[0]
    first.parameters["properties"]["x"] = {}
    assert load_tools({"name": "a"})[0].parameters == {"type": "object", "properties": {}}


# --- BFCL type mapping ------------------------------------------------------


def test_bfcl_nested_mapping() -> None:
    fn = {"name": "geo.plan", "description": "d", "parameters": {
        "type": "dict",
        "properties": {
            "coords": {"type": "tuple", "items": {"type": "float"}},
            "grid": {"type": "list", "items": {"type": "list", "items": {"type": "double"}}},
            "options": {"type": "dict", "properties": {
                "flag": {"type": "bool"},
                "data": {"type": "any", "description": "anything"},
                "type": {"type": "String", "enum": ["a", "b"]},
            }, "additionalProperties": {"type": "long"}},
            "either": {"anyOf": [{"type": "HashMap"}, {"type": "Any"}, {"type": "char"}]},
            "many": {"type": ["short", "tuple", "null"]},
            "loose": {"type": ["float", "any"]},
            "java": {"type": "ArrayList", "items": {"type": "Bigint"}},
            "default_like": {"type": "string", "default": {"type": "float"}},
        },
        "required": ["coords"],
    }}
    [tool] = load_tools([fn])
    assert tool.source == "bfcl"
    assert tool.parameters == {
        "type": "object",
        "properties": {
            "coords": {"type": "array", "items": {"type": "number"}},
            "grid": {"type": "array", "items": {"type": "array", "items": {"type": "number"}}},
            "options": {"type": "object", "properties": {
                "flag": {"type": "boolean"},
                "data": {"description": "anything"},
                "type": {"type": "string", "enum": ["a", "b"]},
            }, "additionalProperties": {"type": "integer"}},
            "either": {"anyOf": [{"type": "object"}, {}, {"type": "string"}]},
            "many": {"type": ["integer", "array", "null"]},
            "loose": {},
            "java": {"type": "array", "items": {"type": "integer"}},
            # a default value is data, not a schema: left alone
            "default_like": {"type": "string", "default": {"type": "float"}},
        },
        "required": ["coords"],
    }


def test_bfcl_detected_from_a_nested_type_only() -> None:
    fn = {"name": "f", "parameters": {"type": "object", "properties": {
        "xs": {"type": "array", "items": {"type": "float"}}}}}
    [tool] = load_tools(fn)
    assert tool.source == "bfcl"
    assert tool.parameters["properties"]["xs"]["items"] == {"type": "number"}


def test_property_named_like_a_bfcl_type_is_not_bfcl() -> None:
    params = {"type": "object", "properties": {"dict": {"type": "string"}, "type": {"type": "string"}}}
    [tool] = load_tools({"name": "f", "parameters": params})
    assert tool.source == "function"
    assert tool.parameters == params


# --- the corpus -------------------------------------------------------------


def test_corpus_mcp_tools_all_load() -> None:
    files = sorted((CORPUS / "mcp").glob("*.json"))
    assert len(files) == 8
    total = 0
    for path in files:
        data = json.loads(path.read_text(encoding="utf-8"))
        tools = load_tools_file(path)
        assert [t.name for t in tools] == [t["name"] for t in data["tools"]]
        for tool, raw in zip(tools, data["tools"]):
            assert tool.source == "mcp"
            assert tool.parameters == raw["inputSchema"]
            assert tool.description == raw.get("description", "")
        total += len(tools)
    assert total == 61


def test_corpus_mcp_aws_pricing_keeps_defs() -> None:
    tools = {t.name: t for t in load_tools_file(CORPUS / "mcp" / "aws-pricing.tools.json")}
    assert any("$defs" in t.parameters for t in tools.values())


def test_corpus_bfcl_definitions_all_load() -> None:
    files = sorted((CORPUS / "bfcl").glob("BFCL_v3_*.json"))
    assert [p.name for p in files] == [
        "BFCL_v3_multiple.json", "BFCL_v3_parallel.json",
        "BFCL_v3_parallel_multiple.json", "BFCL_v3_simple.json"]
    total = 0
    seen_types: set[object] = set()
    for path in files:
        for line in path.read_text(encoding="utf-8").splitlines():
            if not line.strip():
                continue
            record: dict[str, Any] = json.loads(line)
            tools = load_tools(record["function"])
            assert [t.name for t in tools] == [f["name"] for f in record["function"]]
            for tool in tools:
                assert tool.source == "bfcl"
                assert tool.parameters["type"] == "object"
                types = all_types(tool.parameters)
                assert not set(types) & BFCL_ONLY_TYPES, (record["id"], tool.name)
                seen_types.update(types)
            total += len(tools)
    assert total == 1677
    assert seen_types <= JSON_SCHEMA_TYPES
    assert {"object", "number", "array"} <= seen_types


def test_load_tools_file_object_and_list(tmp_path: Path) -> None:
    fn = {"name": "f", "parameters": WEATHER_PARAMS}
    as_list = tmp_path / "list.json"
    as_list.write_text(json.dumps([fn]), encoding="utf-8")
    as_object = tmp_path / "object.json"
    as_object.write_text(json.dumps({"jsonrpc": "2.0", "result": {"tools": [
        {"name": "f", "inputSchema": WEATHER_PARAMS}]}}), encoding="utf-8")
    assert load_tools_file(as_list) == [Tool("f", "", WEATHER_PARAMS, "function")]
    assert load_tools_file(str(as_object)) == [Tool("f", "", WEATHER_PARAMS, "mcp")]
    assert load_tools_file(as_list, format="bfcl")[0].source == "bfcl"


def test_load_tools_file_invalid_json(tmp_path: Path) -> None:
    path = tmp_path / "broken.json"
    path.write_text("[{", encoding="utf-8")
    with pytest.raises(ToolDefinitionError, match="broken.json: not valid JSON"):
        load_tools_file(path)


ANTHROPIC = {
    "name": "get_weather",
    "description": "Weather for a city.",
    "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}


def test_anthropic_tools_are_read_with_their_input_schema() -> None:
    [tool] = load_tools([ANTHROPIC])
    assert (tool.name, tool.source, tool.parameters) == ("get_weather", "anthropic", ANTHROPIC["input_schema"])
    assert load_tools(ANTHROPIC, format="anthropic") == [tool]
    # Compiled, its required key is constrained: a call without it is refused.
    from constrained import compile_tools

    compiled = compile_tools([ANTHROPIC], "hermes", "qwen3", tool_choice="required")
    assert compiled.left_out == ()
    assert not compiled.check('<tool_call>\n{"name": "get_weather", "arguments": {}}\n</tool_call>').accepted
    assert compiled.check('<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo"}}\n</tool_call>').accepted


@pytest.mark.parametrize(
    "entry, found",
    [
        ({"type": "function", "function": {"name": "f", "parameter": {"type": "object"}}}, "parameter"),
        ({"type": "function", "function": {"name": "f", "input_schema": {"type": "object"}}}, "input_schema"),
        ({"name": "f", "paramters": {"type": "object"}}, "paramters"),
        ({"name": "f", "params": {"type": "object"}}, "params"),
        ({"name": "f", "args": {"type": "object"}}, "args"),
    ],
)
def test_a_schema_under_another_key_is_refused_naming_it(entry: dict, found: str) -> None:
    """Read as written, such a tool would take no arguments and every real
    call of it would be refused: the definition is refused instead, and a
    tool set leaves that tool out, by name and reason."""
    with pytest.raises(ToolDefinitionError, match=f"tool 'f': has no 'parameters' but has '{found}'"):
        load_tools([entry])
    from constrained import compile_tools

    compiled = compile_tools([entry, ANTHROPIC], "hermes", "qwen3")
    assert [t.name for t in compiled.tools] == ["get_weather"]
    assert [t.name for t in compiled.left_out] == ["f"] and found in compiled.left_out[0].reason


def test_a_tool_without_parameters_still_loads() -> None:
    [tool] = load_tools([{"name": "now", "description": "The time.", "strict": True}])
    assert tool.parameters == {"type": "object", "properties": {}}

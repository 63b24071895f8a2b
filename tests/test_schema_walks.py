"""Every walk over a schema reads subschemas only.

A *name* in ``properties``, ``$defs``/``definitions`` or ``patternProperties``
that looks like a keyword (``id``, ``$id``, ``$ref``, ``$schema``,
``properties``, ``type``, ``enum``) is a name, and the map holding it is no
schema: the wrapping of non-object schemas (``constrained.qa.conformance``),
``$ref`` resolution (``constrained.schema.refs``), the ``type`` annotation
(``constrained.schema.annotate``), the BFCL type mapping
(``constrained.tools``) and ``walk_schemas`` itself. Each case is checked in
draft-04, draft-07 and 2020-12, with an array, a string and an object at the
root (an object both as tool parameters as it is and wrapped), against
``jsonschema``'s own verdicts.
"""

from __future__ import annotations

import copy
import re
from typing import Any

import jsonschema
import pytest
from referencing.jsonschema import DRAFT4, DRAFT7, DRAFT202012

from constrained import compile_tools
from constrained.errors import ConstrainedError, SchemaError
from constrained.qa.conformance import Outcome, judge_schema, schema_tool
from constrained.schema.annotate import annotate_ref_types
from constrained.schema.keywords import walk_schemas
from constrained.schema.refs import enter, pointer_token, resolver_for, schema_id
from constrained.tools import load_tools

DRAFT4_URI = "http://json-schema.org/draft-04/schema#"
DRAFT7_URI = "http://json-schema.org/draft-07/schema#"
DRAFT2020_URI = "https://json-schema.org/draft/2020-12/schema"

# draft name -> ($schema, where that draft keeps definitions)
DRAFTS = {
    "draft-04": (DRAFT4_URI, "definitions"),
    "draft-07": (DRAFT7_URI, "definitions"),
    "2020-12": (DRAFT2020_URI, "$defs"),
}
NAMES = ["id", "$id", "$ref", "$schema", "properties", "type", "enum"]
ROOTS = ["array", "string", "object", "wrapped object"]


def case(draft: str, name: str, root: str) -> tuple[dict[str, Any], list[tuple[Any, bool]]]:
    """A schema whose ``properties``, definitions and ``patternProperties``
    each have a member called ``name`` (the property's schema a ``$ref`` to
    the definition of that name), and instances of it with their verdicts."""
    uri, defs = DRAFTS[draft]
    ref = {"$ref": f"#/{defs}/{pointer_token(name)}"}
    if root == "string":
        schema = {
            "$schema": uri,
            "type": "string",
            "allOf": [ref],
            # Never applied to a string, still walked.
            "properties": {name: ref},
            "patternProperties": {name: {"type": "boolean"}},
            defs: {name: {"type": "string", "maxLength": 3}},
        }
        return schema, [("ab", True), ("", True), ("abcd", False), (5, False)]
    members = {
        "type": "object",
        "properties": {name: ref, "other": {"type": "boolean"}},
        "patternProperties": {name: {"type": "integer"}},
    }
    definitions = {name: {"type": "integer", "minimum": 1}}
    if root == "array":
        schema = {"$schema": uri, "type": "array", "items": {"$ref": f"#/{defs}/item"}, defs: {**definitions, "item": members}}
        return schema, [([{name: 1}], True), ([], True), ([{name: 0}], False), ([{name: "x"}], False), ("x", False)]
    schema = {"$schema": uri, **members, defs: definitions}
    if root == "wrapped object":
        schema["type"] = ["object", "null"]
        return schema, [({name: 1}, True), (None, True), ({name: 0}, False), ({name: "x"}, False), (5, False)]
    return schema, [({name: 1, "other": True}, True), ({}, True), ({name: 0}, False), ({name: "x"}, False)]


CASES = [
    pytest.param(draft, name, root, id=f"{draft}-{root}-{name}")
    for draft in DRAFTS
    for root in ROOTS
    for name in NAMES
]


def jsonschema_valid(schema: Any, instance: Any) -> bool:
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    return bool(cls(schema).is_valid(instance))


def ref_sites(schema: Any) -> list[dict[str, Any]]:
    """The nodes holding a ``$ref`` string, in the copy's own objects."""
    return [node for node in walk_schemas(schema) if isinstance(node.get("$ref"), str)]


@pytest.mark.parametrize("draft, name, root", CASES)
def test_cases_agree_with_jsonschema(draft, name, root):
    schema, instances = case(draft, name, root)
    for instance, valid in instances:
        assert jsonschema_valid(schema, instance) is valid, instance


@pytest.mark.parametrize("draft, name, root", CASES)
def test_judge_schema(draft, name, root):
    schema, instances = case(draft, name, root)
    tool = schema_tool(schema)
    assert tool.wrapped is (root != "object")
    verdicts = judge_schema(schema, instances, "hermes")
    for (instance, valid), verdict in zip(instances, verdicts):
        assert not verdict.failed, (instance, verdict)
        # Every $ref resolved, in the wrapped copy too ("$id" as a pattern is relaxed: "$" mid-pattern).
        assert "$ref" not in verdict.relaxed, (instance, verdict)
        assert verdict.passed and (verdict.outcome is Outcome.ACCEPTED) is valid, (instance, verdict)


@pytest.mark.parametrize("draft, name, root", CASES)
def test_wrapping_rewrites_the_references_and_nothing_else(draft, name, root):
    schema, _ = case(draft, name, root)
    original = copy.deepcopy(schema)
    definition = schema_tool(schema).definition
    assert schema == original
    if root == "object":
        assert definition["parameters"] is schema
        return
    inner = definition["parameters"]["properties"]["value"]
    refs = [node["$ref"] for node in ref_sites(inner)]
    assert refs and all(ref.startswith("#/properties/value/") for ref in refs)
    # Only the $ref values changed.
    restored = copy.deepcopy(inner)
    for node in ref_sites(restored):
        node["$ref"] = "#" + node["$ref"].removeprefix("#/properties/value")
    assert restored == schema


@pytest.mark.parametrize("draft, name, root", CASES)
def test_annotation_keeps_the_meaning(draft, name, root):
    schema, instances = case(draft, name, root)
    original = copy.deepcopy(schema)
    annotated = annotate_ref_types(schema)
    assert schema == original
    for instance, valid in instances:
        assert jsonschema_valid(annotated, instance) is valid, instance
    # The walk reached the property named `name` through its map.
    properties = annotated[DRAFTS[draft][1]]["item"]["properties"] if root == "array" else annotated["properties"]
    assert properties[name]["type"] == ("string" if root == "string" else "integer")


@pytest.mark.parametrize("draft, name, root", CASES)
def test_compiles(draft, name, root):
    schema, _ = case(draft, name, root)
    compiled = compile_tools([schema_tool(schema).definition], dialect="hermes", tokenizer="qwen3")
    # No unresolved $ref: each was rewritten and resolved.
    assert not [w for w in compiled.warnings if w.warning.keyword == "$ref"]


@pytest.mark.parametrize("draft", DRAFTS)
def test_annotated_schema_compiles(draft):
    schema, _ = case(draft, "id", "object")
    compiled = compile_tools([{"name": "f", "parameters": annotate_ref_types(schema)}], dialect="hermes", tokenizer="qwen3")
    assert not [w for w in compiled.warnings if w.warning.keyword == "$ref"]


def test_the_reported_schema():
    schema = {
        "$schema": DRAFT4_URI,
        "type": "array",
        "items": {"type": "object", "properties": {"id": {"type": "integer"}}},
    }
    verdicts = judge_schema(schema, [([{"id": 1}], True), ([{"id": "x"}], False)], "hermes")
    assert [v.outcome for v in verdicts] == [Outcome.ACCEPTED, Outcome.REJECTED]


# -- walk_schemas ---------------------------------------------------------------


def test_walk_yields_subschemas_not_their_maps():
    def members() -> dict[str, Any]:
        return {name: {"type": "integer"} for name in NAMES}

    schema = {
        "properties": members(),
        "patternProperties": members(),
        "$defs": members(),
        "definitions": members(),
        "dependentSchemas": members(),
        "allOf": [{"type": "object"}],
        "enum": [{"type": "object", "properties": {}}],
        "default": {"$ref": "#/$defs/id"},
    }
    walked = list(walk_schemas(schema))
    walked_ids = {id(node) for node in walked}
    for keyword in ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas"):
        assert id(schema[keyword]) not in walked_ids, keyword
        assert all(id(member) in walked_ids for member in schema[keyword].values()), keyword
    assert id(schema["allOf"][0]) in walked_ids
    assert id(schema["enum"][0]) not in walked_ids
    assert id(schema["default"]) not in walked_ids
    assert len(walked) == 1 + 5 * len(NAMES) + 1


def test_possible_walk_adds_unknown_keywords_never_data():
    target = {"$ref": "#/$defs/n"}
    listed = {"type": "string"}
    schema = {
        "x-library": {"item": target},
        "x-list": [[listed]],
        "enum": [{"$ref": "#/a"}],
        "const": {"$ref": "#/a"},
        "examples": [{"$ref": "#/a"}],
        "required": ["$ref"],
        "properties": {"$ref": {"type": "integer"}},
    }
    strict = {id(node) for node in walk_schemas(schema)}
    possible = {id(node) for node in walk_schemas(schema, possible=True)}
    assert id(target) not in strict and id(target) in possible
    assert id(listed) in possible
    assert id(schema["properties"]) not in possible
    for keyword in ("enum", "examples"):
        assert id(schema[keyword][0]) not in possible
    assert id(schema["const"]) not in possible


def test_walk_visits_a_shared_object_once_and_stops_where_asked():
    shared = {"type": "integer"}
    embedded = {"$id": "https://example.com/x", "properties": {"a": {"type": "string"}}}
    schema = {"properties": {"a": shared, "b": shared, "c": embedded}}
    walked = list(walk_schemas(schema, stop_at=lambda node: "$id" in node))
    assert [id(node) for node in walked].count(id(shared)) == 1
    assert id(embedded) not in {id(node) for node in walked}
    assert id(embedded["properties"]["a"]) not in {id(node) for node in walked}


# -- references -------------------------------------------------------------------


@pytest.mark.parametrize("specification", [DRAFT4, DRAFT7, DRAFT202012])
def test_schema_id_is_a_string_or_none(specification):
    assert schema_id(specification, {"id": {"type": "integer"}, "$id": {"type": "integer"}}) is None
    assert schema_id(specification, {"id": 5, "$id": 5}) is None
    assert schema_id(specification, [1]) is None
    key = "id" if specification is DRAFT4 else "$id"
    assert schema_id(specification, {key: "https://example.com/s"}) == "https://example.com/s"


@pytest.mark.parametrize("specification", [DRAFT4, DRAFT7, DRAFT202012])
def test_enter_a_map_of_names(specification):
    schema = {"definitions": {"id": {"type": "integer"}, "$id": {"type": "string"}}}
    resolver = resolver_for(schema)
    assert enter(resolver, schema["definitions"], specification) is resolver


@pytest.mark.parametrize("draft", DRAFTS)
def test_a_reference_to_a_map_of_names_is_read_as_a_schema(draft):
    uri, defs = DRAFTS[draft]
    # A $ref may point at any JSON value; here at the definitions map itself,
    # which is then read as a schema: its member "id" ("$id") is that
    # schema's identifier, an object, so the schema is malformed: refused by
    # name and pointer, never a crash.
    schema = {
        "$schema": uri,
        "type": "object",
        "properties": {"a": {"$ref": f"#/{defs}"}},
        defs: {"id": {"type": "integer"}, "$id": {"type": "integer"}},
    }
    key = "id" if draft == "draft-04" else "$id"
    with pytest.raises(SchemaError, match=re.escape(f"tool 'f', schema at /{defs}: {key} must be a string")):
        compile_tools([{"name": "f", "parameters": schema}], dialect="hermes", tokenizer="qwen3")
    # Beside another tool, only this one is left out.
    compiled = compile_tools([{"name": "f", "parameters": schema}, {"name": "g", "parameters": {}}], "hermes", "qwen3")
    assert [t.name for t in compiled.tools] == ["g"] and compiled.left_out[0].path == f"/{defs}"


@pytest.mark.parametrize("draft", DRAFTS)
@pytest.mark.parametrize("bad", [5, {"type": "string"}])
def test_an_id_that_is_not_a_string_does_not_crash(draft, bad):
    uri, defs = DRAFTS[draft]
    key = "id" if draft == "draft-04" else "$id"
    inner = {"type": "object", "properties": {"a": {key: bad, "type": "string"}, "b": {"$ref": f"#/{defs}/n"}}}
    schema = {"$schema": uri, **inner, defs: {"n": {"type": "integer"}}}
    try:
        compile_tools([{"name": "f", "parameters": schema}], dialect="hermes", tokenizer="qwen3")
    except ConstrainedError:
        pass  # a malformed schema may be refused, not crash
    wrapped = {"$schema": uri, "type": "array", "items": {"$ref": f"#/{defs}/o"}, defs: {"n": {"type": "integer"}, "o": inner}}
    judge_schema(wrapped, [([{"a": "x", "b": 1}], True)], "hermes")


def test_embedded_resource_keeps_its_references():
    schema = {
        "type": "array",
        "items": {
            "$id": "https://example.com/item",
            "type": "object",
            "properties": {"$id": {"$ref": "#/$defs/n"}},
            "$defs": {"n": {"type": "integer"}},
        },
    }
    inner = schema_tool(schema).definition["parameters"]["properties"]["value"]
    assert inner["items"]["properties"]["$id"] == {"$ref": "#/$defs/n"}
    verdicts = judge_schema(schema, [([{"$id": 1}], True), ([{"$id": "x"}], False)], "hermes")
    assert [v.outcome for v in verdicts] == [Outcome.ACCEPTED, Outcome.REJECTED]


def test_wrapping_follows_a_reference_into_an_unknown_keyword():
    schema = {
        "type": "array",
        "items": {"$ref": "#/x-library/item"},
        "x-library": {"item": {"$ref": "#/$defs/n"}},
        "$defs": {"n": {"type": "integer"}},
        "enum": [[{"$ref": "#/$defs/n"}], [1], ["x"]],
    }
    inner = schema_tool(schema).definition["parameters"]["properties"]["value"]
    assert inner["x-library"]["item"] == {"$ref": "#/properties/value/$defs/n"}
    assert inner["enum"] == schema["enum"]  # data, not references
    verdicts = judge_schema(schema, [([1], True), (["x"], False)], "hermes")
    assert [v.outcome for v in verdicts] == [Outcome.ACCEPTED, Outcome.REJECTED]


def test_wrapping_copies_a_shared_object_for_each_place():
    shared = {"$ref": "#/$defs/n"}
    schema = {
        "type": "array",
        "items": {"type": "object", "properties": {"a": shared, "b": shared}},
        "$defs": {"n": {"type": "integer"}},
    }
    inner = schema_tool(schema).definition["parameters"]["properties"]["value"]
    properties = inner["items"]["properties"]
    assert properties["a"] == properties["b"] == {"$ref": "#/properties/value/$defs/n"}
    assert shared == {"$ref": "#/$defs/n"}


# -- annotation ---------------------------------------------------------------------


@pytest.mark.parametrize("member", ["properties", "$defs", "patternProperties"])
def test_a_member_named_schema_is_no_dialect_switch(member):
    # 2019-09 and later conjoin the types along the chain: object & [object, null] is object.
    # A nested $schema would make only the end of the chain count: [object, null].
    schema = {
        "$schema": DRAFT2020_URI,
        "type": "object",
        "properties": {"x": {"$ref": "#/$defs/a"}},
        "$defs": {"a": {"$ref": "#/$defs/b", "type": "object"}, "b": {"type": ["object", "null"]}},
    }
    schema.setdefault(member, {})["$schema"] = {"type": "string"}
    annotated = annotate_ref_types(schema)
    assert annotated["properties"]["x"]["type"] == "object"
    for instance in ({"x": {}}, {"x": None}, {"x": 1}, {"$schema": "s", "x": {}}):
        assert jsonschema_valid(annotated, instance) == jsonschema_valid(schema, instance)


# -- BFCL types --------------------------------------------------------------------------


def test_bfcl_types_map_schemas_not_names_or_data():
    parameters = {
        "type": "dict",
        "properties": {
            "type": {"type": "float"},
            "properties": {"type": "dict", "properties": {"enum": {"type": "list", "items": {"type": "integer"}}}},
            "enum": {"type": "string", "enum": ["dict", "float"], "default": {"type": "dict"}},
            "id": {"type": "tuple", "items": {"type": "bool"}},
        },
        "required": ["type"],
    }
    (tool,) = load_tools([{"name": "f", "parameters": parameters}])
    mapped = tool.parameters
    assert mapped["type"] == "object"
    props = mapped["properties"]
    assert props["type"] == {"type": "number"}
    assert props["properties"]["type"] == "object"
    assert props["properties"]["properties"]["enum"] == {"type": "array", "items": {"type": "integer"}}
    assert props["enum"] == {"type": "string", "enum": ["dict", "float"], "default": {"type": "dict"}}
    assert props["id"] == {"type": "array", "items": {"type": "boolean"}}
    assert set(props) == {"type", "properties", "enum", "id"}

"""Tests for constrained.schema.annotate: the copied ``type`` helps parsers and
never changes what a schema accepts (checked against jsonschema on corpora)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import referencing
from corpus import CORPUS
from jsonschema.validators import validator_for

from constrained.schema.annotate import annotate_ref_types

MASKBENCH = CORPUS / "maskbench"
JSTS = CORPUS / "jsts" / "draft2020-12"
MCP = CORPUS / "mcp"

DRAFT4 = "http://json-schema.org/draft-04/schema#"
DRAFT7 = "http://json-schema.org/draft-07/schema#"
DRAFT2019 = "https://json-schema.org/draft/2019-09/schema"
DRAFT2020 = "https://json-schema.org/draft/2020-12/schema"
ALL_DIALECTS = (
    "http://json-schema.org/draft-03/schema#",
    DRAFT4,
    "http://json-schema.org/draft-06/schema#",
    DRAFT7,
    DRAFT2019,
    DRAFT2020,
)


# -- helpers -----------------------------------------------------------------


def verdict(schema: Any, instance: Any) -> tuple[Any, ...]:
    """What jsonschema makes of ``instance``: its lazy ``is_valid`` answer and
    whether a full error walk finds errors, or the kind of error it raised.
    An empty registry (with jsonschema's bundled meta-schemas) means remote
    refs fail the same way every time instead of going to the network."""
    try:
        cls = validator_for(schema, default=jsonschema.Draft202012Validator)
        validator = cls(schema, registry=referencing.Registry())
        lazy = validator.is_valid(instance)
        # The full walk reaches keywords the lazy one stops before.
        full = not list(validator.iter_errors(instance))
        return ("verdict", lazy, full)
    except Exception as error:  # noqa: BLE001 - the kind is the verdict
        return ("raised", type(error).__name__)


def assert_same_verdicts(schema: Any, annotated: Any, instances: list[Any]) -> None:
    for instance in instances:
        assert verdict(schema, instance) == verdict(annotated, instance), instance


def added_types(original: Any, annotated: Any, path: str = "") -> int:
    """Check ``annotated`` is ``original`` plus ``type`` keys beside ``$ref``
    (and nothing else); return how many were added."""
    assert type(original) is type(annotated), path
    if isinstance(original, dict):
        added = 0
        extra = set(annotated) - set(original)
        if extra:
            assert extra == {"type"}, path
            assert isinstance(original.get("$ref"), str), path
            added = 1
        assert set(original) <= set(annotated), path
        for key, value in original.items():
            added += added_types(value, annotated[key], f"{path}/{key}")
        return added
    if isinstance(original, list):
        assert len(original) == len(annotated), path
        return sum(
            added_types(a, b, f"{path}/{i}")
            for i, (a, b) in enumerate(zip(original, annotated))
        )
    assert original == annotated, path
    return 0


def annotated_checked(schema: Any) -> Any:
    """Annotate, asserting the input is untouched and only types were added."""
    before = copy.deepcopy(schema)
    result = annotate_ref_types(schema)
    assert schema == before
    added_types(schema, result)
    return result


def load_corpus(folder: Path, pattern: str) -> list[Path]:
    assert folder.is_dir(), f"the corpus is missing: {folder}"
    return sorted(folder.glob(pattern))


# -- unit cases ----------------------------------------------------------------


@pytest.mark.parametrize(
    "target_type", ["integer", "object", "array", ["string", "null"]]
)
def test_ref_gets_target_type(target_type: Any) -> None:
    schema = {
        "type": "object",
        "properties": {"x": {"$ref": "#/$defs/T", "description": "kept"}},
        "$defs": {"T": {"type": target_type}},
    }
    result = annotated_checked(schema)
    assert result["properties"]["x"] == {
        "$ref": "#/$defs/T",
        "description": "kept",
        "type": target_type,
    }
    assert result["$defs"] == schema["$defs"]


def test_definitions_and_root_ref() -> None:
    schema = {
        "$schema": DRAFT7,
        "$ref": "#/definitions/Args",
        "definitions": {
            "Args": {
                "type": "object",
                "properties": {"n": {"$ref": "#/definitions/N"}},
            },
            "N": {"type": "integer"},
        },
    }
    result = annotated_checked(schema)
    assert result["type"] == "object"
    assert result["definitions"]["Args"]["properties"]["n"]["type"] == "integer"
    assert_same_verdicts(schema, result, [{"n": 1}, {"n": "1"}, [], 3])


def test_chained_refs() -> None:
    schema = {
        "properties": {"a": {"$ref": "#/$defs/Alias1"}},
        "$defs": {
            "Alias1": {"$ref": "#/$defs/Alias2"},
            "Alias2": {"$ref": "#/$defs/Int"},
            "Int": {"type": "integer"},
        },
    }
    result = annotated_checked(schema)
    assert result["properties"]["a"]["type"] == "integer"
    # The aliases are $ref sites too.
    assert result["$defs"]["Alias1"]["type"] == "integer"
    assert result["$defs"]["Alias2"]["type"] == "integer"


def chain_with_typed_alias(
    dialect: str, alias_type: Any, end: dict[str, Any]
) -> dict[str, Any]:
    return {
        "$schema": dialect,
        "properties": {"a": {"$ref": "#/definitions/Alias"}},
        "definitions": {
            "Alias": {"$ref": "#/definitions/End", "type": alias_type},
            "End": end,
        },
    }


def test_chain_conjunction_in_2020_12() -> None:
    # Everything along the chain is conjoined: number and integer -> integer.
    schema = chain_with_typed_alias(DRAFT2020, "number", {"type": "integer"})
    assert annotated_checked(schema)["properties"]["a"]["type"] == "integer"
    # The alias's own type is implied even though the end has none.
    schema = chain_with_typed_alias(DRAFT2020, "string", {"minLength": 2})
    result = annotated_checked(schema)
    assert result["properties"]["a"]["type"] == "string"
    assert_same_verdicts(schema, result, [{"a": "xyz"}, {"a": 5}, {"a": "x"}])
    # Lists intersect, in the nearest one's order.
    schema = chain_with_typed_alias(
        DRAFT2020, ["string", "null", "number"], {"type": ["integer", "null"]}
    )
    assert annotated_checked(schema)["properties"]["a"]["type"] == ["null", "integer"]


def test_chain_with_contradiction_is_left_alone() -> None:
    schema = chain_with_typed_alias(DRAFT2020, "string", {"type": "integer"})
    result = annotated_checked(schema)
    assert "type" not in result["properties"]["a"]
    assert_same_verdicts(schema, result, [{"a": 1}, {"a": "1"}, {}])


def test_legacy_drafts_ignore_siblings_of_ref() -> None:
    # In draft-07 the alias's own "type" is ignored: only the end counts.
    schema = chain_with_typed_alias(DRAFT7, "number", {"type": "string"})
    result = annotated_checked(schema)
    assert result["properties"]["a"]["type"] == "string"
    assert_same_verdicts(schema, result, [{"a": "s"}, {"a": 1}])
    schema = chain_with_typed_alias(DRAFT7, "string", {"minimum": 2})
    result = annotated_checked(schema)
    assert "type" not in result["properties"]["a"]
    assert_same_verdicts(schema, result, [{"a": 5}, {"a": 1}, {"a": "s"}])


@pytest.mark.parametrize(
    ("ref", "name"),
    [
        ("#/$defs/a~1b", "a/b"),
        ("#/$defs/t~0x", "t~x"),
        ("#/$defs/~01", "~1"),
        ("#/$defs/%25pc", "%pc"),
        ("#/$defs/foo%22bar", 'foo"bar'),
        ("#/$defs/sp%20ace", "sp ace"),
        ("#/$defs/", ""),
    ],
)
def test_pointer_escapes(ref: str, name: str) -> None:
    schema = {"properties": {"p": {"$ref": ref}}, "$defs": {name: {"type": "boolean"}}}
    result = annotated_checked(schema)
    assert result["properties"]["p"]["type"] == "boolean"
    assert_same_verdicts(schema, result, [{"p": True}, {"p": 1}])


def test_pointer_into_properties_and_items() -> None:
    schema = {
        "properties": {
            "a": {"type": "array", "items": {"type": "number"}},
            "b": {"$ref": "#/properties/a"},
            "c": {"$ref": "#/properties/a/items"},
            "d": {"$ref": "#/properties/b"},
            "e": {"$ref": "#/allOf/0"},
        },
        "allOf": [{"type": "object"}],
    }
    props = annotated_checked(schema)["properties"]
    assert props["b"]["type"] == "array"
    assert props["c"]["type"] == "number"
    assert props["d"]["type"] == "array"
    assert props["e"]["type"] == "object"


def test_anchor_and_embedded_ids() -> None:
    schema = {
        "$id": "https://example.com/root.json",
        "properties": {
            "anchored": {"$ref": "#thing"},
            "absolute": {"$ref": "https://example.com/nested/leaf.json"},
            "nested": {
                "$id": "nested/",
                "properties": {"relative": {"$ref": "leaf.json"}},
            },
        },
        "$defs": {
            "thing": {"$anchor": "thing", "type": "string"},
            "leaf": {"$id": "nested/leaf.json", "type": "null"},
        },
    }
    props = annotated_checked(schema)["properties"]
    assert props["anchored"]["type"] == "string"
    assert props["absolute"]["type"] == "null"
    assert props["nested"]["properties"]["relative"]["type"] == "null"


def test_draft4_id_sets_the_base() -> None:
    schema = {
        "$schema": DRAFT4,
        "id": "http://example.com/root.json",
        "properties": {
            "sub": {"id": "sub/", "properties": {"c": {"$ref": "t.json"}}},
        },
        "definitions": {"t": {"id": "sub/t.json", "type": "boolean"}},
    }
    result = annotated_checked(schema)
    assert result["properties"]["sub"]["properties"]["c"]["type"] == "boolean"


def test_id_beside_ref_depends_on_dialect() -> None:
    def make(dialect: str) -> dict[str, Any]:
        return {
            "$schema": dialect,
            "$id": "http://example.com/root.json",
            "properties": {
                "a": {"$id": "http://example.com/other.json", "$ref": "#/definitions/t"}
            },
            "definitions": {"t": {"type": "integer"}},
        }

    # draft-07 ignores an $id beside $ref: the pointer is against the root.
    legacy = make(DRAFT7)
    result = annotated_checked(legacy)
    assert result["properties"]["a"]["type"] == "integer"
    assert_same_verdicts(legacy, result, [{"a": 1}, {"a": "x"}])
    # 2020-12 honours it: the pointer is against the site itself, dangling.
    modern = make(DRAFT2020)
    result = annotated_checked(modern)
    assert "type" not in result["properties"]["a"]
    assert_same_verdicts(modern, result, [{"a": 1}, {"a": "x"}])


def test_nested_dialect_base_follows_jsonschema() -> None:
    # jsonschema reads a subschema's own $id with the dialect around it, even
    # when that subschema declares another $schema: "t.json" is sub/t.json.
    schema = {
        "$id": "http://x/root.json",
        "properties": {
            "n": {
                "$schema": DRAFT7,
                "$id": "http://x/sub/",
                "$ref": "http://x/root.json#/$defs/t0",
                "properties": {"a": {"$ref": "t.json"}},
            }
        },
        "$defs": {
            "t0": {},
            "t1": {"$id": "http://x/sub/t.json", "type": "integer"},
            "t2": {"$id": "http://x/t.json", "type": "string"},
        },
    }
    result = annotated_checked(schema)
    assert result["properties"]["n"]["properties"]["a"]["type"] == "integer"
    assert "type" not in result["properties"]["n"]
    assert verdict(schema, {"n": {"a": "s"}})[1] is False
    assert_same_verdicts(schema, result, [{"n": {"a": "s"}}, {"n": {"a": 1}}])


def test_every_schema_position_is_walked() -> None:
    ref = {"$ref": "#/$defs/I"}
    schema = {
        "$defs": {"I": {"type": "integer"}, "alias": dict(ref)},
        "definitions": {"alias": dict(ref)},
        "properties": {"p": dict(ref)},
        "patternProperties": {"^x": dict(ref)},
        "additionalProperties": dict(ref),
        "propertyNames": dict(ref),
        "dependentSchemas": {"p": dict(ref)},
        "dependencies": {"p": dict(ref), "q": ["p"]},
        "unevaluatedProperties": dict(ref),
        "items": dict(ref),
        "prefixItems": [dict(ref), True],
        "additionalItems": dict(ref),
        "unevaluatedItems": dict(ref),
        "contains": dict(ref),
        "not": dict(ref),
        "if": dict(ref),
        "then": dict(ref),
        "else": dict(ref),
        "allOf": [dict(ref), False],
        "anyOf": [dict(ref)],
        "oneOf": [dict(ref)],
    }
    result = annotated_checked(schema)
    # One per position above (dependencies' list value is not a schema).
    assert added_types(schema, result) == 21
    older = {
        "$schema": DRAFT4,
        "definitions": {"I": {"type": "integer"}},
        "items": [{"$ref": "#/definitions/I"}, {"$ref": "#/definitions/I"}],
    }
    assert [item["type"] for item in annotated_checked(older)["items"]] == [
        "integer"
    ] * 2


def test_names_and_data_are_untouched() -> None:
    data_ref = {"$ref": "#/$defs/Obj"}
    schema = {
        "$defs": {"Obj": {"type": "object"}},
        "properties": {
            "$ref": {"type": "string"},
            "type": {"$ref": "#/$defs/Obj"},
            "e": {"enum": [data_ref, 1]},
            "c": {"const": data_ref},
            "d": {"type": "object", "default": data_ref, "examples": [data_ref]},
        },
        "default": {"$ref": "#/$defs/Obj"},
        "examples": [{"$ref": "#/$defs/Obj"}],
        "const": {"properties": {"x": {"$ref": "#/$defs/Obj"}}},
    }
    result = annotated_checked(schema)
    props = result["properties"]
    # The property called "$ref" is a name, not a reference.
    assert props["$ref"] == {"type": "string"}
    # The property called "type" is a real $ref site.
    assert props["type"] == {"$ref": "#/$defs/Obj", "type": "object"}
    assert props["e"]["enum"] == [data_ref, 1]
    assert props["c"]["const"] == data_ref
    assert props["d"]["default"] == data_ref and props["d"]["examples"] == [data_ref]
    assert result["default"] == schema["default"]
    assert result["examples"] == schema["examples"]
    assert result["const"] == schema["const"]
    assert added_types(schema, result) == 1


def test_existing_type_is_not_overwritten() -> None:
    schema = {
        "properties": {"a": {"$ref": "#/$defs/I", "type": "number"}},
        "$defs": {"I": {"type": "integer"}},
    }
    assert annotated_checked(schema)["properties"]["a"]["type"] == "number"


@pytest.mark.parametrize(
    "ref",
    [
        "#/$defs/missing",
        "#/nowhere/at/all",
        "#/$defs/I/properties/0",
        "https://example.com/remote.json",
        "other.json#/$defs/I",
        "#no-such-anchor",
        "#/$defs/I/%zz",
        "#/items/9",
    ],
)
def test_unresolvable_refs_are_left_alone(ref: str) -> None:
    schema = {"properties": {"a": {"$ref": ref}}, "$defs": {"I": {"type": "integer"}}}
    result = annotated_checked(schema)
    assert result == schema
    assert_same_verdicts(schema, result, [{"a": 1}, {}])


def test_cycles_terminate() -> None:
    schema = {
        "properties": {
            "a": {"$ref": "#/$defs/A"},
            "self": {"$ref": "#/properties/self"},
        },
        "$defs": {"A": {"$ref": "#/$defs/B"}, "B": {"$ref": "#/$defs/A"}},
    }
    assert annotated_checked(schema) == schema


def test_recursive_tree_model() -> None:
    schema = {
        "$ref": "#/$defs/node",
        "$defs": {
            "node": {
                "type": "object",
                "properties": {
                    "value": {"type": "integer"},
                    "children": {"type": "array", "items": {"$ref": "#/$defs/node"}},
                    "parent": {"anyOf": [{"$ref": "#"}, {"type": "null"}]},
                },
            }
        },
    }
    result = annotated_checked(schema)
    node = result["$defs"]["node"]
    assert result["type"] == "object"
    assert node["properties"]["children"]["items"]["type"] == "object"
    # "#" is the root, whose type is object by virtue of its own $ref.
    assert node["properties"]["parent"]["anyOf"][0]["type"] == "object"
    tree = {"value": 1, "children": [{"value": 2, "children": []}], "parent": None}
    assert_same_verdicts(
        schema, result, [tree, {"children": [1]}, {"parent": {"value": "x"}}]
    )


def test_ref_into_a_type_keyword_disables_annotation() -> None:
    # Once "type" were added under properties/a, "#/properties/a/type" would
    # start resolving (to a string): keep the document as it is.
    schema = {
        "properties": {
            "a": {"$ref": "#/$defs/I"},
            "b": {"$ref": "#/properties/a/type"},
        },
        "$defs": {"I": {"type": "integer"}},
    }
    result = annotated_checked(schema)
    assert result == schema
    assert_same_verdicts(schema, result, [{"a": 1}, {"b": 1}])
    # A property *named* "type" is fine.
    schema = {
        "properties": {
            "type": {"$ref": "#/$defs/I"},
            "b": {"$ref": "#/properties/type"},
        },
        "$defs": {"I": {"type": "integer"}},
    }
    props = annotated_checked(schema)["properties"]
    assert props["type"]["type"] == props["b"]["type"] == "integer"


def test_mixed_dialects_copy_only_the_end_type() -> None:
    schema = {
        "properties": {"a": {"$ref": "#/$defs/Alias"}, "b": {"$ref": "#/$defs/Old"}},
        "$defs": {
            "Alias": {"$ref": "#/$defs/End", "type": "string"},
            "End": {"maxLength": 3},
            "Old": {"$schema": DRAFT7, "$ref": "#/$defs/End", "type": "string"},
        },
    }
    result = annotated_checked(schema)
    assert "type" not in result["properties"]["a"]
    assert "type" not in result["properties"]["b"]
    assert_same_verdicts(schema, result, [{"a": "ab"}, {"a": 1}, {"b": 1}])


@pytest.mark.parametrize(
    "schema",
    [
        {"$ref": 5},
        {"$ref": None, "properties": []},
        {
            "$id": 7,
            "properties": {"a": {"$ref": "#/$defs/I"}},
            "$defs": {"I": {"type": "integer"}},
        },
        {"$schema": 3, "$ref": "#"},
        {"$schema": "not a dialect", "$ref": "#"},
        {"properties": {"a": {"$ref": "#/$defs/T"}}, "$defs": {"T": True}},
        {"properties": {"a": {"$ref": "#/$defs/F"}}, "$defs": {"F": False}},
        {"properties": {"a": {"$ref": "#/$defs/T"}}, "$defs": {"T": {"type": "any"}}},
        {"properties": {"a": {"$ref": "#/$defs/T"}}, "$defs": {"T": {"type": []}}},
        {
            "properties": {"a": {"$ref": "#/$defs/T"}},
            "$defs": {"T": {"type": {"x": 1}}},
        },
        {
            "properties": {"a": {"$ref": "#/$defs/T"}},
            "$defs": {"T": {"type": ["string", 1]}},
        },
        {
            "properties": {"a": {"$ref": "#/$defs/T/0"}},
            "$defs": {"T": [{"type": "integer"}]},
        },
        {"$defs": [], "definitions": "x", "items": [1, None], "allOf": {}, "not": []},
        {
            "properties": {"a": {"$ref": "#/$defs/Obj"}},
            "$defs": {"Obj": {"$anchor": 3, "type": "object"}},
        },
    ],
)
def test_weird_schemas_do_not_raise(schema: dict[str, Any]) -> None:
    result = annotated_checked(schema)
    assert_same_verdicts(schema, result, [{"a": 1}, {"a": "s"}, [], None])


def test_duplicate_type_names_are_collapsed() -> None:
    schema = {
        "properties": {"a": {"$ref": "#/$defs/T"}},
        "$defs": {"T": {"type": ["string", "string"]}},
    }
    assert annotated_checked(schema)["properties"]["a"]["type"] == "string"


def test_boolean_and_trivial_inputs() -> None:
    assert annotate_ref_types(True) is True  # type: ignore[arg-type]
    assert annotate_ref_types({}) == {}


def test_input_is_not_mutated_and_result_shares_nothing() -> None:
    schema = {
        "properties": {
            "a": {"$ref": "#/$defs/I"},
            "b": {"type": "array", "items": {"$ref": "#/$defs/I"}},
        },
        "$defs": {"I": {"type": ["integer", "null"]}},
    }
    snapshot = json.dumps(schema, sort_keys=True)
    result = annotate_ref_types(schema)
    assert json.dumps(schema, sort_keys=True) == snapshot
    assert result["properties"]["a"]["type"] == ["integer", "null"]
    result["properties"]["a"]["type"].append("string")
    result["$defs"]["I"]["type"].append("string")
    assert json.dumps(schema, sort_keys=True) == snapshot
    assert annotate_ref_types(annotate_ref_types(schema)) == annotate_ref_types(schema)


def test_shared_python_object_with_conflicting_bases() -> None:
    # The same dict object sits in two resources whose "t.json" differ.
    shared = {"$ref": "t.json"}
    schema = {
        "$id": "https://example.com/",
        "properties": {
            "x": {"$id": "x/", "properties": {"s": shared}},
            "y": {"$id": "y/", "properties": {"s": shared}},
        },
        "$defs": {
            "xt": {"$id": "x/t.json", "type": "string"},
            "yt": {"$id": "y/t.json", "type": "integer"},
        },
    }
    result = annotated_checked(schema)
    assert "type" not in result["properties"]["x"]["properties"]["s"]
    assert_same_verdicts(
        schema, result, [{"x": {"s": "a"}, "y": {"s": 1}}, {"x": {"s": 1}}]
    )


# -- corpora -------------------------------------------------------------------


def test_maskbench_verdicts_unchanged() -> None:
    """On every MaskBench test instance, jsonschema says the same about the
    original and the annotated schema."""
    files = load_corpus(MASKBENCH, "*.json")
    instances = changed_files = added = raised = 0
    for path in files:
        case = json.loads(path.read_text())
        schema = case["schema"]
        result = annotated_checked(schema)
        count = added_types(schema, result)
        added += count
        changed_files += count > 0
        for test in case["tests"]:
            original = verdict(schema, test["data"])
            assert verdict(result, test["data"]) == original, (
                path.name,
                test["description"],
            )
            raised += original[0] == "raised"
            instances += 1
    print(
        f"maskbench: {len(files)} files, {instances} instances compared, "
        f"{changed_files} files annotated ({added} types added), "
        f"{raised} instances where jsonschema raised"
    )
    assert len(files) == 3455
    assert instances == 4410
    # 86 files / 725 types at the time of writing; fewer means a regression.
    assert changed_files >= 86
    assert added >= 725


def test_maskbench_ref_schemas_under_every_dialect() -> None:
    """The same, with each ``$ref``-using schema read as each draft (the
    sibling rules of ``$ref`` and the base-URI rules differ)."""
    compared = 0
    for path in load_corpus(MASKBENCH, "*.json"):
        case = json.loads(path.read_text())
        if not isinstance(case["schema"], dict) or "$ref" not in json.dumps(
            case["schema"]
        ):
            continue
        for dialect in ALL_DIALECTS:
            schema = {**case["schema"], "$schema": dialect}
            result = annotated_checked(schema)
            for test in case["tests"]:
                assert verdict(result, test["data"]) == verdict(schema, test["data"]), (
                    path.name,
                    dialect,
                    test["description"],
                )
                compared += 1
    print(
        f"maskbench $ref schemas x {len(ALL_DIALECTS)} dialects: {compared} instances compared"
    )
    assert compared == 119 * len(ALL_DIALECTS)


def test_json_schema_test_suite_verdicts_unchanged() -> None:
    """The draft 2020-12 test suite (embedded $id, anchors, escapes,
    $dynamicRef, unevaluated*) gives the same verdicts after annotation."""
    files = [p for p in load_corpus(JSTS, "**/*.json") if "remotes" not in p.parts]
    cases = instances = changed = 0
    for path in files:
        for case in json.loads(path.read_text()):
            schema = case["schema"]
            result = annotated_checked(schema) if isinstance(schema, dict) else schema
            cases += 1
            changed += result != schema
            for test in case["tests"]:
                assert verdict(result, test["data"]) == verdict(schema, test["data"]), (
                    path.name,
                    case["description"],
                    test["description"],
                )
                instances += 1
    print(
        f"JSON-Schema-Test-Suite 2020-12: {cases} cases, {instances} instances, {changed} annotated"
    )
    assert instances >= 2000 and changed >= 40


def test_mcp_aws_pricing_annotations() -> None:
    load_corpus(MCP, "*.json")
    tools = json.loads((MCP / "aws-pricing.tools.json").read_text())["tools"]
    schema = next(t["inputSchema"] for t in tools if t["name"] == "get_pricing")
    result = annotated_checked(schema)
    props = result["properties"]
    # anyOf branch with a bare $ref to a model: now visibly an object.
    assert props["output_options"]["anyOf"][0] == {
        "$ref": "#/$defs/OutputOptions",
        "type": "object",
    }
    assert props["output_options"]["anyOf"][1] == {"type": "null"}
    # Array items that are a $ref to a model.
    assert props["filters"]["anyOf"][0]["items"] == {
        "$ref": "#/$defs/PricingFilter",
        "type": "object",
    }
    assert "type" not in props["filters"] and "type" not in props["output_options"]
    assert result["$defs"] == schema["$defs"]
    assert added_types(schema, result) == 2
    assert_same_verdicts(
        schema,
        result,
        [
            {"service_code": "AmazonEC2"},
            {
                "service_code": "AmazonEC2",
                "filters": [{"Field": "instanceType", "Value": "t3.micro"}],
            },
            {
                "service_code": "AmazonEC2",
                "filters": ['{"Field": "instanceType", "Value": "t3.micro"}'],
            },
            {
                "service_code": "AmazonEC2",
                "output_options": {"pricing_terms": ["OnDemand"]},
            },
            {
                "service_code": "AmazonEC2",
                "output_options": '{"pricing_terms": ["OnDemand"]}',
            },
            {"service_code": "AmazonEC2", "output_options": None},
        ],
    )


def test_mcp_schemas_without_refs_are_unchanged() -> None:
    seen = 0
    for path in load_corpus(MCP, "*.json"):
        for tool in json.loads(path.read_text())["tools"]:
            schema = tool["inputSchema"]
            if "$ref" not in json.dumps(schema):
                assert annotated_checked(schema) == schema, (path.name, tool["name"])
                seen += 1
    assert seen >= 60

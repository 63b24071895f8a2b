"""The normalizer: one faithful reading of a tool's JSON Schema as typed frames."""

from __future__ import annotations

import pytest

from constrained.errors import SchemaError, ToolDefinitionError, UnsatisfiableSchemaError
from constrained.frames.accepts import frame_accepts
from constrained.frames.model import (
    ArrayFrame,
    BooleanFrame,
    EnumFrame,
    FreeFrame,
    IntegerFrame,
    NormalizedSchema,
    NullFrame,
    NumberFrame,
    ObjectFrame,
    RefFrame,
    StringFrame,
    UnionFrame,
)
from constrained.frames.normalize import RELAXED_KEYWORDS, normalize_schema
from constrained.frames.toolset import normalize_tool
from constrained.frames.types import effective_type
from constrained.tools import Tool


def tool(parameters: dict, name: str = "t") -> Tool:
    return Tool(name=name, description="", parameters=parameters, source="function")


def param(parameters: dict, key: str = "p"):
    """The normalized tool and the frame of one of its parameters."""
    normalized = normalize_tool(tool(parameters))
    root = normalized.schema.resolve(normalized.root)
    assert isinstance(root, ObjectFrame)
    frame = root.property(key)
    assert frame is not None, f"{key!r} missing from {root}"
    return normalized, frame


NODE = {
    "type": "object",
    "properties": {
        "value": {"type": "integer"},
        "children": {"type": "array", "items": {"$ref": "#/$defs/Node"}},
    },
    "required": ["value"],
}

# (id, parameters schema, expected effective type of "p", values "p" accepts, values it rejects)
TABLE = [
    ("direct integer", {"properties": {"p": {"type": "integer"}}}, "integer", [1, 1.0, -7], ["1", 1.5, None]),
    (
        "$ref to integer",
        {"$defs": {"n": {"type": "integer"}}, "properties": {"p": {"$ref": "#/$defs/n"}}},
        "integer",
        [10],
        ["10"],
    ),
    (
        "$ref to object",
        {
            "$defs": {"o": {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]}},
            "properties": {"p": {"$ref": "#/$defs/o"}},
        },
        "object",
        [{"a": "x"}],
        ['{"a": "x"}', {}, {"a": "x", "b": 1}],
    ),
    (
        "$ref to array",
        {"$defs": {"ids": {"type": "array", "items": {"type": "integer"}}}, "properties": {"p": {"$ref": "#/$defs/ids"}}},
        "array",
        [[1, 2, 3], []],
        ["[1, 2, 3]", [1, "2"]],
    ),
    (
        "chained $ref",
        {
            "definitions": {
                "alias": {"$ref": "#/definitions/alias2"},
                "alias2": {"$ref": "#/definitions/count"},
                "count": {"type": "integer"},
            },
            "properties": {"p": {"$ref": "#/definitions/alias"}},
        },
        "integer",
        [3],
        ["3", 3.5],
    ),
    ("oneOf[integer, null]", {"properties": {"p": {"oneOf": [{"type": "integer"}, {"type": "null"}]}}}, "integer", [123, None], ["123"]),
    ("anyOf[integer, null]", {"properties": {"p": {"anyOf": [{"type": "integer"}, {"type": "null"}]}}}, "integer", [123, None], ["123"]),
    (
        "type [object, null]",
        {"properties": {"p": {"type": ["object", "null"], "properties": {"a": {"type": "integer"}}}}},
        "object",
        [{"a": 1}, None],
        ["null", {"a": "1"}],
    ),
    ("nullable: true", {"properties": {"p": {"type": "string", "nullable": True}}}, "string", ["x", None], [1]),
    (
        "self-referential $ref",
        {"$defs": {"Node": NODE}, "properties": {"p": {"$ref": "#/$defs/Node"}}},
        "object",
        [{"value": 1, "children": [{"value": 2, "children": [{"value": 3}]}]}],
        [{"value": 1, "children": [{"children": []}]}],
    ),
    ("dangling $ref", {"properties": {"p": {"$ref": "#/$defs/missing"}}}, "ambiguous", ["x", 1, {"a": [1]}, None], []),
    (
        "escaped definition names",
        {
            "$defs": {"a/b": {"type": "integer"}, "c~d": {"$ref": "#/$defs/a~1b"}, "e%f g": {"$ref": "#/$defs/c~0d"}},
            "properties": {"p": {"$ref": "#/$defs/e%25f%20g"}},
        },
        "integer",
        [5],
        ["5"],
    ),
    (
        "maxLength conjunction",
        {"$defs": {"s": {"type": "string", "maxLength": 1}}, "properties": {"p": {"$ref": "#/$defs/s", "maxLength": 3}}},
        "string",
        ["", "x"],
        ["xy", "xyz"],
    ),
    (
        "pointer ref into properties",
        {
            "properties": {
                "data": {"type": "object", "properties": {"children": {"type": "array", "items": {"type": "number"}}}},
                "p": {"$ref": "#/properties/data/properties/children/items"},
            }
        },
        "number",
        [1.5, 2],
        ["1.5"],
    ),
]


@pytest.mark.parametrize("schema, expected_type, accepted, rejected", [row[1:] for row in TABLE], ids=[row[0] for row in TABLE])
def test_table(schema, expected_type, accepted, rejected):
    normalized, frame = param(schema)
    definitions = normalized.schema.definitions
    assert effective_type(frame, definitions) == expected_type
    for value in accepted:
        assert frame_accepts(frame, value, definitions), value
    for value in rejected:
        assert not frame_accepts(frame, value, definitions), value


def test_self_reference_becomes_a_recursive_frame():
    normalized, frame = param({"$defs": {"Node": NODE}, "properties": {"p": {"$ref": "#/$defs/Node"}}})
    assert isinstance(frame, RefFrame)
    body = normalized.schema.definitions[frame.name]
    assert isinstance(body, ObjectFrame)
    children = body.property("children")
    assert children == ArrayFrame(items=RefFrame(frame.name))


def test_mutual_recursion_terminates():
    schema = {
        "$defs": {
            "Comment": {
                "type": "object",
                "properties": {"text": {"type": "string"}, "replies": {"$ref": "#/$defs/Replies"}},
                "required": ["text"],
            },
            "Replies": {"type": "array", "items": {"$ref": "#/$defs/Comment"}},
        },
        "properties": {"p": {"$ref": "#/$defs/Comment"}},
    }
    normalized, frame = param(schema)
    value = {"text": "a", "replies": [{"text": "b", "replies": [{"text": "c"}]}]}
    assert frame_accepts(frame, value, normalized.schema.definitions)
    assert not frame_accepts(frame, {"text": "a", "replies": [{"replies": []}]}, normalized.schema.definitions)


def test_pydantic_style_root_ref():
    schema = {"$defs": {"Node": NODE}, "$ref": "#/$defs/Node"}
    normalized = normalize_tool(tool(schema))
    root = normalized.schema.resolve(normalized.root)
    assert root.required == ("value",)
    assert frame_accepts(root, {"value": 1, "children": [{"value": 2}]}, normalized.schema.definitions)


@pytest.mark.parametrize(
    "schema",
    [
        {"$defs": {"a": {"$ref": "#/$defs/a"}}, "properties": {"p": {"$ref": "#/$defs/a"}}},
        {"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}}, "properties": {"p": {"$ref": "#/$defs/a"}}},
        {"$defs": {"a": {"allOf": [{"$ref": "#/$defs/a"}]}}, "properties": {"p": {"$ref": "#/$defs/a"}}},
        {"$defs": {"a": {"anyOf": [{"$ref": "#/$defs/a"}]}}, "properties": {"p": {"$ref": "#/$defs/a"}}},
    ],
    ids=["self", "two-step", "through allOf", "through anyOf"],
)
def test_ref_cycle_without_content_is_free_with_warning(schema):
    normalized, frame = param(schema)
    assert frame == FreeFrame()
    assert any(w.keyword == "$ref" and "back to itself" in w.message for w in normalized.warnings)


def test_ref_cycle_keeps_content_beside_it():
    schema = {"$defs": {"a": {"allOf": [{"$ref": "#/$defs/a"}, {"type": "string", "maxLength": 2}]}}, "properties": {"p": {"$ref": "#/$defs/a"}}}
    _, frame = param(schema)
    assert frame == StringFrame(max_length=2)


@pytest.mark.parametrize("ref", ["http://example.com/schema.json", "other.json#/x", "#/$defs/nope", "#/properties/nope/items"])
def test_unresolvable_refs_are_free_with_warning(ref):
    normalized, frame = param({"properties": {"p": {"$ref": ref}}})
    assert frame == FreeFrame()
    (warning,) = normalized.warnings
    assert warning.path == "/properties/p" and warning.keyword == "$ref" and ref in warning.message


def test_embedded_id_resolves_relative_refs():
    schema = {
        "$defs": {
            "inner": {
                "$id": "http://example.com/inner.json",
                "$defs": {"n": {"type": "integer"}},
                "$ref": "#/$defs/n",
            }
        },
        "properties": {"p": {"$ref": "http://example.com/inner.json"}},
    }
    _, frame = param(schema)
    assert frame == IntegerFrame()


# -- conjunction -----------------------------------------------------------------------


def test_allof_tightens_bounds_and_unites_required():
    schema = {
        "allOf": [
            {"type": "object", "properties": {"a": {"type": "integer", "minimum": 0, "maximum": 10}}, "required": ["a"]},
            {"properties": {"a": {"minimum": 3, "maximum": 20}, "b": {"type": "string"}}, "required": ["b"]},
        ]
    }
    normalized = normalize_tool(tool(schema))
    root = normalized.root
    assert isinstance(root, ObjectFrame)
    assert root.required == ("a", "b")
    assert root.property("a") == IntegerFrame(minimum=3, maximum=10)
    assert root.property("b") == StringFrame()


def test_enums_intersect_and_keep_typed_values():
    _, frame = param({"properties": {"p": {"enum": ["a", "b", 1, "1"], "allOf": [{"enum": ["b", "1", 1.0, "c"]}]}}})
    assert frame == EnumFrame(("b", 1, "1"))


def test_const_is_typed():
    normalized, frame = param({"properties": {"p": {"const": 1}}})
    assert frame_accepts(frame, 1) and frame_accepts(frame, 1.0)
    assert not frame_accepts(frame, "1") and not frame_accepts(frame, True)
    _, string_const = param({"properties": {"p": {"const": "1"}}})
    assert not frame_accepts(string_const, 1)


def test_enum_values_other_keywords_exclude_are_dropped():
    _, frame = param({"properties": {"p": {"type": "string", "enum": ["a", "abc", 3], "maxLength": 2}}})
    assert frame == EnumFrame(("a",))


def test_sibling_keys_beside_ref_add_to_the_definition():
    schema = {
        "$defs": {"Opts": {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]}},
        "properties": {"p": {"$ref": "#/$defs/Opts", "properties": {"y": {"type": "boolean"}}, "required": ["y"]}},
    }
    _, frame = param(schema)
    assert isinstance(frame, ObjectFrame)
    assert frame.required == ("x", "y")
    assert dict(frame.properties) == {"x": IntegerFrame(), "y": BooleanFrame()}


def test_keys_beside_anyof_distribute_into_branches():
    schema = {"properties": {"p": {"anyOf": [{"type": "string"}, {"type": "array"}], "maxLength": 2, "maxItems": 1}}}
    _, frame = param(schema)
    assert frame == UnionFrame((StringFrame(max_length=2), ArrayFrame(items=FreeFrame(), max_items=1)))


def test_draft7_ignores_keys_beside_ref():
    schema = {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "definitions": {"s": {"type": "string"}},
        "properties": {"p": {"$ref": "#/definitions/s", "maxLength": 1}},
    }
    _, frame = param(schema)
    assert frame == StringFrame()


@pytest.mark.parametrize(
    "schema, path, reason",
    [
        ({"properties": {"p": {"allOf": [{"type": "string", "minLength": 5}, {"maxLength": 3}]}}}, "p", "minLength 5 > maxLength 3"),
        ({"properties": {"p": {"type": "integer", "allOf": [{"type": "string"}]}}}, "p", "no type in common"),
        ({"properties": {"p": {"enum": [1, 2], "allOf": [{"enum": [3]}]}}}, "p", "no enum/const value"),
        ({"properties": {"p": {"type": "integer", "minimum": 5, "allOf": [{"maximum": 4}]}}}, "p", "exclude every integer"),
        ({"properties": {"p": {"type": "number", "exclusiveMinimum": 1, "maximum": 1}}}, "p", "exclude every number"),
    ],
)
def test_unsatisfiable_merge_names_the_path(schema, path, reason):
    with pytest.raises(UnsatisfiableSchemaError) as info:
        normalize_tool(tool({**schema, "required": [path]}, name="bad_tool"))
    message = str(info.value)
    assert "bad_tool" in message and f"/properties/{path}" in message and reason in message
    assert f"required key {path!r}" in message


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "boolean", "enum": ["True", "False", "dontcare"]},
        {"type": "object", "enum": ["MODIFIABLE", "DELETABLE"]},
        {"type": "array", "items": {"type": "string"}, "enum": ["temperature", "humidity"]},
        {"type": "integer", "enum": ["1", "2", "3"]},
        {"type": "string", "minLength": 4, "maxLength": 2},
    ],
)
def test_optional_key_no_value_satisfies_may_not_appear(schema):
    """JSON Schema's own reading: an optional key whose schema nothing
    satisfies can only be left out. The tool stays usable, with a warning
    naming the key's pointer."""
    normalized = normalize_tool(tool({"type": "object", "properties": {"q": {"type": "string"}, "bad": schema}, "required": ["q"]}))
    root = normalized.root
    assert root.forbidden == ("bad",) and root.property("bad") is None
    assert frame_accepts(root, {"q": "x"})
    for value in ("True", True, ["temperature"], 1, "1", {}):
        assert not frame_accepts(root, {"q": "x", "bad": value})
    [warning] = [w for w in normalized.warnings if w.keyword == "unsatisfiable"]
    assert warning.path == "/properties/bad" and "'bad'" in warning.message and "may not appear" in warning.message


def test_unsatisfiable_items_and_additional_properties_allow_none():
    normalized = normalize_tool(tool({
        "type": "object",
        "properties": {
            "tags": {"type": "array", "items": {"type": "integer", "enum": ["a"]}},
            "extra": {"type": "object", "additionalProperties": {"type": "null", "minimum": 1, "enum": [1]}},
        },
    }))
    assert frame_accepts(normalized.root, {"tags": [], "extra": {}})
    assert not frame_accepts(normalized.root, {"tags": [1]})
    assert not frame_accepts(normalized.root, {"extra": {"k": None}})
    assert {w.path for w in normalized.warnings if w.keyword == "unsatisfiable"} == {
        "/properties/tags/items", "/properties/extra/additionalProperties"
    }


def test_unsatisfiable_optional_key_is_forbidden_not_an_error():
    normalized = normalize_tool(tool({"type": "object", "properties": {"a": False, "b": {"type": "string"}}, "additionalProperties": True}))
    root = normalized.root
    assert root.forbidden == ("a",)
    assert not frame_accepts(root, {"a": 1})
    assert frame_accepts(root, {"b": "x", "c": 1})


def test_unsatisfiable_union_branch_is_dropped():
    _, frame = param({"properties": {"p": {"type": "integer", "anyOf": [{"type": "string"}, {"minimum": 2}]}}})
    assert frame == IntegerFrame(minimum=2)


# -- unions ------------------------------------------------------------------------


def test_oneof_with_overlapping_branches_is_relaxed_with_warning():
    normalized, frame = param({"properties": {"p": {"oneOf": [{"type": "integer"}, {"type": "number", "minimum": 0}]}}})
    assert isinstance(frame, UnionFrame)
    assert [w.keyword for w in normalized.warnings] == ["oneOf"]
    assert normalized.warnings[0].path == "/properties/p"


@pytest.mark.parametrize(
    "branches",
    [
        [{"type": "integer"}, {"type": "string"}],
        [{"const": "a"}, {"const": "b"}],
        [{"type": "integer", "maximum": 0}, {"type": "integer", "minimum": 1}],
        [
            {"type": "object", "properties": {"kind": {"const": "a"}}, "required": ["kind"]},
            {"type": "object", "properties": {"kind": {"const": "b"}, "x": {"type": "integer"}}, "required": ["kind"]},
        ],
    ],
    ids=["types", "consts", "ranges", "discriminator"],
)
def test_disjoint_oneof_is_exact(branches):
    normalized, _ = param({"properties": {"p": {"oneOf": branches}}})
    assert normalized.warnings == ()


def test_union_options_are_flattened_and_deduplicated():
    _, frame = param({"properties": {"p": {"anyOf": [{"type": "string"}, {"anyOf": [{"type": "string"}, {"type": "null"}]}]}}})
    assert frame == UnionFrame((StringFrame(), NullFrame()))


# -- scalars -------------------------------------------------------------------------


def test_integer_accepts_integral_floats_and_tightens_fractional_bounds():
    _, frame = param({"properties": {"p": {"type": "integer", "exclusiveMinimum": 0.5, "maximum": 9.9, "multipleOf": 3}}})
    assert frame == IntegerFrame(minimum=3, maximum=9, multiple_of=3)
    assert frame_accepts(frame, 6.0) and not frame_accepts(frame, 4)


@pytest.mark.parametrize(
    "schema, expected",
    [
        ({"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1}, NumberFrame(0, 1, True, True)),
        (
            {"$schema": "http://json-schema.org/draft-04/schema#", "type": "number", "minimum": 0, "exclusiveMinimum": True},
            NumberFrame(0, None, True, False),
        ),
        ({"type": "number", "minimum": 2, "exclusiveMinimum": 2}, NumberFrame(2, None, True, False)),
        ({"type": "number", "multipleOf": 0.1, "allOf": [{"multipleOf": 0.25}]}, NumberFrame(multiple_of=0.5)),
    ],
    ids=["exclusive", "draft-04 boolean exclusive", "tie goes to exclusive", "multipleOf lcm"],
)
def test_number_bounds(schema, expected):
    if "$schema" in schema:
        normalized = normalize_schema(schema)
        assert normalized.root == expected
    else:
        _, frame = param({"properties": {"p": schema}})
        assert frame == expected


def test_string_lengths_count_characters():
    _, frame = param({"properties": {"p": {"type": "string", "minLength": 2, "maxLength": 3}}})
    assert frame_accepts(frame, "éé") and frame_accepts(frame, "日本語")
    assert not frame_accepts(frame, "日本語!")


def test_supported_and_unsupported_formats():
    normalized = normalize_tool(
        tool({"properties": {"a": {"type": "string", "format": "uuid"}, "b": {"type": "string", "format": "color"}}})
    )
    root = normalized.root
    assert root.property("a") == StringFrame(format="uuid")
    assert root.property("b") == StringFrame()
    assert [(w.path, w.keyword) for w in normalized.warnings] == [("/properties/b", "format")]


def test_patterns_accumulate():
    _, frame = param({"properties": {"p": {"type": "string", "pattern": "^a", "allOf": [{"pattern": "z$"}]}}})
    assert frame == StringFrame(patterns=("^a", "z$"))


# -- arrays --------------------------------------------------------------------------


def test_prefix_items_and_rest():
    _, frame = param(
        {"properties": {"p": {"type": "array", "prefixItems": [{"type": "string"}, {"type": "integer"}], "items": False, "minItems": 1}}}
    )
    assert frame == ArrayFrame((StringFrame(), IntegerFrame()), None, 1, 2)
    assert frame_accepts(frame, ["a", 1]) and not frame_accepts(frame, ["a", 1, 2]) and not frame_accepts(frame, [])


def test_draft7_item_tuples():
    schema = {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "type": "array",
        "items": [{"type": "string"}],
        "additionalItems": {"type": "boolean"},
        "maxItems": 3,
    }
    assert normalize_schema(schema).root == ArrayFrame((StringFrame(),), BooleanFrame(), 0, 3)


# -- objects -------------------------------------------------------------------------


def test_declared_properties_close_the_object_by_default():
    schema = {"type": "object", "properties": {"a": {"type": "string"}}}
    assert normalize_schema(schema).root.additional is None
    assert normalize_schema(schema, strict=False).root.additional == FreeFrame()


@pytest.mark.parametrize(
    "additional, expected",
    [(False, None), (True, FreeFrame()), ({"type": "integer"}, IntegerFrame())],
)
def test_additional_properties(additional, expected):
    schema = {"type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": additional}
    assert normalize_schema(schema).root.additional == expected


def test_object_without_properties_is_open():
    _, frame = param({"properties": {"p": {"type": "object"}}})
    assert frame == ObjectFrame(additional=FreeFrame())
    assert frame_accepts(frame, {"any": {"nested": [1, "}"]}})


def test_required_key_not_in_properties_gets_a_free_value():
    root = normalize_schema({"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a", "b"]}).root
    assert root.property("b") == FreeFrame()
    assert root.required == ("a", "b")
    assert root.additional is None


def test_pattern_properties_and_counts():
    schema = {
        "type": "object",
        "patternProperties": {"^x-": {"type": "string"}},
        "properties": {"x-id": {"maxLength": 2}},
        "minProperties": 1,
        "maxProperties": 3,
    }
    root = normalize_schema(schema).root
    assert root.property("x-id") == StringFrame(max_length=2)
    assert root.pattern_properties == (("^x-", StringFrame()),)
    assert (root.min_properties, root.max_properties, root.additional) == (1, 3, None)


def test_property_order_is_schema_order():
    root = normalize_schema({"type": "object", "properties": {"z": {}, "a": {}, "m": {}}}).root
    assert [k for k, _ in root.properties] == ["z", "a", "m"]


# -- data is never schema ----------------------------------------------------------------


def test_annotation_and_data_keywords_are_not_read_as_schema():
    schema = {
        "type": "object",
        "title": {"$ref": "#/nowhere"},
        "description": "a",
        "default": {"$ref": "#/nowhere", "type": "string"},
        "examples": [{"not": {}}],
        "properties": {
            "$ref": {"type": "string"},
            "type": {"enum": [{"$ref": "#/x"}, {"type": "integer"}]},
            "not": {"const": {"allOf": [False]}},
        },
    }
    normalized = normalize_tool(tool(schema))
    assert normalized.warnings == ()
    root = normalized.root
    assert [k for k, _ in root.properties] == ["$ref", "type", "not"]
    assert root.property("type") == EnumFrame(({"$ref": "#/x"}, {"type": "integer"}))
    assert root.property("not") == EnumFrame(({"allOf": [False]},))


@pytest.mark.parametrize("keyword, value", [
    ("not", {"type": "null"}),
    ("if", {"type": "string"}),
    ("uniqueItems", True),
    ("contains", {"type": "integer"}),
    ("dependentRequired", {"a": ["b"]}),
    ("dependentSchemas", {"a": {}}),
    ("unevaluatedProperties", False),
    ("propertyNames", {"maxLength": 3}),
    ("$dynamicRef", "#meta"),
])
def test_relaxed_keywords_warn_with_path(keyword, value):
    assert keyword in RELAXED_KEYWORDS
    normalized, _ = param({"properties": {"p": {keyword: value}}})
    assert [(w.path, w.keyword) for w in normalized.warnings] == [("/properties/p", keyword)]


# -- bad input ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "parameters, message",
    [
        ({"properties": {"p": {"type": "strnig"}}}, "unknown type 'strnig'"),
        ({"properties": {"p": {"type": "object", "required": "a"}}}, "required must be a list of strings"),
        ({"properties": {"p": {"enum": "a"}}}, "enum must be a list"),
        ({"properties": {"p": {"anyOf": []}}}, "anyOf must be a non-empty list"),
        ({"properties": {"p": {"type": "string", "maxLength": -1}}}, "maxLength must be a non-negative integer"),
        ({"properties": {"p": 5}}, "a schema must be an object or a boolean"),
    ],
)
def test_malformed_schema_errors_name_tool_and_path(parameters, message):
    with pytest.raises(SchemaError) as info:
        normalize_tool(tool(parameters, name="broken"))
    assert message in str(info.value)
    assert info.value.tool == "broken" and info.value.path == "/properties/p"


@pytest.mark.parametrize(
    "parameters",
    [
        {"type": "string"},
        {"$defs": {"s": {"type": "string"}}, "$ref": "#/$defs/s"},
        {"anyOf": [{"type": "object"}, {"type": "integer"}]},
    ],
)
def test_parameters_must_resolve_to_an_object(parameters):
    with pytest.raises(ToolDefinitionError, match="tool 'x': parameters must be an object schema"):
        normalize_tool(tool(parameters, name="x"))


def test_typeless_root_with_properties_is_an_object():
    normalized = normalize_tool(tool({"properties": {"a": {"type": "integer"}}, "required": ["a"]}))
    assert normalized.root == ObjectFrame(properties=(("a", IntegerFrame()),), required=("a",))


def test_normalized_schema_round_trips_through_json():
    normalized = normalize_tool(tool({"$defs": {"Node": NODE}, "properties": {"p": {"$ref": "#/$defs/Node"}, "q": {"enum": [1, "a", None]}}}))
    again = NormalizedSchema.from_json(normalized.schema.to_json())
    assert again == normalized.schema


def test_self_referencing_pydantic_model_normalizes():

    from pydantic import BaseModel

    from constrained.tools import load_tools

    class Comment(BaseModel):
        """A comment and its replies."""

        text: str
        votes: int | None = None
        replies: list[Comment] = []

    (loaded,) = load_tools([Comment])
    normalized = normalize_tool(loaded)
    definitions = normalized.schema.definitions
    root = normalized.schema.resolve(normalized.root)
    assert root.required == ("text",)
    assert effective_type(root.property("votes"), definitions) == "integer"
    thread = {"text": "a", "votes": 2, "replies": [{"text": "b", "replies": [{"text": "c", "votes": None}]}]}
    assert frame_accepts(root, thread, definitions)
    assert not frame_accepts(root, {"text": "a", "replies": [{"text": "b", "votes": "2"}]}, definitions)

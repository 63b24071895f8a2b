"""repair_arguments: unwrapping JSON-string objects and wrapping flat
arguments in tool calls from other engines, accepted only when the result
validates and declares every key; otherwise every error, arguments as given."""

from __future__ import annotations

import json
from typing import Any

import pytest
from corpus import CORPUS
from hypothesis import given, settings
from hypothesis import strategies as st

from constrained.errors import SchemaError, UnsatisfiableSchemaError
from constrained.output.repair import RepairResult, repair_arguments

FILTER = {
    "type": "object",
    "properties": {"field": {"type": "string"}, "value": {"type": "integer"}},
    "required": ["field"],
    "additionalProperties": False,
}

SEARCH = {
    "type": "object",
    "properties": {
        "query": {"type": "string"},
        "filter": FILTER,
        "tags": {"type": "array", "items": {"type": "string"}},
        "limit": {"type": "integer"},
    },
    "required": ["query"],
    "additionalProperties": False,
}

# The one required property is an object: flat arguments may belong in it.
WRAPPED = {
    "type": "object",
    "properties": {
        "params": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
            "required": ["city"],
        }
    },
    "required": ["params"],
}


def unchanged(result: RepairResult, given: Any, errors: list[str]) -> None:
    assert result.arguments is given
    assert result.repaired is False
    assert result.repairs == ()
    assert list(result.errors) == errors


# -- accepted repairs ------------------------------------------------------------


def test_unwraps_an_object_from_a_json_string() -> None:
    given = {"query": "q", "filter": '{"field": "x", "value": 3}'}
    result = repair_arguments(given, SEARCH)
    assert result == RepairResult(
        {"query": "q", "filter": {"field": "x", "value": 3}},
        repaired=True,
        repairs=("unwrapped 'filter' from a JSON string",),
    )
    assert given["filter"] == '{"field": "x", "value": 3}'  # the input is not changed


def test_unwraps_an_array_and_an_object_together() -> None:
    given = {"query": "q", "filter": ' {"field": "x"} ', "tags": '["a", "b"]', "limit": 5}
    result = repair_arguments(given, SEARCH)
    assert result.arguments == {"query": "q", "filter": {"field": "x"}, "tags": ["a", "b"], "limit": 5}
    assert result.repairs == ("unwrapped 'filter' from a JSON string", "unwrapped 'tags' from a JSON string")
    assert result.errors == ()


def test_unwraps_in_a_json_string_of_arguments() -> None:
    given = json.dumps({"query": "q", "filter": json.dumps({"field": "x"})})
    result = repair_arguments(given, SEARCH)
    assert result.arguments == {"query": "q", "filter": {"field": "x"}}
    assert result.repaired is True


def test_unwraps_an_object_typed_through_chained_refs_and_null() -> None:
    schema = {
        "type": "object",
        "properties": {"where": {"anyOf": [{"$ref": "#/$defs/Alias"}, {"type": "null"}]}},
        "required": ["where"],
        "additionalProperties": False,
        "$defs": {"Alias": {"$ref": "#/$defs/Where"}, "Where": FILTER},
    }
    result = repair_arguments({"where": '{"field": "x"}'}, schema)
    assert result.arguments == {"where": {"field": "x"}}
    assert result.repairs == ("unwrapped 'where' from a JSON string",)


def test_unwraps_a_recursive_ref() -> None:
    schema = {
        "type": "object",
        "properties": {"tree": {"$ref": "#/$defs/Node"}},
        "required": ["tree"],
        "$defs": {
            "Node": {
                "type": "object",
                "properties": {"name": {"type": "string"}, "children": {"type": "array", "items": {"$ref": "#/$defs/Node"}}},
                "required": ["name"],
            }
        },
    }
    tree = {"name": "a", "children": [{"name": "b", "children": []}]}
    result = repair_arguments({"tree": json.dumps(tree)}, schema)
    assert result.arguments == {"tree": tree}
    assert result.repaired is True


def test_wraps_flat_arguments_into_the_single_required_object() -> None:
    given = {"city": "Oslo", "days": 3}
    result = repair_arguments(given, WRAPPED)
    assert result == RepairResult(
        {"params": {"city": "Oslo", "days": 3}},
        repaired=True,
        repairs=("wrapped the arguments into 'params'",),
    )
    assert given == {"city": "Oslo", "days": 3}


def test_wraps_into_a_nullable_ref_object() -> None:
    schema = {
        "type": "object",
        "properties": {"request": {"anyOf": [{"$ref": "#/$defs/Request"}, {"type": "null"}]}},
        "required": ["request"],
        "$defs": {"Request": WRAPPED["properties"]["params"]},  # type: ignore[index]
    }
    result = repair_arguments('{"city": "Oslo"}', schema)
    assert result.arguments == {"request": {"city": "Oslo"}}
    assert result.repairs == ("wrapped the arguments into 'request'",)


# -- the aws-pricing MCP server's get_pricing ------------------------------------


def get_pricing_schema() -> dict[str, Any]:
    tools = json.loads((CORPUS / "mcp" / "aws-pricing.tools.json").read_text())["tools"]
    schema: dict[str, Any] = next(t for t in tools if t["name"] == "get_pricing")["inputSchema"]
    return schema


def test_get_pricing_string_encoded_filters_and_output_options() -> None:
    filters = [{"Field": "instanceType", "Value": "m5.large"}, {"Field": "memory", "Value": ["8 GiB"], "Type": "ANY_OF"}]
    output_options = {"pricing_terms": ["OnDemand"], "exclude_free_products": True}
    call = {
        "function": {
            "name": "get_pricing",
            "arguments": json.dumps(
                {
                    "service_code": "AmazonEC2",
                    "region": '["us-east-1", "eu-west-1"]',  # a string: region may be one
                    "filters": json.dumps(filters),
                    "output_options": json.dumps(output_options),
                }
            ),
        }
    }
    result = repair_arguments(call["function"]["arguments"], get_pricing_schema())
    assert result == RepairResult(
        {
            "service_code": "AmazonEC2",
            "region": '["us-east-1", "eu-west-1"]',
            "filters": filters,
            "output_options": output_options,
        },
        repaired=True,
        repairs=("unwrapped 'filters' from a JSON string", "unwrapped 'output_options' from a JSON string"),
    )


def test_get_pricing_filter_with_an_undeclared_key_is_not_unwrapped() -> None:
    # PricingFilter has no additionalProperties, so JSON Schema lets "Op" validate;
    # the repair still declines a key the schema never names.
    given = {"service_code": "AmazonEC2", "filters": '[{"Field": "f", "Value": "v", "Op": "x"}]'}
    result = repair_arguments(given, get_pricing_schema())
    unchanged(
        result,
        given,
        ["$.filters: '[{\"Field\": \"f\", \"Value\": \"v\", \"Op\": \"x\"}]' is not valid under any of the given schemas"],
    )


# -- declined repairs: the arguments as given, every error ----------------------


def test_declined_when_the_unwrapped_object_does_not_validate() -> None:
    given = {"query": 7, "filter": '{"value": "three"}', "limit": "ten"}
    result = repair_arguments(given, SEARCH)
    unchanged(
        result,
        given,
        [
            "$.query: 7 is not of type 'string'",
            "$.filter: '{\"value\": \"three\"}' is not of type 'object'",
            "$.limit: 'ten' is not of type 'integer'",
        ],
    )


def test_declined_when_another_error_remains() -> None:
    given = {"filter": '{"field": "x"}'}
    result = repair_arguments(given, SEARCH)
    unchanged(
        result,
        given,
        ["$.filter: '{\"field\": \"x\"}' is not of type 'object'", "$: 'query' is a required property"],
    )


def test_declined_when_unwrapping_would_introduce_an_undeclared_key() -> None:
    # An open object (no additionalProperties): "extra" would validate.
    schema = {
        "type": "object",
        "properties": {"filter": {"type": "object", "properties": {"field": {"type": "string"}}}},
        "required": ["filter"],
    }
    given = {"filter": '{"field": "x", "extra": 1}'}
    result = repair_arguments(given, schema)
    unchanged(result, given, ["$.filter: '{\"field\": \"x\", \"extra\": 1}' is not of type 'object'"])
    assert repair_arguments({"filter": '{"field": "x"}'}, schema).repaired is True


def test_declined_when_wrapping_would_introduce_an_undeclared_key() -> None:
    given = {"city": "Oslo", "country": "NO"}
    result = repair_arguments(given, WRAPPED)
    # Wrapped, they validate ("params" has no additionalProperties), but
    # "country" is not a key "params" declares.
    unchanged(result, given, ["$: 'params' is a required property"])


def test_declared_keys_beyond_properties() -> None:
    # patternProperties and an explicit additionalProperties declare keys;
    # only the rest count as undeclared.
    schema = {
        "type": "object",
        "properties": {
            "labels": {"type": "object", "additionalProperties": {"type": "string"}},
            "env": {"type": "object", "properties": {"HOME": {"type": "string"}}, "patternProperties": {"^X_": {}}},
            "free": {"type": "object"},
        },
        "additionalProperties": False,
    }
    given = {"labels": '{"a": "1"}', "env": '{"HOME": "/", "X_Y": [1]}', "free": '{"any": {"thing": 1}}'}
    result = repair_arguments(given, schema)
    assert result.arguments == {"labels": {"a": "1"}, "env": {"HOME": "/", "X_Y": [1]}, "free": {"any": {"thing": 1}}}
    given = {"env": '{"HOME": "/", "Y": 1}'}
    unchanged(repair_arguments(given, schema), given, ["$.env: '{\"HOME\": \"/\", \"Y\": 1}' is not of type 'object'"])


def test_declined_when_the_wrapped_arguments_do_not_validate() -> None:
    given = {"days": "three"}
    result = repair_arguments(given, WRAPPED)
    unchanged(result, given, ["$: 'params' is a required property"])


def test_empty_arguments_are_not_wrapped() -> None:
    optional = {
        "type": "object",
        "properties": {"params": {"type": "object", "properties": {"city": {"type": "string"}}}},
        "required": ["params"],
    }
    given: dict[str, Any] = {}
    unchanged(repair_arguments(given, optional), given, ["$: 'params' is a required property"])


def test_no_wrap_with_two_required_properties() -> None:
    schema = {
        "type": "object",
        "properties": {"params": WRAPPED["properties"]["params"], "mode": {"type": "string"}},  # type: ignore[index]
        "required": ["params", "mode"],
    }
    given = {"city": "Oslo"}
    unchanged(
        repair_arguments(given, schema),
        given,
        ["$: 'params' is a required property", "$: 'mode' is a required property"],
    )


def test_a_string_parameter_keeps_its_string() -> None:
    given = {"query": '{"field": "x"}', "limit": "10"}
    result = repair_arguments(given, SEARCH)
    unchanged(result, given, ["$.limit: '10' is not of type 'integer'"])


def test_a_union_with_string_keeps_a_valid_string_but_unwraps_an_invalid_one() -> None:
    schema = {
        "type": "object",
        "properties": {
            "spec": {"anyOf": [{"type": "string", "maxLength": 5}, FILTER]},
            "n": {"type": "integer"},
        },
        "additionalProperties": False,
    }
    given = {"spec": "[1]", "n": "1"}
    unchanged(repair_arguments(given, schema), given, ["$.n: '1' is not of type 'integer'"])
    result = repair_arguments({"spec": '{"field": "x"}'}, schema)
    assert result.arguments == {"spec": {"field": "x"}}
    assert result.repairs == ("unwrapped 'spec' from a JSON string",)


def test_an_array_string_for_an_object_parameter_is_not_unwrapped() -> None:
    given = {"query": "q", "filter": '[{"field": "x"}]'}
    unchanged(repair_arguments(given, SEARCH), given, ["$.filter: '[{\"field\": \"x\"}]' is not of type 'object'"])


def test_valid_arguments_are_untouched() -> None:
    given = {"query": "q", "filter": {"field": "x"}}
    unchanged(repair_arguments(given, SEARCH), given, [])
    text = '{"query": "{\\"field\\": \\"x\\"}"}'
    unchanged(repair_arguments(text, SEARCH), text, [])
    flat = {"params": {"city": "Oslo"}}
    unchanged(repair_arguments(flat, WRAPPED), flat, [])


def test_invalid_json_string() -> None:
    given = '{"query": "q",'
    unchanged(
        repair_arguments(given, SEARCH),
        given,
        ["$: the arguments are not valid JSON: Expecting property name enclosed in double quotes: line 1 column 15 (char 14)"],
    )
    unchanged(repair_arguments("", SEARCH), "", ["$: the arguments are not valid JSON: Expecting value: line 1 column 1 (char 0)"])


@pytest.mark.parametrize(
    ("given", "kind"),
    [("[1, 2]", "array"), ('"text"', "string"), ("3", "integer"), ("null", "null"), ("true", "boolean")],
)
def test_json_that_is_not_an_object(given: str, kind: str) -> None:
    unchanged(repair_arguments(given, SEARCH), given, [f"$: the arguments must be a JSON object, got {kind}"])


@pytest.mark.parametrize(("given", "kind"), [([1], "list"), (None, "NoneType"), (b"{}", "bytes")])
def test_arguments_of_no_accepted_type(given: Any, kind: str) -> None:
    unchanged(repair_arguments(given, SEARCH), given, [f"$: the arguments must be a dict or a JSON string, got {kind}"])


def test_a_dict_holding_what_json_cannot() -> None:
    given = {"query": "q", 1: "one", "filter": {"field": {"x"}}, "tags": [b"a"]}
    unchanged(
        repair_arguments(given, SEARCH),  # type: ignore[arg-type]
        given,
        ["$: key 1 is not a string", "$.filter.field: {'x'} is not a JSON value", "$.tags[0]: b'a' is not a JSON value"],
    )


def test_arguments_nested_too_deeply() -> None:
    deep = "[" * 100_000 + "]" * 100_000
    given = {"query": "q", "filter": deep}
    result = repair_arguments(given, SEARCH)
    assert result.arguments is given and not result.repaired
    assert len(result.errors) == 1 and result.errors[0].startswith("$.filter: ")
    nested: Any = "x"
    for _ in range(100_000):
        nested = [nested]
    huge = {"query": "q", "tags": nested}
    unchanged(repair_arguments(huge, SEARCH), huge, ["$: the arguments are nested too deeply to check"])
    text = "[" * 100_000
    assert repair_arguments(text, SEARCH).errors[0].startswith("$: the arguments are not valid JSON: ")


def test_format_is_checked() -> None:
    schema = {
        "type": "object",
        "properties": {"when": {"type": "object", "properties": {"date": {"type": "string", "format": "date"}}}},
        "required": ["when"],
    }
    given = {"when": '{"date": "yesterday"}'}
    unchanged(repair_arguments(given, schema), given, ["$.when: '{\"date\": \"yesterday\"}' is not of type 'object'"])
    assert repair_arguments({"when": '{"date": "2024-02-29"}'}, schema).repaired is True


def test_draft_07_schema_is_validated_as_draft_07() -> None:
    # In draft 7, keywords beside $ref are ignored: "filter" is only the $ref.
    schema = {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "type": "object",
        "properties": {"filter": {"$ref": "#/definitions/F", "type": "string"}},
        "required": ["filter"],
        "additionalProperties": False,
        "definitions": {"F": FILTER},
    }
    result = repair_arguments({"filter": '{"field": "x"}'}, schema)
    assert result.arguments == {"filter": {"field": "x"}}


FORMATS = {
    "type": "object",
    "properties": {
        name: {"anyOf": [{"type": "string", "format": name}, {"type": "object", "properties": {"v": {"format": name}}}]}
        for name in ("date", "date-time", "time", "email", "uri", "ipv4", "ipv6", "hostname", "uuid", "regex", "duration")
    },
}

JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)
KEYS = st.sampled_from(["query", "filter", "tags", "limit", "city", "date", "uri", "regex", "x"])
# Arguments as another engine might send them: objects whose values may be
# JSON text, JSON text of anything, or any text at all.
ARGUMENTS = (
    st.dictionaries(KEYS, JSON_VALUES | JSON_VALUES.map(json.dumps), max_size=5)
    | JSON_VALUES.map(json.dumps)
    | st.text()
)


# jsonschema's "regex" format compiles the text; Python warns on some patterns.
@pytest.mark.filterwarnings("ignore::FutureWarning")
@settings(max_examples=300, deadline=None)
@given(ARGUMENTS, st.sampled_from([SEARCH, WRAPPED, FORMATS]))
def test_never_raises_and_accepts_only_valid_results(arguments: Any, schema: dict[str, Any]) -> None:
    result = repair_arguments(arguments, schema)
    if result.repaired:
        assert result.errors == ()
        assert repair_arguments(result.arguments, schema) == RepairResult(result.arguments)
    else:
        assert result.arguments is arguments
        assert result.repairs == ()


# -- malformed schemas raise SchemaError ------------------------------------------


@pytest.mark.parametrize(
    "schema",
    [
        None,
        {"type": "strin"},
        {"type": "object", "properties": 3},
    ],
    ids=["not a schema", "unknown type", "properties not an object"],
)
def test_malformed_schema_raises(schema: Any) -> None:
    with pytest.raises(SchemaError):
        repair_arguments({"p": "x"}, schema)


def test_schema_rejected_by_its_metaschema_raises_with_the_path() -> None:
    with pytest.raises(SchemaError, match="5 is not of type 'string'") as raised:
        repair_arguments({}, {"type": "object", "properties": {"p": {"type": "string", "description": 5}}})
    assert raised.value.path == "/properties/p/description"


def test_unsatisfiable_schema_raises() -> None:
    with pytest.raises(UnsatisfiableSchemaError):
        repair_arguments({}, {"type": "object", "properties": {"p": {"type": "string", "minLength": 3, "maxLength": 1}}, "required": ["p"]})


def test_unresolvable_ref_raises_when_validation_reaches_it() -> None:
    schema = {"type": "object", "properties": {"p": {"$ref": "#/$defs/missing"}}}
    assert repair_arguments({}, schema) == RepairResult({})
    with pytest.raises(SchemaError, match="cannot resolve a \\$ref"):
        repair_arguments({"p": 1}, schema)

"""A key that looks like a misspelt JSON Schema keyword is ignored by the
constraint and the validator alike, so the value it meant to bound goes
unchecked: it is a warning, naming the tool, the JSON Pointer and the
keyword it likely means, wherever warnings show."""

from __future__ import annotations

import json

import pytest

import constrained as cd
from constrained.cli import main
from constrained.frames.normalize import normalize_schema
from constrained.frames.toolset import normalize_tool_set
from constrained.schema.keywords import KNOWN_KEYWORDS, misspelt_keywords


def tool(properties: dict, **extra: object) -> dict:
    return {"name": "search", "parameters": {"type": "object", "properties": properties, **extra}}


def test_a_misspelt_keyword_is_found_with_its_pointer_and_the_keyword_meant():
    schema = {
        "type": "object",
        "properties": {
            "query": {"type": "string", "maxLenght": 3},
            "a/b~c": {"anyOf": [{"type": "integer", "minimun": 1}, {"type": "null"}]},
            "tags": {"type": "array", "items": {"type": "string", "Format": "date"}},
        },
        "$defs": {"unused": {"type": "number", "exclusivemaximum": 3}},
        "requird": ["query"],
    }
    assert sorted(misspelt_keywords(schema)) == [
        ("", "requird", "required"),
        ("/$defs/unused", "exclusivemaximum", "exclusiveMaximum"),
        ("/properties/a~1b~0c/anyOf/0", "minimun", "minimum"),
        ("/properties/query", "maxLenght", "maxLength"),
        ("/properties/tags/items", "Format", "format"),
    ]


@pytest.mark.parametrize(
    "schema",
    [
        # keywords, annotations and OpenAPI's additions
        {"type": "string", "title": "t", "examples": ["a"], "example": "a", "nullable": True, "readOnly": True,
         "$comment": "c", "deprecated": False, "contentMediaType": "text/plain"},
        # vendor extensions and notes far from every keyword
        {"type": "string", "x-maxLenght": 3, "x-foo": 1, "note": "not `not`", "propertyOrdering": ["a"],
         "enumDescriptions": ["a"], "markdownDescription": "m"},
        # names and values that look like keywords are not keys of a schema
        {"type": "object", "properties": {"maxLenght": {"type": "string"}, "minimun": {}},
         "required": ["maxLenght"], "default": {"maxLenght": 1}, "enum": [{"minimun": 2}],
         "discriminator": {"propertyName": "kind"}},
    ],
)
def test_what_is_not_a_misspelling_is_not_flagged(schema):
    assert list(misspelt_keywords(schema)) == []


def test_the_table_knows_every_keyword_the_normalizer_reads():
    from constrained.frames.normalize import RELAXED_KEYWORDS

    assert set(RELAXED_KEYWORDS) <= KNOWN_KEYWORDS
    assert {"maxLength", "minimum", "nullable", "discriminator", "$defs", "prefixItems"} <= KNOWN_KEYWORDS


def test_normalize_warns_and_still_reads_the_schema():
    normalized = normalize_schema({"type": "string", "maxLenght": 3})
    (warning,) = normalized.warnings
    assert (warning.path, warning.keyword) == ("", "maxLenght") and "'maxLength'" in warning.message
    assert normalized.root.kind == "string"


def test_the_warning_reaches_the_tool_set_and_the_compiled_tools():
    tools = [tool({"query": {"type": "string", "maxLenght": 3}})]
    (normalized,) = normalize_tool_set(tools).tools
    assert [(w.path, w.keyword) for w in normalized.warnings] == [("/properties/query", "maxLenght")]
    compiled = cd.compile_tools(tools, "hermes", "qwen3")
    (warning,) = compiled.warnings
    assert str(warning) == (
        "tool 'search': /properties/query: maxLenght: not a JSON Schema keyword, so nothing checks it: "
        "did you mean 'maxLength'?"
    )


def test_the_command_line_shows_it(tmp_path, capsys):
    path = tmp_path / "tools.json"
    path.write_text(json.dumps([tool({"query": {"type": "string", "maxLenght": 3}})]))
    assert main(["normalize", str(path)]) == 0
    (entry,) = json.loads(capsys.readouterr().out)
    assert [w["keyword"] for w in entry["warnings"]] == ["maxLenght"]
    assert main(["compile", str(path), "--dialect", "gemma4"]) == 0
    out, err = capsys.readouterr()
    assert [w.split(": ")[2] for w in json.loads(out)["warnings"]] == ["maxLenght"]
    assert err == (
        "constrained: warning: tool 'search': /properties/query: maxLenght: not a JSON Schema keyword, so nothing "
        "checks it: did you mean 'maxLength'?\n"
    )

"""Lenient readings of drifted output: the parser reads a few
shapes the grammar never writes, when the reading is unambiguous, with the
schema's typing and no invented value; plainly malformed shapes still fail
closed; tools written with BFCL's or Python's type names load in every form,
with a warning."""

from __future__ import annotations

import json
from typing import Any

import pytest

from constrained import ToolCallStreamParser, compile_tools, load_tools, parse_tool_calls, render_tool_calls
from constrained.frames.toolset import normalize_tool, normalize_tool_set

GEMMAS = {"gemma4": '<|"|>', "functiongemma": "<escape>"}
OPENS = {"gemma4": ("<|tool_call>", "<tool_call|>"), "functiongemma": ("<start_function_call>", "<end_function_call>")}

FORECAST = {
    "type": "function",
    "function": {
        "name": "forecast",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string"},
                "days": {"type": "integer", "minimum": 1},
                "units": {"enum": ["C", "F"]},
            },
            "required": ["city"],
            "additionalProperties": False,
        },
    },
}
PATCH = {
    "type": "function",
    "function": {
        "name": "patch",
        "parameters": {
            "type": "object",
            "properties": {
                "lines": {"type": "object", "additionalProperties": {"type": "string"}},
                "hunks": {
                    "type": "array",
                    "items": {"type": "object", "properties": {"at": {"type": "integer"}, "text": {"type": "string"}}},
                },
                "meta": {"type": "object"},
                "vcard:fn": {"type": "string"},
                "count": {"type": "integer"},
            },
        },
    },
}
TOOLS = [FORECAST, PATCH]


def calls(result) -> list[tuple[str, dict[str, Any]]]:
    return [(c["function"]["name"], json.loads(c["function"]["arguments"])) for c in result.tool_calls]


def rejected(text: str, dialect: str, tools=TOOLS) -> str:
    """The one error's reason; the call stays content."""
    result = parse_tool_calls(text, tools, dialect)
    assert result.tool_calls == [] and result.content == text, result
    assert len(result.errors) == 1, result.errors
    return result.errors[0].reason


def streamed(text: str, dialect: str, tools=TOOLS) -> list[str]:
    """Each call's argument fragments, joined, when ``text`` streams in one
    character at a time; the stream's result is the parser's."""
    parser = ToolCallStreamParser(tools, dialect)
    deltas = [delta for piece in text for delta in parser.feed(piece)] + parser.close()
    assert parser.result == parse_tool_calls(text, tools, dialect)
    joined: dict[int, str] = {}
    for delta in deltas:
        assert "tool_call_errors" not in delta
        for call in delta.get("tool_calls", []):
            joined[call["index"]] = joined.get(call["index"], "") + call["function"]["arguments"]
    return [joined[index] for index in sorted(joined)]


# -- hermes: whitespace around the object --------------------------------------

PARIS = '{"name": "forecast", "arguments": {"city": "Paris", "days": 3}}'


@pytest.mark.parametrize(
    "text",
    [
        f"<tool_call>{PARIS}</tool_call>",
        f"<tool_call> {PARIS} </tool_call>",
        f"<tool_call>\n\n{PARIS}\n\n</tool_call>",
        f"<tool_call>\r\n{PARIS}\r\n</tool_call>",
        f"<tool_call>\t{PARIS}\n</tool_call>",
        f"<tool_call>\n{PARIS}</tool_call>",
        f"<tool_call>{PARIS}\n</tool_call>",
        '<tool_call>{"name":"forecast","arguments":{"city":"Paris","days":3}}</tool_call>',
    ],
    ids=repr,
)
def test_hermes_reads_the_object_with_any_json_whitespace_around_it(text):
    result = parse_tool_calls(text, TOOLS, "hermes")
    assert result.errors == [] and result.content == ""
    assert calls(result) == [("forecast", {"city": "Paris", "days": 3})]
    arguments = result.tool_calls[0]["function"]["arguments"]
    assert streamed(text, "hermes") == [arguments]


def test_hermes_same_line_calls_in_a_row_and_text_around_them():
    text = f"Checking.\n<tool_call>{PARIS}</tool_call>\n<tool_call>{PARIS.replace('Paris', 'Oslo')}</tool_call>"
    result = parse_tool_calls(text, TOOLS, "hermes")
    assert calls(result) == [("forecast", {"city": "Paris", "days": 3}), ("forecast", {"city": "Oslo", "days": 3})]
    assert result.content == "Checking.\n\n"


def test_hermes_whitespace_other_than_json_whitespace_is_malformed():
    assert "not valid JSON" in rejected(f"<tool_call>\u00a0{PARIS}</tool_call>", "hermes")


def test_hermes_still_renders_the_template_form_and_reads_it_back():
    call = {"name": "forecast", "arguments": {"city": "Paris", "days": 3}}
    text = render_tool_calls([call], TOOLS, "hermes")
    assert text == f"<tool_call>\n{PARIS}\n</tool_call>"
    assert calls(parse_tool_calls(text, TOOLS, "hermes")) == [("forecast", call["arguments"])]


# -- hermes: a call cut off before </tool_call> ---------------------------------


@pytest.mark.parametrize("tail", ["", "\n", "  \n"], ids=repr)
def test_hermes_reads_a_complete_object_cut_off_at_the_very_end(tail):
    text = f"<tool_call>\n{PARIS.replace('Paris', 'Oslo')}\n</tool_call>\n<tool_call>\n{PARIS}{tail}"
    result = parse_tool_calls(text, TOOLS, "hermes")
    assert result.errors == []
    assert calls(result) == [("forecast", {"city": "Oslo", "days": 3}), ("forecast", {"city": "Paris", "days": 3})]
    assert result.content == "\n"
    assert streamed(text, "hermes") == [c["function"]["arguments"] for c in result.tool_calls]


@pytest.mark.parametrize(
    "body",
    [
        PARIS[:-1],
        PARIS[:-2],
        '{"name": "forecast", "arguments": {"city": "Par',
        '{"name": "forecast", "argu',
        "",
        "\n",
    ],
    ids=repr,
)
def test_hermes_an_incomplete_cut_off_object_stays_malformed(body):
    reason = rejected(f"<tool_call>\n{body}", "hermes")
    assert reason.startswith("the call is not closed with '</tool_call>'")


def test_hermes_a_cut_off_object_followed_by_text_stays_malformed():
    assert "not closed" in rejected(f"<tool_call>\n{PARIS}\nDone.", "hermes")


def test_hermes_a_call_missing_its_closing_before_another_call_is_not_read():
    text = f"<tool_call>\n{PARIS}\n<tool_call>\n{PARIS}\n</tool_call>"
    assert "not valid JSON" in rejected(text, "hermes")


def test_hermes_a_cut_off_call_is_still_validated():
    reason = rejected('<tool_call>\n{"name": "forecast", "arguments": {"days": 3}}', "hermes")
    assert "missing required parameter(s) 'city'" in reason


def test_hermes_a_cut_off_call_in_a_fenced_block_is_text():
    assert "fenced code block" in rejected(f"```\n<tool_call>\n{PARIS}", "hermes")


@pytest.mark.parametrize("dialect", sorted(GEMMAS))
def test_gemma_keeps_a_cut_off_call_malformed(dialect):
    opening, _ = OPENS[dialect]
    d = GEMMAS[dialect]
    reason = rejected(f"{opening}call:forecast{{city:{d}Paris{d}}}", dialect)
    assert reason.startswith("the call is not closed with")


# -- hermes: arguments as a JSON-encoded string --------------------------------


def encoded(name: str, arguments: Any) -> str:
    body = json.dumps({"name": name, "arguments": json.dumps(arguments) if not isinstance(arguments, str) else arguments})
    return f"<tool_call>\n{body}\n</tool_call>"


def test_hermes_decodes_string_arguments_that_validate():
    text = '<tool_call>\n{"name": "forecast", "arguments": "{\\"city\\": \\"Paris\\"}"}\n</tool_call>'
    result = parse_tool_calls(text, TOOLS, "hermes")
    assert result.errors == []
    assert calls(result) == [("forecast", {"city": "Paris"})]
    assert streamed(text, "hermes") == ['{"city": "Paris"}']


def test_hermes_decoded_string_arguments_keep_the_schema_typing():
    # Decoded values are typed by JSON, then checked: "3" stays a string, not a number.
    reason = rejected(encoded("forecast", {"city": "Paris", "days": "3"}), "hermes")
    assert reason.startswith("the arguments, a JSON-encoded string, decoded do not fit 'forecast': ")
    assert reason.endswith(': /days: "3" is not an integer')


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ({"city": "Paris", "wind": True}, "has no parameter 'wind'"),
        ({"city": "Paris", "days": 0}, "/days: 0 is less than the minimum 1"),
        ({"city": "Paris", "units": "K"}, '/units: "K" is not one of "C", "F"'),
        ({"days": 2}, "missing required parameter(s) 'city'"),
    ],
)
def test_hermes_decoded_string_arguments_that_do_not_validate_fail_closed(arguments, expected):
    reason = rejected(encoded("forecast", arguments), "hermes")
    assert reason.startswith("the arguments, a JSON-encoded string, decoded do not fit 'forecast'")
    assert expected in reason


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ('{"city": "Paris"', "is not valid JSON"),
        ("city=Paris", "is not valid JSON"),
        ('["Paris"]', "is not a JSON object"),
        ('"{\\"city\\": \\"Paris\\"}"', "is not a JSON object"),  # encoded twice: not decoded twice
        ('{"city": "Paris", "city": "Oslo"}', "given twice"),
        ('{"city": "Paris", "days": NaN}', "NaN is not JSON"),
        ("", "is not valid JSON"),
    ],
    ids=repr,
)
def test_hermes_string_arguments_that_encode_no_object_are_malformed(arguments, expected):
    reason = rejected(encoded("forecast", arguments), "hermes")
    assert reason.startswith("the arguments, a JSON-encoded string, ")
    assert expected in reason
    assert parse_tool_calls(encoded("forecast", arguments), TOOLS, "hermes").errors[0].tool == "forecast"


def test_hermes_empty_string_arguments_object_for_a_tool_without_required_keys():
    assert calls(parse_tool_calls(encoded("patch", "{}"), TOOLS, "hermes")) == [("patch", {})]


def test_hermes_other_non_object_arguments_stay_malformed():
    assert "not a JSON object" in rejected('<tool_call>\n{"name": "forecast", "arguments": 5}\n</tool_call>', "hermes")


# -- gemma4 / functiongemma: keys wrapped in the string delimiter ---------------


def gemma_call(dialect: str, name: str, body: str) -> str:
    opening, closing = OPENS[dialect]
    return f"{opening}call:{name}{body.replace('<D>', GEMMAS[dialect])}{closing}"


@pytest.mark.parametrize("dialect", sorted(GEMMAS))
@pytest.mark.parametrize(
    ("body", "expected"),
    [
        # reported from Gemma 4 in the wild: a numeric key written as a string
        ("{lines:{<D>3<D>:<D>new text<D>}}", {"lines": {"3": "new text"}}),
        ("{<D>count<D>:2,lines:{<D>3<D>:<D>a<D>,<D>10<D>:<D>b<D>}}", {"count": 2, "lines": {"3": "a", "10": "b"}}),
        ("{hunks:[{<D>at<D>:4,text:<D>x<D>},{at:5,<D>text<D>:<D>y<D>}]}", {"hunks": [{"at": 4, "text": "x"}, {"at": 5, "text": "y"}]}),
        ("{meta:{<D>a,b:c{}<D>:{<D>deep<D>:[1,{<D>k<D>:null}]}}}", {"meta": {"a,b:c{}": {"deep": [1, {"k": None}]}}}),
        ("{<D>vcard:fn<D>:<D>Ada<D>}", {"vcard:fn": "Ada"}),
        ("{meta:{<D><D>:1}}", {"meta": {"": 1}}),
    ],
    ids=repr,
)
def test_gemma_reads_delimited_keys_at_any_depth(dialect, body, expected):
    text = gemma_call(dialect, "patch", body)
    result = parse_tool_calls(text, TOOLS, dialect)
    assert result.errors == [] and result.content == ""
    assert calls(result) == [("patch", expected)]
    assert streamed(text, dialect) == [result.tool_calls[0]["function"]["arguments"]]


@pytest.mark.parametrize("dialect", sorted(GEMMAS))
def test_gemma_delimited_keys_keep_the_schema_typing(dialect):
    assert rejected(gemma_call(dialect, "patch", "{lines:{<D>3<D>:7}}"), dialect) == "/lines/3: 7 is not a string"
    assert "/count: " in rejected(gemma_call(dialect, "patch", "{<D>count<D>:<D>2<D>}"), dialect)
    assert "no parameter 'town'" in rejected(gemma_call(dialect, "forecast", "{<D>town<D>:<D>Oslo<D>}"), dialect)


@pytest.mark.parametrize("dialect", sorted(GEMMAS))
@pytest.mark.parametrize(
    "body",
    [
        "{<D>city<D>}",  # no ':'
        "{<D>city<D> :<D>Paris<D>}",  # not ':' right after the key
        "{<D>city:<D>Paris<D>}",  # the key's closing delimiter missing: the value's opens it
        "{<D>city",  # never closed
        "{<D>city<D>:}",  # no value
    ],
    ids=repr,
)
def test_gemma_malformed_delimited_keys_fail_closed(dialect, body):
    rejected(gemma_call(dialect, "forecast", body), dialect)


@pytest.mark.parametrize("dialect", sorted(GEMMAS))
def test_gemma_still_renders_bare_keys_and_reads_them_back(dialect):
    call = {"name": "patch", "arguments": {"lines": {"3": "x"}, "vcard:fn": "Ada", "count": 1}}
    text = render_tool_calls([call], TOOLS, dialect)
    assert GEMMAS[dialect] + "3" not in text and "{3:" in text
    assert calls(parse_tool_calls(text, TOOLS, dialect)) == [("patch", call["arguments"])]


# -- simply malformed shapes keep failing closed --------------------------------

MALFORMED_GEMMA = [
    "{city:<D>Paris}",  # unterminated string
    "{city:<D>Paris<D>,days:}",  # key: with no value
    "{city:,days:3}",
    "{city:<D>Paris<D>,days:108.}",  # 108.
    "{city:<D>Paris<D>,days:3,}",  # trailing comma
    "{city:<D>Paris<D>days:3}",  # no separator
    "{city:<D>Paris<D>,days:3",  # object not closed
    "{city=<D>Paris<D>}",  # key=value
]
MALFORMED_HERMES = [
    '{"name": "forecast", "arguments": {"city": "Paris}}',
    '{"name": "forecast", "arguments": {"city": "Paris", "days": }}',
    '{"name": "forecast", "arguments": {"city": "Paris", "days": 108.}}',
    '{"name": "forecast", "arguments": {"city": "Paris", "days": 3,}}',
    '{"name": "forecast", "arguments": {"city": "Paris" "days": 3}}',
    '{"name": "forecast", "arguments": {"city": "Paris", "days": NaN}}',
    '{"name": "forecast", "arguments": {"city": "Paris"}, "extra": 1}',
    '{"name": "forecast"} {"arguments": {"city": "Paris"}}',
]


@pytest.mark.parametrize("dialect", sorted(GEMMAS))
@pytest.mark.parametrize("body", MALFORMED_GEMMA, ids=repr)
def test_gemma_malformed_shapes_fail_closed(dialect, body):
    rejected(gemma_call(dialect, "forecast", body), dialect)


@pytest.mark.parametrize("body", MALFORMED_HERMES, ids=repr)
@pytest.mark.parametrize("closed", [True, False], ids=["closed", "cut off"])
def test_hermes_malformed_shapes_fail_closed(body, closed):
    rejected(f"<tool_call>\n{body}\n" + ("</tool_call>" if closed else ""), "hermes")


# -- tool definitions with BFCL and Python type names ---------------------------

HABITS = {
    "type": "dict",
    "properties": {
        "ratio": {"type": "float"},
        "count": {"type": "int"},
        "label": {"type": "str", "enum": ["float", "int"]},
        "tags": {"type": "list", "items": {"type": "str"}},
        "point": {"type": "tuple", "prefixItems": [{"type": "int"}, {"type": "integer"}]},
        "flag": {"type": "bool"},
        "extra": {"type": "any"},
        "note": {"type": ["str", "None"]},
        "int": {"type": "integer", "default": {"type": "float"}},
    },
    "required": ["ratio"],
}
MAPPED = {
    "type": "object",
    "properties": {
        "ratio": {"type": "number"},
        "count": {"type": "integer"},
        "label": {"type": "string", "enum": ["float", "int"]},
        "tags": {"type": "array", "items": {"type": "string"}},
        "point": {"type": "array", "prefixItems": [{"type": "integer"}, {"type": "integer"}]},
        "flag": {"type": "boolean"},
        "extra": {},
        "note": {"type": ["string", "null"]},
        "int": {"type": "integer", "default": {"type": "float"}},
    },
    "required": ["ratio"],
}
ALL_WARNINGS = [
    ("", "BFCL type name 'dict' read as 'object'"),
    ("/properties/ratio", "BFCL type name 'float' read as 'number'"),
    ("/properties/count", "Python type name 'int' read as 'integer'"),
    ("/properties/label", "Python type name 'str' read as 'string'"),
    ("/properties/tags", "BFCL type name 'list' read as 'array'"),
    ("/properties/tags/items", "Python type name 'str' read as 'string'"),
    ("/properties/point", "BFCL type name 'tuple' read as 'array'"),
    ("/properties/point/prefixItems/0", "Python type name 'int' read as 'integer'"),
    ("/properties/flag", "BFCL type name 'bool' read as 'boolean'"),
    ("/properties/extra", "BFCL type name 'any' read as any value (no type)"),
    ("/properties/note", "Python type name 'str' read as 'string'"),
    ("/properties/note", "Python type name 'None' read as 'null'"),
]
FORMS = {
    "openai": {"type": "function", "function": {"name": "measure", "parameters": HABITS}},
    "mcp": {"name": "measure", "inputSchema": HABITS},
    "function": {"name": "measure", "parameters": HABITS},  # a bare function: read as BFCL
}


def warned(tool) -> list[tuple[str, str]]:
    assert all(w.keyword == "type" for w in tool.warnings)
    return [(w.path, w.message) for w in tool.warnings]


@pytest.mark.parametrize("form", sorted(FORMS))
def test_bfcl_and_python_type_names_map_in_every_form(form):
    [tool] = load_tools([FORMS[form]])
    assert tool.parameters == MAPPED
    assert tool.source == ("bfcl" if form == "function" else form)
    # BFCL's own names are a BFCL definition's vocabulary; Python's are a habit anywhere.
    expected = [w for w in ALL_WARNINGS if form != "function" or w[1].startswith("Python")]
    assert warned(tool) == expected
    normalized = normalize_tool(tool)
    assert [(w.path, w.message) for w in normalized.warnings[: len(expected)]] == expected
    tool_set = normalize_tool_set([FORMS[form]])
    assert tool_set.left_out == () and [t.name for t in tool_set.tools] == ["measure"]
    assert HABITS["properties"]["count"] == {"type": "int"}  # the caller's schema is left alone


def test_forced_formats_label_the_tool_and_warn_accordingly():
    [as_bfcl] = load_tools(FORMS["function"], format="bfcl")
    [as_function] = load_tools(FORMS["function"], format="function")
    assert as_bfcl.parameters == as_function.parameters == MAPPED
    assert (as_bfcl.source, as_function.source) == ("bfcl", "function")
    assert warned(as_function) == ALL_WARNINGS
    assert all(message.startswith("Python") for _, message in warned(as_bfcl))


def test_json_schema_tools_are_left_exactly_as_they_are():
    params = {
        "type": "object",
        "properties": {"float": {"type": "number", "enum": [1.5]}, "type": {"type": "string", "const": "int"}},
        "$defs": {"D": {"type": "object", "properties": {"dict": {"type": ["string", "null"]}}}},
    }
    for entry in ({"type": "function", "function": {"name": "f", "parameters": params}}, {"name": "f", "inputSchema": params}):
        [tool] = load_tools(entry)
        assert tool.parameters == params and tool.warnings == () and normalize_tool(tool).warnings == ()


def test_bfcl_names_under_defs_and_combinators_are_mapped_with_their_pointer():
    params = {
        "type": "object",
        "properties": {"shape": {"anyOf": [{"$ref": "#/$defs/Box"}, {"type": "str"}]}},
        "$defs": {"Box": {"type": "dict", "properties": {"w/h": {"type": "float"}}}},
    }
    [tool] = load_tools({"type": "function", "function": {"name": "f", "parameters": params}})
    assert warned(tool) == [
        ("/properties/shape/anyOf/1", "Python type name 'str' read as 'string'"),
        ("/$defs/Box", "BFCL type name 'dict' read as 'object'"),
        ("/$defs/Box/properties/w~1h", "BFCL type name 'float' read as 'number'"),
    ]


def test_an_unknown_type_name_still_leaves_the_tool_out():
    entry = {"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {"n": {"type": "integr"}}}}}
    tool_set = normalize_tool_set([entry, FORECAST])
    assert [t.name for t in tool_set.tools] == ["forecast"]
    assert [(t.name, t.path) for t in tool_set.left_out] == [("f", "/properties/n")]


@pytest.mark.parametrize("dialect", ["hermes", "gemma4"])
def test_a_mapped_tool_is_read_with_the_mapped_types(dialect):
    tools = [FORMS["openai"]]
    call = {"name": "measure", "arguments": {"ratio": 2.5, "count": 3, "tags": ["a"], "point": [1, 2], "note": None}}
    text = render_tool_calls([call], tools, dialect)
    assert calls(parse_tool_calls(text, tools, dialect)) == [("measure", call["arguments"])]
    wrong = text.replace(":3", ":3.5").replace(": 3", ": 3.5")  # count is an integer
    assert wrong != text and parse_tool_calls(wrong, tools, dialect).tool_calls == []


def test_compiled_tools_report_the_mapping_warnings():
    compiled = compile_tools([FORMS["openai"], FORECAST], "hermes", "qwen3")
    assert [t.name for t in compiled.tools] == ["measure", "forecast"]
    mapped = [(w.tool, w.warning.path) for w in compiled.warnings if w.warning.keyword == "type"]
    assert ("measure", "/properties/ratio") in mapped and all(tool == "measure" for tool, _ in mapped)

"""Drift shapes that other engines' parsers read, read here too where the
reading is unambiguous: gemma4 strings whose opening delimiter is missing
and ``, `` between members and items; glm arrays and objects written with
every quote escaped; hermes calls without ``"arguments"``; qwen3_coder
values whose ``</parameter>`` is missing before ``</function>``.

Each reading keeps the schema's typing and is validated as any call is;
shapes with more than one reading still fail closed; the grammar still
writes only the template's form; and a drift shape streamed in pieces gives
what parsing it whole gives.
"""

from __future__ import annotations

import json
import random
from functools import cache
from typing import Any

import pytest

from constrained import ToolCallStreamParser, compile_tools, parse_tool_calls, render_tool_calls
from constrained.dialects import get_dialect


def tool(name: str, properties: dict[str, Any], required: tuple[str, ...] = (), **extra: Any) -> dict[str, Any]:
    parameters = {"type": "object", "properties": properties, "required": list(required), **extra}
    return {"type": "function", "function": {"name": name, "parameters": parameters}}


SEARCH = tool(
    "search",
    {
        "query": {"type": "string"},
        "limit": {"type": "integer"},
        "tags": {"type": "array", "items": {"type": "string"}},
        "nums": {"type": "array", "items": {"type": "integer"}},
        "filters": {"type": "object"},
    },
    ("query",),
)
SPACED = tool("spaced", {"a": {"type": "integer"}, " b": {"type": "integer"}, "b": {"type": "string"}})
ITEMS = tool(
    "items",
    {
        "tags": {"type": "array", "items": {"type": "string"}},
        "meta": {"type": "object"},
        "note": {"type": "string"},
        "either": {"type": ["string", "array"]},
        "maybe": {"anyOf": [{"type": "array", "items": {"type": "integer"}}, {"type": "null"}]},
        "ids": {"type": "array", "items": {"type": "integer"}},
    },
)
GET_TIME = tool("get_time", {})
OPTIONAL = tool("options", {"verbose": {"type": "boolean"}})
NEEDS = tool("needs", {"city": {"type": "string"}}, ("city",))
NONEMPTY = tool("nonempty", {"verbose": {"type": "boolean"}}, minProperties=1)
WEATHER = tool(
    "get_weather", {"city": {"type": "string"}, "state": {"type": "string"}, "days": {"type": "integer"}}, ("city",)
)
TOOLS = [SEARCH, SPACED, ITEMS, GET_TIME, OPTIONAL, NEEDS, NONEMPTY, WEATHER]

GEMMAS = {"gemma4": ('<|tool_call>', '<tool_call|>', '<|"|>'),
          "functiongemma": ("<start_function_call>", "<end_function_call>", "<escape>")}
GLM = ("glm45", "glm47")


def calls(result) -> list[tuple[str, dict[str, Any]]]:
    return [(c["function"]["name"], json.loads(c["function"]["arguments"])) for c in result.tool_calls]


def read(text: str, dialect: str) -> list[tuple[str, dict[str, Any]]]:
    """The calls of ``text``, which must all be accepted, and the same
    when it streams in pieces."""
    result = parse_tool_calls(text, TOOLS, dialect)
    assert result.errors == [], result.errors
    streams_like_the_parser(text, dialect)
    return calls(result)


def refused(text: str, dialect: str) -> str:
    """The one error of a text whose call is refused (the text stays content),
    the same when it streams."""
    result = parse_tool_calls(text, TOOLS, dialect)
    assert result.tool_calls == [] and result.content == text, result
    assert len(result.errors) == 1, result.errors
    streams_like_the_parser(text, dialect)
    return result.errors[0].reason


def pieces(text: str, seed: int) -> list[str]:
    rng = random.Random(seed)
    cuts = sorted(rng.sample(range(1, len(text)), min(len(text) - 1, rng.randint(1, 12))))
    return [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)])]


def streams_like_the_parser(text: str, dialect: str) -> None:
    """Fed one character at a time and in random pieces: the stream's result
    is the parser's, content deltas join to its content, and each call
    streamed without an error delta has fragments that join to its
    arguments (an accepted call streams without one)."""
    expected = parse_tool_calls(text, TOOLS, dialect)
    for split in [list(text), *(pieces(text, seed) for seed in range(4))]:
        stream = ToolCallStreamParser(TOOLS, dialect)
        deltas = [delta for piece in split for delta in stream.feed(piece)] + stream.close()
        assert stream.result == expected
        assert "".join(d.get("content", "") for d in deltas) == expected.content
        joined: dict[int, str] = {}
        failed = {e["index"] for d in deltas for e in d.get("tool_call_errors", [])}
        for delta in deltas:
            for call in delta.get("tool_calls", []):
                joined[call["index"]] = joined.get(call["index"], "") + call["function"]["arguments"]
        kept = [joined[index] for index in sorted(joined) if index not in failed]
        assert kept == [c["function"]["arguments"] for c in expected.tool_calls], split


@cache
def compiled(dialect: str):
    return compile_tools(TOOLS, dialect, get_dialect(dialect).default_tokenizer, tool_choice="auto")


def grammar_refuses(text: str, dialect: str) -> None:
    assert not compiled(dialect).check(text).accepted, text


# -- 1 and 2. gemma4 / functiongemma --------------------------------------------------------------


def gemma(dialect: str, name: str, body: str) -> str:
    opening, closing, delimiter = GEMMAS[dialect]
    return f"{opening}call:{name}{body.replace('<D>', delimiter)}{closing}"


@pytest.mark.parametrize("dialect", sorted(GEMMAS))
@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("{query:weather in Tokyo<D>}", {"query": "weather in Tokyo"}),
        ("{limit:5,query:Paris, France<D>}", {"limit": 5, "query": "Paris, France"}),
        ("{query:Note: a, b<D>}", {"query": "Note: a, b"}),
        ("{query:Paris<D>,limit:5}", {"query": "Paris", "limit": 5}),
        ("{filters:{city:Tokyo<D>},query:<D>x<D>}", {"filters": {"city": "Tokyo"}, "query": "x"}),
        ("{filters:{deep:[1,{k:v<D>}]},query:<D>x<D>}", {"filters": {"deep": [1, {"k": "v"}]}, "query": "x"}),
        ("{query:<D>x<D>,tags:[<D>a<D>,b<D>]}", {"query": "x", "tags": ["a", "b"]}),
        ("{query:<D>x<D>,tags:[a<D>]}", {"query": "x", "tags": ["a"]}),
        # a bare scalar that runs on into the closing delimiter is the string's start
        ("{query:true<D>}", {"query": "true"}),
        ("{query:42<D>}", {"query": "42"}),
        ("{query:null and void<D>}", {"query": "null and void"}),
        ("{query:multi\nline {x}<D>}", {"query": "multi\nline {x}"}),
    ],
    ids=repr,
)
def test_gemma_reads_a_string_whose_opening_delimiter_is_missing(dialect, body, expected):
    text = gemma(dialect, "search", body)
    assert read(text, dialect) == [("search", expected)]
    grammar_refuses(text, dialect)


@pytest.mark.parametrize("dialect", sorted(GEMMAS))
@pytest.mark.parametrize(
    ("body", "reason"),
    [
        # typed by the schema: a string where an integer belongs is refused
        ("{limit:5<D>,query:<D>x<D>}", '/limit: "5" is not an integer'),
        # could be two members ("a" and a string "b" whose opening is missing)
        ("{query:a,limit:b<D>}", "expected"),
        ("{query:a, limit:b<D>}", "expected"),
        ("{filters:{k:a,j:b<D>},query:<D>x<D>}", "expected"),
        # could be two items
        ("{query:<D>x<D>,tags:[a,b<D>]}", "expected"),
        ("{query:<D>x<D>,tags:[<D>a<D>,b, c<D>]}", "expected"),
        # no closing delimiter at all: a bare word
        ("{query:Paris}", "expected"),
        # what follows the delimiter is no separator or end
        ("{query:Paris<D>x<D>}", "expected"),
        ("{query:Paris<D>:1}", "expected"),
        # a space after ':' is not read
        ("{query: <D>Paris<D>}", "expected"),
        ("{query: Paris<D>}", "expected"),
        # an empty value, then more
        ("{query:,limit:<D>3<D>}", "expected"),
        ("{filters:{k:}<D>},query:<D>x<D>}", "expected"),
        ("{query:<D>x<D>,tags:[]<D>]}", "expected"),
    ],
    ids=repr,
)
def test_gemma_missing_opening_delimiter_fails_closed_where_ambiguous(dialect, body, reason):
    assert reason in refused(gemma(dialect, "search", body), dialect)


@pytest.mark.parametrize("dialect", sorted(GEMMAS))
def test_gemma_missing_opening_delimiter_of_a_call_cut_off_stays_malformed(dialect):
    opening, _, delimiter = GEMMAS[dialect]
    text = f"{opening}call:search{{query:Paris{delimiter}}}"
    assert "not closed" in refused(text, dialect)


@pytest.mark.parametrize("dialect", sorted(GEMMAS))
@pytest.mark.parametrize(
    ("name", "body", "expected"),
    [
        ("search", "{nums:[1, 2,  3],query:<D>x<D>}", {"nums": [1, 2, 3], "query": "x"}),
        ("search", "{query:<D>x<D>,tags:[<D>a<D>, <D>b, c<D>]}", {"query": "x", "tags": ["a", "b, c"]}),
        ("search", "{query:<D>x<D>, tags:[<D>a<D>, b<D>]}", {"query": "x", "tags": ["a", "b"]}),
        ("search", "{limit:3, query:<D>x<D>}", {"limit": 3, "query": "x"}),
        ("search", "{filters:{a:1, b:[true, null]}, query:<D>x<D>}", {"filters": {"a": 1, "b": [True, None]}, "query": "x"}),
        ("search", "{filters:{<D>a<D>:1, <D>b<D>:2},query:<D>x<D>}", {"filters": {"a": 1, "b": 2}, "query": "x"}),
        # a declared key that starts with a space keeps it (as the grammar writes it) ...
        ("spaced", "{a:1, b:2}", {"a": 1, " b": 2}),
        # ... and otherwise the spaces are the separator's
        ("spaced", "{a:1,  b:<D>x<D>}", {"a": 1, "b": "x"}),
        ("spaced", "{a:1,b:<D>x<D>}", {"a": 1, "b": "x"}),
    ],
    ids=repr,
)
def test_gemma_reads_comma_space_between_members_and_items(dialect, name, body, expected):
    text = gemma(dialect, name, body)
    assert read(text, dialect) == [(name, expected)]
    if (name, body) != ("spaced", "{a:1, b:2}") and body.replace(", ", ",") != body:
        grammar_refuses(text, dialect)


@pytest.mark.parametrize("dialect", sorted(GEMMAS))
@pytest.mark.parametrize(
    "body",
    [
        "{nums:[1 ,2],query:<D>x<D>}",  # space before ','
        "{nums:[1,2 ],query:<D>x<D>}",  # before ']'
        "{nums:[ 1,2],query:<D>x<D>}",  # after '['
        "{nums:[1,\t2],query:<D>x<D>}",  # a tab
        "{nums:[1,\n2],query:<D>x<D>}",  # a line break
        "{query:<D>x<D> ,limit:1}",
        "{query:<D>x<D>,limit:1 }",
        "{query:<D>x<D>,limit:1, }",  # a trailing comma, spaced
        "{ query:<D>x<D>}",
    ],
    ids=repr,
)
def test_gemma_other_spaces_fail_closed(dialect, body):
    refused(gemma(dialect, "search", body), dialect)


@pytest.mark.parametrize("dialect", sorted(GEMMAS))
@pytest.mark.parametrize(
    ("name", "arguments"),
    [
        ("search", {"query": "a, b:c", "tags": ["x, y", ", z:"], "filters": {"k": "v, w:1", "n": [1, 2]}}),
        ("search", {"query": "Paris", "limit": 3}),
        ("spaced", {"a": 1, " b": 2, "b": "x"}),
    ],
    ids=repr,
)
def test_gemma_template_form_reads_back_unchanged(dialect, name, arguments):
    text = render_tool_calls([{"name": name, "arguments": arguments}], TOOLS, dialect)
    assert compiled(dialect).check(text).accepted
    assert read(text, dialect) == [(name, arguments)]


# -- 3. glm: arrays and objects with every quote escaped ----------------------------------------


def glm(dialect: str, pairs: list[tuple[str, str]], name: str = "items") -> str:
    nl = "\n" if dialect == "glm45" else ""
    body = "".join(f"<arg_key>{k}</arg_key>{nl}<arg_value>{v}</arg_value>{nl}" for k, v in pairs)
    return f"<tool_call>{name}{nl}{body}</tool_call>"


@pytest.mark.parametrize("dialect", GLM)
@pytest.mark.parametrize(
    ("key", "value", "expected"),
    [
        ("tags", r"[\"a\", \"b\"]", ["a", "b"]),
        ("tags", r"[\"a\",\"b\"]", ["a", "b"]),
        ("meta", r"{\"k\": \"v\", \"n\": [1, {\"deep\": true}]}", {"k": "v", "n": [1, {"deep": True}]}),
        # the text is a JSON string's contents: its escapes are decoded once, then the JSON's
        ("tags", r"[\"C:\\\\dir\", \"two\\nlines\", \"say \\\"hi\\\"\"]", ["C:\\dir", "two\nlines", 'say "hi"']),
        ("maybe", r"[1, 2]", [1, 2]),  # plain JSON: read as before
        ("meta", r"{\"k\": []}", {"k": []}),
    ],
    ids=repr,
)
def test_glm_reads_escaped_json_for_a_parameter_that_cannot_be_a_string(dialect, key, value, expected):
    text = glm(dialect, [(key, value)])
    assert read(text, dialect) == [("items", {key: expected})]


@pytest.mark.parametrize("dialect", GLM)
def test_glm_escaped_json_reads_beside_other_arguments_and_calls(dialect):
    text = glm(dialect, [("note", "n"), ("tags", r"[\"a\"]"), ("maybe", r"[1]")]) + glm(
        dialect, [("meta", r"{\"x\": 1}")]
    )
    assert read(text, dialect) == [("items", {"note": "n", "tags": ["a"], "maybe": [1]}), ("items", {"meta": {"x": 1}})]


@pytest.mark.parametrize("dialect", GLM)
@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("note", r"[\"a\", \"b\"]"),  # a string parameter keeps the text as it is
        ("either", r"[\"a\", \"b\"]"),  # so does one that may be a string
        ("note", r"{\"k\": 1}"),
    ],
    ids=repr,
)
def test_glm_a_parameter_that_may_be_a_string_keeps_the_text(dialect, key, value):
    assert read(glm(dialect, [(key, value)]), dialect) == [("items", {key: value})]


@pytest.mark.parametrize("dialect", GLM)
@pytest.mark.parametrize(
    ("key", "value", "reason"),
    [
        ("tags", '[\\"a\\", "b"]', "is not an array"),  # a quote not escaped
        ("tags", r"\"a\"", "is not an array"),  # encodes a string, not an array
        ("tags", r"[\"a\", ", "is not an array"),
        ("tags", r" [\"a\"]", "is not an array"),  # whitespace around it
        ("tags", "[\\\"a\nb\\\"]", "is not an array"),  # a raw line break in a JSON string
        ("ids", r"[\"a\"]", '/ids/0: "a" is not an integer'),  # read, then typed by the schema
        ("maybe", r"[\"1\"]", '/maybe/0: "1" is not an integer'),
        ("meta", r"{\"k\": NaN}", "is not an object"),
        ("meta", r"[\"a\"]", '/meta: ["a"] is not an object'),
    ],
    ids=repr,
)
def test_glm_escaped_json_fails_closed_otherwise(dialect, key, value, reason):
    assert reason in refused(glm(dialect, [(key, value)]), dialect)


@pytest.mark.parametrize("dialect", GLM)
def test_glm_grammar_writes_json_unescaped(dialect):
    grammar_refuses(glm(dialect, [("tags", r"[\"a\", \"b\"]")]), dialect)
    arguments = {"tags": ['a"b', "c\\d"], "meta": {"q": '"'}, "note": r"[\"x\"]"}
    text = render_tool_calls([{"name": "items", "arguments": arguments}], TOOLS, dialect)
    assert compiled(dialect).check(text).accepted
    assert read(text, dialect) == [("items", arguments)]


# -- 4. hermes: a call without "arguments" ------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        '<tool_call>\n{"name": "get_time"}\n</tool_call>',
        '<tool_call>{"name":"get_time"}</tool_call>',
        '<tool_call>\n{"name": "get_time"}',  # cut off at the very end, complete
        'Sure.\n<tool_call>\n{"name": "get_time"}\n</tool_call>',
    ],
    ids=repr,
)
def test_hermes_reads_a_call_without_arguments_as_no_arguments(text):
    assert read(text, "hermes") == [("get_time", {})]


def test_hermes_call_without_arguments_for_a_tool_with_optional_parameters():
    text = '<tool_call>\n{"name": "options"}\n</tool_call>\n<tool_call>\n{"name": "options", "arguments": {"verbose": true}}\n</tool_call>'
    assert read(text, "hermes") == [("options", {}), ("options", {"verbose": True})]
    grammar_refuses('<tool_call>\n{"name": "get_time"}\n</tool_call>', "hermes")


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        ('{"name": "needs"}', "missing required parameter(s) 'city'"),
        ('{"name": "nonempty"}', "/: {} has fewer than the minimum 1 properties"),
        ('{"name": "get_time", "args": {}}', "expected exactly"),
        ('{"name": "get_time", "arguments": null}', "not a JSON object"),
        ('{"arguments": {}}', "expected exactly"),
        ('{"name": "nowhere"}', "no tool is called 'nowhere'"),
    ],
    ids=repr,
)
def test_hermes_call_without_arguments_fails_closed_otherwise(body, reason):
    assert reason in refused(f"<tool_call>\n{body}\n</tool_call>", "hermes")


# -- 5. qwen3_coder: </parameter> missing before </function> ------------------------------------


def qwen(*lines: str, opening: bool = True) -> str:
    body = "\n".join(["<function=get_weather>", *lines])
    return f"<tool_call>\n{body}\n</tool_call>" if opening else body


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (qwen("<parameter=city>", "Paris", "</function>"), {"city": "Paris"}),
        (qwen("<parameter=city>", "Paris</function>"), {"city": "Paris"}),
        (qwen("<parameter=city>Paris</function>"), {"city": "Paris"}),
        (qwen("<parameter=city>Paris", "</function>"), {"city": "Paris"}),
        (qwen("<parameter=city>", "New", "York", "</function>"), {"city": "New\nYork"}),
        (qwen("<parameter=city>", "Paris  ", "</function>  "), {"city": "Paris  "}),
        (qwen("<parameter=city>", "Paris", "</parameter>", "<parameter=days>", "3", "</function>"),
         {"city": "Paris", "days": 3}),
        (qwen("<parameter=city>", "Paris", "</parameter>", "<parameter=days>", "3</function>"),
         {"city": "Paris", "days": 3}),
        (qwen("<parameter=city>Dallas<parameter=state>TX</function>"), {"city": "Dallas", "state": "TX"}),
        (qwen("<parameter=city>", "Paris", "</function>").replace("\n</tool_call>", "</tool_call>"), {"city": "Paris"}),
        # calls without <tool_call>
        (qwen("<parameter=city>", "Paris", "</function>", opening=False), {"city": "Paris"}),
        (qwen("<parameter=city>", "Paris</function>", opening=False), {"city": "Paris"}),
        (qwen("<parameter=city>", "Paris", "</function>", opening=False) + "\nDone.", {"city": "Paris"}),
    ],
    ids=repr,
)
def test_qwen_reads_a_value_whose_closing_is_missing_before_function_end(text, expected):
    assert read(text, "qwen3_coder") == [("get_weather", expected)]
    grammar_refuses(text, "qwen3_coder")


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        # a closing misspelt: it is no part of the value
        (qwen("<parameter=city>", "Paris", "</paramter>", "</function>"), "not closed"),
        (qwen("<parameter=city>", "Paris</paramter></function>"), "not closed"),
        (qwen("<parameter=city>Paris</parameter1></function>"), "not closed"),
        (qwen("<parameter=city>", "<div>x</div>", "</function>"), "not closed"),
        (qwen("<parameter=city>", "a</function>b", "</function>"), "not closed"),
        # one value or two
        (qwen("<parameter=city>", "Dallas<parameter=state>TX", "</function>"), "not closed"),
        (qwen("<parameter=city>", "Dallas<parameter=state>TX</function>"), "not closed"),
        (qwen("<parameter=city>", "a</parameter>b", "</function>"), "not closed"),
        # no value
        (qwen("<parameter=city>", "</function>"), "no value"),
        (qwen("<parameter=city></function>"), "no value"),
        # more after the call's end
        (qwen("<parameter=city>", "Paris", "</function>", "more", "</parameter>", "</function>"), "after '</function>'"),
        (qwen("<parameter=city>", "Paris</function>", "more"), "not closed"),
        (qwen("<parameter=city>", "Paris</function>", opening=False) + "\nDone.", "not closed"),
        # the call itself not closed
        (qwen("<parameter=city>", "Paris", "</function>").removesuffix("\n</tool_call>"), "not closed"),
        # typed by the schema
        (qwen("<parameter=city>", "Paris", "</parameter>", "<parameter=days>", "three", "</function>"),
         '/days: "three" is not an integer'),
    ],
    ids=repr,
)
def test_qwen_missing_closing_before_function_end_fails_closed_otherwise(text, reason):
    assert reason in refused(text, "qwen3_coder")


@pytest.mark.parametrize(
    "city",
    ["Paris</function>", "a\nb</function>", "x</function>  ", "</function>x", "see </function> here", "x</functio"],
    ids=repr,
)
def test_qwen_values_holding_function_end_still_read_back(city):
    """A value may hold ``</function>`` inside a line; with its closing, it
    reads back whole, and streams without ever sending what may end it."""
    text = render_tool_calls([{"name": "get_weather", "arguments": {"city": city}}], TOOLS, "qwen3_coder")
    assert compiled("qwen3_coder").check(text).accepted
    assert read(text, "qwen3_coder") == [("get_weather", {"city": city})]

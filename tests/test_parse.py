"""The schema-aware parser: model text in each dialect -> exact OpenAI tool_calls."""

from __future__ import annotations

import json
import re

import pytest
from sample_tools import RAW_DIALECTS, WRITE_FILE

from constrained import ToolCallStreamParser
from constrained.dialects import DIALECTS, get_dialect
from constrained.dialects.dsml import DeepSeekV32
from constrained.output.parse import parse_tool_calls
from constrained.output.render import render_tool_calls

PROBES = ["123", "true", "null", "[1, 2]", '{"a": 1}', "\n    indented\n  [1, 2]\n\n", "    return x\n"]


def arguments(result, index=0):
    return json.loads(result.tool_calls[index]["function"]["arguments"])


@pytest.mark.parametrize("dialect", sorted(DIALECTS))
@pytest.mark.parametrize("content", PROBES, ids=repr)
def test_string_parameters_keep_their_exact_text(dialect, content):
    call = {"name": "write_file", "arguments": {"path": "123", "content": content}}
    text = render_tool_calls([call], [WRITE_FILE], dialect)
    result = parse_tool_calls(text, [WRITE_FILE], dialect)
    assert result.errors == []
    assert arguments(result) == {"path": "123", "content": content}
    assert result.tool_calls[0]["type"] == "function"
    assert result.tool_calls[0]["function"]["name"] == "write_file"
    assert result.content == ""


def test_qwen_removes_exactly_the_template_newlines():
    text = "<tool_call>\n<function=write_file>\n<parameter=path>\n a \n</parameter>\n<parameter=content>\n\n\nx\n\n\n</parameter>\n</function>\n</tool_call>"
    assert arguments(parse_tool_calls(text, [WRITE_FILE], "qwen3_coder")) == {"path": " a ", "content": "\n\nx\n\n"}


REF_TOOL = {
    "name": "query",
    "parameters": {
        "type": "object",
        "$defs": {
            "Limit": {"type": "integer"},
            "Alias": {"$ref": "#/$defs/Limit"},
            "Filter": {"type": "object", "properties": {"field": {"type": "string"}}, "required": ["field"]},
            "Ids": {"type": "array", "items": {"type": "integer"}},
            "Node": {
                "type": "object",
                "properties": {"name": {"type": "string"}, "children": {"type": "array", "items": {"$ref": "#/$defs/Node"}}},
                "required": ["name"],
            },
        },
        "properties": {
            "limit": {"$ref": "#/$defs/Limit"},
            "alias": {"$ref": "#/$defs/Alias"},
            "filter": {"$ref": "#/$defs/Filter"},
            "ids": {"$ref": "#/$defs/Ids"},
            "maybe": {"oneOf": [{"type": "integer"}, {"type": "null"}]},
            "tree": {"$ref": "#/$defs/Node"},
            "label": {"type": "string"},
        },
    },
}


@pytest.mark.parametrize("dialect", RAW_DIALECTS)
def test_raw_values_are_typed_by_the_schema(dialect):
    raw = {
        "limit": "10",
        "alias": "7",
        "filter": '{"field": "x"}',
        "ids": "[1, 2, 3]",
        "maybe": "123",
        "tree": '{"name": "a", "children": [{"name": "b"}]}',
        "label": "10",
    }
    chosen = get_dialect(dialect)
    if dialect == "qwen3_coder":
        body = "".join(f"<parameter={k}>\n{v}\n</parameter>\n" for k, v in raw.items())
        text = f"<tool_call>\n<function=query>\n{body}</function>\n</tool_call>"
    elif isinstance(chosen, DeepSeekV32):  # each value as written, the string attribute saying how to read it
        tags = chosen.tags
        body = "".join(f'{tags.parameter_open(k)}{str(k == "label").lower()}">{v}{tags.parameter_close}\n' for k, v in raw.items())
        text = chosen.markup.calls_text([f'{chosen.markup.open}query">\n{body}{chosen.markup.close}'])
    elif dialect == "minimax_m2":
        body = "".join(f'<parameter name="{k}">{v}</parameter>\n' for k, v in raw.items())
        text = chosen.markup.calls_text([f'<invoke name="query">\n{body}</invoke>'])
    else:
        nl = "\n" if dialect == "glm45" else ""
        body = "".join(f"<arg_key>{k}</arg_key>{nl}<arg_value>{v}</arg_value>{nl}" for k, v in raw.items())
        text = f"<tool_call>query{nl}{body}</tool_call>"
    result = parse_tool_calls(text, [REF_TOOL], dialect)
    assert result.errors == []
    assert arguments(result) == {
        "limit": 10,
        "alias": 7,
        "filter": {"field": "x"},
        "ids": [1, 2, 3],
        "maybe": 123,
        "tree": {"name": "a", "children": [{"name": "b"}]},
        "label": "10",
    }


def test_python_style_literals_are_read_in_qwen():
    tool = {"name": "f", "parameters": {"type": "object", "properties": {"on": {"type": "boolean"}, "none": {"type": "null"}}}}
    text = "<tool_call>\n<function=f>\n<parameter=on>\nTrue\n</parameter>\n<parameter=none>\nNone\n</parameter>\n</function>\n</tool_call>"
    assert arguments(parse_tool_calls(text, [tool], "qwen3_coder")) == {"on": True, "none": None}


def test_a_union_of_string_and_integer_takes_the_integer_only_when_valid():
    tool = {"name": "f", "parameters": {"type": "object", "properties": {"v": {"anyOf": [{"type": "integer", "minimum": 0}, {"type": "string"}]}}}}
    read = lambda raw: arguments(parse_tool_calls(f"<tool_call>\n<function=f>\n<parameter=v>\n{raw}\n</parameter>\n</function>\n</tool_call>", [tool], "qwen3_coder"))["v"]
    assert read("5") == 5
    assert read("-5") == "-5"
    assert read("five") == "five"


@pytest.mark.parametrize("dialect", RAW_DIALECTS)
@pytest.mark.parametrize("raw", ["1\n", " 1", "\t[1]", "{}\r\n"], ids=repr)
def test_raw_text_with_surrounding_whitespace_is_no_json_reading(dialect, raw):
    """The grammar writes JSON values without surrounding whitespace, so in
    a union such text is the string it looks like (json.loads would skip the
    whitespace and read the number 1 out of the string "1\n")."""
    tool = {"name": "f", "parameters": {"type": "object", "properties": {"v": {"type": ["string", "integer", "array", "object"]}}}}
    text = render_tool_calls([{"name": "f", "arguments": {"v": raw}}], [tool], dialect)
    assert arguments(parse_tool_calls(text, [tool], dialect)) == {"v": raw}


def test_two_calls_come_back_in_source_order():
    calls = [
        {"name": "write_file", "arguments": {"path": "b", "content": "2"}},
        {"name": "write_file", "arguments": {"path": "a", "content": "1"}},
    ]
    for dialect in DIALECTS:
        result = parse_tool_calls(render_tool_calls(calls, [WRITE_FILE], dialect), [WRITE_FILE], dialect)
        assert [arguments(result, i)["path"] for i in range(2)] == ["b", "a"], dialect
        assert len({call["id"] for call in result.tool_calls}) == 2


def test_reasoning_and_content_are_kept_apart():
    text = "<think>\nplan\n</think>\n\nI will write it.\n" + render_tool_calls(
        [{"name": "write_file", "arguments": {"path": "a", "content": "b"}}], [WRITE_FILE], "qwen3_coder"
    )
    result = parse_tool_calls(text, [WRITE_FILE], "qwen3_coder")
    assert result.reasoning == "\nplan\n"
    assert result.content == "I will write it.\n"  # the blank after </think> is the template's
    assert len(result.tool_calls) == 1


GOOD = "<tool_call>\n<function=write_file>\n<parameter=path>\na\n</parameter>\n<parameter=content>\nb\n</parameter>\n</function>\n</tool_call>"


@pytest.mark.parametrize(
    "text, reason",
    [
        (GOOD.replace("</tool_call>", ""), "not closed"),
        ("```\n" + GOOD + "\n```", "fenced code block"),
        (GOOD.replace("write_file", "delete_file"), "no tool is called 'delete_file'"),
        (GOOD.replace("<parameter=path>\na\n</parameter>\n", ""), "missing required parameter(s) 'path'"),
        (GOOD.replace("</function>", "<parameter=mode>\n5\n</parameter>\n</function>"), "has no parameter 'mode'"),
        (GOOD.replace("</function>", "<parameter=path>\nb\n</parameter>\n</function>"), "given twice"),
        # A misspelt closing is text; the last value then has none (before, the
        # first value ran on through the next parameter: see test_drift_raw).
        (GOOD.replace("<parameter=content>\nb\n</parameter>", "<parameter=content>\nb\n</paramter>"), "not closed"),
        # (A missing newline after <tool_call> is read: see test_drift_raw.)
        (GOOD.replace("\n<function=", "\nhello\n<function="), "expected"),
    ],
)
def test_fail_closed_keeps_the_text_and_says_why(text, reason):
    result = parse_tool_calls(text, [WRITE_FILE], "qwen3_coder")
    assert result.tool_calls == []
    assert text in result.content or result.content == text
    (error,) = result.errors
    assert reason in error.reason
    start, end = error.span
    assert 0 <= start < end <= len(text.encode())


def test_a_value_of_the_wrong_type_is_rejected():
    tool = {"name": "f", "parameters": {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}}
    for dialect, text in [
        ("qwen3_coder", "<tool_call>\n<function=f>\n<parameter=n>\nten\n</parameter>\n</function>\n</tool_call>"),
        ("hermes", '<tool_call>\n{"name": "f", "arguments": {"n": "10"}}\n</tool_call>'),
        ("gemma4", '<|tool_call>call:f{n:<|"|>10<|"|>}<tool_call|>'),
    ]:
        result = parse_tool_calls(text, [tool], dialect)
        assert result.tool_calls == [] and result.content == text, dialect
        assert result.errors and result.errors[0].tool == "f"


def test_relaxed_keywords_are_validated_after_parsing():
    tool = {"name": "f", "parameters": {"type": "object", "properties": {"tags": {"type": "array", "uniqueItems": True}}}}
    ok = '<tool_call>\n{"name": "f", "arguments": {"tags": [1, 2]}}\n</tool_call>'
    bad = '<tool_call>\n{"name": "f", "arguments": {"tags": [1, 1]}}\n</tool_call>'
    assert len(parse_tool_calls(ok, [tool], "hermes").tool_calls) == 1
    result = parse_tool_calls(bad, [tool], "hermes")
    assert result.tool_calls == [] and result.errors[0].reason == "/tags: [1, 1] has repeated items (uniqueItems)"


def test_an_oversized_call_is_rejected(monkeypatch):
    import constrained.output.parse as parse

    monkeypatch.setattr(parse, "MAX_CALL_BYTES", 50)
    result = parse_tool_calls(GOOD, [WRITE_FILE], "qwen3_coder")
    assert result.tool_calls == [] and "larger than 50 bytes" in result.errors[0].reason


def test_duplicate_keys_in_hermes_json_are_malformed():
    text = '<tool_call>\n{"name": "write_file", "arguments": {"path": "a", "path": "b", "content": "c"}}\n</tool_call>'
    result = parse_tool_calls(text, [WRITE_FILE], "hermes")
    assert result.tool_calls == [] and "given twice" in result.errors[0].reason


def test_a_schema_the_validator_cannot_follow_fails_closed_without_raising():
    # The normalizer does not read inside `not` (relaxed); the validator trips on it.
    tool = {"name": "f", "parameters": {"type": "object", "properties": {"a": {"not": {"minLength": "x"}}}}}
    text = '<tool_call>\n{"name": "f", "arguments": {"a": "text"}}\n</tool_call>'
    result = parse_tool_calls(text, [tool], "hermes")
    assert result.tool_calls == [] and result.content == text
    assert "cannot be validated" in result.errors[0].reason


def test_a_remote_ref_is_never_fetched_and_reads_as_any_value(monkeypatch):
    import urllib.request

    monkeypatch.setattr(urllib.request, "urlopen", lambda *a, **k: pytest.fail("fetched a remote $ref"))
    tool = {"name": "f", "parameters": {"type": "object", "properties": {"a": {"$ref": "http://example.com/x.json"}}}}
    text = '<tool_call>\n{"name": "f", "arguments": {"a": 1}}\n</tool_call>'
    assert arguments(parse_tool_calls(text, [tool], "hermes")) == {"a": 1}


def test_a_key_matching_a_pattern_property_is_typed_by_that_pattern():
    tool = {
        "name": "f",
        "parameters": {
            "type": "object",
            "properties": {"label": {"type": "string"}},
            "patternProperties": {"^n_": {"type": "integer"}},
            "additionalProperties": {"type": "string"},
        },
    }
    text = "<tool_call>\n<function=f>\n<parameter=n_size>\n5\n</parameter>\n<parameter=note>\n5\n</parameter>\n</function>\n</tool_call>"
    assert arguments(parse_tool_calls(text, [tool], "qwen3_coder")) == {"n_size": 5, "note": "5"}


@pytest.mark.random_call_ids
def test_call_ids_never_repeat_across_outputs_and_a_stream_keeps_its_own():
    """Clients match tool results to calls by id over a whole conversation:
    the same call in two outputs (every turn's first ``write_file``) gets two
    ids; a stream's streamed ids are its result's."""
    text = render_tool_calls([{"name": "write_file", "arguments": {"path": "a", "content": "b"}}] * 2, [WRITE_FILE],
                             "qwen3_coder")
    ids = [call["id"] for _ in range(50) for call in parse_tool_calls(text, [WRITE_FILE], "qwen3_coder").tool_calls]
    assert len(set(ids)) == len(ids) == 100
    assert all(re.fullmatch(r"call_[0-9a-f]{24}", i) for i in ids)
    stream = ToolCallStreamParser([WRITE_FILE], "qwen3_coder")
    deltas = [d for i in range(0, len(text), 5) for d in stream.feed(text[i : i + 5])] + stream.close()
    streamed = [call["id"] for d in deltas for call in d.get("tool_calls", ()) if "id" in call]
    assert stream.result is not None and streamed == [call["id"] for call in stream.result.tool_calls]
    assert not set(streamed) & set(ids)

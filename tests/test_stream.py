"""Streaming: deltas that add up to exactly what the non-streaming parser gives."""

from __future__ import annotations

import json
import random

import pytest
from sample_tools import WRITE_FILE_WITH_MODE

from constrained.dialects import DIALECTS
from constrained.errors import StreamClosedError
from constrained.output.parse import parse_tool_calls
from constrained.output.render import render_tool_calls
from constrained.output.stream import ToolCallStreamParser

PROBES = ["123", "true", "null", "[1, 2]", '{"a": 1}', "\n    indented\n  [1, 2]\n\n", "    return x\n"]
STREAMING_STRINGS = sorted(DIALECTS)


def stream(text: str, dialect: str, sizes: random.Random):
    parser = ToolCallStreamParser([WRITE_FILE_WITH_MODE], dialect)
    deltas = []
    position = 0
    while position < len(text):
        step = sizes.randint(1, 7)
        deltas.append((position + step, parser.feed(text[position : position + step])))
        position += step
    deltas.append((len(text), parser.close()))
    return parser, deltas


def collect(deltas):
    content, names, arguments = "", {}, {}
    for _, batch in deltas:
        for delta in batch:
            content += delta.get("content", "")
            for call in delta.get("tool_calls", []):
                if "id" in call:
                    names[call["index"]] = (call["id"], call["function"]["name"])
                arguments[call["index"]] = arguments.get(call["index"], "") + call["function"]["arguments"]
    return content, names, arguments


@pytest.mark.parametrize("dialect", sorted(DIALECTS))
@pytest.mark.parametrize("content", PROBES, ids=repr)
def test_fragments_reconstruct_the_non_streaming_arguments(dialect, content):
    calls = [
        {"name": "write_file", "arguments": {"path": "123", "content": content, "mode": 5}},
        {"name": "write_file", "arguments": {"path": "b", "content": content}},
    ]
    text = "Writing.\n" + render_tool_calls(calls, [WRITE_FILE_WITH_MODE], dialect)
    expected = parse_tool_calls(text, [WRITE_FILE_WITH_MODE], dialect)
    assert expected.errors == [] and len(expected.tool_calls) == 2
    for seed in range(3):
        parser, deltas = stream(text, dialect, random.Random(seed))
        got_content, names, arguments = collect(deltas)
        assert got_content == expected.content
        assert [names[i] for i in sorted(names)] == [(c["id"], c["function"]["name"]) for c in expected.tool_calls]
        assert [arguments[i] for i in sorted(arguments)] == [c["function"]["arguments"] for c in expected.tool_calls]
        assert [json.loads(arguments[i])["content"] for i in sorted(arguments)] == [content, content]
        assert parser.result == expected


@pytest.mark.parametrize("dialect", STREAMING_STRINGS)
def test_string_values_stream_before_the_call_ends(dialect):
    long_text = "line \"é\" \\ \U0001F600\n" * 40
    text = render_tool_calls([{"name": "write_file", "arguments": {"path": "p", "content": long_text}}], [WRITE_FILE_WITH_MODE], dialect)
    _, deltas = stream(text, dialect, random.Random(1))
    call_end = text.rindex("line")
    early = "".join(
        call["function"]["arguments"]
        for fed, batch in deltas
        if fed < call_end
        for delta in batch
        for call in delta.get("tool_calls", [])
    )
    # Most of the string has been sent before its last line arrived.
    assert early.count("line") >= 30
    assert parser_result_arguments(text, dialect).startswith(early)


def parser_result_arguments(text: str, dialect: str) -> str:
    (call,) = parse_tool_calls(text, [WRITE_FILE_WITH_MODE], dialect).tool_calls
    return call["function"]["arguments"]


def test_text_that_might_start_a_call_is_held_back():
    parser = ToolCallStreamParser([WRITE_FILE_WITH_MODE], "qwen3_coder")
    assert parser.feed("Hello <tool") == [{"content": "Hello "}]
    assert parser.feed("box>") == [{"content": "<toolbox>"}]


def test_a_streamed_call_found_invalid_at_its_end_is_reported():
    text = "<tool_call>\n<function=write_file>\n<parameter=path>\na\n</parameter>\n</function>\n</tool_call>"
    parser = ToolCallStreamParser([WRITE_FILE_WITH_MODE], "qwen3_coder")
    deltas = parser.feed(text)
    assert deltas[0]["tool_calls"][0]["function"]["name"] == "write_file"
    final, content = parser.close()
    (error,) = final["tool_call_errors"]
    # Its text is not lost: it comes out as content, as in the result.
    assert content == {"content": text}
    assert error["index"] == 0 and "missing required parameter(s) 'content'" in error["reason"]
    assert parser.result is not None
    assert parser.result.tool_calls == [] and parser.result.content == text


def test_an_unknown_tool_is_never_streamed():
    text = "<tool_call>\n<function=rm>\n<parameter=path>\na\n</parameter>\n</function>\n</tool_call>"
    parser = ToolCallStreamParser([WRITE_FILE_WITH_MODE], "qwen3_coder")
    deltas = parser.feed(text) + parser.close()
    assert all("tool_calls" not in d for d in deltas)
    assert parser.result is not None and parser.result.errors[0].tool == "rm"


def test_reasoning_is_not_streamed_as_content():
    text = "<think>\nplan\n</think>\n\nDone."
    parser, deltas = stream(text, "qwen3_coder", random.Random(2))
    content, _, _ = collect(deltas)
    assert content == "Done."
    assert parser.result is not None and parser.result.reasoning == "\nplan\n"


def test_feed_after_close_is_an_error():
    parser = ToolCallStreamParser([WRITE_FILE_WITH_MODE], "hermes")
    parser.close()
    with pytest.raises(ValueError):
        parser.feed("x")
    with pytest.raises(StreamClosedError, match="after close"):
        parser.feed("x")

"""The parser never raises, and a cut-off call is never reported as a call."""

from __future__ import annotations

import json

import pytest
from corpus import mcp_tools
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sample_tools import reads_cut_off_call

from constrained.dialects import DIALECTS
from constrained.output.parse import parse_tool_calls
from constrained.output.render import render_tool_calls
from constrained.output.stream import ToolCallStreamParser

TOOLS = [t for t in mcp_tools() if t.name in {"write_file", "edit_file", "git_log", "get_pricing", "create_entities"}]
CALLS = [
    {"name": "write_file", "arguments": {"path": "/tmp/a.py", "content": "def f():\n    return {'a': [1, 2]}\n"}},
    {"name": "git_log", "arguments": {"repo_path": ".", "max_count": 5}},
    {
        "name": "create_entities",
        "arguments": {"entities": [{"name": "n", "entityType": "t", "observations": ["x, y", "{z}"]}]},
    },
]


def rendered(dialect: str) -> str:
    return render_tool_calls(CALLS, TOOLS, dialect)


def test_the_sample_calls_round_trip():
    for dialect in DIALECTS:
        result = parse_tool_calls(rendered(dialect), TOOLS, dialect)
        assert result.errors == [], dialect
        assert [(c["function"]["name"], json.loads(c["function"]["arguments"])) for c in result.tool_calls] == [
            (c["name"], c["arguments"]) for c in CALLS
        ]


@pytest.mark.parametrize("dialect", sorted(DIALECTS))
def test_every_prefix_parses_without_raising_and_never_completes_a_cut_call(dialect):
    closing = DIALECTS[dialect].markup.close
    # A framed turn's output ends before its last call's closing (a stop token): here it is written.
    text = rendered(dialect) + (closing if DIALECTS[dialect].markup.messages else "")
    complete_ends = []
    position = 0
    while (found := text.find(closing, position)) >= 0:
        complete_ends.append(found + len(closing))
        position = found + 1
    assert len(complete_ends) == len(CALLS)
    for cut in range(len(text) + 1):
        result = parse_tool_calls(text[:cut], TOOLS, dialect)
        finished = sum(1 for end in complete_ends if end <= cut) + reads_cut_off_call(dialect, text[:cut])
        assert len(result.tool_calls) == finished, (cut, text[:cut][-40:])


@pytest.mark.parametrize("dialect", sorted(DIALECTS))
def test_every_byte_cut_streams_without_raising(dialect):
    text = rendered(dialect)
    for cut in range(0, len(text) + 1, 7):
        parser = ToolCallStreamParser(TOOLS, dialect)
        parser.feed(text[:cut])
        parser.close()
        assert parser.result == parse_tool_calls(text[:cut], TOOLS, dialect)


MARKUP = st.sampled_from(
    [
        "<tool_call>", "</tool_call>", "<function=write_file>", "<parameter=path>", "</parameter>", "</function>",
        "\n", "{", "}", "[", "]", ":", ",", '"', "<|tool_call>", "<tool_call|>", '<|"|>', "call:", "<arg_key>",
        "</arg_key>", "<arg_value>", "</arg_value>", "```", "<think>", "</think>", '{"name": "write_file", "arguments": ',
    ]
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.one_of(MARKUP, st.text(max_size=8)), max_size=30), st.sampled_from(sorted(DIALECTS)))
def test_garbage_never_raises(pieces, dialect):
    text = "".join(pieces)
    result = parse_tool_calls(text, TOOLS, dialect)
    for call in result.tool_calls:
        json.loads(call["function"]["arguments"])
    parser = ToolCallStreamParser(TOOLS, dialect)
    for piece in pieces:
        parser.feed(piece)
    parser.close()
    assert parser.result == result

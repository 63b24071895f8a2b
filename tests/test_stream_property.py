"""Streaming never loses text: for any model output, cut anywhere, the stream
adds up to exactly what the non-streaming parser gives."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sample_tools import WEATHER, WRITE_FILE

from constrained import ToolCallStreamParser, parse_tool_calls, render_tool_calls
from constrained.dialects import DIALECTS
from constrained.options import Reasoning


def tool(name: str, required: list[str], **properties: dict) -> dict:
    return {"name": name, "parameters": {"type": "object", "properties": properties, "required": required}}


STRING = {"type": "string"}
TOOLS = [WEATHER, WRITE_FILE]
# Only for writing calls the stream's tools reject: any types, no required
# keys, an undeclared parameter, an undeclared tool.
LOOSE = [
    tool("get_weather", [], city={}, unit={}, country={}),
    tool("write_file", [], path={}, content={}),
    tool("delete_all", [], path=STRING),
]

WORDS = st.text(alphabet='ab xyz09\n"{}:,é\\', max_size=12)
LINES = st.lists(WORDS, max_size=4).map("\n".join)
PROSE = st.text(alphabet="ab <>/=|`\n{}:,.", max_size=16)


def valid_call(draw) -> dict:
    if draw(st.booleans()):
        arguments = {"city": draw(WORDS)}
        if draw(st.booleans()):
            arguments["unit"] = draw(st.sampled_from(["celsius", "fahrenheit"]))
        return {"name": "get_weather", "arguments": arguments}
    return {"name": "write_file", "arguments": {"path": draw(WORDS), "content": draw(LINES)}}


def invalid_call(draw) -> dict:
    return draw(
        st.sampled_from(
            [
                {"name": "delete_all", "arguments": {"path": "/"}},
                {"name": "get_weather", "arguments": {"city": 5}},
                {"name": "get_weather", "arguments": {"city": "Paris", "unit": "kelvin"}},
                {"name": "get_weather", "arguments": {"unit": "celsius"}},
                {"name": "get_weather", "arguments": {"city": "Paris", "country": "FR"}},
                {"name": "write_file", "arguments": {"path": "a"}},
                {"name": "write_file", "arguments": {"path": ["a"], "content": {"x": 1}}},
            ]
        )
    )


@st.composite
def pieces(draw, dialect: str) -> str:
    chosen = DIALECTS[dialect]
    kind = draw(
        st.sampled_from(["valid", "valid", "invalid", "truncated", "bare", "marker", "prose", "prose", "reasoning"])
    )
    if kind == "valid":
        return render_tool_calls([valid_call(draw)], TOOLS, dialect)
    if kind == "invalid":
        return render_tool_calls([invalid_call(draw)], LOOSE, dialect)
    if kind == "truncated":
        text = render_tool_calls([valid_call(draw)], TOOLS, dialect)
        return text[: draw(st.integers(1, len(text) - 1))]
    if kind == "bare":  # a call without its opening marker, or both (drifted output)
        text = render_tool_calls([valid_call(draw)], TOOLS, dialect)[len(chosen.markup.open) :]
        return text if draw(st.booleans()) else text[: -len(chosen.markup.close)]
    if kind == "marker":
        marker = draw(st.sampled_from(["<tool_call>", chosen.markup.open, chosen.markup.close]))
        return draw(st.sampled_from([f"Say {marker} is a tag.", marker, f"{marker}\n"]))
    block = chosen.reasoning_block()
    if kind == "reasoning" and block is not None:
        shape = draw(st.sampled_from(["closed", "closed", "unclosed", "closing"]))
        if shape == "closing":  # a lone closing marker, or the end of a block the prompt opened
            return block.closing
        label = draw(st.sampled_from(["", block.label]))
        return f"{block.opening}{label}{draw(PROSE)}" + (block.closing if shape == "closed" else "")
    return draw(PROSE)


@st.composite
def outputs(draw) -> tuple[str, str, list[str], Reasoning]:
    dialect = draw(st.sampled_from(sorted(DIALECTS)))
    reasoning: Reasoning = draw(st.sampled_from([True, "open"])) if DIALECTS[dialect].reasoning_block() else True
    parts = draw(st.lists(pieces(dialect), min_size=1, max_size=5))
    text = draw(st.sampled_from(["", "\n", " "])).join(parts)
    if draw(st.booleans()):
        cuts = list(range(1, len(text)))
    else:
        cuts = sorted(set(draw(st.lists(st.integers(1, max(1, len(text) - 1)), max_size=12))))
    bounds = [0, *cuts, len(text)]
    return dialect, text, [text[a:b] for a, b in zip(bounds, bounds[1:]) if b > a], reasoning


def streamed(dialect: str, parts: list[str], reasoning: Reasoning = True):
    parser = ToolCallStreamParser(TOOLS, dialect, reasoning=reasoning)
    deltas = [delta for part in parts for delta in parser.feed(part)] + parser.close()
    return parser, deltas


def check(dialect: str, text: str, parts: list[str], reasoning: Reasoning = True) -> None:
    expected = parse_tool_calls(text, TOOLS, dialect, reasoning=reasoning)
    parser, deltas = streamed(dialect, parts, reasoning)
    content, calls, failed = "", {}, set()
    for delta in deltas:
        content += delta.get("content", "")
        for call in delta.get("tool_calls", []):
            index = call["index"]
            assert index not in failed, "a fragment after the call was reported"
            if "id" in call:
                assert index not in calls
                calls[index] = [call["id"], call["function"]["name"], ""]
            calls[index][2] += call["function"]["arguments"]
        for error in delta.get("tool_call_errors", []):
            assert error["index"] in calls and error["index"] not in failed
            assert error["id"] == calls[error["index"]][0] and error["reason"]
            failed.add(error["index"])
    assert content == expected.content
    accepted = [tuple(calls[i]) for i in sorted(calls) if i not in failed]
    assert accepted == [(c["id"], c["function"]["name"], c["function"]["arguments"]) for c in expected.tool_calls]
    assert parser.result == expected


@pytest.mark.slow
@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(outputs())
def test_the_stream_adds_up_to_the_non_streaming_parse(output):
    check(*output)


def test_a_lone_call_marker_in_prose_stays_content():
    for dialect in ("qwen3_coder", "hermes"):
        text = "Say <tool_call> is a tag."
        _, deltas = streamed(dialect, list(text))
        assert "".join(d.get("content", "") for d in deltas) == text


def test_a_call_of_an_undeclared_tool_streams_as_content():
    call = render_tool_calls([{"name": "delete_all", "arguments": {"path": "/"}}], LOOSE, "qwen3_coder")
    text = f"Hi {call} bye"
    _, deltas = streamed("qwen3_coder", list(text))
    assert "".join(d.get("content", "") for d in deltas) == text == parse_tool_calls(text, TOOLS, "qwen3_coder").content
    assert all("tool_calls" not in d and "tool_call_errors" not in d for d in deltas)


def test_a_rejected_glm45_call_streams_as_content():
    undeclared = {"name": "delete_all", "arguments": {"path": "/"}}
    for call in (undeclared, {"name": "get_weather", "arguments": {"unit": "celsius"}}):
        text = render_tool_calls([call], LOOSE, "glm45")
        parser, deltas = streamed("glm45", list(text))
        assert "".join(d.get("content", "") for d in deltas) == text
        assert parser.result is not None and parser.result.content == text and parser.result.tool_calls == []


def test_prose_streams_at_once_and_a_marker_tail_only_until_it_cannot_be_one():
    for dialect, chosen in DIALECTS.items():
        parser = ToolCallStreamParser(TOOLS, dialect)
        assert parser.feed("Hello, ") == [{"content": "Hello, "}]
        partial = chosen.markup.open[:3]
        assert parser.feed(partial) == []
        assert parser.feed("!") == [{"content": partial + "!"}]


@pytest.mark.parametrize("dialect", sorted(name for name, dialect in DIALECTS.items() if dialect.markup.section is not None))
def test_a_calls_section_after_an_open_code_fence_streams_as_the_parse_reads_it(dialect):
    """The section's opening is in the fence state the text before it
    leaves: a call after an unclosed ``` is text, streamed or not."""
    text = "```" + render_tool_calls([{"name": "write_file", "arguments": {"path": "", "content": ""}}], TOOLS, dialect)
    assert parse_tool_calls(text, TOOLS, dialect).content == text
    check(dialect, text, list(text))

"""The detectors as SGLang's serving layer drives them, through its
``FunctionCallParser``: whole outputs, streams, and the constraint each
request gets. Outputs are read exactly as the library reads them, in
SGLang's shapes (``ToolCallItem``: the tool's index in the request and
JSON arguments whole; streamed, the call's index, its name once, then
argument fragments)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from sglang.srt.entrypoints.openai.protocol import ChatCompletionRequest, ToolChoice
from sglang.srt.function_call.function_call_parser import FunctionCallParser
from sglang_tools import WEATHER, WRITE, sglang_tools

import constrained.sglang
from constrained import parse_tool_calls, render_tool_calls
from constrained.dialects import get_dialect
from constrained.sglang import ToolsTag

constrained.sglang.register()

DIALECTS = ("qwen3_coder", "gemma4", "functiongemma", "hermes", "glm45", "glm47", "deepseek_v32", "deepseek_v4", "deepseek_v41",
            "deepseek_v31", "deepseek_r1", "kimi_k2", "gpt_oss", "minimax_m2")
TOOLS = [WRITE, WEATHER]
CALLS = [
    {"name": "get_weather", "arguments": {"city": "Paris", "days": 3}},
    {"name": "write_file", "arguments": {"path": "a.json", "content": '{"looks": "like JSON"}\n  indented\n\n', "mode": 420}},
]


def parser(dialect: str, tools: list[dict[str, Any]] = TOOLS, tool_choice: Any = None) -> FunctionCallParser:
    return FunctionCallParser(sglang_tools(tools), f"constrained_{dialect}", tool_choice=tool_choice)


def output(dialect: str, calls: list[dict[str, Any]] = CALLS) -> str:
    """Text, then the calls (the text in a preamble message where the family frames text)."""
    framing = get_dialect(dialect).markup.messages
    text = "Let me see.\n" if framing is None else framing.preamble("Let me see.\n")
    return text + render_tool_calls(calls, TOOLS, dialect)


def streamed(reader: FunctionCallParser, text: str, size: int) -> tuple[str, dict[int, str], dict[int, str]]:
    """Content, and per call index its name and its arguments, from a stream
    of ``size``-character chunks."""
    pieces = [reader.parse_stream_chunk(text[i : i + size]) for i in range(0, len(text), size)]
    pieces.append(reader.parse_stream_end())
    names: dict[int, str] = {}
    arguments: dict[int, str] = {}
    for _, items in pieces:
        for item in items:
            if item.name:
                assert item.tool_index not in names, "a call's name is sent once"
                names[item.tool_index] = item.name
            arguments[item.tool_index] = arguments.get(item.tool_index, "") + item.parameters
    return "".join(normal for normal, _ in pieces), names, arguments


@pytest.mark.parametrize("dialect", DIALECTS)
def test_whole_outputs_read_as_the_library_reads_them(dialect):
    text = output(dialect)
    expected = parse_tool_calls(text, TOOLS, dialect, reasoning=False)
    normal, items = parser(dialect).parse_non_stream(text)
    assert normal == expected.content and normal.startswith("Let me see.\n")
    assert [(item.tool_index, item.name, item.parameters) for item in items] == [
        ([1, 0][i], call["function"]["name"], call["function"]["arguments"]) for i, call in enumerate(expected.tool_calls)
    ]
    assert [json.loads(item.parameters) for item in items] == [call["arguments"] for call in CALLS]


@pytest.mark.parametrize("size", [1, 3, 7, 10_000])
@pytest.mark.parametrize("dialect", DIALECTS)
def test_streams_read_as_the_library_reads_them(dialect, size):
    text = output(dialect)
    expected = parse_tool_calls(text, TOOLS, dialect, reasoning=False)
    content, names, arguments = streamed(parser(dialect), text, size)
    assert content == expected.content
    assert names == {i: call["function"]["name"] for i, call in enumerate(expected.tool_calls)}
    assert arguments == {i: call["function"]["arguments"] for i, call in enumerate(expected.tool_calls)}


@pytest.mark.parametrize("dialect", ["qwen3_coder", "gemma4"])
def test_a_plain_call_reads_as_sglangs_own_detector_reads_it(dialect):
    """Where SGLang's detector for the format reads a call right, the
    plug-in's reads it the same, in the same shapes (SGLang's detectors
    disagree among themselves on what ``tool_index`` counts, so only the
    calls are compared)."""
    text = output(dialect, CALLS[:1])
    ours = FunctionCallParser(sglang_tools(TOOLS), f"constrained_{dialect}").parse_non_stream(text)
    theirs = FunctionCallParser(sglang_tools(TOOLS), dialect).parse_non_stream(text)
    assert ours[0] == theirs[0]
    assert [(i.name, json.loads(i.parameters)) for i in ours[1]] == [(i.name, json.loads(i.parameters)) for i in theirs[1]]
    ours_streamed = streamed(FunctionCallParser(sglang_tools(TOOLS), f"constrained_{dialect}"), text, 4)
    theirs_streamed = streamed(FunctionCallParser(sglang_tools(TOOLS), dialect), text, 4)
    assert ours_streamed[0] == theirs_streamed[0]
    assert list(ours_streamed[1].values()) == list(theirs_streamed[1].values())
    assert [json.loads(a) for a in ours_streamed[2].values()] == [json.loads(a) for a in theirs_streamed[2].values()]


@pytest.mark.parametrize("dialect", DIALECTS)
def test_a_call_of_an_undeclared_tool_stays_content(dialect):
    delete = {"type": "function", "function": {"name": "delete_everything", "parameters": {"type": "object"}}}
    text = render_tool_calls([{"name": "delete_everything", "arguments": {}}], [delete], dialect)
    reader = parser(dialect, [WEATHER])
    assert reader.has_tool_call(text)
    normal, items = reader.parse_non_stream(text)
    assert items == [] and normal == text
    content, names, _ = streamed(parser(dialect, [WEATHER]), text, 5)
    assert names == {} and content == text


def test_a_named_choice_reads_the_named_tools_calls_only():
    text = output("qwen3_coder")
    choice = ToolChoice(function={"name": "write_file"})
    normal, items = parser("qwen3_coder", tool_choice=choice).parse_non_stream(text)
    assert [item.name for item in items] == ["write_file"]
    assert "<function=get_weather>" in normal


@pytest.mark.parametrize(
    "choice, expected",
    [("auto", "auto"), ("required", "required"), (ToolChoice(function={"name": "get_weather"}), "get_weather")],
)
def test_every_tool_choice_asks_for_the_librarys_constraint(choice, expected):
    kind, tag = parser("gemma4").get_structure_constraint(choice, parallel_tool_calls=False)
    assert kind == "structural_tag" and isinstance(tag, ToolsTag)
    assert tag.request["dialect"] == "gemma4" and tag.request["tool_choice"] == expected
    assert tag.request["parallel_tool_calls"] is False
    assert [tool["function"]["name"] for tool in tag.request["tools"]] == ["write_file", "get_weather"]
    assert tag.request["tools"][0]["function"]["parameters"] == WRITE["function"]["parameters"]


def test_the_constraint_reaches_the_sampling_parameters_as_sglang_serializes_it():
    tool_choice = "auto"
    constraint = parser("hermes").get_structure_constraint(tool_choice)
    request = ChatCompletionRequest(
        model="m", messages=[{"role": "user", "content": "hi"}], tools=TOOLS, tool_choice=tool_choice
    )
    sampling = request.to_sampling_params(stop=[], model_generation_config={}, tool_call_constraint=constraint)
    assert json.loads(sampling["structural_tag"]) == constraint[1].model_dump(by_alias=True)
    assert json.loads(sampling["structural_tag"])["type"] == "constrained_tools"

"""gpt-oss's Harmony format with the built-in ``o200k_harmony`` vocabulary:
reasoning on ``analysis``, the answer on ``final``, a call on
``commentary`` addressed ``to=functions.NAME``, ended by ``<|call|>``."""

from __future__ import annotations

import json

import pytest
from sample_tools import WEATHER_DAYS, assert_stream_reads_as_parse

from constrained import ToolCallStreamParser, compile_tools, parse_tool_calls, render_tool_calls
from constrained.dialects import get_dialect
from constrained.frames.toolset import normalize_tools
from constrained.runtime.constraint import ToolCallConstraint

PING = {"name": "ping", "parameters": {"type": "object", "properties": {}}}
TOOLS = [WEATHER_DAYS, PING]
CALL = {"name": "get_weather", "arguments": {"city": "Paris", "days": 3}}
WRITTEN = '<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city": "Paris", "days": 3}'
"""A call as the model writes it, up to its <|call|> (a stop token the output ends before)."""
ANALYSIS = "<|channel|>analysis<|message|>The user wants the weather.<|end|><|start|>assistant"
ANSWER = "<|channel|>final<|message|>It is sunny."
PREAMBLE = "<|channel|>commentary<|message|>Checking the forecast.<|end|><|start|>assistant"
RECIPIENT_FIRST = ' to=functions.get_weather<|channel|>commentary json<|message|>{"city": "Paris", "days": 3}'


def _compiled(**options):
    return compile_tools(TOOLS, "gpt_oss", "o200k_harmony", **options)


def test_the_renderer_writes_the_formats_bytes():
    assert render_tool_calls([CALL], TOOLS, "gpt_oss") == WRITTEN
    two = render_tool_calls([CALL, {"name": "ping", "arguments": {}}], TOOLS, "gpt_oss")
    assert two == WRITTEN + "<|call|><|start|>assistant<|channel|>commentary to=functions.ping <|constrain|>json<|message|>{}"


def test_every_tool_choice():
    auto = _compiled()
    for text in (WRITTEN, ANALYSIS + WRITTEN, PREAMBLE + WRITTEN, ANALYSIS + PREAMBLE + WRITTEN, ANSWER, ANALYSIS + ANSWER):
        assert auto.check(text).accepted, text
    # The header as the format's documentation also writes it: no space before <|constrain|>.
    assert auto.check(WRITTEN.replace(" <|constrain|>", "<|constrain|>")).accepted
    # Text outside a message, a message without its channel, a bare end: not Harmony.
    for text in ("It is sunny.", "", "<|message|>It is sunny.", "Sure. " + WRITTEN, WRITTEN + "<|call|>"):
        assert not auto.check(text).accepted, text
    assert not auto.check(WRITTEN.replace('"days": 3', '"days": 0')).accepted  # minimum 1
    assert not auto.check(WRITTEN.replace('"city": "Paris", ', "")).accepted  # city is required
    assert not auto.check(WRITTEN.replace("functions.get_weather", "get_weather")).accepted
    required = _compiled(tool_choice="required")
    assert required.check(ANALYSIS + WRITTEN).accepted and not required.check(ANSWER).accepted
    named = _compiled(tool_choice="ping")
    assert not named.check(WRITTEN).accepted
    assert named.check(render_tool_calls([{"name": "ping", "arguments": {}}], TOOLS, "gpt_oss")).accepted
    none = _compiled(tool_choice="none")
    assert none.check(ANALYSIS + ANSWER).accepted and not none.check(WRITTEN).accepted
    # The channel's marker spelled out in text tokens is no way around it.
    tok = none.tokenizer
    ids = tok.encode("<|channel|>final<|message|>Sure. <|chan") + tok.encode("nel|>commentary")
    assert none.matcher().validate_tokens(ids) < len(ids)


def test_a_turn_holds_one_call():
    """The call's <|call|> stops the generation: parallel calls or not, the
    grammar writes one; the parser reads each call message it is given."""
    two = render_tool_calls([CALL, CALL], TOOLS, "gpt_oss")
    for parallel in (True, False):
        compiled = _compiled(parallel_tool_calls=parallel)
        assert compiled.check(WRITTEN).accepted and not compiled.check(two).accepted
    assert len(parse_tool_calls(two, TOOLS, "gpt_oss").tool_calls) == 2


def test_strings_stay_strings_and_content_is_the_answer():
    arguments = {"city": '{"a": 1}\n  line 2\n```json\n to=functions.ping <|constrain|>', "days": 2}
    text = ANALYSIS + PREAMBLE + render_tool_calls([{"name": "get_weather", "arguments": arguments}], TOOLS, "gpt_oss")
    assert not _compiled().check(text).accepted  # the marker's text is its token
    arguments["city"] = '{"a": 1}\n  line 2\n```json\n to=functions.ping <constrain>'
    text = ANALYSIS + PREAMBLE + render_tool_calls([{"name": "get_weather", "arguments": arguments}], TOOLS, "gpt_oss")
    assert _compiled().check(text).accepted
    result = parse_tool_calls(text, TOOLS, "gpt_oss")
    assert result.content == "Checking the forecast." and result.reasoning == "The user wants the weather."
    assert json.loads(result.tool_calls[0]["function"]["arguments"]) == arguments
    answer = parse_tool_calls(ANALYSIS + "<|channel|>final<|message|>It is {\"sunny\": true}.<|return|>", TOOLS, "gpt_oss")
    assert answer.content == 'It is {"sunny": true}.' and answer.tool_calls == []


@pytest.mark.parametrize(
    "text",
    [
        WRITTEN + "<|call|>",  # the stop token kept
        RECIPIENT_FIRST,  # the recipient first, as the template writes earlier calls
        RECIPIENT_FIRST.replace(" json", " <|constrain|>json"),
        ANALYSIS + RECIPIENT_FIRST,  # <|start|>assistant to=...
        WRITTEN.replace(" <|constrain|>json", ""),  # no content type
        WRITTEN.replace(" <|constrain|>json", "<|constrain|>json"),
        WRITTEN.replace('{"city": "Paris", "days": 3}', ' {"city":"Paris","days":3} '),
        WRITTEN.replace('{"city": "Paris", "days": 3}', json.dumps('{"city": "Paris", "days": 3}')),
        "<|start|>assistant" + WRITTEN + "<|call|>",
        WRITTEN + "<|end|>",
    ],
)
def test_the_parser_reads_what_models_drift_to(text):
    result = parse_tool_calls(text, TOOLS, "gpt_oss")
    (call,) = result.tool_calls
    assert call["function"]["name"] == "get_weather" and result.errors == [], text
    assert json.loads(call["function"]["arguments"]) == CALL["arguments"], text
    assert result.content == ""


def test_broken_calls_fail_closed_with_their_reason():
    for text, reason in (
        (WRITTEN.replace("functions.get_weather", "functions.get_wether"), "no tool is called 'get_wether'"),
        (WRITTEN.replace("functions.get_weather", "browser.search"), "'browser.search'"),
        (WRITTEN.removesuffix("}"), "not closed with '<|call|>'"),
        ("<|channel|>commentary to=functions.get_weather <|constrain|>json", "<|message|>"),
    ):
        result = parse_tool_calls(text, TOOLS, "gpt_oss")
        assert result.tool_calls == [] and len(result.errors) == 1, text
        assert reason in str(result.errors[0]), (text, result.errors)


@pytest.mark.parametrize("seed", range(3))
def test_the_stream_agrees_with_the_parser_at_any_split(seed):
    calls = [CALL, {"name": "get_weather", "arguments": {"city": 'a "quoted"\n\\ to= city'}}, {"name": "ping", "arguments": {}}]
    for text in (
        ANALYSIS + PREAMBLE + render_tool_calls(calls, TOOLS, "gpt_oss"),
        ANALYSIS + "<|channel|>final<|message|>Go to=the city, t<|return|>",
        RECIPIENT_FIRST + "<|call|><|start|>assistant" + RECIPIENT_FIRST,
        "to" + ANSWER,
    ):
        assert_stream_reads_as_parse(TOOLS, "gpt_oss", text, seed=seed)


def test_the_stream_sends_the_answer_and_the_arguments_as_they_come():
    stream = ToolCallStreamParser(TOOLS, "gpt_oss")
    sent: list[dict] = []
    for piece in (ANALYSIS, "<|channel|>final<|message|>It is", " sunny", " today.<|return|>"):
        sent += stream.feed(piece)
    assert "".join(d.get("content", "") for d in sent) == "It is sunny today."
    assert [d["content"] for d in sent if "content" in d][0] == "It is"  # not held to the end
    stream = ToolCallStreamParser(TOOLS, "gpt_oss")
    deltas = stream.feed(ANALYSIS + WRITTEN[:-10])
    assert deltas and deltas[0]["tool_calls"][0]["function"]["name"] == "get_weather"


def test_reasoning():
    compiled = _compiled(tool_choice="required")
    result = parse_tool_calls(ANALYSIS + WRITTEN, compiled, "gpt_oss")
    assert result.reasoning == "The user wants the weather." and len(result.tool_calls) == 1
    opened = _compiled(tool_choice="required", reasoning="open")
    body = ANALYSIS.removeprefix("<|channel|>analysis<|message|>")
    assert opened.check(body + WRITTEN).accepted and not opened.check(WRITTEN).accepted
    assert parse_tool_calls(body + WRITTEN, opened, "gpt_oss").reasoning == "The user wants the weather."
    assert not _compiled(reasoning=False).check(ANALYSIS + WRITTEN).accepted
    dialect = get_dialect("gpt_oss")
    assert dialect.prompt_reasoning("<|start|>assistant<|channel|>analysis<|message|>") == "open"


def test_arguments_are_followed_and_the_cache_serves():
    constraint = ToolCallConstraint(_compiled(tool_choice="required"))
    assert constraint.cache_state == "on"


def test_the_chat_prompt_is_gpt_oss_template():
    tools = list(normalize_tools(TOOLS))
    messages = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "reasoning_content": "Call the tool.", "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris", "days": 3}'}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "sunny"},
    ]
    prompt = get_dialect("gpt_oss").chat_prompt(messages, tools)
    assert prompt.startswith("<|start|>system<|message|>You are ChatGPT, a large language model trained by OpenAI.\n")
    assert "Reasoning: medium\n\n# Valid channels: analysis, commentary, final. Channel must be included for every message.\n" \
           "Calls to these tools must go to the commentary channel: 'functions'.<|end|>" in prompt
    assert "<|start|>developer<|message|># Instructions\n\nBe brief.\n\n# Tools\n\n## functions\n\nnamespace functions {\n\n" in prompt
    assert "type get_weather = (_: {\ncity: string,\ndays?: number,\n}) => any;\n\n// \ntype ping = () => any;\n\n} // namespace functions<|end|>" in prompt
    assert prompt.endswith(
        "<|start|>user<|message|>Weather in Paris?<|end|>"
        "<|start|>assistant<|channel|>analysis<|message|>Call the tool.<|end|>"
        '<|start|>assistant to=functions.get_weather<|channel|>commentary json<|message|>{"city": "Paris", "days": 3}<|call|>'
        '<|start|>functions.get_weather to=assistant<|channel|>commentary<|message|>"sunny"<|end|>'
        "<|start|>assistant"
    )
    opened = get_dialect("gpt_oss").chat_prompt(messages[:2], tools, reasoning="open")
    assert opened.endswith("<|start|>assistant<|channel|>analysis<|message|>")
    assert "Reasoning: low" in get_dialect("gpt_oss").chat_prompt(messages[:2], tools, reasoning=False)


@pytest.mark.parametrize("marker", ["<|call|>", "<|end|>", "<|return|>", "<|start|>assistant", "<|channel|>"])
def test_a_marker_outside_a_message_is_never_streamed_as_content(marker):
    """The parser reads every marker as markup, even outside a message: the
    stream holds a marker's first characters back until it knows, so the
    content it sends adds up to the parser's, however the text is split."""
    text = f"Say {marker} is a tag."
    expected = parse_tool_calls(text, TOOLS, "gpt_oss").content
    assert marker not in expected
    for size in (1, 2, 3, len(text)):
        stream = ToolCallStreamParser(TOOLS, "gpt_oss")
        deltas = [d for i in range(0, len(text), size) for d in stream.feed(text[i : i + size])] + stream.close()
        assert "".join(d.get("content", "") for d in deltas) == expected, size

"""DeepSeek V3.1 and V3/R1 with DeepSeek V4's vocabulary (the same tool-call
tokens): JSON arguments between DeepSeek's tokens, calls in their block."""

from __future__ import annotations

import json

import pytest
from sample_tools import WEATHER_DAYS, assert_stream_reads_as_parse

from constrained import compile_tools, parse_tool_calls, render_tool_calls
from constrained.dialects import get_dialect
from constrained.frames.toolset import normalize_tools
from constrained.runtime.constraint import ToolCallConstraint

WEATHER = WEATHER_DAYS
PING = {"name": "ping", "parameters": {"type": "object", "properties": {}}}
TOOLS = [WEATHER, PING]
V31 = (
    "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>"
    '{"city": "Paris", "days": 3}<｜tool▁call▁end｜><｜tool▁calls▁end｜>'
)
R1 = (
    "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n"
    '{"city": "Paris", "days": 3}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>'
)
WRITTEN = {"deepseek_v31": V31, "deepseek_r1": R1}
CALL = {"name": "get_weather", "arguments": {"city": "Paris", "days": 3}}


@pytest.mark.parametrize("dialect", sorted(WRITTEN))
def test_the_renderer_writes_the_templates_bytes(dialect):
    assert render_tool_calls([CALL], TOOLS, dialect) == WRITTEN[dialect]
    two = render_tool_calls([CALL, {"name": "ping", "arguments": {}}], TOOLS, dialect)
    separator = "" if dialect == "deepseek_v31" else "\n"
    assert f"<｜tool▁call▁end｜>{separator}<｜tool▁call▁begin｜>" in two


@pytest.mark.parametrize("dialect", sorted(WRITTEN))
def test_every_tool_choice(dialect):
    text = WRITTEN[dialect]
    auto = compile_tools(TOOLS, dialect, "deepseek_v4")
    assert auto.check("Sure. " + text).accepted and auto.check("No call.").accepted
    assert not auto.check(text.replace('"days": 3', '"days": 0')).accepted  # minimum 1
    assert not auto.check(text.replace('"city": "Paris", ', "")).accepted  # city is required
    required = compile_tools(TOOLS, dialect, "deepseek_v4", tool_choice="required")
    assert required.check(text).accepted and not required.check("No call.").accepted
    named = compile_tools(TOOLS, dialect, "deepseek_v4", tool_choice="ping")
    assert not named.check(text).accepted
    assert named.check(render_tool_calls([{"name": "ping", "arguments": {}}], TOOLS, dialect)).accepted
    none = compile_tools(TOOLS, dialect, "deepseek_v4", tool_choice="none")
    assert not none.check("Sure. " + text).accepted
    # The block's opening spelled out in text tokens is no way around it.
    tok = none.tokenizer
    ids = tok.encode("Sure. <｜tool▁") + tok.encode("calls▁begin｜>")
    assert not any(tok.is_special(i) for i in ids)
    assert none.matcher().validate_tokens(ids) < len(ids)
    one = compile_tools(TOOLS, dialect, "deepseek_v4", parallel_tool_calls=False)
    two = render_tool_calls([CALL, CALL], TOOLS, dialect)
    assert auto.check(two).accepted and not one.check(two).accepted


@pytest.mark.parametrize("dialect", sorted(WRITTEN))
def test_strings_stay_strings_and_content_is_the_text(dialect):
    arguments = {"city": '{"a": 1}\n  line 2\n```json\n<｜tool▁sep｜>', "days": 2}
    text = "Looking it up.\n\n" + render_tool_calls([{"name": "get_weather", "arguments": arguments}], TOOLS, dialect)
    assert not compile_tools(TOOLS, dialect, "deepseek_v4").check(text).accepted  # the separator's text is its token
    arguments["city"] = '{"a": 1}\n  line 2\n```json\n</tool_call>'
    text = "Looking it up.\n\n" + render_tool_calls([{"name": "get_weather", "arguments": arguments}], TOOLS, dialect)
    assert compile_tools(TOOLS, dialect, "deepseek_v4").check(text).accepted
    result = parse_tool_calls(text, TOOLS, dialect)
    assert result.content == "Looking it up.\n\n"
    assert json.loads(result.tool_calls[0]["function"]["arguments"]) == arguments


def test_the_parser_reads_what_models_drift_to():
    # V3.1 arguments in a json fence, spaces around the name, a JSON-encoded string.
    fenced = V31.replace('{"city"', '```json\n{"city"').replace("3}<", "3}\n```<").replace(">get_weather<", "> get_weather <")
    encoded = V31.replace('{"city": "Paris", "days": 3}', json.dumps('{"city": "Paris", "days": 3}'))
    for text in (fenced, encoded):
        (call,) = parse_tool_calls(text, TOOLS, "deepseek_v31").tool_calls
        assert json.loads(call["function"]["arguments"]) == CALL["arguments"], text
    # R1 arguments without the fence; a block not closed still reads its whole calls.
    bare = R1.replace("\n```json\n", "\n").replace("\n```<", "<")
    for text in (bare, R1.removesuffix("<｜tool▁calls▁end｜>")):
        (call,) = parse_tool_calls(text, TOOLS, "deepseek_r1").tool_calls
        assert json.loads(call["function"]["arguments"]) == CALL["arguments"], text
    # A name no tool has, and broken JSON: no call, the text stays content.
    for text in (V31.replace("get_weather", "get_wether"), V31.replace("3}", "3")):
        result = parse_tool_calls(text, TOOLS, "deepseek_v31")
        assert result.tool_calls == [] and result.content == text and result.errors


@pytest.mark.parametrize("dialect", sorted(WRITTEN))
def test_the_stream_agrees_with_the_parser_at_any_split(dialect):
    calls = [CALL, {"name": "get_weather", "arguments": {"city": 'a "quoted"\n\\ city'}}, {"name": "ping", "arguments": {}}]
    text = "Sure.\n" + render_tool_calls(calls, TOOLS, dialect)
    expected = parse_tool_calls(text, TOOLS, dialect)
    assert len(expected.tool_calls) == 3
    assert_stream_reads_as_parse(TOOLS, dialect, text, seed=3)


@pytest.mark.parametrize("dialect", sorted(WRITTEN))
def test_reasoning_the_prompt_opened(dialect):
    compiled = compile_tools(TOOLS, dialect, "deepseek_v4", tool_choice="required", reasoning="open")
    text = "The user wants the weather.</think>" + WRITTEN[dialect]
    assert compiled.check(text).accepted and not compiled.check(WRITTEN[dialect]).accepted
    result = parse_tool_calls(text, compiled, dialect)
    assert result.reasoning == "The user wants the weather." and len(result.tool_calls) == 1


@pytest.mark.parametrize("dialect", sorted(WRITTEN))
def test_arguments_are_followed_by_the_mask_cache(dialect):
    compiled = compile_tools(TOOLS, dialect, "deepseek_v4", tool_choice="required")
    assert ToolCallConstraint(compiled).cache_state == "on"


def test_the_chat_prompts():
    tools = list(normalize_tools(TOOLS))
    messages = [{"role": "user", "content": "Paris?"}, {"role": "assistant", "content": "", "tool_calls": [{"function": CALL}]},
                {"role": "tool", "content": "sunny"}]
    v31 = get_dialect("deepseek_v31").chat_prompt(messages, tools, False)
    assert v31.startswith("<｜begin▁of▁sentence｜>## Tools\nYou have access to the following tools:\n\n### get_weather\n")
    assert v31.endswith(f"<｜User｜>Paris?<｜Assistant｜></think>{V31}<｜end▁of▁sentence｜>"
                        "<｜tool▁output▁begin｜>sunny<｜tool▁output▁end｜>")
    assert get_dialect("deepseek_v31").chat_prompt(messages[:1], tools, True).endswith("<｜User｜>Paris?<｜Assistant｜><think>")
    r1 = get_dialect("deepseek_r1").chat_prompt(messages, tools, False)
    assert r1.endswith(f"{R1}<｜end▁of▁sentence｜><｜tool▁outputs▁begin｜><｜tool▁output▁begin｜>sunny"
                       "<｜tool▁output▁end｜><｜tool▁outputs▁end｜>")

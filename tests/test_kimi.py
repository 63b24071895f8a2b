"""Kimi K2 with the built-in ``kimi_k2`` vocabulary (Kimi's special tokens
at their ids): JSON arguments between Kimi's tokens, each call named
``functions.NAME:INDEX``, a turn's calls in their section."""

from __future__ import annotations

import json

from sample_tools import WEATHER_DAYS, assert_stream_reads_as_parse

from constrained import compile_tools, parse_tool_calls, render_tool_calls
from constrained.dialects import get_dialect
from constrained.frames.toolset import normalize_tools
from constrained.runtime.constraint import ToolCallConstraint

WEATHER = WEATHER_DAYS
PING = {"name": "ping", "parameters": {"type": "object", "properties": {}}}
TOOLS = [WEATHER, PING]
CALL = {"name": "get_weather", "arguments": {"city": "Paris", "days": 3}}
WRITTEN = (
    "<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>"
    '{"city": "Paris", "days": 3}<|tool_call_end|><|tool_calls_section_end|>'
)


def _compiled(**options):
    return compile_tools(TOOLS, "kimi_k2", "kimi_k2", **options)


def test_the_renderer_writes_the_templates_bytes():
    assert render_tool_calls([CALL], TOOLS, "kimi_k2") == WRITTEN
    two = render_tool_calls([CALL, {"name": "ping", "arguments": {}}], TOOLS, "kimi_k2")
    assert "<|tool_call_end|><|tool_call_begin|>functions.ping:1<|tool_call_argument_begin|>{}" in two


def test_every_tool_choice():
    auto = _compiled()
    assert auto.check("Sure. " + WRITTEN).accepted and auto.check("No call.").accepted
    assert auto.check(WRITTEN.replace(":0<", ":17<")).accepted  # the conversation's count
    for wrong in (":01<", ":<", ":x<"):
        assert not auto.check(WRITTEN.replace(":0<", wrong)).accepted, wrong
    assert not auto.check(WRITTEN.replace('"days": 3', '"days": 0')).accepted  # minimum 1
    assert not auto.check(WRITTEN.replace('"city": "Paris", ', "")).accepted  # city is required
    assert not auto.check(WRITTEN.replace("functions.get_weather", "get_weather")).accepted
    required = _compiled(tool_choice="required")
    assert required.check(WRITTEN).accepted and not required.check("No call.").accepted
    named = _compiled(tool_choice="ping")
    assert not named.check(WRITTEN).accepted
    assert named.check(render_tool_calls([{"name": "ping", "arguments": {}}], TOOLS, "kimi_k2")).accepted
    none = _compiled(tool_choice="none")
    assert not none.check("Sure. " + WRITTEN).accepted
    # The section's opening spelled out in text tokens is no way around it.
    tok = none.tokenizer
    ids = tok.encode("Sure. <|tool_calls_") + tok.encode("section_begin|>")
    assert not any(tok.is_special(i) for i in ids)
    assert none.matcher().validate_tokens(ids) < len(ids)
    one = _compiled(parallel_tool_calls=False)
    two = render_tool_calls([CALL, CALL], TOOLS, "kimi_k2")
    assert auto.check(two).accepted and not one.check(two).accepted


def test_strings_stay_strings_and_content_is_the_text():
    arguments = {"city": '{"a": 1}\n  line 2\n```json\n<|tool_call_end|>', "days": 2}
    text = "Looking it up.\n\n" + render_tool_calls([{"name": "get_weather", "arguments": arguments}], TOOLS, "kimi_k2")
    assert not _compiled().check(text).accepted  # the closing's text is its token
    arguments["city"] = '{"a": 1}\n  line 2\n```json\n</tool_call> functions.ping:0'
    text = "Looking it up.\n\n" + render_tool_calls([{"name": "get_weather", "arguments": arguments}], TOOLS, "kimi_k2")
    assert _compiled().check(text).accepted
    result = parse_tool_calls(text, TOOLS, "kimi_k2")
    assert result.content == "Looking it up.\n\n"
    assert json.loads(result.tool_calls[0]["function"]["arguments"]) == arguments


def test_the_parser_reads_what_models_drift_to():
    spaced = WRITTEN.replace(">functions.get_weather:0<", ">\n functions.get_weather:0 \n<").replace('>{"city"', '> {"city"')
    unprefixed = WRITTEN.replace("functions.get_weather:0", "get_weather:3")
    encoded = WRITTEN.replace('{"city": "Paris", "days": 3}', json.dumps('{"city": "Paris", "days": 3}'))
    unsectioned = WRITTEN.removeprefix("<|tool_calls_section_begin|>").removesuffix("<|tool_calls_section_end|>")
    for text in (spaced, unprefixed, encoded, unsectioned, WRITTEN.removesuffix("<|tool_calls_section_end|>")):
        (call,) = parse_tool_calls(text, TOOLS, "kimi_k2").tool_calls
        assert call["function"]["name"] == "get_weather", text
        assert json.loads(call["function"]["arguments"]) == CALL["arguments"], text
    # A bare counter names no tool (it is not guessed), a name no tool has,
    # broken JSON: no call, the text stays content, each error says why.
    for text, reason in (
        (WRITTEN.replace("functions.get_weather:0", "2"), "expected functions.NAME:INDEX"),
        (WRITTEN.replace("get_weather", "get_wether"), "no tool is called 'get_wether'"),
        (WRITTEN.replace("3}", "3"), "get_weather"),
    ):
        result = parse_tool_calls(text, TOOLS, "kimi_k2")
        assert result.tool_calls == [] and result.content == text, text
        assert len(result.errors) == 1 and reason in str(result.errors[0]), (text, result.errors)


def test_the_stream_agrees_with_the_parser_at_any_split():
    calls = [CALL, {"name": "get_weather", "arguments": {"city": 'a "quoted"\n\\ city'}}, {"name": "ping", "arguments": {}}]
    text = "<think>Three calls.</think>Sure.\n" + render_tool_calls(calls, TOOLS, "kimi_k2")
    expected = parse_tool_calls(text, TOOLS, "kimi_k2")
    assert len(expected.tool_calls) == 3 and expected.reasoning == "Three calls."
    assert_stream_reads_as_parse(TOOLS, "kimi_k2", text, seed=3)


def test_reasoning():
    compiled = _compiled(tool_choice="required")
    assert compiled.check("<think>The user wants the weather.</think>" + WRITTEN).accepted
    result = parse_tool_calls("<think>The user wants the weather.</think>" + WRITTEN, compiled, "kimi_k2")
    assert result.reasoning == "The user wants the weather." and len(result.tool_calls) == 1
    opened = _compiled(tool_choice="required", reasoning="open")
    assert opened.check("Still thinking.</think>" + WRITTEN).accepted and not opened.check(WRITTEN).accepted
    assert not _compiled(reasoning=False).check("<think>x</think>" + WRITTEN).accepted


def test_arguments_are_followed_by_the_mask_cache():
    assert ToolCallConstraint(_compiled(tool_choice="required")).cache_state == "on"


def test_the_chat_prompt_is_kimis_template():
    tools = list(normalize_tools(TOOLS))
    messages = [
        {"role": "user", "content": "Paris?"},
        {"role": "assistant", "content": "", "reasoning_content": "Look it up.",
         "tool_calls": [{"id": "call_a", "function": CALL}, {"id": "call_b", "function": {"name": "ping", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "call_b", "content": "pong"},
        {"role": "tool", "tool_call_id": "call_a", "content": "sunny"},
    ]
    declared = json.dumps([{"type": "function", "function": tool} for tool in TOOLS], ensure_ascii=False)
    assert get_dialect("kimi_k2").chat_prompt(messages, tools) == (
        f"<|im_system|>tool_declare<|im_middle|>{declared}<|im_end|>"
        "<|im_system|>system<|im_middle|>You are Kimi, an AI assistant created by Moonshot AI.<|im_end|>"
        "<|im_user|>user<|im_middle|>Paris?<|im_end|>"
        "<|im_assistant|>assistant<|im_middle|><think>Look it up.</think><|tool_calls_section_begin|>"
        '<|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>{"city": "Paris", "days": 3}<|tool_call_end|>'
        "<|tool_call_begin|>functions.ping:1<|tool_call_argument_begin|>{}<|tool_call_end|>"
        "<|tool_calls_section_end|><|im_end|>"
        "<|im_system|>tool<|im_middle|>## Return of functions.ping:1\npong<|im_end|>"
        "<|im_system|>tool<|im_middle|>## Return of functions.get_weather:0\nsunny<|im_end|>"
        "<|im_assistant|>assistant<|im_middle|>"
    )
    # After a plain answer, earlier turns keep no reasoning; a system turn of
    # the conversation's own replaces Kimi's.
    later = [{"role": "system", "content": "Be brief."}, *messages, {"role": "assistant", "content": "Sunny."},
             {"role": "user", "content": "Thanks"}]
    prompt = get_dialect("kimi_k2").chat_prompt(later, tools)
    assert f"{declared}<|im_end|><|im_system|>system<|im_middle|>Be brief.<|im_end|><|im_user|>" in prompt
    assert "<think></think><|tool_calls_section_begin|>" in prompt and "Look it up." not in prompt
    assert prompt.endswith("<think></think>Sunny.<|im_end|><|im_user|>user<|im_middle|>Thanks<|im_end|>"
                           "<|im_assistant|>assistant<|im_middle|>")

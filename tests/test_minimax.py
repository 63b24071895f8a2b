"""MiniMax-M2 with the built-in ``minimax_m2`` vocabulary (MiniMax's special
tokens at their ids): ``<invoke>`` and ``<parameter>`` tags inside the
``<minimax:tool_call>`` block, strings raw and the rest JSON, the output
starting inside the reasoning block the prompt opened."""

from __future__ import annotations

import json

import torch
from sample_tools import WEATHER_DAYS, assert_masks_equal_llguidance, assert_stream_reads_as_parse

from constrained import compile_tools, parse_tool_calls, render_tool_calls
from constrained.dialects import get_dialect
from constrained.frames.toolset import normalize_tools
from constrained.runtime.constraint import ToolCallConstraint

WEATHER = WEATHER_DAYS
PING = {"name": "ping", "parameters": {"type": "object", "properties": {}}}
TOOLS = [WEATHER, PING]
CALL = {"name": "get_weather", "arguments": {"city": "Paris", "days": 3}}
INVOKE = '<invoke name="get_weather">\n<parameter name="city">Paris</parameter>\n<parameter name="days">3</parameter>\n</invoke>'
WRITTEN = f"\n<minimax:tool_call>\n{INVOKE}\n</minimax:tool_call>"
THOUGHT = "The user wants the weather.\n</think>\n\n"
"""What the output starts with: the template's prompt ends inside ``<think>\\n``."""


def _compiled(**options):
    return compile_tools(TOOLS, "minimax_m2", "minimax_m2", **options)


def _read(text: str) -> list[tuple[str, dict]]:
    result = parse_tool_calls(text, TOOLS, "minimax_m2")
    assert result.errors == [], result.errors
    return [(c["function"]["name"], json.loads(c["function"]["arguments"])) for c in result.tool_calls]


def test_the_renderer_writes_the_templates_bytes():
    assert render_tool_calls([CALL], TOOLS, "minimax_m2") == WRITTEN
    two = render_tool_calls([CALL, {"name": "ping", "arguments": {}}], TOOLS, "minimax_m2")
    assert two == f'\n<minimax:tool_call>\n{INVOKE}\n<invoke name="ping">\n</invoke>\n</minimax:tool_call>'


def test_every_tool_choice():
    auto = _compiled()
    assert auto.check("Sure." + WRITTEN).accepted and auto.check("No call.").accepted
    assert not auto.check(WRITTEN.replace(">3<", ">0<")).accepted  # minimum 1
    assert not auto.check(WRITTEN.replace('<parameter name="city">Paris</parameter>\n', "")).accepted  # required
    assert not auto.check(WRITTEN.replace(">3<", ">three<")).accepted
    assert not auto.check("Sure.\n" + INVOKE).accepted  # an invoke outside the block is no text
    required = _compiled(tool_choice="required")
    assert required.check(WRITTEN).accepted and not required.check("No call.").accepted
    named = _compiled(tool_choice="ping")
    assert not named.check(WRITTEN).accepted
    assert named.check(render_tool_calls([{"name": "ping", "arguments": {}}], TOOLS, "minimax_m2")).accepted
    none = _compiled(tool_choice="none")
    assert not none.check("Sure." + WRITTEN).accepted
    # The block's opening spelled out in text tokens is no way around it.
    tok = none.tokenizer
    ids = tok.encode("Sure. <minimax:tool") + tok.encode("_call>")
    assert not any(tok.is_special(i) for i in ids)
    assert none.matcher().validate_tokens(ids) < len(ids)
    one = _compiled(parallel_tool_calls=False)
    two = render_tool_calls([CALL, CALL], TOOLS, "minimax_m2")
    assert auto.check(two).accepted and not one.check(two).accepted


def test_strings_stay_strings_and_file_contents_keep_their_bytes():
    content = '{"a": 1}\n  <div class="x">line 2</div>\n```json\n42\n</param'
    arguments = {"city": content, "days": 2}
    text = "Looking it up." + render_tool_calls([{"name": "get_weather", "arguments": arguments}], TOOLS, "minimax_m2")
    assert _compiled().check(text).accepted
    result = parse_tool_calls(text, TOOLS, "minimax_m2")
    assert result.content == "Looking it up."
    assert json.loads(result.tool_calls[0]["function"]["arguments"]) == arguments
    # "42" is a string where the schema says so, and the integer where it does not.
    assert _read(WRITTEN.replace("Paris", "42")) == [("get_weather", {"city": "42", "days": 3})]


def test_values_that_would_end_early_are_refused_by_the_grammar():
    for held in ("</parameter>", "</invoke>", '<parameter name="'):
        arguments = {"city": f"a{held}b", "days": 2}
        text = render_tool_calls([{"name": "get_weather", "arguments": arguments}], TOOLS, "minimax_m2")
        assert not _compiled().check(text).accepted, held
    free = {"name": "note", "parameters": {"type": "object", "properties": {"meta": {"type": "object"}}}}
    compiled = compile_tools([free], "minimax_m2", "minimax_m2")
    for held, accepted in (("</parameter>", False), ("</invoke>", False), ("</param", True), ("<invoke name=", True)):
        text = render_tool_calls([{"name": "note", "arguments": {"meta": {"k": held}}}], [free], "minimax_m2")
        assert compiled.check(text).accepted == accepted, held
        if accepted:
            assert json.loads(parse_tool_calls(text, [free], "minimax_m2").tool_calls[0]["function"]["arguments"]) == {
                "meta": {"k": held}
            }


def test_the_parser_reads_what_models_drift_to():
    one_line = WRITTEN.replace("\n", "")
    spaced = WRITTEN.replace("\n<parameter", "\n  <parameter").replace("\n</invoke>", " \n</invoke>")
    unclosed = WRITTEN.replace("Paris</parameter>", "Paris")  # the next parameter ends the value
    unsectioned = "\n" + INVOKE
    for text in (one_line, spaced, unclosed, unsectioned, WRITTEN.removesuffix("</minimax:tool_call>")):
        assert _read(text) == [("get_weather", CALL["arguments"])], text
    # The line break before a parameter that ends a value is the layout's, streamed or not.
    assert_stream_reads_as_parse(TOOLS, "minimax_m2", unclosed.replace("Paris", "Paris\n  two lines"), seed=5)
    # A name no tool has, a value that is no integer, an unclosed last value:
    # no call, the text stays content, each error says why.
    for text, reason in (
        (WRITTEN.replace("get_weather", "get_wether"), "no tool is called 'get_wether'"),
        (WRITTEN.replace(">3<", ">3 days<"), "days"),
        (WRITTEN.replace("3</parameter>", "3"), "not closed with '</parameter>'"),
    ):
        result = parse_tool_calls(text, TOOLS, "minimax_m2")
        assert result.tool_calls == [], text
        assert len(result.errors) == 1 and reason in str(result.errors[0]), (text, result.errors)


def test_the_stream_agrees_with_the_parser_at_any_split():
    calls = [CALL, {"name": "get_weather", "arguments": {"city": 'a "quoted"\n<b>city</b>'}}, {"name": "ping", "arguments": {}}]
    text = THOUGHT + "Sure." + render_tool_calls(calls, TOOLS, "minimax_m2")
    reading = parse_tool_calls(text, TOOLS, "minimax_m2")
    opened = get_dialect("minimax_m2").reading("open")
    assert len(reading.tool_calls) == 3
    assert_stream_reads_as_parse(TOOLS, "minimax_m2", "<think>\n" + text, seed=3)
    assert opened.scan(text).__next__().kind == "reasoning"


def test_reasoning_the_prompt_opened():
    opened = _compiled(tool_choice="required", reasoning="open")
    assert opened.check(THOUGHT + WRITTEN).accepted and not opened.check(WRITTEN).accepted
    assert opened.check("Short.\n</think>" + WRITTEN).accepted  # any blank between the block and the calls
    result = parse_tool_calls(THOUGHT + "Sure." + WRITTEN, TOOLS, "minimax_m2", reasoning="open")
    assert result.reasoning == "The user wants the weather.\n" and result.content == "Sure."
    assert len(result.tool_calls) == 1
    assert _compiled(tool_choice="required").check("<think>\n" + THOUGHT + WRITTEN).accepted
    assert not _compiled(reasoning=False).check("<think>\nx\n</think>\n\n" + WRITTEN).accepted


def test_masks_are_served_from_the_cache_and_equal_llguidance():
    """Raw text is followed (JSON values are keyed by their tokens: the walk
    does not follow strings that keep the closing tags out)."""
    compiled = _compiled(tool_choice="required")
    assert ToolCallConstraint(compiled).cache_state.startswith("on, values keyed by their tokens")
    calls = [{"name": "get_weather", "arguments": {"city": "def f():\n    return '</a>' * 3\n" * 4, "days": 12}}] * 2
    tok = compiled.tokenizer
    constraint = assert_masks_equal_llguidance(compiled, tok.encode(render_tool_calls(calls, TOOLS, "minimax_m2")) + [tok.token_id("[e~[")])
    assert constraint.precomputed_rows > 20


def test_a_raw_value_never_spells_the_calls_closing():
    """The precomputed masks of raw text keep ``</invoke>`` out as the
    grammar does (the parser ends a call at the first)."""
    compiled = _compiled(tool_choice="required")
    tok = compiled.tokenizer
    opened = '\n<minimax:tool_call>\n<invoke name="get_weather">\n<parameter name="city">Paris, or </invoke'
    constraint = assert_masks_equal_llguidance(compiled, tok.encode(opened))
    allowed = torch.isfinite(constraint.mask_logits(torch.zeros(1, tok.vocab_size)))[0]
    assert not allowed[tok.encode(">")[0]] and allowed[tok.encode("d")[0]]
    assert constraint.precomputed_rows > 0


def test_the_chat_prompt_is_minimaxs_template():
    tools = list(normalize_tools(TOOLS))
    messages = [
        {"role": "user", "content": "Paris?"},
        {"role": "assistant", "content": "", "reasoning_content": "Look it up.",
         "tool_calls": [{"id": "call_a", "function": CALL}, {"id": "call_b", "function": {"name": "ping", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "call_a", "content": "sunny"},
        {"role": "tool", "tool_call_id": "call_b", "content": "pong"},
    ]
    declared = "".join(f"<tool>{json.dumps(tool, ensure_ascii=False)}</tool>\n" for tool in TOOLS)
    assert get_dialect("minimax_m2").chat_prompt(messages, tools) == (
        "]~!b[]~b]system\nYou are a helpful assistant.\n\n# Tools\nYou may call one or more tools to assist with the user query.\n"
        f"Here are the tools available in JSONSchema format:\n\n<tools>\n{declared}</tools>\n\n"
        "When making tool calls, use XML format to invoke tools and pass parameters:\n\n<minimax:tool_call>\n"
        '<invoke name="tool-name-1">\n<parameter name="param-key-1">param-value-1</parameter>\n'
        '<parameter name="param-key-2">param-value-2</parameter>\n...\n</invoke>\n</minimax:tool_call>[e~[\n'
        "]~b]user\nParis?[e~[\n"
        f"]~b]ai\n<think>\nLook it up.\n</think>\n\n\n<minimax:tool_call>\n{INVOKE}\n"
        '<invoke name="ping">\n</invoke>\n</minimax:tool_call>[e~[\n'
        "]~b]tool\n<response>sunny</response>\n<response>pong</response>[e~[\n"
        "]~b]ai\n<think>\n"
    )
    # A system turn of the conversation's own replaces the default; earlier
    # turns keep no reasoning; with reasoning off the prompt opens no block.
    later = [{"role": "system", "content": "Be brief."}, *messages, {"role": "assistant", "content": "Sunny."},
             {"role": "user", "content": "Thanks"}]
    prompt = get_dialect("minimax_m2").chat_prompt(later, tools, reasoning=False)
    assert prompt.startswith("]~!b[]~b]system\nBe brief.\n\n# Tools\n") and "Look it up." not in prompt
    assert prompt.endswith("]~b]ai\nSunny.[e~[\n]~b]user\nThanks[e~[\n]~b]ai\n")
    assert get_dialect("minimax_m2").prompt_reasoning(get_dialect("minimax_m2").chat_prompt(messages, tools)) == "open"

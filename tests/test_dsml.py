"""DeepSeek's DSML (V3.2, V4, V4.1) with DeepSeek V4's vocabulary: the bytes
DeepSeek's encoding writes, the constraint, the parser's drift, the stream,
the chat prompt."""

from __future__ import annotations

import json

import pytest
from sample_tools import assert_masks_equal_llguidance, assert_stream_reads_as_parse

from constrained import compile_tools, parse_tool_calls, render_tool_calls
from constrained.dialects import DIALECTS, get_dialect
from constrained.dialects.dsml import DeepSeekV32
from constrained.frames.toolset import normalize_tools
from constrained.runtime.constraint import ToolCallConstraint

VERSIONS = sorted(name for name, dialect in DIALECTS.items() if isinstance(dialect, DeepSeekV32))
WRITE = {
    "name": "write_file",
    "parameters": {
        "type": "object",
        "properties": {"path": {"type": "string"}, "content": {"type": "string"}, "mode": {"type": "integer"}},
        "required": ["path", "content"],
    },
}
NOTE = {"name": "note", "parameters": {"type": "object", "properties": {"text": {"type": ["string", "null"]}}}}
# Values a text parser would misread: JSON look-alikes, markup, lines.
AWKWARD = ['{"a": 1}', "12", "</b> <｜DSML｜invoke", "line 1\nline 2\n", "", " padded ", "null", "</"]


def version_text(name: str, text: str) -> str:
    """A text written for V3.2 as version ``name`` writes it."""
    tags = DIALECTS[name].tags  # type: ignore[attr-defined]
    return (
        text.replace("｜DSML｜function_calls", "｜DSML｜" + tags.calls)
        .replace("｜DSML｜invoke", "｜DSML｜" + tags.invoke)
        .replace("｜DSML｜parameter", "｜DSML｜" + tags.parameter)
    )


V32_CALL = (
    "\n\n<｜DSML｜function_calls>\n"
    '<｜DSML｜invoke name="write_file">\n'
    '<｜DSML｜parameter name="path" string="true">a.py</｜DSML｜parameter>\n'
    '<｜DSML｜parameter name="content" string="true">x = 1\n</｜DSML｜parameter>\n'
    '<｜DSML｜parameter name="mode" string="false">420</｜DSML｜parameter>\n'
    "</｜DSML｜invoke>\n"
    "</｜DSML｜function_calls>"
)


@pytest.mark.parametrize("name", VERSIONS)
def test_the_renderer_writes_deepseeks_encoding_byte_for_byte(name):
    text = render_tool_calls([{"name": "write_file", "arguments": {"path": "a.py", "content": "x = 1\n", "mode": 420}}], [WRITE], name)
    assert text == version_text(name, V32_CALL)


@pytest.mark.parametrize("name", VERSIONS)
def test_strings_stay_strings_and_file_contents_keep_their_bytes(name):
    for value in AWKWARD:
        if "｜DSML" in value:
            continue  # no value may hold the token's text
        calls = [{"name": "write_file", "arguments": {"path": value, "content": value + "\r\n\t", "mode": 1}}]
        text = render_tool_calls(calls, [WRITE], name)
        compiled = compile_tools([WRITE], name, "deepseek_v4", tool_choice="required")
        assert compiled.check(text).accepted, text
        (call,) = parse_tool_calls(text, [WRITE], name).tool_calls
        assert json.loads(call["function"]["arguments"]) == calls[0]["arguments"]


@pytest.mark.parametrize("name", VERSIONS)
def test_the_string_attribute_follows_the_schema(name):
    compiled = compile_tools([WRITE, NOTE], name, "deepseek_v4", tool_choice="required")
    good = version_text(name, V32_CALL)
    assert compiled.check(good).accepted
    # An integer written as a string, a string written as JSON: refused.
    assert not compiled.check(good.replace('"mode" string="false"', '"mode" string="true"')).accepted
    assert not compiled.check(good.replace('"path" string="true">a.py', '"path" string="false">"a.py"')).accepted
    # A string-or-null parameter takes either.
    for attribute, value in (("true", "hi"), ("false", "null")):
        call = version_text(
            name,
            '\n\n<｜DSML｜function_calls>\n<｜DSML｜invoke name="note">\n'
            f'<｜DSML｜parameter name="text" string="{attribute}">{value}</｜DSML｜parameter>\n'
            "</｜DSML｜invoke>\n</｜DSML｜function_calls>",
        )
        assert compiled.check(call).accepted, call
        (parsed,) = parse_tool_calls(call, [WRITE, NOTE], name).tool_calls
        assert json.loads(parsed["function"]["arguments"]) == {"text": "hi" if attribute == "true" else None}


def test_the_markup_around_a_value_is_not_the_end_of_it():
    """A raw value runs to the closing tag's token: "</" and look-alikes of
    the markup spelled in text stay in it, the token's text does not."""
    compiled = compile_tools([WRITE], "deepseek_v32", "deepseek_v4", tool_choice="required")
    held = V32_CALL.replace("x = 1\n", '</div> </parameter> <invoke name="x">')
    assert compiled.check(held).accepted
    spelled = V32_CALL.replace("x = 1\n", "a ｜DSML｜ b")  # spelled out by text tokens, not the special token
    tok = compiled.tokenizer
    ids = tok.encode(V32_CALL.split("x = 1")[0]) + tok.encode("a ｜DS") + tok.encode("ML｜ b")
    assert tok.token_id("｜DSML｜") not in ids[-6:]
    assert compiled.matcher().validate_tokens(ids) < len(ids)
    assert not compiled.check(spelled).accepted


def test_tool_choice_none_auto_and_named():
    tools = [WRITE, NOTE]
    none = compile_tools(tools, "deepseek_v4", "deepseek_v4", tool_choice="none")
    assert none.check("No call needed.").accepted
    assert not none.check("Sure." + version_text("deepseek_v4", V32_CALL)).accepted
    auto = compile_tools(tools, "deepseek_v4", "deepseek_v4")
    assert auto.check("Sure." + version_text("deepseek_v4", V32_CALL)).accepted
    assert auto.check("Just text.").accepted
    named = compile_tools(tools, "deepseek_v4", "deepseek_v4", tool_choice="note")
    assert not named.check(version_text("deepseek_v4", V32_CALL)).accepted
    one = compile_tools(tools, "deepseek_v4", "deepseek_v4", parallel_tool_calls=False)
    two = render_tool_calls([{"name": "note", "arguments": {}}, {"name": "note", "arguments": {}}], tools, "deepseek_v4")
    assert auto.check(two).accepted and not one.check(two).accepted


def test_the_parser_reads_what_models_drift_to():
    tools = [WRITE]
    # Arguments as one JSON object inside the invoke tags.
    text = '<｜DSML｜function_calls>\n<｜DSML｜invoke name="write_file">\n{"path": "a", "content": "b"}\n</｜DSML｜invoke>\n</｜DSML｜function_calls>'
    (call,) = parse_tool_calls(text, tools, "deepseek_v32").tool_calls
    assert json.loads(call["function"]["arguments"]) == {"path": "a", "content": "b"}
    # The string attribute against the schema: typed by the schema.
    text = V32_CALL.replace('"mode" string="false"', '"mode" string="true"')
    (call,) = parse_tool_calls(text, tools, "deepseek_v32").tool_calls
    assert json.loads(call["function"]["arguments"])["mode"] == 420
    # No newlines between the tags, and no lead before the block.
    text = V32_CALL.replace(">\n<", "><").lstrip("\n")
    (call,) = parse_tool_calls(text, tools, "deepseek_v32").tool_calls
    assert json.loads(call["function"]["arguments"])["path"] == "a.py"
    # A value whose closing tag is missing: no call, the text stays content.
    broken = V32_CALL.replace("a.py</｜DSML｜parameter>", "a.py")
    result = parse_tool_calls("Text." + broken, tools, "deepseek_v32")
    assert result.tool_calls == [] and result.content == "Text." + broken and result.errors


PING = {"name": "ping", "parameters": {"type": "object", "properties": {}}}


@pytest.mark.parametrize("name", VERSIONS)
def test_a_self_closing_invoke_is_a_call_with_no_arguments(name):
    """V4 writes a zero-argument call as one tag, ``<｜DSML｜invoke name="x"/>``."""
    tools = [WRITE, PING]
    block = version_text(name, V32_CALL)
    short = '<｜DSML｜invoke name="ping"/>'
    before_write = V32_CALL.replace('<｜DSML｜invoke name="write_file">', short + '\n<｜DSML｜invoke name="write_file">')
    alone = "Pinging.\n\n<｜DSML｜function_calls>\n" + short.replace("/>", " />") + "\n</｜DSML｜function_calls>"
    cases = ((before_write, ["ping", "write_file"], "\n"), (alone, ["ping"], "Pinging."))
    for text, names, content in ((version_text(name, text), names, content) for text, names, content in cases):
        result = parse_tool_calls(text, tools, name)
        assert [c["function"]["name"] for c in result.tool_calls] == names and result.errors == [], (text, result)
        assert json.loads(result.tool_calls[0]["function"]["arguments"]) == {}
        assert result.content == content, result.content
        assert_stream_reads_as_parse(tools, name, text, seed=5)
    # A tool with a required argument called so is rejected by name; a "/>" in a value is text.
    result = parse_tool_calls(version_text(name, short.replace("ping", "write_file")), tools, name)
    assert result.tool_calls == [] and "write_file" in str(result.errors[0])
    (call,) = parse_tool_calls(block.replace("x = 1\n", '<br class="a"/>'), tools, name).tool_calls
    assert json.loads(call["function"]["arguments"])["content"] == '<br class="a"/>'


def test_content_keeps_the_text_and_the_block_is_markup():
    result = parse_tool_calls("Writing it." + V32_CALL, [WRITE], "deepseek_v32")
    assert result.content == "Writing it." and len(result.tool_calls) == 1
    two = render_tool_calls([{"name": "write_file", "arguments": {"path": "a", "content": "b"}}] * 2, [WRITE], "deepseek_v32")
    result = parse_tool_calls(two, [WRITE], "deepseek_v32")
    assert result.content == "\n" and len(result.tool_calls) == 2  # the newline between two calls, as in every dialect


@pytest.mark.parametrize("name", VERSIONS)
def test_the_stream_agrees_with_the_parser_at_any_split(name):
    calls = [{"name": "write_file", "arguments": {"path": v, "content": v, "mode": 7}} for v in AWKWARD if "｜DSML" not in v]
    text = "Sure.\n" + render_tool_calls(calls, [WRITE], name)
    expected = parse_tool_calls(text, [WRITE], name)
    assert len(expected.tool_calls) == len(calls)
    assert_stream_reads_as_parse([WRITE], name, text, seed=7)


def test_reasoning_the_prompt_opened_is_read_and_closed_first():
    compiled = compile_tools([WRITE], "deepseek_v32", "deepseek_v4", tool_choice="required", reasoning="open")
    text = "The user wants a file.</think>" + V32_CALL
    assert compiled.check(text).accepted
    assert not compiled.check(V32_CALL).accepted  # the block must close first
    result = parse_tool_calls(text, compiled, "deepseek_v32")
    assert result.reasoning == "The user wants a file." and len(result.tool_calls) == 1


def test_the_chat_prompt_is_deepseeks_encoding():
    dialect = get_dialect("deepseek_v32")
    tools = list(normalize_tools([WRITE]))
    messages = [
        {"role": "user", "content": "Save a.py"},
        {"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "write_file", "arguments": {"path": "a.py", "content": "x"}}}]},
        {"role": "tool", "content": "saved"},
    ]
    thinking = dialect.chat_prompt(messages, tools, True)
    assert thinking.startswith("<｜begin▁of▁sentence｜>## Tools\n")
    assert '{"name": "write_file", "parameters": ' in thinking
    call = render_tool_calls([{"name": "write_file", "arguments": {"path": "a.py", "content": "x"}}], [WRITE], "deepseek_v32")
    assert thinking.endswith(
        f"<｜User｜>Save a.py<｜Assistant｜><think></think>{call}<｜end▁of▁sentence｜>"
        "\n\n<function_results>\n<result>saved</result>\n</function_results>\n\n<think>"
    )
    chat = dialect.chat_prompt(messages[:1], tools, False)
    assert chat.endswith("<｜User｜>Save a.py<｜Assistant｜></think>")


def test_masks_are_served_from_the_cache_and_equal_llguidance():
    """Every mask, precomputed rows of raw text included, is llguidance's own."""
    compiled = compile_tools([WRITE], "deepseek_v4", "deepseek_v4", tool_choice="required")
    # JSON values are keyed by their tokens (the walk does not follow strings
    # that keep the token's text out), raw text is followed.
    assert ToolCallConstraint(compiled).cache_state.startswith("on, values keyed by their tokens")
    tok = compiled.tokenizer
    text = version_text("deepseek_v4", V32_CALL.replace("x = 1\n", "def f():\n    return '</a>' * 3\n"))
    constraint = assert_masks_equal_llguidance(compiled, tok.encode(text) + [tok.token_id("<｜end▁of▁sentence｜>")])
    assert constraint.precomputed_rows > 0  # the raw value's masks came from the precomputed rows


def test_each_parameter_keeps_its_own_types():
    """Two parameters that may each be null or another kind (an array, an
    object): each value is held to its own parameter's kinds."""
    tool = {"name": "report", "parameters": {"type": "object", "properties": {
        "services": {"anyOf": [{"type": "array", "items": {"type": "string"}}, {"type": "null"}]},
        "details": {"anyOf": [{"type": "object"}, {"type": "null"}]},
    }}}
    compiled = compile_tools([tool], "deepseek_v32", "deepseek_v4", tool_choice="required")

    def call(details: str) -> str:
        return (
            '\n\n<｜DSML｜function_calls>\n<｜DSML｜invoke name="report">\n'
            '<｜DSML｜parameter name="services" string="false">["a"]</｜DSML｜parameter>\n'
            f'<｜DSML｜parameter name="details" string="false">{details}</｜DSML｜parameter>\n'
            "</｜DSML｜invoke>\n</｜DSML｜function_calls>"
        )

    assert compiled.check(call('{"k": 1}')).accepted and compiled.check(call("null")).accepted
    assert not compiled.check(call('["x"]')).accepted


def test_names_with_runs_of_spaces_are_written_as_they_are():
    tool = {"name": "two  spaces", "parameters": {"type": "object", "properties": {"n": {"type": "integer"}}}}
    compiled = compile_tools([tool], "deepseek_v32", "deepseek_v4", tool_choice="required")
    text = render_tool_calls([{"name": "two  spaces", "arguments": {"n": 1}}], [tool], "deepseek_v32")
    assert compiled.check(text).accepted
    assert not compiled.check(text.replace("two  spaces", "two spaces")).accepted

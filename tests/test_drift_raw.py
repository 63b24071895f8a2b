"""qwen3_coder and glm under model drift.

1. A value whose closing the model left out: no raw value may hold a guard
   (the start of an argument's markup: qwen3_coder, a line that is
   ``<parameter=KEY>`` of a key its tool declares or ``</function>``, alone
   or right after ``</parameter>``; glm, ``<arg_key>``), the grammar keeps
   them out, and the parser reads one as the end of the value (and the
   start of the next argument).
2. qwen3_coder calls without ``<tool_call>``: a bare ``<function=NAME>``
   block is a call, for the grammar under ``auto`` and for the parser.
3. Lenient readings in the parser only: values on one line, the newlines
   between the tags missing or doubled, GLM-4.7 output read as GLM-4.5 and
   back. The grammar still writes only the template's form.

The precomputed raw-text masks follow the guards exactly (checked against
llguidance over the whole vocabulary).
"""

from __future__ import annotations

import functools
import json
import random
import re

import numpy as np
import pytest
from sample_tools import WRITE_FILE
from test_text_masks import Pair, compiled_for, rendered_tokens
from test_text_masks import glm_special_tokenizer as _glm_special_tokenizer

import constrained as cd
from constrained import compile_tools, parse_tool_calls, render_tool_calls
from constrained.dialects.representable import unrepresentable
from constrained.frames.toolset import normalize_tool
from constrained.output.stream import ToolCallStreamParser
from constrained.runtime.constraint import RowState
from constrained.tools import load_tools

glm_special_tokenizer = functools.cache(_glm_special_tokenizer)


def tool(name: str, properties: dict, required: list[str]) -> dict:
    return {"type": "function", "function": {"name": name, "parameters": {
        "type": "object", "properties": properties, "required": required}}}


WEATHER = tool("get_weather", {"city": {"type": "string"}, "state": {"type": "string"}, "days": {"type": "integer"}},
               ["city"])
OPTIONS = tool("configure", {"name": {"type": "string"}, "options": {"type": "object"}}, ["name"])
TOOLS = [WEATHER, WRITE_FILE, OPTIONS]
GLM = ("glm45", "glm47")


def calls(text: str, dialect: str = "qwen3_coder", tools=TOOLS) -> list[tuple[str, dict]]:
    result = parse_tool_calls(text, tools, dialect)
    assert result.errors == [], result.errors
    return [(c["function"]["name"], json.loads(c["function"]["arguments"])) for c in result.tool_calls]


def refused(text: str, dialect: str = "qwen3_coder", tools=TOOLS) -> str:
    """The one error of a text whose call is refused (the text stays content)."""
    result = parse_tool_calls(text, tools, dialect)
    assert result.tool_calls == [] and len(result.errors) == 1, result
    assert result.content == text
    return result.errors[0].reason


def compiled(dialect: str = "qwen3_coder", choice: str = "required", tok: str = "qwen3"):
    return compile_tools(TOOLS, dialect, tok, tool_choice=choice)


def render(name: str, arguments: dict, dialect: str = "qwen3_coder") -> str:
    return render_tool_calls([{"name": name, "arguments": arguments}], TOOLS, dialect)


def qwen(*lines: str) -> str:
    return "<tool_call>\n" + "\n".join(lines) + "\n</tool_call>"


def glm(body: str) -> str:
    return f"<tool_call>{body}</tool_call>"


# -- 1. a value whose closing is missing -------------------------------------------------

MISSING_CLOSE = qwen("<function=get_weather>", "<parameter=city>", "Dallas", "<parameter=state>", "TX",
                     "</parameter>", "</function>")


def test_qwen_missing_closing_reads_as_two_parameters():
    """The issue's case: before, city = 'Dallas\\n<parameter=state>\\nTX'."""
    assert calls(MISSING_CLOSE) == [("get_weather", {"city": "Dallas", "state": "TX"})]


@pytest.mark.parametrize("choice", ["required", "auto"])
def test_qwen_grammar_refuses_what_the_parser_splits(choice):
    ct = compiled(choice=choice)
    assert not ct.check(MISSING_CLOSE).accepted
    assert ct.check(render("get_weather", {"city": "Dallas", "state": "TX"})).accepted


@pytest.mark.parametrize(
    "value, writable",
    [
        ("a\n<parameter=state>\nb", False),  # a line that opens a declared parameter
        ("<parameter=city>", False),  # the first line too
        ("a\n</parameter><parameter=state>", False),
        ("a\n</function>\nb", False),
        ("x\n</parameter></function>", False),
        ("a\n<parameter=country>\nb", True),  # not a parameter of get_weather
        ("a\n<parameter=days>5</parameter>", True),  # not the whole line
        ("x</parameter></function>y", True),
        ("see <parameter=state> here", True),
        ("a\n <parameter=state>", True),
        ("a\n<parameter=", True),
        ("a\n<parameter\n<parametr=x>", True),
        ("</parameter>x\n</parameter >\n</parameter> <parameter=state>", True),
        ("a</parameter>\n</function>", False),  # a line that begins with </function>
        ("a\n </function>\n</function >", True),
    ],
)
def test_qwen_guards_in_string_values(value, writable):
    """What a string value may hold: the grammar, the renderer and parser,
    and representability agree."""
    ct = compiled()
    text = render("get_weather", {"city": value})
    normalized = normalize_tool(load_tools([WEATHER])[0])
    problem = unrepresentable("qwen3_coder", normalized, {"city": value}, ct.tokenizer)
    assert ct.check(text).accepted is writable
    assert (problem is None) is writable, problem
    if writable:
        assert calls(text) == [("get_weather", {"city": value})]


def test_qwen_guards_hold_for_constrained_strings_and_unions():
    spec = tool("f", {"code": {"type": "string", "maxLength": 50}, "n": {"type": ["string", "integer"]},
                      "k": {"type": "string"}}, ["code"])
    ct = compile_tools([spec], "qwen3_coder", "qwen3", tool_choice="required")
    for key in ("code", "n"):
        bad = render_tool_calls([{"name": "f", "arguments": {key: "a\n<parameter=k>\nb"}}], [spec], "qwen3_coder")
        good = render_tool_calls([{"name": "f", "arguments": {"code": "x", key: "a <parameter=k>\nb"}}], [spec],
                                 "qwen3_coder")
        assert not ct.check(bad).accepted and ct.check(good).accepted


def test_qwen_missing_closing_before_a_json_parameter():
    text = qwen("<function=get_weather>", "<parameter=days>", "3", "<parameter=city>", "Austin", "</parameter>",
                "</function>")
    assert calls(text) == [("get_weather", {"days": 3, "city": "Austin"})]


def test_qwen_json_value_keeps_what_only_raw_text_may_not_hold():
    """JSON strings may hold ``</parameter><parameter=K>``: the grammar
    allows it in an object parameter, and the parser does not split it."""
    arguments = {"name": "n", "options": {"a": "</parameter><parameter=name>", "b": "</parameter></function>"}}
    text = render("configure", arguments)
    assert compiled().check(text).accepted
    assert calls(text) == [("configure", arguments)]


def test_qwen_value_missing_before_the_next_parameter_fails_closed():
    text = qwen("<function=get_weather>", "<parameter=city>", "<parameter=state>", "TX", "</parameter>",
                "</function>")
    assert "no value" in refused(text)


def test_qwen_enum_string_holding_a_guard_leaves_its_tool_out():
    spec = tool("f", {"mode": {"enum": ["a\n<parameter=x>\nb"]}, "x": {"type": "string"}}, ["x"])
    ct = compile_tools([spec, WEATHER], "qwen3_coder", "qwen3", tool_choice="auto")
    assert [t.name for t in ct.left_out] == ["f"] and "start of an argument" in ct.left_out[0].reason


@pytest.mark.parametrize("dialect", GLM)
@pytest.mark.parametrize("newline", ["", "\n"])
def test_glm_missing_closing_reads_as_two_arguments(dialect, newline):
    """A raw value whose </arg_value> is missing ends at the next
    <arg_key> (one newline before it is the layout's)."""
    nl = newline
    text = glm(f"get_weather{nl}<arg_key>city</arg_key>{nl}<arg_value>Dallas{nl}<arg_key>state</arg_key>{nl}"
               f"<arg_value>TX</arg_value>{nl}")
    assert calls(text, dialect) == [("get_weather", {"city": "Dallas", "state": "TX"})]
    assert not compiled(dialect).check(text).accepted


@pytest.mark.parametrize("dialect", GLM)
@pytest.mark.parametrize(
    "value, writable",
    [
        ("a<arg_key>state</arg_key>b", False),
        ("a<arg_key>country</arg_key>b", False),  # any key
        ("<arg_key>", False),
        ("a</arg_value>b", False),
        ("a<arg_ke", True),
        ("</arg_key><arg_value>", True),
    ],
)
def test_glm_guards_in_string_values(dialect, value, writable):
    ct = compiled(dialect)
    text = render("get_weather", {"city": value}, dialect)
    normalized = normalize_tool(load_tools([WEATHER])[0])
    assert ct.check(text).accepted is writable
    assert (unrepresentable(dialect, normalized, {"city": value}, ct.tokenizer) is None) is writable
    if writable:
        assert calls(text, dialect) == [("get_weather", {"city": value})]


@pytest.mark.parametrize("dialect", GLM)
def test_glm_json_value_missing_its_closing_is_refused_not_misread(dialect):
    """Only raw (and scalar) values split at a guard: a JSON value runs to
    its </arg_value>, and reads as no valid value."""
    text = glm("configure<arg_key>options</arg_key><arg_value>{\"a\": 1}<arg_key>name</arg_key>"
               "<arg_value>n</arg_value>")
    assert "options" in refused(text, dialect)


@pytest.mark.parametrize("dialect", GLM)
@pytest.mark.parametrize("value, writable", [("a</arg_value>b", False), ("a<arg_key>state</arg_key>b", False),
                                             ("a<arg_key", True), ("a</arg_valu", True)])
def test_glm_special_markers_keep_spelled_out_tags_out_of_text(dialect, value, writable):
    """With the tags as special tokens, text may still spell them out,
    which the parser (reading text) could not tell from the tokens."""
    tok = glm_special_tokenizer()
    ct = compile_tools(TOOLS, dialect, tok, tool_choice="required")
    nl = "\n" if dialect == "glm45" else ""
    spelled = [t for piece in re.split("(<)", value) if piece for t in tok.encode(piece)]
    assert not any(tok.is_special(t) for t in spelled)
    tokens = (tok.encode(f"<tool_call>get_weather{nl}<arg_key>city</arg_key>{nl}<arg_value>") + spelled
              + tok.encode(f"</arg_value>{nl}</tool_call>"))
    assert (ct.matcher().validate_tokens(tokens) == len(tokens)) is writable


# -- 2. calls without <tool_call> ----------------------------------------------------------

BARE = "<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>"
TOKENED = qwen("<function=get_weather>", "<parameter=city>", "Rome", "</parameter>", "</function>")


@pytest.mark.parametrize(
    "text",
    [
        BARE,
        BARE + "\n</tool_call>",
        BARE + "</tool_call>",
        "Let me check.\n" + BARE,
        "Let me check.\n" + BARE + "\n</tool_call>\n" + TOKENED,
        TOKENED + "\n" + BARE,
        "Two: " + BARE + "\n" + BARE.replace("Paris", "Nice"),
    ],
)
def test_bare_call_under_auto(text):
    ct = compile_tools(TOOLS, "qwen3_coder", "qwen3", tool_choice="auto")
    assert ct.check(text).accepted
    read = calls(text)
    assert [name for name, _ in read] == ["get_weather"] * text.count("<function=")
    assert {"city": "Paris"} in [arguments for _, arguments in read]


@pytest.mark.parametrize(
    "text, accepted",
    [
        ("Sure, here you are.", True),
        ("a < b and c > d\n\n  indented <func", True),
        ("the <function tag", True),
        ("write <function=NAME> to call", False),  # a bare opening is a call: NAME is no tool
        ("Let me check " + BARE + " now", False),  # text after a call
        ("quote: <tool_call> spelled out", False),
    ],
)
def test_free_text_under_auto(text, accepted):
    ct = compile_tools(TOOLS, "qwen3_coder", "qwen3", tool_choice="auto")
    assert ct.check(text).accepted is accepted


@pytest.mark.parametrize("choice", ["required", "get_weather"])
def test_bare_call_is_not_a_call_start_under_required(choice):
    ct = compile_tools(TOOLS, "qwen3_coder", "qwen3", tool_choice=choice)
    assert not ct.check(BARE).accepted and ct.check(TOKENED).accepted


def test_bare_calls_in_the_parser():
    assert calls("Sure.\n" + BARE + "\n</tool_call>") == [("get_weather", {"city": "Paris"})]
    assert parse_tool_calls("Sure.\n" + BARE + "\n</tool_call>", TOOLS, "qwen3_coder").content == "Sure.\n"
    # one-line and newline drift inside a bare call too
    assert calls("<function=get_weather><parameter=city>Oslo</parameter></function>") == [
        ("get_weather", {"city": "Oslo"})]
    # the value's </parameter> missing right before </function>
    assert calls("<function=get_weather>\n<parameter=city>\nParis\n</function>") == [("get_weather", {"city": "Paris"})]
    # fences inside a bare call's value count for nothing outside it
    content = "```python\nprint(1)\n"
    text = render("write_file", {"path": "a.md", "content": content}).removeprefix("<tool_call>\n") + "\n" + TOKENED
    assert calls(text) == [("write_file", {"path": "a.md", "content": content}), ("get_weather", {"city": "Rome"})]


@pytest.mark.parametrize(
    "text, reason",
    [
        ("```\n" + BARE + "\n```", "fenced code block"),
        ("Use `<function=NAME>` to call a tool.", "expected"),
        ("<function=get_weather", "not closed with '>'"),
    ],
)
def test_bare_calls_fail_closed(text, reason):
    assert reason in refused(text)


# -- 3. lenient readings ---------------------------------------------------------------

@pytest.mark.parametrize(
    "text, arguments",
    [
        # values on one line
        (qwen("<function=get_weather>", "<parameter=city>Tokyo</parameter>", "</function>"), {"city": "Tokyo"}),
        (qwen("<function=get_weather>", "<parameter=city>Tokyo</parameter>", "<parameter=days>3</parameter>",
              "</function>"), {"city": "Tokyo", "days": 3}),
        (qwen("<function=get_weather>", "<parameter=city>\nTokyo</parameter>", "</function>"), {"city": "Tokyo"}),
        (qwen("<function=get_weather>", "<parameter=city>Tokyo\n</parameter>", "</function>"), {"city": "Tokyo"}),
        (qwen("<function=get_weather>", "<parameter=city>Dallas<parameter=state>TX</parameter>", "</function>"),
         {"city": "Dallas", "state": "TX"}),
        (qwen("<function=get_weather>", "<parameter=city>", "Tokyo</parameter>", "<parameter=state>", "TX",
              "</parameter>", "</function>"), {"city": "Tokyo", "state": "TX"}),
        # (only the template's newline on each side is stripped: test_qwen_render_then_parse)
        (qwen("<function=get_weather>", "<parameter=city>", "</parameter>", "</function>"), {"city": ""}),
        # the last value's </parameter> missing right before </function>
        (qwen("<function=get_weather>", "<parameter=city>", "Tokyo", "</function>"), {"city": "Tokyo"}),
        # newlines missing or doubled between the tags
        ("<tool_call><function=get_weather><parameter=city>\nA\n</parameter></function></tool_call>", {"city": "A"}),
        ("<tool_call>\n\n<function=get_weather>\n\n<parameter=city>\nA\n</parameter>\n\n\n<parameter=days>\n2\n"
         "</parameter>\n\n</function>\n\n</tool_call>", {"city": "A", "days": 2}),
        (qwen("<function=get_weather>", "<parameter=city>", "A", "</parameter><parameter=state>", "B",
              "</parameter></function>"), {"city": "A", "state": "B"}),
        ("<tool_call>\n<function=get_weather>\n<parameter=city>\nA\n</parameter></function>\n</tool_call>",
         {"city": "A"}),
        (qwen("<function=get_weather>", "<parameter=city>", "A", "</parameter>", "</function>").replace(
            "</function>\n</tool_call>", "</function></tool_call>"), {"city": "A"}),
    ],
)
def test_qwen_lenient_readings(text, arguments):
    assert calls(text) == [("get_weather", arguments)]
    assert not compiled(choice="auto").check(text).accepted  # the grammar writes only the template's form


@pytest.mark.parametrize(
    "text, reason",
    [
        (qwen("<function=get_weather>", "<parameter=city>Tokyo"), "not closed"),
        (qwen("<function=get_weather>", "<parameter=city", "Tokyo", "</parameter>", "</function>"), "'>'"),
        (qwen("<function=get_weather>", "<parameter=city>", "A", "</parameter>", "and then", "</function>"),
         "expected '<parameter=KEY>' or '</function>'"),
        (qwen("<function=get_weather>", "<parameter=city>", "A", "</parameter>", "</function>", "tail"),
         "after '</function>'"),
        (qwen("<function=get_weather>", "<parameter=city>Tokyo</parameter>x", "</function>"), "expected"),
    ],
)
def test_qwen_malformed_still_fails_closed(text, reason):
    assert reason in refused(text)


@pytest.mark.parametrize(
    "arguments",
    [
        {"city": "Tokyo\n"},
        {"city": "\nTokyo"},
        {"city": "a</parameter>b\n</parameter>x"},
        {"city": "x <parameter=city"},
        {"city": ""},
        {"city": "\n"},
        {"city": "  two  \n\n lines "},
        {"city": "\n  Tokyo \n"},
        {"city": "x", "days": 0},
    ],
)
def test_qwen_render_then_parse(arguments):
    text = render("get_weather", arguments)
    assert compiled().check(text).accepted
    assert calls(text) == [("get_weather", arguments)]


@pytest.mark.parametrize("source, target", [("glm47", "glm45"), ("glm45", "glm47"), ("glm45", "glm45")])
def test_glm_either_layout_reads_in_both(source, target):
    arguments = {"city": "New\nYork ", "days": 4}
    text = render("get_weather", arguments, source) + "\n" + render("write_file", {"path": "p", "content": " x\n"},
                                                                     source)
    assert calls(text, target) == [("get_weather", arguments), ("write_file", {"path": "p", "content": " x\n"})]


@pytest.mark.parametrize("dialect", GLM)
@pytest.mark.parametrize(
    "body",
    [
        "get_weather \n <arg_key>city</arg_key> <arg_value>A</arg_value> \n <arg_key>days</arg_key>\n\n<arg_value>2"
        "</arg_value>\n\n",
        "\nget_weather\n<arg_key>city</arg_key><arg_value>A</arg_value><arg_key>days</arg_key>\n<arg_value>2"
        "</arg_value>",
    ],
)
def test_glm_whitespace_between_tags(dialect, body):
    assert calls(glm(body), dialect) == [("get_weather", {"city": "A", "days": 2})]


@pytest.mark.parametrize("dialect", GLM)
@pytest.mark.parametrize(
    "body, reason",
    [
        ("get_weather<arg_key>city</arg_key><arg_value>A", "not closed"),
        ("get_weather<arg_key>city</arg_key><arg_value>A</arg_value>junk", "expected '<arg_key>"),
        ("get_weather<arg_key>city</arg_key>x<arg_value>A</arg_value>", "expected '<arg_value>'"),
        ("get_weather<arg_key>city<arg_value>A</arg_value>", "expected '<arg_key>"),
        ("get_weather<arg_key>city</arg_key><arg_value><arg_key>state</arg_key><arg_value>TX</arg_value>",
         "missing"),
    ],
)
def test_glm_malformed_still_fails_closed(dialect, body, reason):
    assert reason in refused(glm(body), dialect)


@pytest.mark.parametrize(
    "text, dialect",
    [
        (MISSING_CLOSE, "qwen3_coder"),
        (qwen("<function=get_weather>", "<parameter=city>Tokyo</parameter>", "<parameter=days>3</parameter>",
              "</function>"), "qwen3_coder"),
        (qwen("<function=get_weather>", "<parameter=city>", "Tokyo</parameter>", "<parameter=state>", "TX",
              "</parameter>", "</function>"), "qwen3_coder"),
        (glm("get_weather<arg_key>city</arg_key><arg_value>Dallas\n<arg_key>state</arg_key><arg_value>TX"
             "</arg_value>"), "glm45"),
        (glm("get_weather\n<arg_key>city</arg_key>\n<arg_value>Dallas</arg_value>\n"), "glm47"),
        ("Sure.\n" + BARE + "\n</tool_call>", "qwen3_coder"),
    ],
)
def test_streaming_agrees_on_drift(text, dialect):
    """Fed a character at a time, the streamed fragments concatenate to the
    arguments the parser gives for the whole text."""
    expected = parse_tool_calls(text, TOOLS, dialect).tool_calls
    assert len(expected) == 1
    stream = ToolCallStreamParser(TOOLS, dialect)
    deltas = [d for piece in text for d in stream.feed(piece)] + stream.close()
    fragments = "".join(c["function"].get("arguments", "") for d in deltas for c in d.get("tool_calls", []))
    assert fragments == expected[0]["function"]["arguments"]
    assert not any("tool_call_errors" in d for d in deltas)


# -- precomputed masks ---------------------------------------------------------------------

NEAR_GUARDS = [
    "<parameter=pat\n<parameter=pathx>\n<parameter=contents>\n<parameter=path>x\n</parameter><parameter=paths>",
    "</parameter></functions>\n</parameter><parameter=path> \n<parameter=path\n</function>\t",
    "<parameter\n<parametr=\n <parameter=x>\n<paramete",
    "</parameter><parameter\n</parameter></function\n</parameter> </function>",
    "</function\n</functionx>\nx</parameter><parameterx\n</function >",
    "\n\n<\n</\n</p\n<p\nx<parameter=\n",
]


@pytest.mark.parametrize("dialect", ["qwen3_coder", "glm45", "glm47"])
def test_masks_near_guards_match_llguidance(dialect):
    texts = NEAR_GUARDS if dialect == "qwen3_coder" else [
        "<arg_ke", "<arg_keyx>", "</arg_key><arg_value>", "< arg_key>\n<arg_key", "<arg_ke<arg_k<"]
    ct = compiled_for(dialect, [WRITE_FILE])
    pair = Pair(ct)
    pair.run(rendered_tokens(ct, [("write_file", {"path": "a", "content": text}) for text in texts]))
    assert pair.constraint.state(0) is RowState.FINISHED
    assert pair.checked > 60


def steered_walk(ct, prefix: list[int], steer: np.ndarray, rng: random.Random, steps: int) -> int:
    """From ``prefix``, tokens drawn from the mask (mostly among ``steer``)
    until the call ends or ``steps``: how many rows were compared."""
    pair = Pair(ct)
    for token in prefix:
        pair.feed(token)
    while steps and pair.constraint.state(0) is RowState.ACTIVE:
        mask = pair.check()
        near = steer[mask[steer]]
        pair.feed(int(rng.choice(near if near.size and rng.random() < 0.8 else np.nonzero(mask)[0])))
        steps -= 1
    return pair.checked


@pytest.mark.parametrize("dialect", ["qwen3_coder", "glm47"])
def test_random_walks_near_guards_match_llguidance(dialect):
    """Seeded walks inside a value, steered towards the pieces of guards."""
    ct = compiled_for(dialect, [WRITE_FILE])
    tok = ct.tokenizer
    pieces = ["<", "</", "parameter", "<parameter", "=", "path", "content", ">", ">\n", "\n", "function", "</function>",
              "arg", "_key", "<arg_key>", "</arg_key>", "arg_value", "x", " "]
    steer = np.array(sorted({t for piece in pieces for t in tok.encode(piece)}))
    text = tok.decode(rendered_tokens(ct, [("write_file", {"path": "p", "content": "x"})]))
    prefix = tok.encode(text[: text.index("content") + len("content")])
    rng = random.Random(15)
    assert sum(steered_walk(ct, prefix, steer, rng, 60) for _ in range(30)) > 800


@pytest.mark.slow
@pytest.mark.parametrize("dialect", GLM)
def test_glm_special_markers_masks_match_llguidance(dialect):
    """Contents that spell tags out as text (split at each '<', so that no
    special token is encoded) up to where a guard would complete."""
    tok = glm_special_tokenizer()
    ct = compiled_for(dialect, [WRITE_FILE], tok)
    nl = "\n" if dialect == "glm45" else ""
    tokens: list[int] = []
    for text in ["a</arg_value", "</arg_valu>x", "<arg_ke<arg_key", "<arg_keys"]:
        tokens += tok.encode(nl) if tokens else []
        tokens += tok.encode(f"<tool_call>write_file{nl}<arg_key>path</arg_key>{nl}<arg_value>a</arg_value>{nl}"
                             f"<arg_key>content</arg_key>{nl}<arg_value>")
        tokens += [t for piece in re.split("(<)", text) if piece for t in tok.encode(piece)]
        tokens += tok.encode(f"</arg_value>{nl}</tool_call>")
    pair = Pair(ct)
    pair.run(tokens + [tok.token_id("<|endoftext|>")])
    assert pair.constraint.state(0) is RowState.FINISHED
    assert pair.checked > 20


def test_compiled_tools_parse_like_the_tool_list():
    ct = compiled()
    assert cd.parse_tool_calls(MISSING_CLOSE, ct, "qwen3_coder").tool_calls[0]["function"]["arguments"] == \
        json.dumps({"city": "Dallas", "state": "TX"})

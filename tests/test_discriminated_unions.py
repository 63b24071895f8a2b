"""Discriminated unions as a tool's parameters, read exactly in every dialect.

A root ``oneOf`` of parameter sets told apart by a ``const`` key (what
Pydantic writes for a discriminated union) gives one key a different type in
each set: ``value`` is an integer where ``kind`` is ``"count"`` and a string
where it is ``"text"``. The raw-value dialects (qwen3_coder, glm45, glm47)
write strings unquoted, so a value's type comes from the set the other keys
select, wherever the discriminator stands among the keys. These tests check
that for each dialect (hermes and gemma4 for parity): each set's calls read
back to exactly typed arguments, with the discriminator before and after the
value; a value of the wrong set's type is rejected and says why; the
constraint accepts every valid call token by token and ends; the streaming
parser agrees with the non-streaming one; and discriminated unions nested
in a parameter read as before.
"""

from __future__ import annotations

import json

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sample_tools import added_up

from constrained import ToolCallStreamParser, compile_tools, parse_tool_calls, render_tool_calls
from constrained.dialects import get_dialect
from constrained.runtime.constraint import RowState, ToolCallConstraint

DIALECTS = ("qwen3_coder", "glm45", "glm47", "hermes", "gemma4")
RAW = ("qwen3_coder", "glm45", "glm47")


def branch(tag: str, value: dict, *, tag_first: bool = True) -> dict:
    """One parameter set: ``kind`` is ``tag``, ``value`` has schema ``value``."""
    kind = ("kind", {"const": tag})
    properties = dict([kind, ("value", value)] if tag_first else [("value", value), kind])
    return {"type": "object", "properties": properties, "required": ["kind", "value"]}


def union_tool(name: str, *, tag_first: bool) -> dict:
    """A plain root ``oneOf`` (no ``discriminator`` keyword): count/integer,
    text/string, flag/boolean, ratio/number."""
    sets = [
        branch("count", {"type": "integer"}, tag_first=tag_first),
        branch("text", {"type": "string"}, tag_first=tag_first),
        branch("flag", {"type": "boolean"}, tag_first=tag_first),
        branch("ratio", {"type": "number"}, tag_first=tag_first),
    ]
    return {"type": "function", "function": {"name": name, "parameters": {"type": "object", "oneOf": sets}}}


PYDANTIC = {
    "type": "function",
    "function": {
        "name": "pick",
        "parameters": {
            "$defs": {
                "Count": {
                    "properties": {"kind": {"const": "count", "title": "Kind", "type": "string"},
                                   "value": {"title": "Value", "type": "integer"}},
                    "required": ["kind", "value"], "title": "Count", "type": "object",
                },
                "Text": {
                    "properties": {"kind": {"const": "text", "title": "Kind", "type": "string"},
                                   "value": {"title": "Value", "type": "string", "maxLength": 20}},
                    "required": ["kind", "value"], "title": "Text", "type": "object",
                },
            },
            "discriminator": {"mapping": {"count": "#/$defs/Count", "text": "#/$defs/Text"}, "propertyName": "kind"},
            "oneOf": [{"$ref": "#/$defs/Count"}, {"$ref": "#/$defs/Text"}],
        },
    },
}

NESTED = {
    "type": "function",
    "function": {
        "name": "configure",
        "parameters": {
            "type": "object",
            "properties": {
                "name": {"type": "string"},
                "limit": {"oneOf": [branch("count", {"type": "integer"}), branch("text", {"type": "string"})]},
            },
            "required": ["name", "limit"],
        },
    },
}

TOOLS = [union_tool("set_limit", tag_first=True), union_tool("set_limit_after", tag_first=False), PYDANTIC, NESTED]

VALID = [
    {"kind": "count", "value": 5},
    {"kind": "count", "value": -12},
    {"kind": "text", "value": "auto"},
    {"kind": "text", "value": "5"},
    {"kind": "text", "value": "true"},
    {"kind": "text", "value": "two\nlines"},
    {"kind": "flag", "value": True},
    {"kind": "flag", "value": False},
    {"kind": "ratio", "value": 0.75},
    {"kind": "ratio", "value": 3},
]
"""Valid arguments of both root-union tools, one or more per set, strings that
look like another set's values among them."""

CALLS = [
    {"name": name, "arguments": arguments}
    for name in ("set_limit", "set_limit_after")
    for arguments in VALID
] + [
    {"name": "pick", "arguments": {"kind": "count", "value": 7}},
    {"name": "pick", "arguments": {"kind": "text", "value": "7"}},
    {"name": "configure", "arguments": {"name": "a", "limit": {"kind": "count", "value": 3}}},
    {"name": "configure", "arguments": {"name": "b", "limit": {"kind": "text", "value": "3"}}},
]


def render(call: dict, dialect: str) -> str:
    """The call as the grammar writes it in schema key order: ``kind`` first
    for ``set_limit``, last for ``set_limit_after``."""
    return render_tool_calls([call], TOOLS, dialect, key_order="schema")


def read(text: str, dialect: str):
    result = parse_tool_calls(text, TOOLS, dialect)
    return result, [(c["function"]["name"], json.loads(c["function"]["arguments"])) for c in result.tool_calls]


def same(left, right) -> bool:
    """Equality that tells ``5``, ``5.0``, ``True`` and ``"5"`` apart."""
    return json.dumps(left, sort_keys=True) == json.dumps(right, sort_keys=True) and type(left) is type(right)


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("call", CALLS, ids=lambda c: f"{c['name']}-{json.dumps(c['arguments'])}")
def test_each_set_reads_back_exactly(dialect, call):
    """Each set's call, discriminator before or after the value, reads back
    to the same arguments with the same types (``"5"`` stays a string where
    ``kind`` is ``"text"``, ``5`` an integer where it is ``"count"``)."""
    text = render(call, dialect)
    result, calls = read(text, dialect)
    assert result.errors == [], (text, result.errors)
    assert len(calls) == 1 and calls[0][0] == call["name"]
    assert same(calls[0][1], call["arguments"]), (text, calls[0][1])


def raw_call(dialect: str, name: str, pairs: list[tuple[str, str]]) -> str:
    """A call with raw values written as given, in the given key order."""
    if dialect == "qwen3_coder":
        body = "".join(f"<parameter={key}>\n{value}\n</parameter>\n" for key, value in pairs)
        return f"<tool_call>\n<function={name}>\n{body}</function>\n</tool_call>"
    nl = "\n" if dialect == "glm45" else ""
    body = "".join(f"<arg_key>{key}</arg_key>{nl}<arg_value>{value}</arg_value>{nl}" for key, value in pairs)
    return f"<tool_call>{name}{nl}{body}</tool_call>"


@pytest.mark.parametrize("dialect", RAW)
@pytest.mark.parametrize("name", ["set_limit", "set_limit_after", "pick"])
def test_the_discriminator_selects_the_type_in_any_key_order(dialect, name):
    """The same raw ``value`` text reads by the set ``kind`` names, whether
    ``kind`` comes before or after it in the text."""
    for pairs in ([("kind", "text"), ("value", "5")], [("value", "5"), ("kind", "text")]):
        assert read(raw_call(dialect, name, pairs), dialect)[1] == [(name, {"kind": "text", "value": "5"})]
        assert type(read(raw_call(dialect, name, pairs), dialect)[1][0][1]["value"]) is str
    for pairs in ([("kind", "count"), ("value", "5")], [("value", "5"), ("kind", "count")]):
        assert read(raw_call(dialect, name, pairs), dialect)[1] == [(name, {"kind": "count", "value": 5})]


INVALID_TEXTS = {
    "qwen3_coder": None,
    "glm45": None,
    "glm47": None,
    "hermes": '<tool_call>\n{"name": "set_limit", "arguments": {"kind": "count", "value": "auto"}}\n</tool_call>',
    "gemma4": '<|tool_call>call:set_limit{kind:<|"|>count<|"|>,value:<|"|>auto<|"|>}<tool_call|>',
}


@pytest.mark.parametrize("dialect", DIALECTS)
def test_a_value_of_another_sets_type_is_rejected_with_its_reason(dialect):
    """``kind`` is ``"count"``, ``value`` is ``auto``: no set takes both, and
    the reason names the set the discriminator selects and what is wrong."""
    text = INVALID_TEXTS[dialect] or raw_call(dialect, "set_limit", [("kind", "count"), ("value", "auto")])
    result, calls = read(text, dialect)
    assert calls == [] and result.content == text
    (error,) = result.errors
    assert error.reason.startswith('/value: "auto" is not an integer'), error.reason
    assert "'kind' is \"count\"" in error.reason, error.reason


@pytest.mark.parametrize("dialect", RAW)
def test_rejections_name_what_is_missing_or_unknown(dialect):
    """The selected set's required keys make the missing-key message; a tag
    no set has says which tags there are."""
    (error,) = read(raw_call(dialect, "set_limit", [("kind", "count")]), dialect)[0].errors
    assert "missing required parameter(s) 'value'" in error.reason
    (error,) = read(raw_call(dialect, "set_limit", [("kind", "size"), ("value", "1")]), dialect)[0].errors
    assert "'kind'" in error.reason and '"count"' in error.reason and '"ratio"' in error.reason
    (error,) = read(raw_call(dialect, "set_limit", [("kind", "count"), ("other", "1")]), dialect)[0].errors
    assert "no parameter 'other'" in error.reason


@pytest.mark.parametrize("dialect", RAW)
def test_a_number_with_spaces_around_it_reads_where_it_cannot_be_a_string(dialect):
    """Spaces and newlines around a value that cannot be a string are not
    part of it (``" 5 "`` is 5 for ``count``); where the value may be a
    string, the text is the string exactly as written."""
    assert read(raw_call(dialect, "set_limit", [("kind", "count"), ("value", " 5 ")]), dialect)[1] == [
        ("set_limit", {"kind": "count", "value": 5})
    ]
    assert read(raw_call(dialect, "set_limit", [("kind", "flag"), ("value", "\ntrue ")]), dialect)[1] == [
        ("set_limit", {"kind": "flag", "value": True})
    ]
    assert read(raw_call(dialect, "set_limit", [("kind", "text"), ("value", " 5 ")]), dialect)[1] == [
        ("set_limit", {"kind": "text", "value": " 5 "})
    ]


SPACED = [
    {"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {
        "count": {"type": "integer"}, "ratio": {"type": "number"}, "on": {"type": "boolean"},
        "either": {"type": ["integer", "string"]}}}}}
]


@pytest.mark.parametrize("dialect", RAW)
def test_spaces_around_a_plain_parameter(dialect):
    """The same rule outside unions: an integer, number or boolean parameter
    reads through the spaces around it; a parameter that may be a string
    keeps them, as a string."""
    def one(key: str, text: str):
        result = parse_tool_calls(raw_call(dialect, "f", [(key, text)]), SPACED, dialect)
        return [json.loads(c["function"]["arguments"]) for c in result.tool_calls]

    assert one("count", " 5 ") == [{"count": 5}]
    assert one("count", "\n 5\n") == [{"count": 5}]
    assert one("ratio", "\t0.5 ") == [{"ratio": 0.5}]
    assert one("on", " false") == [{"on": False}]
    assert one("either", " 5 ") == [{"either": " 5 "}]
    assert one("either", "5") == [{"either": 5}]
    assert one("count", " 5 x") == []


# -- the constraint ----------------------------------------------------------------


def compiled(dialect: str):
    return compile_tools(TOOLS, dialect, get_dialect(dialect).default_tokenizer, tool_choice="required", key_order="schema")


_COMPILED: dict[str, object] = {}


def constraint_accepts(dialect: str, text: str) -> bool:
    """Feed ``text``'s tokens one by one to a :class:`ToolCallConstraint`,
    each allowed by the mask before it is consumed, then an end token."""
    ct = _COMPILED.get(dialect) or _COMPILED.setdefault(dialect, compiled(dialect))
    tokens = ct.tokenizer.encode(text)
    constraint = ToolCallConstraint(ct, 1, on_violation="stop")
    logits = torch.zeros(1, ct.tokenizer.vocab_size)
    for token in tokens:
        logits.zero_()
        constraint.mask_logits(logits)
        if not torch.isfinite(logits[0, token]):
            return False
        constraint.consume([token])
    logits.zero_()
    constraint.mask_logits(logits)
    end = next(t for t in ct.tokenizer.eos_token_ids if torch.isfinite(logits[0, t]))
    constraint.consume([end])
    return constraint.state(0) is RowState.FINISHED


@pytest.mark.parametrize("dialect", DIALECTS)
def test_the_constraint_accepts_every_valid_call_and_ends(dialect):
    """Every valid call of every set, in the schema's key order (the
    discriminator first, or last), passes the constraint token by token."""
    for call in CALLS:
        text = render(call, dialect)
        assert constraint_accepts(dialect, text), text


@pytest.mark.parametrize("dialect", RAW)
def test_the_constraint_refuses_a_mix_of_sets(dialect):
    """What the parser rejects the grammar does not write: ``kind`` count
    with a string ``value``, in either key order."""
    ct = _COMPILED.get(dialect) or _COMPILED.setdefault(dialect, compiled(dialect))
    for name, pairs in (
        ("set_limit", [("kind", "count"), ("value", "auto")]),
        ("set_limit_after", [("value", "auto"), ("kind", "count")]),
        ("set_limit_after", [("value", "0.5"), ("kind", "count")]),
    ):
        assert not ct.check(raw_call(dialect, name, pairs)).accepted


# -- streaming -----------------------------------------------------------------------


def streamed(dialect: str, parts: list[str]):
    """The stream's accepted calls (id, name, arguments), content, and result."""
    parser = ToolCallStreamParser(TOOLS, dialect)
    deltas = [d for part in parts for d in parser.feed(part)] + parser.close()
    content, calls = added_up(deltas)
    return content, calls, parser.result


def check_stream(dialect: str, text: str, parts: list[str]) -> None:
    expected = parse_tool_calls(text, TOOLS, dialect)
    content, calls, result = streamed(dialect, parts)
    assert content == expected.content
    assert calls == [(c["id"], c["function"]["name"], c["function"]["arguments"]) for c in expected.tool_calls]
    assert result == expected


@pytest.mark.parametrize("dialect", DIALECTS)
def test_the_stream_gives_what_the_parser_gives(dialect):
    """Fed a character at a time, each call (and an invalid mix) streams to
    exactly the non-streaming parse: a value whose type the discriminator
    after it decides waits for it."""
    texts = [render(call, dialect) for call in CALLS]
    if dialect in RAW:
        texts += [
            raw_call(dialect, "set_limit_after", [("value", "5"), ("kind", "text")]),
            raw_call(dialect, "set_limit_after", [("value", "auto"), ("kind", "count")]),
        ]
    for text in texts:
        check_stream(dialect, text, list(text))
        check_stream(dialect, text, [text])


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_the_stream_gives_what_the_parser_gives_cut_anywhere(data):
    """Several calls of the union tools in one output, cut at random."""
    dialect = data.draw(st.sampled_from(DIALECTS))
    calls = data.draw(st.lists(st.sampled_from(CALLS), min_size=1, max_size=3))
    text = get_dialect(dialect).markup.separator.join(render(call, dialect) for call in calls)
    cuts = sorted(set(data.draw(st.lists(st.integers(1, len(text) - 1), max_size=10))))
    bounds = [0, *cuts, len(text)]
    check_stream(dialect, text, [text[a:b] for a, b in zip(bounds, bounds[1:]) if b > a])


def test_a_string_streams_as_it_comes_once_its_set_is_known():
    """With ``kind`` first, ``value``'s text streams before its closing; with
    ``kind`` after it, ``value`` streams once only one set reads it (``a
    long text`` is no number), and ``5`` not before ``kind`` is read."""
    call = {"name": "set_limit", "arguments": {"kind": "text", "value": "a long text"}}
    text = render(call, "qwen3_coder")
    parser = ToolCallStreamParser(TOOLS, "qwen3_coder")
    cut = text.index("long") + 4
    fragments = "".join(
        c["function"]["arguments"] for d in parser.feed(text[:cut]) for c in d.get("tool_calls", [])
    )
    assert fragments == '{"kind": "text", "value": "a long'
    after = render({"name": "set_limit_after", "arguments": call["arguments"]}, "qwen3_coder")
    parser = ToolCallStreamParser(TOOLS, "qwen3_coder")
    cut = after.index("<parameter=kind>")
    fragments = "".join(
        c["function"]["arguments"] for d in parser.feed(after[:cut]) for c in d.get("tool_calls", [])
    )
    assert fragments == '{"value": "a long text"'
    five = render({"name": "set_limit_after", "arguments": {"kind": "text", "value": "5"}}, "qwen3_coder")
    parser = ToolCallStreamParser(TOOLS, "qwen3_coder")
    cut = five.index("<parameter=kind>")
    fragments = "".join(c["function"]["arguments"] for d in parser.feed(five[:cut]) for c in d.get("tool_calls", []))
    assert fragments == "{"
    rest = "".join(c["function"]["arguments"] for d in parser.feed(five[cut:]) + parser.close() for c in d.get("tool_calls", []))
    assert rest == '"value": "5", "kind": "text"}'


@pytest.mark.slow
@pytest.mark.parametrize("dialect", ["glm45", "glm47"])
def test_glm_with_special_markers_accepts_every_valid_call_and_refuses_a_mix(dialect):
    """Where ``</arg_value>`` is a special token (GLM's own vocabulary), a
    value's text ends at the token in every set, so the sets' values stand
    side by side as they are; the same calls pass, the same mix does not."""
    from test_text_masks import glm_special_tokenizer

    ct = compile_tools(TOOLS, dialect, glm_special_tokenizer(), tool_choice="required", key_order="schema")
    for call in CALLS:
        text = render(call, dialect)
        assert ct.check(text).accepted, text
        assert read(text, dialect)[1] == [(call["name"], call["arguments"])]
    assert not ct.check(raw_call(dialect, "set_limit_after", [("value", "auto"), ("kind", "count")])).accepted


@pytest.mark.parametrize("dialect", RAW)
def test_any_key_order_keeps_every_set_until_the_discriminator(dialect):
    """Under ``key_order="any"`` the value may come first: ``5`` is then
    text, an integer and a number at once, and the constraint keeps all
    three sets until ``kind`` says which; ``auto`` keeps only the text set."""
    tools = [union_tool("set_limit", tag_first=True)]
    ct = compile_tools(tools, dialect, get_dialect(dialect).default_tokenizer, tool_choice="required", key_order="any")
    for kind in ("count", "text", "ratio"):
        assert ct.check(raw_call(dialect, "set_limit", [("value", "5"), ("kind", kind)])).accepted, kind
    assert ct.check(raw_call(dialect, "set_limit", [("value", "auto"), ("kind", "text")])).accepted
    assert not ct.check(raw_call(dialect, "set_limit", [("value", "auto"), ("kind", "count")])).accepted
    assert not ct.check(raw_call(dialect, "set_limit", [("value", "5"), ("kind", "flag")])).accepted

"""A dialect defined outside the package (``boxed_dialect.py``) works from
its registration alone: the constraint, the parser, the stream parser, the
renderer and the CLI; one shipped through the entry point group is found on
the first look-up; and registration names what a dialect lacks."""

from __future__ import annotations

import json
from importlib import metadata
from pathlib import Path

import pytest
import torch
from boxed_dialect import GRAMMAR, Boxed, Shipped, Unopened
from sample_tools import WEATHER

from constrained import (
    DialectError,
    compile_tools,
    load_tokenizer,
    parse_tool_calls,
    register_dialect,
    render_tool_calls,
)
from constrained.cli import main
from constrained.dialects import DIALECTS, ENTRY_POINT_GROUP, ChatFormat, ReasoningMarkup, get_dialect, registry
from constrained.errors import DuplicateDialectError
from constrained.output.stream import ToolCallStreamParser
from constrained.runtime.constraint import ToolCallConstraint

CALLS = [
    {"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}},
    {"name": "get_weather", "arguments": {"city": "Oslo"}},
]


@pytest.fixture
def boxed(monkeypatch):
    """``Boxed`` registered for one test (the registry is as before after it)."""
    len(DIALECTS)  # the built-ins and entry points are loaded before the snapshot
    monkeypatch.setattr(registry._REGISTRY, "_dialects", dict(registry._REGISTRY._dialects))
    return register_dialect(Boxed())


def test_registration_makes_the_dialect_known(boxed):
    assert get_dialect("boxed") is boxed and "boxed" in DIALECTS
    assert register_dialect(boxed) is boxed  # the same object again: nothing to do


def test_the_constraint_follows_a_scripted_call_to_its_end(boxed):
    compiled = compile_tools([WEATHER], "boxed", "qwen3", tool_choice="required")
    tok = compiled.tokenizer
    text = render_tool_calls(CALLS, [WEATHER], "boxed")
    tokens = tok.encode(text) + [tok.token_id("<|im_end|>")]
    constraint = ToolCallConstraint(compiled, 1)
    logits = torch.zeros(1, tok.vocab_size)
    for token in tokens:
        logits.zero_()
        constraint.mask_logits(logits)
        assert torch.isfinite(logits[0, token]), tok.decode([token])
        constraint.consume([token])
    assert constraint.is_finished(0) and constraint.events == []
    assert compiled.check(text).accepted
    assert not compiled.check(text.replace("Paris", "Paris\", \"x\": \"y")).accepted


def test_the_mask_cache_follows_the_arguments_and_keeps_llguidance_s_masks(boxed):
    """With ``arguments_opening`` the cache follows the arguments as JSON:
    a second call with other values walks the first one's masks, and every
    mask equals llguidance's own (a constraint without the cache)."""
    compiled = compile_tools([WEATHER], "boxed", "qwen3", tool_choice="required")
    tok = compiled.tokenizer
    first, second = (tok.encode(render_tool_calls([call], [WEATHER], "boxed")) for call in CALLS)
    cached = ToolCallConstraint(compiled, 1)
    assert cached.cache_state == "on"
    for tokens in (first, second):
        cached, plain = ToolCallConstraint(compiled, 1), ToolCallConstraint(compiled, 1, cache_masks=False)
        cached.prepare_host()
        plain.prepare_host()
        for token in tokens:
            cached.fill_masks()
            plain.fill_masks()
            assert (cached.allowed_words(0) == plain.allowed_words(0)).all(), tok.decode([token])
            cached.consume([token])
            plain.consume([token])
    assert cached.cached_rows > len(second) // 2


def test_a_dialect_that_says_not_where_arguments_begin_is_told_so(boxed):
    """Without ``arguments_opening`` (nor raw values) the cache keys values
    by their tokens, and the constraint says so rather than slowing down silently."""
    plain = register_dialect(Unopened())
    compiled = compile_tools([WEATHER], plain.name, "qwen3", tool_choice="required")
    state = ToolCallConstraint(compiled, 1).cache_state
    assert state.startswith("on, values keyed by their tokens") and "arguments_opening" in state


def test_parse_stream_and_render_agree(boxed):
    text = "Looking it up.\n" + render_tool_calls(CALLS, [WEATHER], "boxed")
    parsed = parse_tool_calls(text, [WEATHER], "boxed")
    assert parsed.errors == [] and parsed.content == "Looking it up.\n\n"  # and the separator between the calls
    assert [json.loads(call["function"]["arguments"]) for call in parsed.tool_calls] == [c["arguments"] for c in CALLS]
    for split in range(len(text) + 1):
        stream = ToolCallStreamParser([WEATHER], "boxed")
        stream.feed(text[:split])
        stream.feed(text[split:])
        stream.close()
        assert stream.result == parsed, split


def test_a_malformed_call_is_rejected(boxed):
    parsed = parse_tool_calls('<|box_start|>{"name": "get_weather"}<|box_end|>', [WEATHER], "boxed")
    assert parsed.tool_calls == [] and len(parsed.errors) == 1


def test_the_cli_accepts_the_dialect(boxed, tmp_path, capsys):
    tools = tmp_path / "tools.json"
    tools.write_text(json.dumps([WEATHER]))
    assert main(["render", "--dialect", "boxed", str(tools), json.dumps(CALLS[:1])]) == 0
    assert capsys.readouterr().out.startswith("<|box_start|>")


def test_a_dialect_shipped_through_an_entry_point_is_found(monkeypatch):
    entry = metadata.EntryPoint("boxed_shipped", "boxed_dialect:Shipped", ENTRY_POINT_GROUP)

    def entry_points(**selection):
        return metadata.EntryPoints([entry] if selection.get("group") == ENTRY_POINT_GROUP else [])

    monkeypatch.setattr(metadata, "entry_points", entry_points)
    monkeypatch.setattr(registry, "_REGISTRY", registry._Registry())
    monkeypatch.setattr(registry, "DIALECTS", registry._REGISTRY)
    assert type(registry.get_dialect("boxed_shipped")) is Shipped
    assert "hermes" in registry.DIALECTS  # the built-ins first


def test_an_entry_point_that_fails_to_load_is_named(monkeypatch):
    entry = metadata.EntryPoint("broken", "no_such_module:Dialect", ENTRY_POINT_GROUP)
    monkeypatch.setattr(metadata, "entry_points", lambda **selection: metadata.EntryPoints([entry]))
    monkeypatch.setattr(registry, "_REGISTRY", registry._Registry())
    with pytest.raises(DialectError, match="broken = no_such_module:Dialect"):
        registry.register_dialect(Boxed())


def test_a_name_taken_by_another_dialect_is_refused(boxed):
    with pytest.raises(DuplicateDialectError, match="'boxed' is registered already"):
        register_dialect(Boxed())
    with pytest.raises(DuplicateDialectError, match="'hermes'"):
        register_dialect(type("Hermes2", (Boxed,), {"name": "hermes"})())


def _variant(**attributes):
    return type("Variant", (Boxed,), {"name": "boxed_variant", **attributes})()


@pytest.mark.parametrize(
    ("dialect", "message"),
    [
        (Boxed, r"register an instance of Boxed, not the class: Boxed\(\)"),
        (type("NoHooks", (Boxed.__mro__[1],), {"name": "x"}), "first define its hooks call_body, parse_body, render_call"),
        ("boxed", "expected a Dialect instance, got str"),
        (_variant(markup=None), "markup must be a CallMarkup"),
        (_variant(name="two words"), "use letters, digits and '_' only"),
        (_variant(grammar_source=GRAMMAR.replace("call_separator", "between")), "defines no rule call_separator"),
        (_variant(grammar_source=GRAMMAR + "start: text\n"), "defines start, which the compiler appends"),
        (_variant(grammar_source=None), "cannot read its grammar"),
        (_variant(grammar_source=Path("/no/such/file.lark")), "cannot read its grammar"),
    ],
)
def test_registration_names_what_a_dialect_lacks(boxed, dialect, message):
    with pytest.raises(DialectError, match=message):
        register_dialect(dialect)


def test_a_grammar_from_a_file(boxed, tmp_path):
    path = tmp_path / "boxed.lark"
    path.write_text(GRAMMAR)
    dialect = register_dialect(_variant(grammar_source=path))
    assert dialect.grammar() == GRAMMAR
    assert compile_tools([WEATHER], "boxed_variant", load_tokenizer("qwen3")).check(render_tool_calls(CALLS, [WEATHER], "boxed_variant")).accepted


def test_a_group_checks_its_own_fields():
    with pytest.raises(DialectError, match="an opening and a closing marker"):
        ReasoningMarkup(tokens=("<think>",))
    with pytest.raises(DialectError, match="expected one of schema, alphabetical"):
        ChatFormat(trained_key_order="sorted")

"""The compiler's rehearsal: one example call of each tool walked through
the fresh grammar, so llguidance's lazily built lexer states are there
before the first request (``CompiledTools._rehearse``), and the example
values it writes (``constrained.schema.examples``).

The rehearsal changes no mask (every copy of the template must mask as a
matcher that never rehearsed does), walks exactly the tokens of each tool's
example call, stops quietly where the grammar refuses an example, and
stays within its token budget.
"""

from __future__ import annotations

import llguidance
import numpy as np
import pytest

from constrained import compile_tools, load_tokenizer, render_tool_calls
from constrained import compiler as compiler_module
from constrained.dialects import get_dialect
from constrained.schema.examples import FORMAT_EXAMPLES, example_value

from sample_tools import WEATHER, WRITE_FILE_WITH_OVERWRITE


def test_example_values():
    assert example_value({"enum": ["b", "a"]}) == "b"
    assert example_value({"const": 4}) == 4
    assert example_value({"anyOf": [{"type": "integer", "minimum": 7}, {"type": "string"}]}) == 7
    assert example_value({"type": ["boolean", "null"]}) is True
    assert example_value({"type": "string", "format": "date"}) == FORMAT_EXAMPLES["date"]
    assert example_value({"type": "string", "default": "hi"}) == "hi"
    assert example_value({"type": "array", "items": {"type": "number"}, "minItems": 2}) == [3, 3]
    schema = {"type": "object", "properties": {"a": {"$ref": "#/$defs/A"}}, "$defs": {"A": {"type": "null"}}}
    assert example_value(schema) == {"a": None}


def test_example_values_stay_small_where_definitions_nest():
    """Eight levels of objects of eight properties each would be 16 million
    values; the example stops at 256 and at a depth of six."""
    defs = {f"L{i}": {"type": "object", "properties": {f"p{j}": {"$ref": f"#/$defs/L{i + 1}"} for j in range(8)}}
            for i in range(8)}
    defs["L8"] = {"type": "string"}
    value = example_value({"$ref": "#/$defs/L0", "$defs": defs})

    def count(v):
        return 1 + sum(count(x) for x in v.values()) if isinstance(v, dict) else 1

    assert isinstance(value, dict) and count(value) <= 257


class SpyMatcher:
    """An llguidance matcher that records the tokens its copies consume."""

    def __init__(self, matcher, consumed):
        self.matcher, self.consumed = matcher, consumed

    def deep_copy(self):
        self.consumed.append([])
        return SpyMatcher(self.matcher.deep_copy(), self.consumed)

    def consume_token(self, token):
        self.consumed[-1].append(token)
        return self.matcher.consume_token(token)

    def __getattr__(self, name):
        return getattr(self.matcher, name)


@pytest.mark.parametrize("dialect", ["qwen3_coder", "hermes", "gemma4"])
def test_the_rehearsal_walks_one_example_call_of_each_tool(dialect):
    tok = load_tokenizer(get_dialect(dialect).default_tokenizer)
    compiled = compile_tools([WEATHER, WRITE_FILE_WITH_OVERWRITE], dialect, tok, tool_choice="required",
                             reasoning=False)
    consumed: list[list[int]] = []
    compiled._rehearse(SpyMatcher(llguidance.LLMatcher(tok.ll_tokenizer, compiled.grammar, log_level=0), consumed))
    expected = [tok.encode(render_tool_calls([{"name": tool.name, "arguments": example_value(tool.parameters)}],
                                             compiled.tools, dialect, key_order=compiled.key_order))
                for tool in compiled.tools]
    assert consumed == expected


def test_the_rehearsal_stops_where_the_grammar_refuses_and_within_its_budget(monkeypatch):
    """An example the grammar refuses ("example text" against a pattern of
    digits) is walked up to the refused token; the budget cuts the walk."""
    tok = load_tokenizer("qwen3")
    digits = {"type": "function", "function": {"name": "pin", "parameters": {
        "type": "object", "properties": {"code": {"type": "string", "pattern": "^[0-9]+$"}}, "required": ["code"]}}}
    compiled = compile_tools([digits, WEATHER], "hermes", tok, tool_choice="required", reasoning=False)
    consumed: list[list[int]] = []
    compiled._rehearse(SpyMatcher(llguidance.LLMatcher(tok.ll_tokenizer, compiled.grammar, log_level=0), consumed))
    first = tok.encode(render_tool_calls([{"name": "pin", "arguments": {"code": "example text"}}], compiled.tools,
                                         "hermes"))
    assert len(consumed) == 2 and 0 < len(consumed[0]) < len(first) and consumed[0] == first[: len(consumed[0])]
    monkeypatch.setattr(compiler_module, "REHEARSAL_TOKENS", 5)
    consumed.clear()
    compiled._rehearse(SpyMatcher(llguidance.LLMatcher(tok.ll_tokenizer, compiled.grammar, log_level=0), consumed))
    assert [len(tokens) for tokens in consumed] == [5]


@pytest.mark.parametrize("dialect", ["qwen3_coder", "hermes", "gemma4"])
def test_a_rehearsed_grammar_masks_as_a_fresh_one(dialect):
    tok = load_tokenizer(get_dialect(dialect).default_tokenizer)
    compiled = compile_tools([WEATHER, WRITE_FILE_WITH_OVERWRITE], dialect, tok, tool_choice="required",
                             reasoning=False)
    call = {"name": "write_file", "arguments": {"path": "a.py", "content": "print(1)\n", "overwrite": False}}
    tokens = tok.encode(render_tool_calls([call], compiled.tools, dialect))
    rehearsed = compiled.matcher()
    fresh = llguidance.LLMatcher(tok.ll_tokenizer, compiled.grammar, log_level=0)
    words = np.zeros((2, (tok.vocab_size + 31) // 32), dtype=np.uint32)
    for token in tokens:
        rehearsed.unsafe_compute_mask_ptr(words[0].ctypes.data, words[0].nbytes)
        fresh.unsafe_compute_mask_ptr(words[1].ctypes.data, words[1].nbytes)
        assert np.array_equal(words[0], words[1])
        assert rehearsed.consume_token(token) and fresh.consume_token(token)

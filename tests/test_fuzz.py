"""Random-walk fuzzing (``constrained.qa.fuzz``).

A seeded slice of the sweep ``bench/fuzz.py`` runs: MCP and BFCL tools in
every dialect and tool_choice mode, both samplers, every other mask
compared with llguidance's and with the applied logits. No walk may wedge or
fail, every finished output must be valid, and enough walks must finish for
that to mean something. Then the fuzzer's own verdicts, on constraints and
outputs broken on purpose: a wedge, a mask that differs, an exception, an
invalid output.
"""

from __future__ import annotations

import json
import subprocess
import sys
import zlib

import numpy as np
import pytest
import torch
from corpus import CORPUS, bfcl_functions
from sample_tools import WEATHER, unwarmed_cache

from constrained import compile_tools, render_tool_calls
from constrained.dialects import DIALECTS
from constrained.frames.examples import example_arguments
from constrained.frames.model import SUPPORTED_FORMATS
from constrained.schema.formats import CHECKED_AFTER_GENERATION
from constrained.output.parse import parse_tool_calls
from constrained.qa.fuzz import FuzzSummary, Outcome, WalkOptions, fuzz, walk
from constrained.qa.fuzz_checks import output_problems
from constrained.qa.fuzz_samplers import UniformSampler, allowed_ids
from constrained.qa.fuzz_structure import grammar_literals
from constrained.runtime import constraint as constraint_module
from constrained.runtime import warm_up as warm_up_module
from constrained.runtime.cache_walk import call_marks
from constrained.runtime.constraint import ToolCallConstraint, warm_mask_cache
from constrained.runtime.mask_cache import LEAF_LABELS, NAMED_LABELS, OPENED_CALL

MODES = [("auto", True), ("required", True), ("none", True), ("named", True), ("auto", False), ("required", False)]


def slice_tool_sets() -> list[list[dict]]:
    """A few MCP tools with nested objects, arrays, enums and ``$ref``s, an
    MCP server's whole list, and BFCL functions spread over the corpus."""
    servers = {path.name: json.loads(path.read_text())["tools"] for path in (CORPUS / "mcp").glob("*.tools.json")}
    by_name = {tool["name"]: tool for tools in servers.values() for tool in tools}
    mcp = [[by_name[name]] for name in ("edit_file", "create_entities", "get_pricing", "fetch", "git_log")]
    server = servers["time.tools.json"]
    bfcl = [[function] for function in bfcl_functions()[7::240]]
    return mcp + [server] + bfcl


def compiled_for(tools: list[dict], dialect: str, mode: tuple[str, bool]):
    choice, parallel = mode
    if choice == "named":
        choice = tools[-1]["name"]
    return compile_tools(tools, dialect, DIALECTS[dialect].default_tokenizer, tool_choice=choice,
                         parallel_tool_calls=parallel)


@pytest.mark.slow
def test_a_seeded_slice_of_the_sweep_finds_nothing_wrong():
    sets = slice_tool_sets()
    steered, uniform = FuzzSummary(keep=10), FuzzSummary(keep=10)
    for dialect_index, dialect in enumerate(sorted(DIALECTS)):
        for mode_index, mode in enumerate(MODES):
            tools = sets[(dialect_index * len(MODES) + mode_index) % len(sets)]
            compiled = compiled_for(tools, dialect, mode)
            seed = zlib.crc32(f"{dialect}|{mode_index}".encode())
            steered.merge(fuzz(compiled, 3, seed, WalkOptions(budget=160, crosscheck_every=2)))
            steered.merge(fuzz(compiled, 3, seed, WalkOptions(budget=160, crosscheck_every=2, fast_forward=True,
                                                              rollback=True)))
            uniform.merge(fuzz(compiled, 1, seed, WalkOptions("uniform", budget=48, crosscheck_every=2)))
    for summary in (steered, uniform):
        assert summary.ok, [run.to_json() for run in summary.failures]
    assert steered.runs == 36 * len(DIALECTS) and uniform.runs == 6 * len(DIALECTS)
    assert steered.finished >= 0.6 * steered.runs, steered.counts()
    assert steered.precomputed_steps > 500  # the raw-text rows were walked through
    assert steered.cached_steps > 500  # and cached masks were compared with llguidance's


TIME = {
    "type": "function",
    "function": {"name": "get_time", "parameters": {"type": "object", "properties": {"zone": {"type": "string"}}}},
}


def format_tool() -> dict:
    """Every format the grammar enforces whole as a required argument, and
    again nested (not hostname: its IDNA rules are checked after generation,
    a relaxation the compiler reports; tests/test_formats.py)."""
    exact = sorted(set(SUPPORTED_FORMATS) - set(CHECKED_AFTER_GENERATION))
    props = {name.replace("-", "_"): {"type": "string", "format": name} for name in exact}
    nested = {"type": "object", "properties": props, "required": sorted(props)}
    parameters = {"type": "object", "properties": {**props, "nested": nested}, "required": [*sorted(props), "nested"]}
    return {"name": "formats", "parameters": parameters}


@pytest.mark.parametrize("dialect", sorted(DIALECTS))
def test_walks_through_every_format_finish_valid(dialect):
    """The format patterns are large (IRIs: every plane's characters); walks
    through them at both depths never wedge, and what finishes validates
    (the parser checks formats with the same patterns). One call, no
    reasoning: the walks are about the formats, and the budget leaves room
    for DeepSeek's vocabulary, whose digits and DSML tags take more tokens."""
    compiled = compile_tools([format_tool()], dialect, DIALECTS[dialect].default_tokenizer, tool_choice="required",
                             parallel_tool_calls=False, reasoning=False)
    summary = FuzzSummary(keep=3)
    summary.merge(fuzz(compiled, 4, zlib.crc32(dialect.encode()), WalkOptions(budget=4000, crosscheck_every=4)))
    assert summary.ok, [run.to_json() for run in summary.failures]
    assert summary.finished >= 1, summary.counts()


def weather(dialect: str = "gemma4", **options):
    options.setdefault("tool_choice", "required")
    return compile_tools([WEATHER, TIME], dialect, DIALECTS[dialect].default_tokenizer, **options)


def test_walks_are_reproducible_and_finish_valid():
    compiled = weather("qwen3_coder")
    first, again = walk(compiled, 3), walk(compiled, 3)
    assert first.tokens == again.tokens and first.outcome is Outcome.FINISHED and first.valid
    assert first.parsed is not None and first.parsed.tool_calls
    assert "--seed 3 --runs 1" in first.replay_options()


def test_a_mask_that_allows_nothing_is_a_wedge(monkeypatch):
    fill = ToolCallConstraint.fill_masks

    def nothing_after_three(self):
        fill(self)
        if self.held(0) >= 3:
            self.buffers().host_words[0].fill(0)

    monkeypatch.setattr(ToolCallConstraint, "fill_masks", nothing_after_three)
    run = walk(weather(), 0)
    assert run.outcome is Outcome.WEDGE and run.failed
    assert len(run.tokens) == 3 and "no token allowed after 3 tokens" in run.detail


def test_a_mask_that_differs_from_llguidance_is_an_error_when_cross_checked(monkeypatch):
    fill = ToolCallConstraint.fill_masks

    def one_extra_token(self):
        fill(self)
        self.buffers().host_words[0][0] |= np.uint32(1)  # token 0 (<pad>), never allowed by the grammar

    monkeypatch.setattr(ToolCallConstraint, "fill_masks", one_extra_token)
    run = walk(weather(), 0, WalkOptions(crosscheck_every=1))
    assert run.outcome is Outcome.ERROR and "differs from llguidance" in run.detail
    assert "(0, b'<pad>', True)" in run.detail


def cache_edges(compiled, closing: bool):
    """The cached masks of ``compiled``: (label, node) over every edge,
    only those reached by a raw value's closing when ``closing``."""
    found, nodes = [], [compiled._masks.root]
    while nodes:
        node = nodes.pop()
        for label, child in node.children.items():
            nodes.append(child)
            if child.mask is not None and (label < 0 or not closing):
                found.append((label, child))
    return found


@pytest.mark.parametrize("dialect", sorted(DIALECTS))
def test_cached_masks_equal_llguidance_in_every_dialect(dialect):
    """Walks with other seeds write other values through the same markup:
    every mask, the cached ones included, is compared with llguidance's.
    In the raw-value dialects the masks after a closed value are shared
    across values."""
    compiled = compile_tools([WEATHER, TIME], dialect, DIALECTS[dialect].default_tokenizer, tool_choice="required",
                             key_order="schema", parallel_tool_calls=False)
    object.__setattr__(compiled, "_masks", None)  # a cache of its own, whatever ran before
    summary = fuzz(compiled, 6, zlib.crc32(dialect.encode()), WalkOptions(budget=200, crosscheck_every=1))
    assert summary.ok, [run.to_json() for run in summary.failures]
    assert summary.cached_steps > 5, summary.counts() | {"cached": summary.cached_steps}
    if dialect in ("qwen3_coder", "glm45", "glm47"):
        assert cache_edges(compiled, closing=True)


TYPED = {
    "type": "function",
    "function": {
        "name": "book",
        "parameters": {
            "type": "object",
            "properties": {
                "nights": {"type": "integer", "minimum": 1},
                "budget": {"type": "number"},
                "room": {"enum": ["single", "double", "suite"]},
                "breakfast": {"type": "boolean"},
                "guests": {"type": "array", "items": {"type": "integer"}, "maxItems": 3},
                "note": {"type": "string"},
            },
            "required": ["nights", "room"],
        },
    },
}
"""Typed top-level values of one argument object: once closed, each leaves
no trace on what follows."""

PICK = {
    "type": "function",
    "function": {
        "name": "pick",
        "parameters": {
            "anyOf": [
                {"type": "object", "properties": {"kind": {"const": "size"}, "size": {"type": "integer"}},
                 "required": ["kind", "size"], "additionalProperties": False},
                {"type": "object", "properties": {"kind": {"const": "name"}, "name": {"type": "string"}},
                 "required": ["kind", "name"], "additionalProperties": False},
            ]
        },
    },
}
"""Two parameter sets told apart by a value: what may follow ``kind``
depends on its text."""


def member_closings(compiled) -> int:
    """Edges labelled by a value's closing token under a member's node (the
    value of one key, whichever keys came before it in the call)."""
    found, nodes = 0, [compiled._masks.root]
    while nodes:
        node = nodes.pop()
        for label, child in node.children.items():
            nodes.append(child)
            if NAMED_LABELS <= label < OPENED_CALL:
                found += sum(closing < 0 for closing in child.children)
    return found


@pytest.mark.parametrize("dialect", ["qwen3_coder", "glm45", "glm47", "gemma4", "functiongemma"])
def test_masks_after_typed_values_are_shared_and_equal_llguidance(dialect):
    """Walks write other numbers, enums, booleans and arrays, and other
    optional keys, through the same markup; every mask, the ones found after
    a value by its key and closing token included, is compared with
    llguidance's."""
    compiled = compile_tools([TYPED], dialect, DIALECTS[dialect].default_tokenizer, tool_choice="required",
                             key_order="schema", parallel_tool_calls=False, reasoning=False)
    object.__setattr__(compiled, "_masks", None)
    summary = fuzz(compiled, 8, zlib.crc32(dialect.encode()) + 1, WalkOptions(budget=160, crosscheck_every=1))
    assert summary.ok, [run.to_json() for run in summary.failures]
    assert summary.finished >= 4, summary.counts()
    assert member_closings(compiled)


def steps_from_llguidance(compiled, call: dict | list[dict]) -> list[int]:
    """For each token of ``call`` (rendered; or of several calls), whether
    llguidance computed its mask (1) or the cache, a precomputed row or a
    forced run gave it (0); every mask is checked against a fresh llguidance
    matcher."""
    tok = compiled.tokenizer
    calls = call if isinstance(call, list) else [call]
    ids = tok.encode(render_tool_calls(calls, compiled.tools, compiled.dialect, key_order="schema"))
    constraint, reference = ToolCallConstraint(compiled), compiled.matcher()
    constraint.prepare(torch.zeros(1, tok.vocab_size))
    words = np.zeros((tok.vocab_size + 31) // 32, dtype=np.uint32)
    computed = []
    for token in ids:
        misses = compiled._masks.misses
        known = constraint.precomputed_rows + constraint.cached_rows + constraint.forced_rows
        constraint.fill_masks()
        computed.append(int(constraint.precomputed_rows + constraint.cached_rows + constraint.forced_rows == known))
        reference.unsafe_compute_mask_ptr(words.ctypes.data, words.nbytes)
        assert np.array_equal(constraint.allowed_words(0), words), tok.decode(ids[: len(computed)])
        assert compiled._masks.misses >= misses
        constraint.consume([token])
        assert reference.consume_token(token)
    assert not constraint.events
    return computed


def test_a_call_with_other_typed_values_finds_the_markup_after_each_value_cached():
    compiled = compile_tools([TYPED], "qwen3_coder", "qwen3", tool_choice="required", key_order="schema")
    object.__setattr__(compiled, "_masks", None)
    first = {"nights": 2, "budget": 80.5, "room": "single", "breakfast": True, "note": "late"}
    second = {"nights": 14, "budget": 120, "room": "suite", "breakfast": False, "note": "quiet, please"}
    steps_from_llguidance(compiled, {"name": "book", "arguments": first})
    computed = steps_from_llguidance(compiled, {"name": "book", "arguments": second})
    # llguidance is asked only inside the values new to the cache (the digits
    # of 14 and 120, the enum's and the boolean's text); never at the markup
    # after a value, nor at the next key or the end of the call.
    tok = compiled.tokenizer
    ids = tok.encode(render_tool_calls([{"name": "book", "arguments": second}], compiled.tools, "qwen3_coder",
                                       key_order="schema"))
    asked = [tok.decode(ids[: index]).rsplit("\n", 2)[-2:] for index, flag in enumerate(computed) if flag]
    assert asked and all(line[0].startswith("<parameter=") for line in asked), asked


@pytest.mark.parametrize("dialect", ["qwen3_coder", "gemma4", "hermes"])
def test_every_call_of_an_output_meets_the_masks_of_the_tool_s_first_call(dialect):
    """After a call's opening token the grammar stands where it stands in
    every call, and after its closing token where it stands after every
    call: a second output that calls the same tools in the other order is
    masked from the cache up to the values' text, every mask llguidance's."""
    compiled = unwarmed_cache(compile_tools([WEATHER, TIME], dialect, DIALECTS[dialect].default_tokenizer,
                                            tool_choice="required", key_order="schema"))
    weather_call = {"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}
    time_call = {"name": "get_time", "arguments": {"zone": "UTC"}}
    first = steps_from_llguidance(compiled, [weather_call, time_call])
    second = steps_from_llguidance(compiled, [time_call, weather_call])
    assert sum(second) <= 1 < sum(first), (sum(first), sum(second))


@pytest.mark.parametrize("dialect", ["qwen3_coder", "gemma4", "hermes"])
def test_a_tool_set_s_first_constraint_warms_its_cache_once(dialect, monkeypatch):
    """A loop of one's own gets the warm-up without asking: the first
    constraint of a tool set walks the example calls before its first
    mask, so the first call finds the opening and each tool's name cached
    (llguidance's masks, checked step by step); later constraints, and
    warm_mask_cache after them, walk nothing again."""
    compiled = compile_tools([WEATHER, TIME], dialect, DIALECTS[dialect].default_tokenizer, tool_choice="required",
                             key_order="schema")
    object.__setattr__(compiled, "_masks", None)
    computed = steps_from_llguidance(compiled, {"name": "get_time", "arguments": {"zone": "Asia/Tokyo"}})
    assert not any(computed[:4]), computed
    assert compiled._masks.rows > 0
    walks = []
    monkeypatch.setattr(constraint_module, "walk_warm_up", walks.append)
    monkeypatch.setattr(warm_up_module, "walk_warm_up", walks.append)
    ToolCallConstraint(compiled)
    warm_mask_cache(compiled)
    assert walks == []


def test_a_constraint_without_the_cache_warms_nothing(monkeypatch):
    compiled = compile_tools([WEATHER], "qwen3_coder", "qwen3", tool_choice="required")
    object.__setattr__(compiled, "_masks", None)
    walks = []
    monkeypatch.setattr(constraint_module, "walk_warm_up", walks.append)
    monkeypatch.setattr(warm_up_module, "walk_warm_up", walks.append)
    ToolCallConstraint(compiled, cache_masks=False)
    assert walks == [] and compiled._masks is None
    ToolCallConstraint(compiled)
    assert walks == [compiled]


GAUGE = {"type": "function", "function": {"name": "gauge", "parameters": {
    "type": "object", "properties": {"site": {"type": "string"}, "level": {"type": "number"},
                                     "reads": {"type": "array", "items": {"type": "number"}}, "live": {"type": "boolean"}},
    "required": ["site"]}}}


@pytest.mark.parametrize("dialect", ["gemma4", "functiongemma"])
@pytest.mark.parametrize("arguments", [
    {"site": "Oslo"},  # the arguments close after another member than in the warm-up's calls
    {"site": "Oslo", "level": -2.5},  # the key's ':' and the minus in one token
    {"site": "Oslo", "level": 13.25, "reads": [40.5, 7.25], "live": True},
    {"site": "Oslo", "level": -0.125, "reads": [2.5, 10], "live": True},
    {"site": "Oslo", "level": 7},
])
def test_gemma_calls_after_the_warm_up_find_every_mask_outside_strings_cached(dialect, arguments):
    """In Gemma's syntax the grammar stands in one place once a call's
    arguments are closed, whichever members came before, and a number's
    masks depend on its member and the state of its text, whether or not
    the key's ``:`` came in the number's first token: after the warm-up
    (plain, fractional and negative numbers), calls that leave the last
    members out or write other numbers ask llguidance nothing, not even
    for the tokens it forces."""
    compiled = compile_tools([GAUGE], dialect, DIALECTS[dialect].default_tokenizer, tool_choice="required",
                             key_order="schema")
    object.__setattr__(compiled, "_masks", None)
    warm_mask_cache(compiled)
    kept = compiled._masks.misses  # masks kept, forced tokens included
    computed = steps_from_llguidance(compiled, {"name": "gauge", "arguments": arguments})
    assert not any(computed) and compiled._masks.misses == kept, computed


STATION = {"type": "function", "function": {"name": "station", "parameters": {
    "type": "object", "properties": {
        "site": {"type": "string"}, "reads": {"type": "array", "items": {"type": "number"}},
        "count": {"type": "integer"}, "live": {"type": "boolean"},
        "services": {"type": "array", "items": {"enum": ["Violin Lessons", "Home Delivery", "Guitar Repair"]}},
        "tags": {"anyOf": [{"type": "null"}, {"type": "array", "items": {"type": "string"}}]}, "extra": {}},
    "required": ["site"]}}}


@pytest.mark.parametrize("arguments", [
    {"site": "Oslo", "reads": [2.5, -7.25]},  # ':[' then ',-', where the warm-up wrote ':' then '[-'
    {"site": "Oslo", "services": ["Home Delivery", "Guitar Repair"]},  # an enum in an array
    {"site": "Oslo", "count": 0, "live": False},
    {"site": "Oslo", "reads": [], "count": 2},
    {"site": "Oslo", "tags": ["a", "b"]},  # a union's second option
    {"site": "Oslo", "extra": ["a", "b"]},  # a value of any type, an array
])
def test_gemma_calls_after_the_warm_up_find_values_of_every_shape_cached(arguments):
    """The warm-up's calls write every enum at each of its values, nested
    ones too, booleans false, integers 0, arrays empty, unions' other
    options and values of any type of other types, and each optional key
    alone after the required ones; and a JSON value's masks hang off its
    member, however the token that opened it fell. Calls of those shapes
    then ask llguidance nothing, not even for forced tokens."""
    compiled = compile_tools([STATION], "gemma4", "gemma4", tool_choice="required", key_order="schema")
    object.__setattr__(compiled, "_masks", None)
    warm_mask_cache(compiled)
    kept = compiled._masks.misses
    computed = steps_from_llguidance(compiled, {"name": "station", "arguments": arguments})
    assert not any(computed) and compiled._masks.misses == kept, computed


NOTE = {"type": "function", "function": {"name": "note", "parameters": {
    "type": "object", "properties": {"title": {"type": "string"}, "extra": {}, "count": {"type": "integer"},
                                     "tag": {"type": "string"}, "pinned": {"type": "boolean"}},
    "required": ["title", "extra", "count", "tag", "pinned"]}}}


@pytest.mark.parametrize("dialect", ["gemma4", "functiongemma"])
def test_the_markup_after_a_value_is_shared_whatever_token_ended_it(dialect):
    """Where members come in a fixed order, the masks of the markup after a
    value are keyed by its member and the markup's text since, so a call
    whose untyped value is a literal (ended by the ``,`` token) where the
    warm-up wrote a string (ended by its delimiter) meets the warm-up's
    masks again from the next key on."""
    compiled = compile_tools([NOTE], dialect, DIALECTS[dialect].default_tokenizer, tool_choice="required",
                             key_order="schema")
    object.__setattr__(compiled, "_masks", None)
    warm_mask_cache(compiled)
    kept = compiled._masks.misses
    call = {"name": "note", "arguments": {"title": "a", "extra": True, "count": 3, "tag": "b", "pinned": True}}
    computed = steps_from_llguidance(compiled, call)
    assert not any(computed), computed
    assert compiled._masks.misses - kept <= 1  # the mask after the literal's closing ``,``


SCULPTURE = [
    {"type": "function", "function": {"name": "sculptor", "parameters": {
        "type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}}},
    {"type": "function", "function": {"name": "sculpture_price", "parameters": {
        "type": "object", "properties": {"material": {"type": "string"}, "size": {"type": "integer"},
                                         "finish": {"enum": ["matte", "polished"]}},
        "required": ["material", "size"]}}},
]
"""Two tools whose first string values sit where llguidance's parser rows
coincide: one ends its arguments, the other needs a key after it."""


@pytest.mark.parametrize("dialect", ["qwen3_coder", "gemma4", "hermes"])
def test_a_warmed_cache_gives_each_tool_s_calls_llguidance_s_masks(dialect):
    """warm_mask_cache walks one example call per tool (rolling back between
    them); calls with other values then find the masks it left, each equal
    to a fresh matcher's. In the raw-value dialect llguidance is asked only
    inside the values; Gemma writes numbers, booleans and arrays in its
    markup, so there the masks after them are keyed by them."""
    compiled = compile_tools([*SCULPTURE, TYPED], dialect, DIALECTS[dialect].default_tokenizer,
                             tool_choice="required", key_order="schema", reasoning=False)
    object.__setattr__(compiled, "_masks", None)
    warm_mask_cache(compiled)
    calls = [
        {"name": "sculptor", "arguments": {"name": "Rodin"}},
        {"name": "sculpture_price", "arguments": {"material": "bronze", "size": 12, "finish": "matte"}},
        {"name": "book", "arguments": {"nights": 3, "budget": 99.5, "room": "double", "breakfast": False,
                                       "guests": [2], "note": "by the sea"}},
        {"name": "book", "arguments": {"nights": 5, "room": "suite", "note": "late"}},  # optional keys left out
        {"name": "sculpture_price", "arguments": {"material": "oak", "size": 3}},
    ]
    for call in calls:
        computed = steps_from_llguidance(compiled, call)
        assert not any(computed[:4]), (call["name"], computed)  # the call's opening and name: warmed
        if dialect == "qwen3_coder":
            tok = compiled.tokenizer
            ids = tok.encode(render_tool_calls([call], compiled.tools, dialect, key_order="schema"))
            asked = [tok.decode(ids[:index]).rsplit("\n", 2)[-2:] for index, flag in enumerate(computed) if flag]
            assert [] not in asked and ["</parameter>", ""] not in asked, asked  # never right after a value
            tool = next(tool for tool in compiled.tools if tool.name == call["name"])
            if call["arguments"].keys() == example_arguments(tool).keys():
                # the example's keys: llguidance is asked only inside the values
                assert all(line[0].startswith("<parameter=") for line in asked), asked


@pytest.mark.parametrize(("dialect", "opening"), [("qwen3_coder", "<parameter=n>\n"), ("gemma4", "{n:")])
def test_a_number_s_masks_are_kept_per_state_of_its_text(dialect, opening):
    """Inside a number of any value, the mask after ``7`` serves every run
    of digits (one node per state of the number's text; in Gemma the number
    is written in the markup): a second call's thirty-digit integer asks
    llguidance at none of its digits, and every mask equals a fresh
    matcher's."""
    plain = {"type": "function", "function": {"name": "measure", "parameters": {
        "type": "object", "properties": {"n": {"type": "integer"}, "x": {"type": "number"}}, "required": ["n", "x"]}}}
    compiled = compile_tools([plain], dialect, DIALECTS[dialect].default_tokenizer, tool_choice="required",
                             key_order="schema", reasoning=False)
    object.__setattr__(compiled, "_masks", None)
    steps_from_llguidance(compiled, {"name": "measure", "arguments": {"n": 7, "x": 1.5}})
    long = 123456789012345678901234567890
    computed = steps_from_llguidance(compiled, {"name": "measure", "arguments": {"n": long, "x": -0.25e-3}})
    tok = compiled.tokenizer
    ids = tok.encode(render_tool_calls([{"name": "measure", "arguments": {"n": long, "x": -0.25e-3}}], compiled.tools,
                                       dialect, key_order="schema"))
    after_digits = [index for index in range(len(ids)) if tok.decode(ids[:index]).partition(opening)[2].isdigit()]
    assert len(after_digits) >= 29 and not any(computed[index] for index in after_digits), computed
    assert sum(computed) <= 8, computed  # the new states of -0.00025 (sign, zero, exponent) and its closing


@pytest.mark.parametrize("dialect", ["qwen3_coder", "gemma4"])
def test_keys_in_any_order_keep_the_keys_written_in_the_key(dialect):
    """With ``key_order="any"`` what may follow a value depends on every key
    written before it, so no node is shared by key; walks over TYPED's
    optional keys see llguidance's masks at every step."""
    compiled = compile_tools([TYPED], dialect, DIALECTS[dialect].default_tokenizer, tool_choice="required",
                             key_order="any", parallel_tool_calls=False, reasoning=False)
    object.__setattr__(compiled, "_masks", None)
    summary = fuzz(compiled, 8, zlib.crc32(dialect.encode()) + 2, WalkOptions(budget=160, crosscheck_every=1))
    assert summary.ok, [run.to_json() for run in summary.failures]
    assert summary.finished >= 4 and not member_closings(compiled)


SURVEY = {
    "type": "function",
    "function": {
        "name": "survey",
        "parameters": {
            "type": "object",
            "properties": {
                "tags": {"type": "array", "items": {"type": "string"}},
                "scores": {"type": "array", "items": {"type": "number"}, "maxItems": 4},
                "meta": {
                    "type": "object",
                    "properties": {
                        "title": {"type": "string"},
                        "rank": {"type": "integer"},
                        "code": {"type": "string", "pattern": "^[A-Z]+$"},
                        "level": {"enum": ["lo", "hi"]},
                        "note": {"type": ["string", "null"]},
                        "short": {"type": "string", "maxLength": 3},
                    },
                    "required": ["title"],
                },
                "limits": {"type": "object", "additionalProperties": {"type": "integer"}},
                "extra": {},
            },
            "required": ["tags", "meta"],
        },
    },
}
"""JSON values whose leaves are free (strings and numbers no keyword
constrains, any JSON) beside constrained ones (a pattern, a length, an
enum, a key that picks the frame)."""

JSON_LEAF_DIALECTS = ["hermes", "qwen3_coder", "gemma4", "functiongemma"]
"""The dialects whose values the walk follows: JSON whose strings keep no
text out (glm's keep its closing), and Gemma's syntax."""


def leaf_edges(compiled) -> int:
    """Edges labelled by a free leaf's state in the cache."""
    found, nodes = 0, [compiled._masks.root]
    while nodes:
        node = nodes.pop()
        nodes.extend(node.children.values())
        found += sum(LEAF_LABELS <= label < NAMED_LABELS for label in node.children)
    return found


@pytest.mark.parametrize("dialect", JSON_LEAF_DIALECTS)
def test_free_json_leaves_are_keyed_by_state_and_equal_llguidance(dialect):
    """Walks write free strings (escapes, any characters) and numbers of
    any text inside nested JSON, with rollbacks: every mask, the ones found
    by a leaf's state included, is llguidance's."""
    compiled = compile_tools([SURVEY], dialect, DIALECTS[dialect].default_tokenizer, tool_choice="required",
                             key_order="schema", parallel_tool_calls=False)
    object.__setattr__(compiled, "_masks", None)
    summary = fuzz(compiled, 2, zlib.crc32(dialect.encode()) + 3, WalkOptions(budget=200, crosscheck_every=1))
    assert leaf_edges(compiled)  # (more walks may fill the cache, which then starts over)
    summary.merge(fuzz(compiled, 8, zlib.crc32(dialect.encode()) + 4, WalkOptions(budget=200, crosscheck_every=1,
                                                                                  rollback=True)))
    summary.merge(fuzz(compiled, 3, zlib.crc32(dialect.encode()) + 5, WalkOptions("uniform", budget=120,
                                                                                  crosscheck_every=1)))
    assert summary.ok, [run.to_json() for run in summary.failures]
    assert summary.finished >= 3, summary.counts()


@pytest.mark.parametrize("dialect", JSON_LEAF_DIALECTS)
def test_a_call_with_other_free_leaves_asks_llguidance_only_where_their_text_is_constrained(dialect):
    """A second call writes other text in every leaf (longer strings, other
    numbers, an escape, another string of a pattern, other keys of a map)
    and more items and members: inside the free leaves every mask comes
    from the cache, and after every leaf and every comma, however the text
    was cut into tokens. llguidance is asked only for the number state the
    first call did not reach (after a leading ``0``), inside the pattern's
    string and where an array goes on past the first call's last item."""
    compiled = compile_tools([SURVEY], dialect, DIALECTS[dialect].default_tokenizer, tool_choice="required",
                             key_order="schema", parallel_tool_calls=False)
    object.__setattr__(compiled, "_masks", None)
    first = {"tags": ["red", "blue"], "scores": [1.5, 20], "meta": {"title": "Spring", "rank": 3, "code": "AB"},
             "limits": {"cpu": 2, "disk": 8}, "extra": {"k": [1, "v"]}}
    second = {"tags": ["a much longer tag, with a comma", "another one entirely", "and a third"],
              "scores": [0.25, 7], "meta": {"title": "Autumn \"reading\" list of the year", "rank": 41, "code": "XYZ"},
              "limits": {"memory": 16, "threads": 4, "files": 1024}, "extra": {"key": [27, "other", "words"]}}
    steps_from_llguidance(compiled, {"name": "survey", "arguments": first})
    computed = steps_from_llguidance(compiled, {"name": "survey", "arguments": second})
    assert 0 < sum(computed) <= 3, sum(computed)
    assert leaf_edges(compiled)


def test_a_value_that_picks_a_parameter_set_is_not_shared():
    """After ``kind``, what may follow depends on its text: a second call
    that takes the other parameter set is accepted, every mask llguidance's."""
    compiled = compile_tools([PICK], "qwen3_coder", "qwen3", tool_choice="required", key_order="schema")
    object.__setattr__(compiled, "_masks", None)
    steps_from_llguidance(compiled, {"name": "pick", "arguments": {"kind": "size", "size": 3}})
    steps_from_llguidance(compiled, {"name": "pick", "arguments": {"kind": "name", "name": "x"}})
    assert not member_closings(compiled)


@pytest.mark.parametrize("dialect", sorted(DIALECTS))
@pytest.mark.parametrize("choice", ["auto", "required"])
def test_a_warmed_mask_cache_holds_llguidance_s_trunk(dialect, choice):
    """warm_mask_cache keeps the tokens llguidance forces from the start and
    its mask at the first choice, and walks from the warmed cache see
    llguidance's masks at every step."""
    compiled = weather(dialect, tool_choice=choice, key_order="schema", parallel_tool_calls=False)
    object.__setattr__(compiled, "_masks", None)
    warm_mask_cache(compiled)
    reference = compiled.matcher()
    forced = reference.compute_ff_tokens()
    marks = call_marks(compiled)  # a call's opening token leads to one node from the root
    node, held = compiled._masks.root, []
    while isinstance(node.mask, int):
        held.append(node.mask)
        node = compiled._masks.root.children[marks[node.mask]] if node.mask in marks else node.children[node.mask]
    assert held == forced
    reference.consume_tokens(forced)
    if node.mask is None:  # the run opened a value of any text: its masks are precomputed rows
        assert forced and not node.children
    else:
        words, kept = np.zeros((2, (compiled.tokenizer.vocab_size + 31) // 32), dtype=np.uint32)
        reference.unsafe_compute_mask_ptr(words.ctypes.data, words.nbytes)
        compiled._masks.write(node, kept)
        assert np.array_equal(kept, words) and np.unpackbits(words.view(np.uint8)).sum() > 1
    summary = fuzz(compiled, 4, zlib.crc32(dialect.encode()), WalkOptions(budget=200, crosscheck_every=1))
    assert summary.ok, [run.to_json() for run in summary.failures]


def test_a_wrong_bit_in_a_cached_mask_is_found_by_the_cross_check():
    compiled = weather("qwen3_coder")
    object.__setattr__(compiled, "_masks", None)
    assert not walk(compiled, 0, WalkOptions(crosscheck_every=1)).failed
    label, node = next((label, node) for label, node in cache_edges(compiled, closing=False) if isinstance(node.mask, int))
    node.mask += 1  # the forced token's neighbour instead
    run = walk(compiled, 0, WalkOptions(crosscheck_every=1))
    assert run.outcome is Outcome.ERROR and "differs from llguidance" in run.detail


def test_a_token_the_constraint_refuses_is_an_error(monkeypatch):
    fill = ToolCallConstraint.fill_masks

    def only_pad(self):
        fill(self)
        words = self.buffers().host_words[0]
        words.fill(0)
        words[0] = np.uint32(1)  # token 0 (<pad>) only

    monkeypatch.setattr(ToolCallConstraint, "fill_masks", only_pad)
    run = walk(weather(), 0)
    assert run.outcome is Outcome.ERROR and "refused a sampled token its own mask allowed" in run.detail


def test_an_exception_is_an_error_outcome_not_a_crash(monkeypatch):
    def broken(self, token_ids):
        raise RuntimeError("boom")

    monkeypatch.setattr(ToolCallConstraint, "consume", broken)
    run = walk(weather(), 0)
    assert run.outcome is Outcome.ERROR and "RuntimeError: boom" in run.detail


def test_an_invalid_finished_output_is_reported_invalid():
    """A look-ahead pattern has no exact translation, so the grammar relaxes
    it (with a warning) and walks write strings the schema rejects."""
    tool = {"name": "f", "parameters": {"type": "object", "properties": {"code": {"type": "string", "pattern": "^(?=z{40})"}},
                                          "required": ["code"]}}
    compiled = compile_tools([tool], "gemma4", "gemma4", tool_choice="required")
    assert compiled.warnings
    summary = fuzz(compiled, 8)
    assert summary.finished >= 4 and summary.valid == 0 and not summary.ok
    assert all("does not match the pattern '^(?=z{40})'" in " ".join(run.problems) for run in summary.failures)


def calls_text(dialect: str, *calls: tuple[str, dict]) -> str:
    return "\n".join(render_tool_calls([{"name": n, "arguments": a}], [WEATHER, TIME], dialect) for n, a in calls)


@pytest.mark.parametrize(
    "options, calls, problem",
    [
        ({"tool_choice": "none"}, [("get_time", {})], 'tool_choice "none" but 1 call'),
        ({"tool_choice": "get_weather"}, [("get_time", {})], "tool_choice 'get_weather' but calls of get_time"),
        ({"tool_choice": "required"}, [], "tool_choice 'required' but no call"),
        ({"parallel_tool_calls": False}, [("get_time", {}), ("get_time", {})], "parallel_tool_calls=False but 2 calls"),
        ({"tool_choice": "auto"}, [("get_weather", {})], "rejected: missing required parameter(s) 'city'"),
    ],
)
def test_output_problems(options, calls, problem):
    compiled = weather("hermes", **options)
    text = calls_text("hermes", *calls) if calls else "Hello."
    tokens = compiled.tokenizer.encode(text)
    problems = output_problems(compiled, tokens, text, parse_tool_calls(text, [WEATHER, TIME], "hermes"))
    assert any(problem in p for p in problems), problems


def test_a_call_marker_the_parser_does_not_read_is_a_problem():
    compiled = weather("hermes", tool_choice="auto")
    text = calls_text("hermes", ("get_time", {}))
    tokens = compiled.tokenizer.encode(text) * 2  # two markers, one parsed call
    problems = output_problems(compiled, tokens, text, parse_tool_calls(text, [WEATHER, TIME], "hermes"))
    assert problems == ["2 call marker(s) and 0 call(s) opened as text, but 1 call(s) and 0 rejected"]


def test_a_call_opened_as_text_counts_as_a_marker():
    """qwen3_coder under auto reads a bare <function= block as a call: it has
    no marker token, and is no problem; a marker left unread still is."""
    compiled = weather("qwen3_coder", tool_choice="auto")
    bare = "Checking.\n<function=get_time>\n</function>\n"
    text = bare + calls_text("qwen3_coder", ("get_time", {}))
    tokens = compiled.tokenizer.encode(text)
    assert output_problems(compiled, tokens, text, parse_tool_calls(text, [WEATHER, TIME], "qwen3_coder")) == []
    unread = compiled.tokenizer.encode(calls_text("qwen3_coder", ("get_time", {}))) + tokens
    assert output_problems(compiled, unread, text, parse_tool_calls(text, [WEATHER, TIME], "qwen3_coder")) == [
        "2 call marker(s) and 1 call(s) opened as text, but 2 call(s) and 0 rejected"
    ]


def test_uniform_sampler_draws_every_allowed_token_and_reports_none():
    vocab = 1000
    words = np.zeros((vocab + 31) // 32, dtype=np.uint32)
    sampler, rng = UniformSampler(vocab), np.random.default_rng(0)
    assert sampler.choose(words, rng) is None
    for token in (3, 500, 999):
        words[token >> 5] |= np.uint32(1 << (token & 31))
    assert allowed_ids(words, vocab).tolist() == [3, 500, 999]
    counts = {3: 0, 500: 0, 999: 0}
    for _ in range(600):
        counts[sampler.choose(words, rng)] += 1
    assert all(150 < count < 250 for count in counts.values()), counts
    words[:] = np.uint32(0xFFFFFFFF)  # bits past the vocabulary are never drawn
    assert max(allowed_ids(words, vocab)) == vocab - 1


def test_grammar_literals_skip_regexes_json_and_comments():
    grammar = "\n".join(
        [
            "// a comment with \"quoted\" text",
            'call: <tool_call> "\\n{\\"name\\": " tool_body "}\\n" </tool_call>',
            'KEY: /[^"\\\\]+/ "after"',
            'json_value: %json {"type": "string", "enum": ["}"]} "tail"',
            'gemma_string: <|"|> GEMMA_TEXT? <|"|> "end"',
        ]
    )
    assert grammar_literals(grammar) == ['\n{"name": ', "}\n", "after", "tail", "end"]


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "constrained", "fuzz", *args], capture_output=True, text=True,
                          timeout=300)


@pytest.mark.slow
def test_cli_prints_a_summary_and_fails_on_invalid_output(tmp_path):
    good = tmp_path / "weather.json"
    good.write_text(json.dumps([WEATHER, TIME]))
    result = run_cli(str(good), "--dialect", "glm47", "--tool-choice", "required", "--runs", "5", "--crosscheck", "3")
    assert result.returncode == 0, result.stdout + result.stderr
    summary = json.loads(result.stdout)
    assert summary["runs"] == 5 and summary["finished"] == summary["valid"] >= 3
    assert summary["dialects"]["glm47"]["runs"] == 5 and summary["failures"] == []

    bad = tmp_path / "pattern.json"
    bad.write_text(json.dumps([{"name": "f", "parameters": {"type": "object", "properties": {
        "code": {"type": "string", "pattern": "^(?=z{40})"}}, "required": ["code"]}}]))
    result = run_cli(str(bad), "--runs", "3", "--tool-choice", "f", "--budget", "64", "--show", "1")
    assert result.returncode == 1
    summary = json.loads(result.stdout)
    assert summary["runs"] == 3 * len(DIALECTS) and set(summary["dialects"]) == set(DIALECTS) and summary["invalid"] >= 1
    [failure] = summary["failures"]
    assert failure["problems"] and "--tool-choice f" in failure["replay"]


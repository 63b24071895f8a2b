"""Adversarial schemas and inputs: every case ends in a clear outcome.

Each case runs in a forked child under an address-space cap and a hang guard
(:func:`bounded`), so a hang, a memory blow-up or a crash fails the test
instead of wedging the run; the child sends back a small outcome. A case
either compiles, a valid call round-trips (rendered, accepted by the
constraint, parsed back to the same arguments) and an invalid one is refused
(by the constraint, or by the parser where the compiler reported a
relaxation), or it raises a specific error from ``constrained.errors`` whose
message names the tool, the place and why.
"""

from __future__ import annotations

import faulthandler
import functools
import json
import multiprocessing
import resource
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import pytest
from sample_tools import RAW_DIALECTS

from constrained.compiler import compile_tools
from constrained.dialects import DIALECTS
from constrained.errors import (
    CompileError,
    SchemaError,
    SchemaLimitError,
    ToolDefinitionError,
    UnsatisfiableSchemaError,
)
from constrained.frames.toolset import normalize_tools
from constrained.output.parse import parse_tool_calls
from constrained.output.render import render_tool_calls
from constrained.schema.limits import MAX_DEPTH, MAX_NESTING, MAX_PROPERTIES
from constrained.tokenizers import Tokenizer, load_tokenizer
from constrained.tools import Tool

ALL_DIALECTS = tuple(DIALECTS)
HANG_GUARD_S = 60
MEMORY_HEADROOM = 4 << 30
"""Bytes of address space a child may add to what it inherits."""


# -- running a case in a bounded child ---------------------------------------------


@dataclass(frozen=True)
class Raised:
    """An exception a child raised: its class and message."""

    kind: type
    message: str


def bounded(case: Callable[..., Any], *args: Any) -> Any:
    """``case(*args)`` in a forked child under the memory cap and the hang
    guard: what it returns, or :class:`Raised`."""
    context = multiprocessing.get_context("fork")
    receive, send = context.Pipe(duplex=False)
    child = context.Process(target=_child, args=(send, case, args))
    child.start()
    send.close()
    try:
        if not receive.poll(HANG_GUARD_S):
            pytest.fail(f"{case.__name__}: no outcome within {HANG_GUARD_S} s")
        return receive.recv()
    except EOFError:
        child.join()
        pytest.fail(f"{case.__name__}: the child died (exit code {child.exitcode}) without an outcome")
    finally:
        child.kill()
        child.join()
        receive.close()


def _child(send: Any, case: Callable[..., Any], args: tuple[Any, ...]) -> None:
    faulthandler.disable()  # a crash is reported by the parent, without the child's traceback dump
    with open("/proc/self/status") as status:
        size = next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmSize:"))
    resource.setrlimit(resource.RLIMIT_AS, (size + MEMORY_HEADROOM, size + MEMORY_HEADROOM))
    try:
        outcome = case(*args)
    except Exception as exc:
        outcome = Raised(type(exc), str(exc))
    send.send(outcome)


@pytest.fixture(scope="module", autouse=True)
def warm_tokenizers() -> None:
    """Warm every dialect's tokenizer in the parent, once, before any fork."""
    for dialect in ALL_DIALECTS:
        tokenizer(dialect)


@functools.cache
def tokenizer(dialect: str) -> Tokenizer:
    """The dialect's default tokenizer, warmed in the parent (one compile
    builds llguidance's per-vocabulary state) so children inherit it."""
    tok = load_tokenizer(DIALECTS[dialect].default_tokenizer)
    compile_tools([function("warm", {"a": {"type": "string"}})], dialect, tok)
    return tok


def function(name: str, properties: dict[str, Any], required: Sequence[str] = (), **extra: Any) -> dict[str, Any]:
    parameters = {"type": "object", "properties": properties, "required": list(required), **extra}
    return {"name": name, "parameters": parameters}


def raised(case: Callable[..., Any], *args: Any) -> Raised:
    """The error ``case`` raises in a bounded child."""
    outcome = bounded(case, *args)
    assert isinstance(outcome, Raised), f"expected an error, got {outcome!r:.300}"
    return outcome


def completed(case: Callable[..., Any], *args: Any) -> Any:
    """What ``case`` returns in a bounded child (an error fails the test)."""
    outcome = bounded(case, *args)
    assert not isinstance(outcome, Raised), f"{case.__name__} raised {outcome.kind.__name__}: {outcome.message:.500}"
    return outcome


def compile_in(dialect: str, tools: Any) -> str:
    """Compile in a child (call through :func:`raised` for the error)."""
    compile_tools(tools, dialect, tokenizer(dialect))
    return "compiled"


# -- round trips -----------------------------------------------------------------------

Call = tuple[str, dict[str, Any]]


@dataclass(frozen=True)
class Reading:
    """One call rendered in a dialect: whether the constraint accepted the
    text, and the arguments the parser read back (``None``: refused, why in
    ``errors``)."""

    accepted: bool
    arguments: dict[str, Any] | None
    errors: tuple[str, ...]


@dataclass(frozen=True)
class Trip:
    """A tool set in one dialect: its relaxations as (tool, keyword), and a
    reading of every valid and invalid call."""

    warnings: tuple[tuple[str, str], ...]
    valid: tuple[Reading, ...]
    invalid: tuple[Reading, ...]


def round_trip(dialect: str, tools: Any, valid: list[Call], invalid: list[Call]) -> Trip:
    compiled = compile_tools(tools, dialect, tokenizer(dialect))
    return Trip(
        tuple((w.tool, w.warning.keyword) for w in compiled.warnings),
        tuple(_reading(compiled, call) for call in valid),
        tuple(_reading(compiled, call) for call in invalid),
    )


def _reading(compiled: Any, call: Call) -> Reading:
    name, arguments = call
    text = render_tool_calls([{"name": name, "arguments": arguments}], compiled.tools, compiled.dialect)
    parsed = parse_tool_calls(text, compiled.tools, compiled.dialect)
    read = json.loads(parsed.tool_calls[0]["function"]["arguments"]) if parsed.tool_calls else None
    return Reading(compiled.check(text).accepted, read, tuple(e.reason for e in parsed.errors))


def assert_round_trips(trip: Trip, valid: list[Call], invalid: list[Call]) -> None:
    """Valid calls come back unchanged; an invalid call the constraint lets
    through is one the compiler reported relaxing and the parser refuses
    (or reads as other, valid arguments: a raw string)."""
    assert isinstance(trip, Trip), trip
    for (name, arguments), reading in zip(valid, trip.valid):
        assert reading.accepted, f"{name}: the constraint refused the valid {arguments!r:.200}"
        assert reading.arguments == arguments and not reading.errors, f"{name}: read back {reading!r:.300}"
    relaxed = {tool for tool, _ in trip.warnings}
    for (name, arguments), reading in zip(invalid, trip.invalid):
        assert reading.arguments != arguments, f"{name}: accepted the invalid {arguments!r:.200}"
        if reading.accepted and reading.arguments is None:
            assert name in relaxed, f"{name}: the constraint accepted {arguments!r:.200} without a relaxation"


def assert_names(error: Raised, kind: type, tool: str, *parts: str) -> None:
    assert issubclass(error.kind, kind), error
    assert f"tool {tool!r}" in error.message, error.message
    for part in parts:
        assert part in error.message, error.message


# -- $ref cycles -------------------------------------------------------------------------


def _defs(defs: dict[str, Any], p: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"$defs": defs, "type": "object", "properties": {"p": p}, **extra}


_TREE = {
    "A": {"type": "object", "properties": {"v": {"type": "integer"}, "b": {"$ref": "#/$defs/B"}}, "required": ["v"]},
    "B": {"type": "object", "properties": {"w": {"type": "string"}, "a": {"$ref": "#/$defs/A"}}, "required": ["w"]},
}
_NODE = {"type": "object", "properties": {"v": {"type": "integer"}}, "required": ["v"]}

# name: (parameters, a valid call's arguments, an invalid one's or None)
REF_CYCLES: dict[str, tuple[dict[str, Any], dict[str, Any], dict[str, Any] | None]] = {
    "root_is_ref_to_root": ({"$ref": "#"}, {"anything": [1, {"a": None}]}, None),
    "property_refs_root": (
        {"type": "object", "properties": {"v": {"type": "integer"}, "child": {"$ref": "#"}}, "required": ["v"]},
        {"v": 1, "child": {"v": 2, "child": {"v": 3}}},
        {"v": 1, "child": {"child": {"v": 3}}},
    ),
    "a_to_a": (_defs({"A": {"$ref": "#/$defs/A"}}, {"$ref": "#/$defs/A"}), {"p": {"x": [1]}}, None),
    "a_to_b_to_a": (_defs({"A": {"$ref": "#/$defs/B"}, "B": {"$ref": "#/$defs/A"}}, {"$ref": "#/$defs/A"}), {"p": "any"}, None),
    "tree_through_properties": (
        {**_defs(_TREE, {"$ref": "#/$defs/A"}), "required": ["p"]},
        {"p": {"v": 1, "b": {"w": "x", "a": {"v": 2, "b": {"w": "y", "a": {"v": 3}}}}}},
        {"p": {"v": 1, "b": {"w": "x", "a": {"v": "2"}}}},
    ),
    "through_items": (
        _defs({"L": {"type": "array", "items": {"anyOf": [{"type": "integer"}, {"$ref": "#/$defs/L"}]}}}, {"$ref": "#/$defs/L"}),
        {"p": [1, [2, [3]]]},
        {"p": [1, ["2"]]},
    ),
    "through_any_of": (
        _defs({"A": {"anyOf": [{"type": "integer"}, {"type": "object", "properties": {"x": {"$ref": "#/$defs/A"}}}]}}, {"$ref": "#/$defs/A"}),
        {"p": {"x": {"x": 5}}},
        {"p": {"x": {"x": True}}},
    ),
    "any_of_without_a_value": (_defs({"A": {"anyOf": [{"type": "string"}, {"$ref": "#/$defs/A"}]}}, {"$ref": "#/$defs/A"}), {"p": 5}, None),
    "through_all_of": (
        _defs({"A": {"allOf": [{"type": "object", "properties": {"x": {"$ref": "#/$defs/A"}}}]}}, {"$ref": "#/$defs/A"}),
        {"p": {"x": {"x": {}}}},
        {"p": {"x": {"y": 1}}},
    ),
    "all_of_without_a_value": (
        _defs({"A": {"allOf": [{"$ref": "#/$defs/A"}, {"type": "integer"}]}}, {"$ref": "#/$defs/A"}),
        {"p": 3},
        {"p": "s"},
    ),
    "through_one_of": (
        _defs({"A": {"oneOf": [{"type": "integer"}, {"type": "array", "items": {"$ref": "#/$defs/A"}}]}}, {"$ref": "#/$defs/A"}),
        {"p": [1, [2, [3]]]},
        {"p": [1, ["x"]]},
    ),
    "through_additional_properties": (
        _defs({"M": {"type": "object", "additionalProperties": {"$ref": "#/$defs/M"}}}, {"$ref": "#/$defs/M"}),
        {"p": {"a": {"b": {"c": {}}}}},
        {"p": {"a": 5}},
    ),
    "through_pattern_properties": (
        _defs({"M": {"type": "object", "patternProperties": {"^k": {"$ref": "#/$defs/M"}}}}, {"$ref": "#/$defs/M"}),
        {"p": {"k1": {"k2": {}}}},
        {"p": {"x": {}}},
    ),
    "through_prefix_items": (
        _defs({"P": {"type": "array", "prefixItems": [{"type": "integer"}, {"$ref": "#/$defs/P"}], "items": False}}, {"$ref": "#/$defs/P"}),
        {"p": [1, [2, [3]]]},
        {"p": [1, [2], 3]},
    ),
    "via_anchor": (
        _defs({"N": {**_NODE, "$anchor": "node", "properties": {"v": {"type": "integer"}, "next": {"$ref": "#node"}}}}, {"$ref": "#node"}),
        {"p": {"v": 1, "next": {"v": 2, "next": {"v": 3}}}},
        {"p": {"v": 1, "next": {}}},
    ),
    "via_embedded_id": (
        _defs(
            {
                "N": {
                    **_NODE,
                    "$id": "http://example.com/node.json",
                    "properties": {"v": {"type": "integer"}, "next": {"$ref": "node.json"}, "self": {"$ref": "#"}},
                }
            },
            {"$ref": "http://example.com/node.json"},
        ),
        {"p": {"v": 1, "next": {"v": 2, "self": {"v": 3}}}},
        {"p": {"v": 1, "next": {"v": "x"}}},
    ),
    "between_defs_and_definitions": (
        _defs(
            {"A": {"$ref": "#/definitions/B"}},
            {"$ref": "#/$defs/A"},
            definitions={"B": {"type": "object", "properties": {"a": {"$ref": "#/$defs/A"}}}},
        ),
        {"p": {"a": {"a": {}}}},
        {"p": {"a": {"a": 5}}},
    ),
    "between_defs_and_definitions_without_a_value": (
        _defs({"A": {"$ref": "#/definitions/B"}}, {"$ref": "#/$defs/A"}, definitions={"B": {"$ref": "#/$defs/A"}}),
        {"p": [1]},
        None,
    ),
    "missing_definition": ({"type": "object", "properties": {"p": {"$ref": "#/$defs/nope"}}}, {"p": {"any": 1}}, None),
    "remote_url": ({"type": "object", "properties": {"p": {"$ref": "https://example.com/schema.json"}}}, {"p": [True]}, None),
}
# Relaxed to any value with a $ref warning: no value between the cycle's ends, or nothing to resolve.
RELAXED_REFS = {
    "root_is_ref_to_root",
    "a_to_a",
    "a_to_b_to_a",
    "any_of_without_a_value",
    "all_of_without_a_value",
    "between_defs_and_definitions_without_a_value",
    "missing_definition",
    "remote_url",
}

REF_TOOLS = [{"name": name, "parameters": case[0]} for name, case in REF_CYCLES.items()]
REF_VALID = [(name, case[1]) for name, case in REF_CYCLES.items()]
REF_INVALID = [(name, case[2]) for name, case in REF_CYCLES.items() if case[2] is not None]


def _ref_cycles_offline(dialect: str) -> Trip:
    """The round trip with the network refused: a remote $ref is never fetched."""
    import socket
    import urllib.request

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a $ref was fetched")

    urllib.request.urlopen = refuse
    socket.create_connection = refuse
    return round_trip(dialect, REF_TOOLS, REF_VALID, REF_INVALID)


@pytest.mark.slow
@pytest.mark.parametrize("dialect", ALL_DIALECTS)
def test_ref_cycles_of_every_shape_compile_and_round_trip(dialect):
    trip = completed(_ref_cycles_offline, dialect)
    assert_round_trips(trip, REF_VALID, REF_INVALID)
    assert {tool for tool, keyword in trip.warnings if keyword == "$ref"} == RELAXED_REFS
    assert {tool for tool, _ in trip.warnings} == RELAXED_REFS


# -- nesting ------------------------------------------------------------------------------


def nest(levels: int, shape: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """Parameters whose values nest ``levels`` deep (the arguments object is
    level 1, the innermost integer the last), and a valid call's arguments.
    ``shape``: objects in objects, arrays in arrays, or the two alternating."""
    schema: dict[str, Any] = {"type": "integer"}
    value: Any = 7
    for level in range(levels - 1, 1, -1):
        if shape == "objects" or (shape == "mixed" and level % 2):
            schema, value = {"type": "object", "properties": {"a": schema}, "required": ["a"]}, {"a": value}
        else:
            schema, value = {"type": "array", "items": schema, "minItems": 1}, [value]
    return {"type": "object", "properties": {"a": schema}, "required": ["a"]}, {"a": value}


NEST_SHAPES = ("objects", "arrays", "mixed")


def _nested_tools(levels: int) -> tuple[list[dict[str, Any]], list[Call], list[Call]]:
    tools, valid, invalid = [], [], []
    for shape in NEST_SHAPES:
        parameters, arguments = nest(levels, shape)
        tools.append({"name": shape, "parameters": parameters})
        valid.append((shape, arguments))
        invalid.append((shape, json.loads(json.dumps(arguments).replace("7", '"7"'))))
    return tools, valid, invalid


@pytest.mark.parametrize("dialect", ALL_DIALECTS)
@pytest.mark.parametrize("levels", [100, MAX_DEPTH])
def test_nesting_100_levels_and_up_to_the_limit_round_trips(dialect, levels):
    tools, valid, invalid = _nested_tools(levels)
    trip = completed(round_trip, dialect, tools, valid, invalid)
    assert_round_trips(trip, valid, invalid)
    assert trip.warnings == ()


def _deep_schemas(levels: int) -> dict[str, dict[str, Any]]:
    """Parameters nesting ``levels`` deep in every way a schema can."""
    chained_defs: dict[str, Any] = {
        f"d{i}": {"type": "object", "properties": {"x": {"$ref": f"#/$defs/d{i + 1}"}}} for i in range(levels)
    }
    chained_defs[f"d{levels}"] = {"type": "integer"}
    ref_chain = {f"d{i}": {"$ref": f"#/$defs/d{i + 1}"} for i in range(levels)}
    ref_chain[f"d{levels}"] = {"type": "integer"}
    any_of: dict[str, Any] = {"type": "integer"}
    all_of: dict[str, Any] = {"type": "integer"}
    data: Any = 1
    for _ in range(levels):
        any_of, all_of, data = {"anyOf": [any_of, {"type": "null"}]}, {"allOf": [all_of]}, [data]
    return {
        **{shape: nest(levels, shape)[0] for shape in NEST_SHAPES},
        "refs_with_values": {"$defs": chained_defs, "type": "object", "properties": {"p": {"$ref": "#/$defs/d0"}}},
        "refs_without_values": {"$defs": ref_chain, "type": "object", "properties": {"p": {"$ref": "#/$defs/d0"}}},
        "any_of": {"type": "object", "properties": {"p": any_of}},
        "all_of": {"type": "object", "properties": {"p": all_of}},
        "enum_data": {"type": "object", "properties": {"p": {"enum": [data]}}},
        "default_data": {"type": "object", "properties": {"p": {"default": data}}},
    }


@pytest.mark.parametrize("shape", list(_deep_schemas(2)))
def test_1000_levels_of_nesting_are_refused_with_the_limit_and_the_place(shape):
    parameters = _deep_schemas(1000)[shape]
    error = raised(compile_in, "qwen3_coder", [{"name": f"deep_{shape}", "parameters": parameters}])
    assert_names(error, SchemaLimitError, f"deep_{shape}", "schema at /")
    assert any(
        reason in error.message
        for reason in (f"nest more than {MAX_NESTING} levels", f"nest more than {MAX_DEPTH} levels", f"more than {MAX_DEPTH} long")
    ), error.message


def test_one_level_past_the_depth_limit_is_refused():
    parameters, _ = nest(MAX_DEPTH + 1, "arrays")
    error = raised(compile_in, "hermes", [{"name": "too_deep", "parameters": parameters}])
    assert_names(error, SchemaLimitError, "too_deep", f"values nest more than {MAX_DEPTH} levels deep here", "/items/items")


def _with_recursion_limit(limit: int, dialect: str, tools: Any) -> str:
    sys.setrecursionlimit(limit)
    return compile_in(dialect, tools)


def test_a_caller_deep_in_the_stack_gets_a_clear_error_not_a_recursion_error():
    parameters, _ = nest(MAX_DEPTH, "objects")
    error = raised(_with_recursion_limit, 400, "gemma4", [{"name": "deep", "parameters": parameters}])
    assert_names(error, SchemaLimitError, "deep", "recursion limit (400)")


# -- big enums ----------------------------------------------------------------------------

MARKUP = [
    "</parameter>", '<|"|>', '"quoted"', "two\nlines", "<escape>", "</arg_value>", "a,b:{c}", "</tool_call>",
    "\n</parameter>\n", "</｜DSML｜parameter>", "<|tool_call_end|>",
]  # fmt: skip
# The markup strings each dialect cannot write, with its default tokenizer: a
# special token, or a raw value's own closing.
UNWRITABLE = {
    "qwen3_coder": {"</parameter>", "\n</parameter>\n", "</tool_call>"},
    "hermes": {"</tool_call>"},
    "glm45": {"</arg_value>", "</tool_call>"},
    "glm47": {"</arg_value>", "</tool_call>"},
    "gemma4": {'<|"|>'},
    "functiongemma": {"<escape>"},
    # DeepSeek's vocabulary has ｜DSML｜ as a token: in JSON too, a value cannot spell it.
    **dict.fromkeys(("deepseek_v32", "deepseek_v4", "deepseek_v41", "deepseek_v31", "deepseek_r1"), {"</｜DSML｜parameter>"}),
    "kimi_k2": {"<|tool_call_end|>"},
    "gpt_oss": {"<|call|>"},
    "minimax_m2": {"</parameter>", "\n</parameter>\n"},
}
NUMBERS = [i * 1.5 for i in range(10_000)]


def _enum_tool(markup: list[str]) -> dict[str, Any]:
    strings = [f"value {i}" for i in range(10_000 - len(markup))] + markup
    return function(
        "pick",
        {"s": {"enum": strings}, "n": {"enum": NUMBERS}, "o": {"type": "object", "properties": {"inner": {"enum": strings}}}},
        ["s", "n"],
    )


def _unwritable_enum_values(dialect: str) -> dict[str, Raised]:
    """For each markup string the dialect cannot write, the error of a
    10,000-value enum holding it."""
    errors = {}
    for value in sorted(UNWRITABLE[dialect]):
        try:
            compile_in(dialect, [_enum_tool([value])])
        except CompileError as exc:
            errors[value] = Raised(CompileError, str(exc))
    return errors


@pytest.mark.parametrize("dialect", ALL_DIALECTS)
def test_enum_strings_a_dialect_cannot_write_are_refused_by_name(dialect):
    errors = completed(_unwritable_enum_values, dialect)
    assert set(errors) == UNWRITABLE[dialect]
    for value, error in errors.items():
        assert_names(error, CompileError, "pick", repr(value), "/properties/", f"dialect {dialect!r}")


@pytest.mark.slow
@pytest.mark.parametrize("dialect", ALL_DIALECTS)
def test_10000_value_enums_with_markup_round_trip(dialect):
    markup = [value for value in MARKUP if value not in UNWRITABLE[dialect]]
    valid = [("pick", {"s": value, "n": 14998.5, "o": {"inner": value}}) for value in markup]
    valid.append(("pick", {"s": "value 0", "n": 1.5}))
    invalid = [("pick", {"s": "value -1", "n": 1.5}), ("pick", {"s": "value 0", "n": 0.75})]
    trip = completed(round_trip, dialect, [_enum_tool(markup)], valid, invalid)
    assert_round_trips(trip, valid, invalid)


# -- lengths, counts and numbers past what the automaton counts -----------------------------

BIG = [
    function("max_length", {"p": {"type": "string", "maxLength": 100_000}}, ["p"]),
    function("min_length", {"p": {"type": "string", "minLength": 100_000}}, ["p"]),
    function("max_items", {"p": {"type": "array", "items": {"type": "integer"}, "maxItems": 100_000}}, ["p"]),
    function("min_items", {"p": {"type": "array", "items": {"type": "integer"}, "minItems": 5000}}, ["p"]),
    function("multiple_of", {"p": {"type": "number", "multipleOf": 1e-9}}, ["p"]),
]
BIG_VALID = [
    ("max_length", {"p": "x" * 1000}),
    ("min_length", {"p": "y" * 100_000}),
    ("max_items", {"p": [1, 2]}),
    ("min_items", {"p": list(range(5000))}),
    ("multiple_of", {"p": 0.123456789}),
]
BIG_INVALID = [
    ("min_length", {"p": "short"}),
    ("min_items", {"p": [1]}),
    ("multiple_of", {"p": 0.1234567891}),
]


@pytest.mark.parametrize("dialect", ALL_DIALECTS)
def test_huge_lengths_counts_and_tiny_steps_round_trip_or_relax(dialect):
    trip = completed(round_trip, dialect, BIG, BIG_VALID, BIG_INVALID)
    assert_round_trips(trip, BIG_VALID, BIG_INVALID)
    # Lengths above 100 are relaxed on raw text only; item counts above 100
    # everywhere; the step is the grammar's to enforce or relax.
    lengths = {"max_length", "min_length"} if dialect in RAW_DIALECTS else set()
    assert {tool for tool, _ in trip.warnings} - {"multiple_of"} == lengths | {"max_items", "min_items"}


HUGE_BOUNDS = [
    function("integer_bounds", {"p": {"type": "integer", "minimum": -(2**80), "maximum": 1e300}}, ["p"]),
    function("number_bounds", {"p": {"type": "number", "minimum": -(2**80), "maximum": 1e300}}, ["p"]),
]


@pytest.mark.parametrize("dialect", ALL_DIALECTS)
def test_huge_number_bounds_round_trip(dialect):
    valid = [("integer_bounds", {"p": -(2**80)}), ("integer_bounds", {"p": 10**299}), ("number_bounds", {"p": 1.5e299})]
    invalid = [("integer_bounds", {"p": -(2**80) - 1}), ("number_bounds", {"p": -(2.0**81)})]
    trip = completed(round_trip, dialect, HUGE_BOUNDS, valid, invalid)
    assert_round_trips(trip, valid, invalid)


# -- patterns -----------------------------------------------------------------------------

PATTERNS = {
    "look_ahead": ("^(?!tmp)[a-z]+$", "keep", "tmpx"),
    "look_behind": ("(?<=a)b", "ab", "cb"),
    "variable_look_behind": ("(?<=a+)b", "aab", "cb"),
    "back_reference": ("^(ab)\\1$", "abab", "abba"),
    "named_groups": ("^(?<y>[0-9]{4})-\\k<y>$", "2024-2024", "2024-2025"),
    "unicode_property": ("^\\p{L}+$", "héllo", "h3llo"),
}
# Key patterns the automaton cannot translate (the parser reads all of them).
KEY_PATTERNS = {"keys_look_ahead": "^(?!k$)x", "keys_unicode": "^\\p{Lu}", "keys_named_group": "^(?<n>x)\\k<n>$"}
MATCHING_KEY = {"keys_look_ahead": "xy", "keys_unicode": "Äb", "keys_named_group": "xx"}
PATTERN_TOOLS = [function(name, {"p": {"type": "string", "pattern": case[0]}}, ["p"]) for name, case in PATTERNS.items()]
PATTERN_TOOLS += [
    function(name, {"k": {"type": "string"}}, ["k"], patternProperties={pattern: {"type": "integer"}})
    for name, pattern in KEY_PATTERNS.items()
]
PATTERN_VALID = [(name, {"p": case[1]}) for name, case in PATTERNS.items()] + [(name, {"k": "a"}) for name in KEY_PATTERNS]
PATTERN_INVALID = [(name, {"p": case[2]}) for name, case in PATTERNS.items()]
PATTERN_INVALID += [(name, {"k": "a", key: "text"}) for name, key in MATCHING_KEY.items()]


def _pattern_trip(dialect: str) -> tuple[Trip, list[Reading]]:
    """The round trip, and the readings of a valid call with a key matching each key pattern."""
    trip = round_trip(dialect, PATTERN_TOOLS, PATTERN_VALID, PATTERN_INVALID)
    compiled = compile_tools(PATTERN_TOOLS, dialect, tokenizer(dialect))  # cached
    return trip, [_reading(compiled, (name, {"k": "a", key: 5})) for name, key in MATCHING_KEY.items()]


@pytest.mark.parametrize("dialect", ALL_DIALECTS)
def test_patterns_without_an_exact_translation_are_relaxed_and_checked_after(dialect):
    trip, matching_keys = completed(_pattern_trip, dialect)
    assert_round_trips(trip, PATTERN_VALID, PATTERN_INVALID)
    assert set(trip.warnings) == {(name, "pattern") for name in PATTERNS} | {(name, "patternProperties") for name in KEY_PATTERNS}
    # As the warning says, keys matching an untranslatable key pattern are not
    # generated; the parser reads such a call, checking the key by its pattern.
    for (name, key), reading in zip(MATCHING_KEY.items(), matching_keys):
        assert not reading.accepted and reading.arguments == {"k": "a", key: 5}, (name, reading)


@pytest.mark.parametrize(
    ("where", "pattern", "reason"),
    [
        ("pattern", "a++", "the possessive quantifier at offset 1 is Python regex syntax, not ECMA 262"),
        ("pattern", "x{2}+", "the possessive quantifier at offset 1"),
        ("pattern", "(?>ab)c", "the atomic group at offset 0"),
        ("pattern", "(", "not a valid regular expression: missing ), unterminated subpattern"),
        ("pattern", "[a-", "not a valid regular expression"),
        ("patternProperties", "(", "not a valid regular expression"),
        ("patternProperties", "a++", "possessive quantifier"),
    ],
)
def test_patterns_that_cannot_be_read_are_schema_errors(where, pattern, reason):
    if where == "pattern":
        parameters, path = {"type": "object", "properties": {"p": {"type": "string", "pattern": pattern}}}, "/properties/p"
    else:
        parameters, path = {"type": "object", "patternProperties": {pattern: {"type": "integer"}}}, "/patternProperties/"
    error = raised(normalize_tools, [{"name": "bad_pattern", "parameters": parameters}])
    assert_names(error, SchemaError, "bad_pattern", f"schema at {path}", repr(pattern), reason)


# -- many tools -----------------------------------------------------------------------------

THOUSAND = [function(f"tool_{i}", {"x": {"type": "integer"}, "s": {"type": "string"}}, ["x"]) for i in range(1000)]


@pytest.mark.parametrize("dialect", ALL_DIALECTS)
def test_1000_tools_compile_and_the_first_and_last_are_callable(dialect):
    valid = [("tool_0", {"x": 1}), ("tool_999", {"x": 2, "s": "a"})]
    invalid = [("tool_500", {"s": "a"}), ("tool_999", {"x": "2"})]
    trip = completed(round_trip, dialect, THOUSAND, valid, invalid)
    assert_round_trips(trip, valid, invalid)


def _twice_named(dialect: str, as_objects: bool) -> str:
    tools: Any = THOUSAND[:999] + [function("tool_17", {})]
    if as_objects:
        tools = [Tool(t["name"], "", t["parameters"], "function") for t in tools]
    compile_tools(tools, dialect, tokenizer(dialect), bad_tools="raise")
    return "compiled"


def _twice_named_left_out(dialect: str, as_objects: bool) -> tuple[int, tuple[tuple[str, str], ...], int]:
    """How many tools compile, which are left out (name, reason), and how
    many warnings say so, when two of 1,000 share a name."""
    tools: Any = THOUSAND[:999] + [function("tool_17", {})]
    if as_objects:
        tools = [Tool(t["name"], "", t["parameters"], "function") for t in tools]
    compiled = compile_tools(tools, dialect, tokenizer(dialect))
    warned = sum(1 for w in compiled.warnings if w.tool == "tool_17" and w.warning.keyword == "tool")
    return len(compiled.tools), tuple((t.name, t.reason) for t in compiled.left_out), warned


@pytest.mark.slow
@pytest.mark.parametrize("dialect", ALL_DIALECTS)
@pytest.mark.parametrize("as_objects", [False, True], ids=["dicts", "Tool objects"])
def test_1000_tools_with_a_repeated_name_leave_both_out(dialect, as_objects):
    """A call of ``tool_17`` could mean either definition: both are left
    out, the other 998 compile; ``bad_tools="raise"`` refuses the set."""
    count, left_out, warned = completed(_twice_named_left_out, dialect, as_objects)
    assert count == 998 and warned == 2
    assert [name for name, _ in left_out] == ["tool_17", "tool_17"]
    assert all("defined twice: tools[17] and tools[999]" in reason for _, reason in left_out)
    error = raised(_twice_named, dialect, as_objects)
    assert_names(error, ToolDefinitionError, "tool_17", "defined twice: tools[17] and tools[999]")


# -- malformed schemas ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("subschema", "reason"),
    [
        ({"type": "strnig"}, "unknown type 'strnig'"),
        ({"type": 5}, "type must be a type name or a list of them, got 5"),
        ({"type": "object", "required": "x"}, "required must be a list of strings, got 'x'"),
        ({"type": "object", "required": [1]}, "required must be a list of strings, got [1]"),
        ({"type": "object", "properties": []}, "properties must be an object, got []"),
        ({"type": "array", "items": 5}, "a schema must be an object or a boolean, got 5"),
        ({"type": "string", "maxLength": -1}, "maxLength must be a non-negative integer, got -1"),
        ({"enum": 5}, "enum must be a list, got 5"),
        (5, "a schema must be an object or a boolean, got 5"),
        ({"$ref": 5}, "$ref must be a string, got 5"),
        ({"$defs": [], "type": "string"}, "$defs must be an object, got []"),
        ({"definitions": 3, "type": "string"}, "definitions must be an object, got 3"),
        ({"type": "integer", "minimum": "0"}, "minimum must be a number, got '0'"),
        ({"type": "number", "multipleOf": 0}, "multipleOf must be > 0, got 0"),
    ],
    ids=lambda case: json.dumps(case)[:40] if not isinstance(case, str) else None,
)
def test_malformed_schemas_name_the_tool_the_pointer_and_why(subschema, reason):
    tools = [{"name": "broken", "parameters": {"type": "object", "properties": {"p": subschema}}}]
    error = raised(compile_in, "qwen3_coder", tools)
    assert_names(error, SchemaError, "broken", "schema at /properties/p", reason)


def test_an_empty_enum_on_a_required_key_names_the_tool_the_pointer_and_why():
    """An optional key with ``enum: []`` may only be left out (see
    test_normalize); a required one leaves no call of the tool possible."""
    tools = [{"name": "broken", "parameters": {"type": "object", "properties": {"p": {"enum": []}}, "required": ["p"]}}]
    error = raised(compile_in, "qwen3_coder", tools)
    assert_names(error, UnsatisfiableSchemaError, "broken", "schema at /properties/p", "enum is empty, so no value is allowed")


def test_parameters_of_an_array_type_are_a_tool_definition_error():
    error = raised(normalize_tools, [{"name": "listy", "parameters": {"type": "array", "items": {"type": "string"}}}])
    assert_names(error, ToolDefinitionError, "listy", "parameters must be an object schema, got type 'array'")


@pytest.mark.parametrize("dialect", ALL_DIALECTS)
def test_parameters_true_false_and_empty(dialect):
    tools = [{"name": "t", "parameters": True}, {"name": "e", "parameters": {}}, {"name": "f", "parameters": False}]
    valid = [("t", {"a": [1, {"b": None}]}), ("e", {"b": {"c": "d"}}), ("e", {})]
    invalid = [("f", {"a": 1}), ("f", {})]
    trip = completed(round_trip, dialect, tools, valid, invalid)
    assert_round_trips(trip, valid, invalid)
    # `false` is read as `{"not": {}}`: relaxed, and every call is refused after.
    assert trip.warnings == (("f", "not"),)
    assert all(reading.arguments is None for reading in trip.invalid)


# -- names that collide with the dialect's markup -----------------------------------------------

NAMES = [
    ">", "<", "\n", "</parameter>", "=", ":", "{", "}", ",", '"', '<|"|>', "</arg_key>", "[", "a:b",
    "two words", " padded ", "", "x" * 10_000, "naïve", "名前", "🔧", "<tool_call>", "a\ud800b",
]  # fmt: skip
_QWEN_MARKUP = {">", "\n", "</parameter>", '<|"|>', "</arg_key>", "<tool_call>"}
_GLM_MARKUP = {"<", "\n", "</parameter>", '<|"|>', "</arg_key>", "<tool_call>"}
_DSML_MARKUP = {"\n", '"', '<|"|>'}  # names and keys sit in double quotes
_MINIMAX_MARKUP = _DSML_MARKUP  # as in DSML's tags
# A name before <｜tool▁sep｜> holds no whitespace nor markup; keys are JSON.
_DEEPSEEK_NAMES = {">", "<", "\n", "</parameter>", '<|"|>', "</arg_key>", "two words", " padded ", "<tool_call>"}
# A name in a Kimi call id holds no whitespace, "<" nor "|"; keys are JSON.
_KIMI_NAMES = {"<", "\n", "</parameter>", '<|"|>', "</arg_key>", "two words", " padded ", "<tool_call>"}
_GEMMA_KEYS = {"<", "</parameter>", "{", "}", ",", '<|"|>', "</arg_key>", "[", "", "<tool_call>"}
# Per dialect: tool names and argument keys it refuses (besides the lone
# surrogate, refused everywhere); "<tool_call>" is a special token of qwen3.
REFUSED = {
    "qwen3_coder": (_QWEN_MARKUP, _QWEN_MARKUP | {""}),
    "hermes": ({"<tool_call>"}, {"<tool_call>"}),
    "glm45": (_GLM_MARKUP, _GLM_MARKUP | {""}),
    "glm47": (_GLM_MARKUP, _GLM_MARKUP | {""}),
    "gemma4": ({"{", '<|"|>'}, _GEMMA_KEYS),
    "functiongemma": ({"{"}, _GEMMA_KEYS),
    **dict.fromkeys(("deepseek_v32", "deepseek_v4", "deepseek_v41"), (_DSML_MARKUP, _DSML_MARKUP | {""})),
    **dict.fromkeys(("deepseek_v31", "deepseek_r1"), (_DEEPSEEK_NAMES, set())),
    "kimi_k2": (_KIMI_NAMES, set()),
    # A Harmony recipient holds no whitespace or '<' either, and fits in a header.
    "gpt_oss": (_KIMI_NAMES | {"x" * 10_000}, set()),
    "minimax_m2": (_MINIMAX_MARKUP, _MINIMAX_MARKUP | {""}),
}


SURROGATE = "a\ud800b"


def _writable(dialect: str) -> tuple[list[str], list[str]]:
    """The names the dialect writes as tool names, and as keys."""
    names, keys = REFUSED[dialect]
    return (
        [n for n in NAMES if n not in names and n and n != SURROGATE],
        [n for n in NAMES if n not in keys and n != SURROGATE],
    )


def _name_calls(dialect: str) -> tuple[list[dict[str, Any]], list[Call]]:
    """One tool called each writable name and one keyed by each writable key, with a call of each."""
    names, keys = _writable(dialect)
    tools = [function(n, {"k": {"type": "string"}}, ["k"]) for n in names]
    tools += [function(f"key_{i}", {k: {"type": "string"}}, [k]) for i, k in enumerate(keys)]
    return tools, [(n, {"k": "v"}) for n in names] + [(f"key_{i}", {k: "v"}) for i, k in enumerate(keys)]


def _names_outcome(dialect: str) -> tuple[dict[tuple[str, str], Raised], Trip]:
    """The error of each name the dialect refuses, alone in a tool set, and
    the round trip of all the others together."""
    names, keys = REFUSED[dialect]
    errors: dict[tuple[str, str], Raised] = {}
    for role, refused in (("name", names | {"", SURROGATE}), ("key", keys | {SURROGATE})):
        for name in refused:
            properties = {"k": {"type": "string"}} if role == "name" else {name: {"type": "string"}}
            try:
                compile_in(dialect, [function(name if role == "name" else "keyed", properties)])
            except (CompileError, ToolDefinitionError) as exc:
                errors[(role, name)] = Raised(type(exc), str(exc))
    tools, valid = _name_calls(dialect)
    return errors, round_trip(dialect, tools, valid, [])


@pytest.mark.parametrize("dialect", ALL_DIALECTS)
def test_names_colliding_with_markup_round_trip_or_are_refused_by_name(dialect):
    errors, trip = completed(_names_outcome, dialect)
    names, keys = REFUSED[dialect]
    assert set(errors) == {("name", n) for n in names | {"", SURROGATE}} | {("key", k) for k in keys | {SURROGATE}}
    for (role, name), error in errors.items():
        if (role, name) == ("name", ""):
            assert issubclass(error.kind, ToolDefinitionError) and "tool name must be a non-empty string" in error.message
        elif len(name) > 1000:  # a message shows a long name cut short, with its length
            assert issubclass(error.kind, CompileError), error
            assert f"{name[:40]}... ({len(name)} characters)" in error.message, error.message
            assert f"cannot be written in dialect {dialect!r}" in error.message, error.message
        else:
            what, tool = ("tool name", name) if role == "name" else ("key", "keyed")
            assert_names(error, CompileError, tool, f"{what} {name!r}", f"cannot be written in dialect {dialect!r}")
    _, valid = _name_calls(dialect)
    assert_round_trips(trip, valid, [])


# -- tokenizers without the dialect's markers -------------------------------------------------

WRONG_TOKENIZER = {
    "qwen3_coder": ("gemma4", ["<tool_call>", "</tool_call>"]),
    "hermes": ("gemma4", ["<tool_call>", "</tool_call>"]),
    "glm45": ("gemma4", ["<tool_call>", "</tool_call>"]),
    "glm47": ("functiongemma", ["<tool_call>", "</tool_call>"]),
    "gemma4": ("qwen3", ["<|tool_call>", "<tool_call|>", '<|"|>']),
    "functiongemma": ("qwen3", ["<start_function_call>", "<end_function_call>", "<escape>"]),
    **dict.fromkeys(("deepseek_v32", "deepseek_v4", "deepseek_v41"), ("qwen3", ["｜DSML｜"])),
    **dict.fromkeys(("deepseek_v31", "deepseek_r1"), ("qwen3", ["<｜tool▁call▁begin｜>", "<｜tool▁call▁end｜>", "<｜tool▁sep｜>"])),
    "kimi_k2": ("qwen3", ["<|tool_call_begin|>", "<|tool_call_end|>", "<|tool_call_argument_begin|>"]),
    "gpt_oss": ("qwen3", ["<|channel|>", "<|call|>", "<|message|>", "<|constrain|>", "<|start|>", "<|end|>"]),
    "minimax_m2": ("qwen3", ["<minimax:tool_call>", "</minimax:tool_call>"]),
}


def _compile_with(dialect: str, tokenizer_name: str) -> str:
    compile_tools([function("f", {"a": {"type": "string"}})], dialect, load_tokenizer(tokenizer_name))
    return "compiled"


@pytest.mark.parametrize("dialect", ALL_DIALECTS)
def test_a_tokenizer_missing_the_markers_is_a_compile_error_naming_them(dialect):
    tokenizer_name, markers = WRONG_TOKENIZER[dialect]
    error = raised(_compile_with, dialect, tokenizer_name)
    assert issubclass(error.kind, CompileError), error
    assert f"dialect {dialect!r} needs {', '.join(markers)} as single special tokens" in error.message
    assert f"tokenizer {tokenizer_name!r} does not have them" in error.message


# -- wide objects and union distribution --------------------------------------------------------


@pytest.mark.parametrize("dialect", ALL_DIALECTS)
def test_the_most_declared_keys_round_trip(dialect):
    """MAX_PROPERTIES keys compile and a call naming the first and last
    round-trips; one key fewer than the required one is refused."""
    last = f"k{MAX_PROPERTIES - 1}"
    tool = function("wide", {f"k{i}": {"type": "integer"} for i in range(MAX_PROPERTIES)}, [last])
    valid, invalid = [("wide", {"k0": 1, last: 2})], [("wide", {"k0": 1})]
    trip = completed(round_trip, dialect, [tool], valid, invalid)
    assert_round_trips(trip, valid, invalid)


def test_5000_properties_are_refused_with_the_limit():
    """Past MAX_PROPERTIES the grammar's chain of one rule per key would
    overflow llguidance's stack (a segfault near 1,800 keys): a clear error."""
    tool = function("wide", {f"k{i}": {"type": "integer"} for i in range(5000)}, ["k4999"])
    error = raised(compile_in, "hermes", [tool])
    assert_names(error, SchemaLimitError, "wide", f"declares 5000 keys, more than {MAX_PROPERTIES}")


_BRANCHES = [{"type": "string"}, {"type": "integer"}, {"type": "null"}, {"type": "boolean"}]


def _nested_all_of(levels: int) -> dict[str, Any]:
    schema: dict[str, Any] = {"anyOf": _BRANCHES}
    for _ in range(levels - 1):
        schema = {"allOf": [{"anyOf": _BRANCHES}, schema]}
    return schema


DISTRIBUTED = [
    function("side_by_side", {"p": {"allOf": [{"anyOf": _BRANCHES} for _ in range(10)]}}, ["p"]),
    function("nested", {"p": _nested_all_of(10)}, ["p"]),
]


@pytest.mark.parametrize("dialect", ALL_DIALECTS)
def test_ten_unions_of_four_are_relaxed_past_64_alternatives(dialect):
    valid = [("side_by_side", {"p": "s"}), ("side_by_side", {"p": 3}), ("nested", {"p": None}), ("nested", {"p": True})]
    invalid = [("side_by_side", {"p": [1]}), ("nested", {"p": {"a": 1}})]
    trip = completed(round_trip, dialect, DISTRIBUTED, valid, invalid)
    assert_round_trips(trip, valid, invalid)
    assert {tool for tool, keyword in trip.warnings if keyword == "anyOf/oneOf"} == {"side_by_side", "nested"}


def test_a_definition_referenced_four_times_at_ten_levels_is_refused_not_expanded():
    defs: dict[str, Any] = {"l0": {"anyOf": _BRANCHES}}
    for level in range(1, 11):
        defs[f"l{level}"] = {"anyOf": [{"$ref": f"#/$defs/l{level - 1}"}] * 4}
    parameters = {"$defs": defs, "type": "object", "properties": {"p": {"$ref": "#/$defs/l10"}}}
    error = raised(normalize_tools, [{"name": "fan_out", "parameters": parameters}])
    assert_names(error, SchemaLimitError, "fan_out", "subschemas through $ref/allOf/anyOf/oneOf")


# -- model output nested past the recursion limit ------------------------------------------

TREE = {"name": "tree", "parameters": _defs({"N": {"type": "array", "items": {"$ref": "#/$defs/N"}}}, {"$ref": "#/$defs/N"})}


def _parse_deep(dialect: str, depth: int) -> tuple[int, tuple[str, ...]]:
    text = render_tool_calls([{"name": "tree", "arguments": {"p": []}}], [TREE], dialect)
    parsed = parse_tool_calls(text.replace("[]", "[" * depth + "]" * depth), [TREE], dialect)
    return len(parsed.tool_calls), tuple(error.reason for error in parsed.errors)


@pytest.mark.parametrize("dialect", ALL_DIALECTS)
def test_a_value_too_deep_to_check_is_refused_not_raised(dialect):
    """A recursive schema lets the grammar nest without end; a value nested
    past what the checks can follow within Python's recursion limit is
    refused (frame_accepts says no), not an exception."""
    calls, errors = completed(_parse_deep, dialect, 350)
    assert calls == 0 and len(errors) == 1, errors
    assert "cannot be validated" not in errors[0], "refused by frame_accepts, before the validator"

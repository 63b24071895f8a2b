"""The conformance judgement (``constrained.qa.conformance``): every verdict
kind on small tools, the wrapping of non-object schemas, and a slice of the
corpus sweep that ``bench/conformance.py`` runs in full.

The slice: every JSON-Schema-Test-Suite group (required and ``optional/``)
and every 6th MaskBench case, each judged in two dialects (the six in turn,
so every dialect meets every kind of schema across the suite), and every
20th BFCL entry with every MCP tool in every dialect. No invalid instance
may pass where the compiler claims exact support, and every valid one the
dialect can write must be accepted and read back equal, except the listed
deliberate deviations and the known misses of the optional format files
(``tests/corpus.py``).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import jsonschema
import pytest
from corpus import (
    JSTS_KNOWN_MISSES,
    MASKBENCH_KNOWN_MISSES,
    bfcl_entries,
    bfcl_facts,
    jsts_deviation,
    jsts_groups,
    maskbench_groups,
    mcp_calls,
)

import constrained.qa.conformance as conformance
from constrained.compiler import CompiledTools, compile_tools
from constrained.dialects import DIALECTS
from constrained.output.parse import ParseResult
from constrained.qa.conformance import Call, Outcome, judge_call, judge_calls, judge_schema, same_value, schema_tool

DIALECT_NAMES = list(DIALECTS)


def compiled_tool(dialect: str, properties: dict[str, Any], **schema: Any) -> CompiledTools:
    parameters = {"type": "object", "properties": properties, **schema}
    return compile_tools([{"name": "f", "parameters": parameters}], dialect, DIALECTS[dialect].default_tokenizer,
                         tool_choice="required")


INTEGER_TO_3 = {"x": {"type": "integer", "maximum": 3}}
TEXT = {"s": {"type": "string"}}
UNIQUE = {"x": {"type": "array", "uniqueItems": True}}

# (dialect, properties, arguments, valid, outcome)
VERDICT_CASES = [
    ("hermes", INTEGER_TO_3, {"x": 2}, True, Outcome.ACCEPTED),
    ("gemma4", INTEGER_TO_3, {"x": 5}, False, Outcome.REJECTED),
    ("hermes", UNIQUE, {"x": [1, 1]}, False, Outcome.REJECTED_BY_VALIDATION),
    # qwen3_coder writes the integer 5 for a string parameter as the text 5: the string "5".
    ("qwen3_coder", TEXT, {"s": 5}, False, Outcome.READS_AS_ANOTHER_VALUE),
    ("qwen3_coder", TEXT, {"s": "a\n</parameter>\nb"}, True, Outcome.UNREPRESENTABLE),
    # Qwen's tokenizer writes "a" + COMBINING DIAERESIS as the one character "ä" (NFC).
    ("hermes", {"s": {"const": "\u00e4"}}, {"s": "a\u0308"}, False, Outcome.UNREPRESENTABLE),
    # JSON text may escape a lone surrogate; no UTF-8, so no tokens, hold one.
    ("gemma4", TEXT, {"s": "a\ud800"}, True, Outcome.UNREPRESENTABLE),
    ("hermes", TEXT, {"s": "a\ud800"}, False, Outcome.UNREPRESENTABLE),
    ("glm45", INTEGER_TO_3, {"x": 1.0}, True, Outcome.KNOWN_LIMIT),
    ("hermes", {"c": {"const": {"a": 1, "b": 2}}}, {"c": {"b": 2, "a": 1}}, True, Outcome.KNOWN_LIMIT),
    ("hermes", INTEGER_TO_3, 5, False, Outcome.NOT_AN_OBJECT),
    # The caller's validator and the compiled schema disagree: the pipeline is judged against the caller.
    ("functiongemma", INTEGER_TO_3, {"x": 5}, True, Outcome.VALID_REJECTED),
    ("glm47", INTEGER_TO_3, {"x": 2}, False, Outcome.INVALID_ACCEPTED),
    ("hermes", UNIQUE, {"x": [1, 2]}, False, Outcome.INVALID_ACCEPTED),
]


@pytest.mark.parametrize("dialect, properties, arguments, valid, outcome", VERDICT_CASES)
def test_verdict(dialect, properties, arguments, valid, outcome):
    verdict = judge_call(compiled_tool(dialect, properties), "f", arguments, valid)
    assert verdict.outcome is outcome, verdict
    assert verdict.valid is valid
    assert verdict.exact == (properties is not UNIQUE)
    assert verdict.failed == (outcome in (Outcome.VALID_REJECTED, Outcome.INVALID_ACCEPTED))
    assert verdict.passed == (outcome in (Outcome.ACCEPTED, Outcome.REJECTED, Outcome.REJECTED_BY_VALIDATION))


def test_relaxed_verdict_names_the_keyword():
    verdict = judge_call(compiled_tool("hermes", UNIQUE), "f", {"x": [1, 1]}, False)
    assert verdict.relaxed == ("uniqueItems",) and "unique" in verdict.reason


def test_refused_tool():
    unsatisfiable = {"name": "f", "parameters": {"type": "object", "properties": {"s": {"type": "string", "minLength": 5, "maxLength": 3}}, "required": ["s"]}}
    valid, invalid = judge_calls([unsatisfiable], [Call("f", {"s": "abcd"}, True), Call("f", {"s": "ab"}, False)], "hermes")
    assert valid.outcome is invalid.outcome is Outcome.REFUSED
    assert "UnsatisfiableSchemaError" in valid.reason
    assert valid.failed and not invalid.failed


def test_read_back_differs(monkeypatch):
    """A parser that reads something else than the renderer wrote is caught."""
    call = {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": '{"x": 3}'}}
    monkeypatch.setattr(conformance, "parse_tool_calls", lambda text, tools, dialect: ParseResult("", [call]))
    verdict = judge_call(compiled_tool("hermes", INTEGER_TO_3), "f", {"x": 2}, True)
    assert verdict.outcome is Outcome.READ_BACK_DIFFERS and verdict.failed


def test_every_outcome_is_reachable():
    """The cases above reach every kind (refused and read-back-differs in their own tests)."""
    reached = {case[-1] for case in VERDICT_CASES} | {Outcome.REFUSED, Outcome.READ_BACK_DIFFERS}
    assert reached == set(Outcome)


@pytest.mark.parametrize(
    "left, right, same",
    [
        (1, 1, True),
        (1, 1.0, False),
        (1, True, False),
        (0, False, False),
        (None, None, True),
        ({"a": [1, {"b": 2.5}]}, {"a": [1, {"b": 2.5}]}, True),
        ({"a": [1, {"b": 2}]}, {"a": [1, {"b": 2.0}]}, False),
        ({"a": 1, "b": 2}, {"b": 2, "a": 1}, True),
        ([1, 2], [1, 2, 3], False),
        ({"a": 1}, {"a": 1, "b": None}, False),
        ("1", 1, False),
    ],
)
def test_same_value_compares_types(left, right, same):
    assert same_value(left, right) is same
    assert same_value(right, left) is same


# -- wrapping non-object schemas ------------------------------------------------

WRAPPED_CASES = [
    # "#/$defs/..." inside the wrapped schema points into it, not into the wrapper.
    (
        {"$defs": {"positive": {"type": "integer", "minimum": 1}}, "type": "array", "items": {"$ref": "#/$defs/positive"}},
        [([1, 2], True), ([0], False), (["a"], False)],
    ),
    # "#" is the wrapped schema itself (a recursive one).
    ({"type": ["integer", "array"], "items": {"$ref": "#"}}, [([1, [2, [3]]], True), (7, True), ([1, ["a"]], False)]),
    # Before draft 6 the base URI keyword is "id".
    (
        {"$schema": "http://json-schema.org/draft-04/schema#", "definitions": {"short": {"type": "string", "maxLength": 2}},
         "type": "array", "items": {"$ref": "#/definitions/short"}},
        [(["ab"], True), (["abc"], False)],
    ),
    # A schema with its own base URI keeps it.
    (
        {"$id": "https://example.com/s.json", "$defs": {"n": {"type": "number"}}, "anyOf": [{"$ref": "#/$defs/n"}, {"type": "null"}]},
        [(1.5, True), (None, True), ("x", False)],
    ),
    # An enum of objects cannot be tool parameters (normalize_tool refuses it), so it is wrapped.
    ({"enum": [{"a": 1}, {"b": [2]}]}, [({"a": 1}, True), ({"b": [2]}, True), ({"a": 2}, False)]),
    # Typeless: it admits non-objects, so it is wrapped.
    ({"properties": {"a": {"type": "integer"}}}, [({"a": 1}, True), ("text", True), ({"a": "x"}, False)]),
]


@pytest.mark.parametrize("schema, instances", WRAPPED_CASES)
def test_wrapped_schema_keeps_its_meaning(schema, instances):
    tool = schema_tool(schema)
    assert tool.wrapped
    parameters = tool.definition["parameters"]
    bare = jsonschema.validators.validator_for(schema)(schema)
    wrapped = jsonschema.validators.validator_for(parameters)(parameters)
    for data, valid in instances:
        assert bare.is_valid(data) is valid
        assert wrapped.is_valid(tool.arguments(data)) is valid, data
    for dialect in DIALECT_NAMES:
        for (data, valid), verdict in zip(instances, judge_schema(schema, instances, dialect)):
            # In raw text (qwen3_coder, glm) an invalid object is also the text of a valid string.
            expected = {Outcome.ACCEPTED} if valid else {Outcome.REJECTED, Outcome.READS_AS_ANOTHER_VALUE}
            assert verdict.outcome in expected and verdict.exact, (dialect, data, verdict)


def test_wrapped_metaschema_reference_still_validates():
    """The metaschema's ``$dynamicRef`` walks the dynamic scope; a wrapped
    copy given its own ``$id`` (the first way of wrapping tried) made
    ``jsonschema`` fail there, so valid definitions were refused (defs.json)."""
    schema = {"$schema": "https://json-schema.org/draft/2020-12/schema", "$ref": "https://json-schema.org/draft/2020-12/schema"}
    instances = [({"$defs": {"foo": {"type": "integer"}}}, True), ({"$defs": {"foo": {"type": 1}}}, False)]
    outcomes = [verdict.outcome for verdict in judge_schema(schema, instances, "hermes")]
    assert outcomes == [Outcome.ACCEPTED, Outcome.REJECTED_BY_VALIDATION]


def test_object_schema_is_not_wrapped():
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}
    tool = schema_tool(schema)
    assert not tool.wrapped and tool.definition["parameters"] is schema
    verdicts = judge_schema(schema, [({"a": 1}, True), ({"a": 1, "b": "open"}, True), ("a", False)], "qwen3_coder")
    assert [v.outcome for v in verdicts] == [Outcome.ACCEPTED, Outcome.ACCEPTED, Outcome.NOT_AN_OBJECT]


# -- a slice of the corpus sweep --------------------------------------------------


def judge_groups(groups, deviation=lambda group: None, known=None) -> tuple[Counter[str], list[str]]:
    """Each group judged in two dialects (a raw-text one and another, the
    six in turn): the counts of outcomes, and every miss that is neither a
    listed ``deviation`` nor in a file of ``known`` misses."""
    counts: Counter[str] = Counter()
    misses = []
    for index, group in enumerate(groups):
        instances = [(test.data, test.valid) for test in group.tests]
        for dialect in (DIALECT_NAMES[index % 6], DIALECT_NAMES[(index + 3) % 6]):
            for test, verdict in zip(group.tests, judge_schema(group.schema, instances, dialect)):
                deviates = verdict.failed and deviation(group) is not None
                explained = verdict.failed and group.source in (known or {})
                counts["deviation" if deviates else "known miss" if explained else verdict.outcome.value] += 1
                counts["exact invalid judged"] += not verdict.valid and verdict.exact and verdict.outcome is not Outcome.NOT_AN_OBJECT
                if verdict.failed and not deviates and not explained:
                    misses.append(f"{group.source} / {group.description} / {test.description} [{dialect}]: "
                                  f"{verdict.outcome.value}: {verdict.reason}")
    return counts, misses


@pytest.mark.slow
def test_jsts_slice():
    """Every group: no miss but the deliberate deviations and the known
    misses of the optional format files (their causes listed)."""
    counts, misses = judge_groups(jsts_groups(optional=True), jsts_deviation, JSTS_KNOWN_MISSES)
    assert misses == [], "\n".join(misses)
    assert counts["accepted"] > 2000 and counts["rejected"] > 800 and counts["exact invalid judged"] > 1000, counts


@pytest.mark.slow
def test_maskbench_slice():
    counts, misses = judge_groups(maskbench_groups()[::6], known=MASKBENCH_KNOWN_MISSES)
    assert misses == [], "\n".join(misses)
    assert counts["accepted"] > 800 and counts["rejected"] > 300, counts


@pytest.mark.slow
def test_roundtrip_slice():
    """Every 20th BFCL entry and every MCP tool, in every dialect: accepted
    and read back equal."""
    facts = bfcl_facts()
    misses = []
    judged: Counter[str] = Counter()
    cases = [(entry.functions, [Call(n, a, True) for n, a in entry.calls]) for entry in bfcl_entries()[::20] if entry.id not in facts]
    cases += [(call.tools, [Call(call.name, call.arguments, True)]) for call in mcp_calls()]
    for dialect in DIALECT_NAMES:
        for tools, calls in cases:
            for call, verdict in zip(calls, judge_calls(tools, calls, dialect)):
                judged[verdict.outcome.value] += 1
                if verdict.outcome is not Outcome.ACCEPTED:
                    misses.append(f"{call.name} [{dialect}]: {verdict.outcome.value}: {verdict.reason}")
    assert misses == [], "\n".join(misses)
    assert judged["accepted"] > 6 * 100, judged

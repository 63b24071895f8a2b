"""Every function that dispatches over all frame kinds handles each member
of the ``Frame`` union. Each ends in ``case _: assert_never(frame)``, so
mypy names it when a kind is added to the union; this test runs each on
one frame of every kind, so a kind it forgets fails here too."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, get_args

import pytest

from constrained.dialects import get_dialect
from constrained.dialects.base import Markers
from constrained.frames import accepts, examples, types
from constrained.frames.model import ArrayFrame, Frame, NormalizedSchema, NullFrame, ObjectFrame, RefFrame, UnionFrame
from constrained.grammar.emitter import ValueEmitter
from constrained.grammar.lark import RuleSet
from constrained.output import repair
from constrained.qa import conformance
from constrained.runtime import budget
from constrained.tokenizers import load_tokenizer

DEFINITIONS: dict[str, Frame] = {"target": NullFrame()}
SCHEMA = NormalizedSchema(ObjectFrame(), DEFINITIONS)
KINDS: tuple[type, ...] = get_args(Frame)
SAMPLES = {ArrayFrame: [None], ObjectFrame: {}, UnionFrame: None, RefFrame: None}
"""A value each kind may be asked about (any value does for the others)."""


def one_of(kind: type) -> Frame:
    """A small frame of ``kind``: a reference names a definition, a union
    has two options."""
    if kind is RefFrame:
        return RefFrame("target")
    if kind is UnionFrame:
        return UnionFrame((NullFrame(), ObjectFrame()))
    return kind()


def emitted(frame: Frame) -> str:
    syntax = get_dialect("hermes").values_syntax(Markers(load_tokenizer("qwen3")))
    emitter = ValueEmitter(RuleSet(), syntax, DEFINITIONS, key_order="schema", tool="t")
    return emitter._body(frame, "")


def example(frame: Frame) -> Any:
    try:
        return examples._example(frame, DEFINITIONS, 0, "plain", 0)
    except examples._NoExample:
        return None


DISPATCHES: dict[str, Callable[[Frame, Any], object]] = {
    "accepts": lambda frame, value: accepts.frame_accepts(frame, value, DEFINITIONS),
    "explain": lambda frame, value: accepts.explain(frame, value, DEFINITIONS),
    "types": lambda frame, value: types.json_types(frame, DEFINITIONS),
    "examples": lambda frame, value: example(frame),
    "emitter": lambda frame, value: emitted(frame),
    "budget": lambda frame, value: budget.minimal_value(frame, DEFINITIONS),
    "repair": lambda frame, value: repair._declared_only(value, frame, SCHEMA),
    "conformance": lambda frame, value: conformance._as_written(value, frame, SCHEMA),
}


def test_the_union_has_the_kinds_this_test_builds() -> None:
    assert len(KINDS) == 11 and all(isinstance(one_of(kind), kind) for kind in KINDS)


@pytest.mark.parametrize("name", sorted(DISPATCHES))
@pytest.mark.parametrize("kind", KINDS, ids=lambda kind: kind.__name__)
def test_each_dispatch_handles_each_kind(name: str, kind: type) -> None:
    DISPATCHES[name](one_of(kind), SAMPLES.get(kind, 1))


@pytest.mark.parametrize("name", sorted(DISPATCHES))
def test_a_value_that_is_no_frame_is_refused(name: str) -> None:
    with pytest.raises((AssertionError, AttributeError, TypeError)):
        DISPATCHES[name](object(), 1)  # type: ignore[arg-type]

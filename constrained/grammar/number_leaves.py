"""Numeric frames -> ``%json`` number leaves, with only what llguidance
enforces exactly.

llguidance enforces bounds and ``multipleOf`` on a number leaf, but not all
of them correctly or affordably (measured with llguidance 1.9.1): this module
keeps the keywords it gets right and drops the others, each reported, so the
leaf is the frame or a superset of it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from decimal import Decimal
from typing import Any

from ..caches import cached
from ..frames.model import IntegerFrame, NumberFrame
from .lark import json_leaf

# Largest multipleOf step enforced, as its decimal digits without trailing
# zeros read as an integer (0.0075 -> 75, 86400 -> 864): llguidance builds an
# automaton with about that many states (a prime near 10**5 adds half a
# second to a compile; 123456789 exhausts memory and aborts the process).
MAX_MULTIPLE_STEP = 10_000

# Largest magnitude of a numeric bound enforced: llguidance 1.9.1 refuses
# integer ranges from about 2**62 on, and beyond 2**63 turns an integer bound
# into a wrong one without a word (maximum 1e300 rejected 10**299).
MAX_BOUND = 10**18


@cached(1)
def negative_multiples() -> bool:
    """Whether llguidance's ``multipleOf`` admits negative multiples: 1.7
    (the version vLLM 0.32 pins) rejects every one (-9 for a step of 3),
    1.8 and later take them. Asked on first use: reading the installed
    version loads :mod:`importlib.metadata`, slow to import."""
    from importlib.metadata import version

    major, minor = (int(part) for part in version("llguidance").split(".")[:2])
    return (major, minor) >= (1, 8)


def number_leaf(frame: IntegerFrame | NumberFrame, path: str, warn: Callable[[str, str, str], None]) -> str:
    """A ``%json`` number leaf, without the keywords llguidance cannot
    enforce (each reported through ``warn(path, keyword, message)``): a
    ``multipleOf`` it gets wrong or cannot afford, bounds beyond
    :data:`MAX_BOUND` or that it refuses."""
    schema = number_schema(frame)
    if frame.multiple_of is not None and not (
        multiple_enforceable(frame.kind, frame.multiple_of) and (negative_multiples() or _non_negative(frame))
    ):
        del schema["multipleOf"]
        warn(path, "multipleOf", f"multipleOf {frame.multiple_of} is not enforced during generation")
    bounds = [k for k in schema if k not in ("type", "multipleOf")]
    for keyword in [k for k in bounds if abs(schema[k]) > MAX_BOUND]:
        warn(path, keyword, f"{keyword} {schema.pop(keyword)} is not enforced during generation")
    if not llguidance_reads(json.dumps(schema)):
        bounds = [k for k in schema if k not in ("type", "multipleOf")]
        # One bound alone may be the trouble.
        alone = [k for k in bounds if llguidance_reads(json.dumps({x: v for x, v in schema.items() if x != k}))]
        for keyword in alone[:1] or bounds:
            warn(path, keyword, f"{keyword} {schema.pop(keyword)} is not enforced during generation")
    return json_leaf(schema)


@cached(1024)
def multiple_enforceable(kind: str, step: int | float) -> bool:
    """Whether llguidance enforces ``multipleOf: step`` on a ``kind`` number
    exactly, as measured with llguidance 1.9.1: an integral step of at most
    :data:`MAX_MULTIPLE_STEP` units, or a power of ten down to 0.0001.
    Other fractional steps are not: it refuses some floats it cannot read
    exactly (0.07 becomes 7000000000000001 units), rejects multiples written
    with fewer decimals than the step (0.5 for 0.25, 0.015 for 0.0075), and
    rejects the exponent form ``json.dumps`` gives below 0.0001 (3e-08)."""
    digits, exponent = Decimal(repr(step)).normalize().as_tuple()[1:]
    assert isinstance(exponent, int), "a finite step"
    units = int("".join(map(str, digits)))
    if not ((exponent >= 0 and units <= MAX_MULTIPLE_STEP) or (units == 1 and exponent >= -4)):
        return False
    return llguidance_reads(json.dumps({"type": kind, "multipleOf": step}))


def _non_negative(frame: IntegerFrame | NumberFrame) -> bool:
    return frame.minimum is not None and frame.minimum >= 0


@cached(1024)
def llguidance_reads(schema: str) -> bool:
    """Whether llguidance compiles the JSON Schema ``schema`` (JSON text) as
    a ``%json`` leaf (llguidance is imported here, on first use: a parser
    that reads the emitters' module never needs it)."""
    import llguidance

    return not llguidance.LLMatcher.validate_grammar(f"start: %json {schema}")


def number_schema(frame: IntegerFrame | NumberFrame) -> dict[str, Any]:
    """The JSON Schema llguidance enforces for a numeric frame."""
    schema: dict[str, Any] = {"type": frame.kind}
    if isinstance(frame, IntegerFrame):
        if frame.minimum is not None:
            schema["minimum"] = frame.minimum
        if frame.maximum is not None:
            schema["maximum"] = frame.maximum
    else:
        if frame.minimum is not None:
            schema["exclusiveMinimum" if frame.exclusive_minimum else "minimum"] = frame.minimum
        if frame.maximum is not None:
            schema["exclusiveMaximum" if frame.exclusive_maximum else "maximum"] = frame.maximum
    if frame.multiple_of is not None:
        schema["multipleOf"] = frame.multiple_of
    return schema

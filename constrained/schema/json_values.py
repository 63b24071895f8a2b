"""JSON values as JSON Schema sees them: their types, equality, exact
numbers and ECMA patterns; and JSON text as a cache key.

The normalizer needs these to intersect ``enum`` lists and to drop enum
values that other keywords exclude; the validator and the frame checks
(:mod:`constrained.frames.accepts`) share them."""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Hashable, Iterable
from fractions import Fraction
from typing import Any

from .patterns import pattern_matcher


def json_type(value: Any) -> str:
    """The JSON type name of a Python value; integral floats are ``integer``
    (JSON Schema counts ``1.0`` as an integer)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "integer" if value.is_integer() else "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    raise TypeError(f"not a JSON value: {value!r}")


def json_key(value: Any) -> Hashable:
    """A hashable key under which two values are equal exactly when JSON
    Schema's ``enum``/``const`` equality says so (``1 == 1.0``, ``1 != true``)."""
    if value is None:
        return ("null",)
    if isinstance(value, bool):
        return ("boolean", value)
    if isinstance(value, (int, float)):
        if isinstance(value, float) and not math.isfinite(value):
            return ("number", repr(value))
        return ("number", exact(value))
    if isinstance(value, str):
        return ("string", value)
    if isinstance(value, list):
        return ("array", tuple(json_key(v) for v in value))
    if isinstance(value, dict):
        return ("object", tuple(sorted((k, json_key(v)) for k, v in value.items())))
    raise TypeError(f"not a JSON value: {value!r}")


def json_text(value: Any) -> str | None:
    """``value`` written as JSON, members in the order given, or ``None``
    when it is not plain JSON (objects, NaN) or is nested too deep to write
    (reading it says why)."""
    try:
        return json.dumps(value, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError, RecursionError):
        return None


def text_digest(text: str) -> str:
    """The SHA-256 of ``text``, a cache key. A lone surrogate is hashed as
    written (surrogatepass): what reads the text refuses it, by name."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def dedupe_values(values: Iterable[Any]) -> list[Any]:
    """``values`` without repeats under JSON Schema equality, first kept."""
    seen: set[Hashable] = set()
    out = []
    for value in values:
        key = json_key(value)
        if key not in seen:
            seen.add(key)
            out.append(value)
    return out


def intersect_values(left: list[Any], right: list[Any]) -> list[Any]:
    """The values of ``left`` also in ``right`` (an ``enum`` intersection)."""
    keys = {json_key(v) for v in right}
    return dedupe_values(v for v in left if json_key(v) in keys)


def exact(number: int | float) -> Fraction:
    """A number as an exact fraction, reading floats by their shortest decimal
    form (``0.1`` is 1/10), as a schema author means them."""
    if isinstance(number, float):
        return Fraction(repr(number))
    return Fraction(number)


def pattern_matches(pattern: str, text: str) -> bool:
    """ECMA 262 ``pattern`` semantics approximated in Python (unanchored
    search, read as :func:`~constrained.schema.patterns.python_pattern`
    reads it), in linear time where RE2 can say the pattern
    (:func:`~constrained.schema.patterns.pattern_matcher`). A pattern no
    Python engine reads, or one that runs past its time on ``text``, is
    treated as matching: the check errs towards accepting."""
    return pattern_matcher(pattern).matches(text)

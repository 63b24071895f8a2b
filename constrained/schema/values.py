"""JSON values as JSON Schema sees them: their types, equality, and whether a
frame accepts one.

The normalizer needs these to intersect ``enum`` lists and to drop enum values
that other keywords exclude; tests use :func:`frame_accepts` to compare frames
with ``jsonschema``.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any, Hashable, Iterable, Mapping

from ..frames import (
    ArrayFrame,
    BooleanFrame,
    EnumFrame,
    Frame,
    FreeFrame,
    IntegerFrame,
    NullFrame,
    NumberFrame,
    ObjectFrame,
    RefFrame,
    StringFrame,
    UnionFrame,
)
from .formats import format_matches
from .patterns import python_pattern


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
    search, :func:`~constrained.schema.patterns.python_pattern`). A pattern
    no Python engine reads is treated as matching: the check errs towards
    accepting."""
    compiled = python_pattern(pattern)
    return compiled is None or compiled.search(text) is not None


def frame_accepts(frame: Frame, value: Any, definitions: Mapping[str, Frame] = {}) -> bool:
    """Whether ``value`` satisfies ``frame`` (following :class:`RefFrame` through
    ``definitions``). A value nested too deep to check within Python's
    recursion limit (a recursive schema allows any depth) is not accepted."""
    try:
        return _accepts(frame, value, definitions)
    except RecursionError:
        return False


def _accepts(frame: Frame, value: Any, definitions: Mapping[str, Frame]) -> bool:
    if isinstance(frame, RefFrame):
        return _accepts(definitions[frame.name], value, definitions)
    if isinstance(frame, FreeFrame):
        return True
    if isinstance(frame, UnionFrame):
        return any(_accepts(option, value, definitions) for option in frame.options)
    if isinstance(frame, EnumFrame):
        key = json_key(value)
        return any(json_key(v) == key for v in frame.values)
    kind = json_type(value)
    if isinstance(frame, NullFrame):
        return kind == "null"
    if isinstance(frame, BooleanFrame):
        return kind == "boolean"
    if isinstance(frame, IntegerFrame):
        return kind == "integer" and _number_in(value, frame.minimum, frame.maximum, False, False, frame.multiple_of)
    if isinstance(frame, NumberFrame):
        return kind in ("integer", "number") and _number_in(
            value,
            frame.minimum,
            frame.maximum,
            frame.exclusive_minimum,
            frame.exclusive_maximum,
            frame.multiple_of,
        )
    if isinstance(frame, StringFrame):
        return kind == "string" and _string_ok(frame, value)
    if isinstance(frame, ArrayFrame):
        return kind == "array" and _array_ok(frame, value, definitions)
    if isinstance(frame, ObjectFrame):
        return kind == "object" and _object_ok(frame, value, definitions)
    raise TypeError(f"not a frame: {frame!r}")


def _number_in(value: Any, low: Any, high: Any, low_excl: bool, high_excl: bool, multiple: Any) -> bool:
    if low is not None and (value < low or (low_excl and value == low)):
        return False
    if high is not None and (value > high or (high_excl and value == high)):
        return False
    if multiple is not None:
        return (exact(value) / exact(multiple)).denominator == 1
    return True


def _string_ok(frame: StringFrame, value: str) -> bool:
    if len(value) < frame.min_length:
        return False
    if frame.max_length is not None and len(value) > frame.max_length:
        return False
    if not all(pattern_matches(p, value) for p in frame.patterns):
        return False
    return frame.format is None or format_matches(frame.format, value)


def _array_ok(frame: ArrayFrame, value: list, definitions: Mapping[str, Frame]) -> bool:
    if len(value) < frame.min_items:
        return False
    if frame.max_items is not None and len(value) > frame.max_items:
        return False
    for index, item in enumerate(value):
        if index < len(frame.prefix_items):
            item_frame: Frame | None = frame.prefix_items[index]
        else:
            item_frame = frame.items
        if item_frame is None or not _accepts(item_frame, item, definitions):
            return False
    return True


def _object_ok(frame: ObjectFrame, value: dict, definitions: Mapping[str, Frame]) -> bool:
    if len(value) < frame.min_properties:
        return False
    if frame.max_properties is not None and len(value) > frame.max_properties:
        return False
    if any(key not in value for key in frame.required):
        return False
    for key, item in value.items():
        frames = member_frames(frame, key)
        if frames is None or not all(_accepts(f, item, definitions) for f in frames):
            return False
    return True


def member_frames(frame: ObjectFrame, key: str) -> list[Frame] | None:
    """The frames the value of ``key`` must satisfy in ``frame`` (all of
    them): its declared property, else the pattern properties it matches,
    else the additional-properties frame; ``None`` when the key may not
    appear."""
    if key in frame.forbidden:
        return None
    declared = frame.property(key)
    if declared is not None:
        return [declared]
    matched = [f for pattern, f in frame.pattern_properties if pattern_matches(pattern, key)]
    if matched:
        return matched
    return None if frame.additional is None else [frame.additional]

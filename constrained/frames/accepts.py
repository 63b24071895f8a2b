"""Whether a frame accepts a JSON value, and which frames a member of an
object must satisfy: the frames' own semantics, which the grammar, the
parser and the tests (comparing frames with ``jsonschema``) rely on."""

from __future__ import annotations

from typing import Any
from collections.abc import Mapping

from .model import (
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
from ..schema.formats import format_matches
from ..schema.json_values import exact, json_key, json_type, pattern_matches


def frame_accepts(frame: Frame, value: Any, definitions: Mapping[str, Frame] = {}) -> bool:
    """Whether ``value`` satisfies ``frame`` (following :class:`RefFrame` through
    ``definitions``). A value nested too deep to check within Python's
    recursion limit (a recursive schema allows any depth) is not accepted."""
    try:
        return _accepts(frame, value, definitions)
    except RecursionError:
        return False


def union_branch(union: UnionFrame, value: Any, definitions: Mapping[str, Frame] = {}) -> Frame | None:
    """The option of ``union`` that ``value`` takes where one must be chosen
    (the renderer's key order, the writability and conformance checks): the
    first that accepts it, or ``None`` when none does."""
    return next((option for option in union.options if frame_accepts(option, value, definitions)), None)


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

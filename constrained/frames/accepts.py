"""Whether a frame accepts a JSON value, and which frames a member of an
object must satisfy: the frames' own semantics, which the grammar, the
parser and the tests (comparing frames with ``jsonschema``) rely on.

:func:`frame_accepts` only says yes or no, as the grammar and the parser
need it fast; a rejected call needs the reason, so that a model asked to
retry (or a person) knows what to fix: :func:`explain` makes the same
checks in the same order, containers before their members, and says the
first that fails (the value's JSON Pointer, the keyword and its bound)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, assert_never

from ..schema.formats import format_matches
from ..schema.json_values import exact, json_key, json_type, pattern_matches
from ..schema.validation import Failure, failure
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
    resolve_frame,
)
from .types import json_types

Path = tuple[str | int, ...]


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
    match frame:
        case RefFrame():
            return _accepts(definitions[frame.name], value, definitions)
        case FreeFrame():
            return True
        case UnionFrame():
            return any(_accepts(option, value, definitions) for option in frame.options)
        case EnumFrame():
            key = json_key(value)
            return any(json_key(v) == key for v in frame.values)
        case NullFrame():
            return json_type(value) == "null"
        case BooleanFrame():
            return json_type(value) == "boolean"
        case IntegerFrame():
            return json_type(value) == "integer" and _number_fault(frame, value) is None
        case NumberFrame():
            return json_type(value) in ("integer", "number") and _number_fault(frame, value) is None
        case StringFrame():
            return json_type(value) == "string" and _string_fault(frame, value) is None
        case ArrayFrame():
            return json_type(value) == "array" and _array_ok(frame, value, definitions)
        case ObjectFrame():
            return json_type(value) == "object" and _object_ok(frame, value, definitions)
        case _:
            assert_never(frame)


Fault = tuple[str, Any]
"""A keyword a value breaks, with its bound: what both the yes-or-no check
and :func:`explain` take from :func:`_number_fault` and :func:`_string_fault`."""


def _number_fault(frame: IntegerFrame | NumberFrame, value: Any) -> Fault | None:
    low, high = frame.minimum, frame.maximum
    if low is not None:
        if isinstance(frame, NumberFrame) and frame.exclusive_minimum and value <= low:
            return "exclusiveMinimum", low
        if value < low:
            return "minimum", low
    if high is not None:
        if isinstance(frame, NumberFrame) and frame.exclusive_maximum and value >= high:
            return "exclusiveMaximum", high
        if value > high:
            return "maximum", high
    if frame.multiple_of is not None and (exact(value) / exact(frame.multiple_of)).denominator != 1:
        return "multipleOf", frame.multiple_of
    return None


def _size_fault(size: int, low: int, high: int | None, keywords: tuple[str, str]) -> Fault | None:
    if size < low:
        return keywords[0], low
    if high is not None and size > high:
        return keywords[1], high
    return None


_ITEMS = ("minItems", "maxItems")
_PROPERTIES = ("minProperties", "maxProperties")


def _string_fault(frame: StringFrame, value: str) -> Fault | None:
    if len(value) < frame.min_length:
        return "minLength", frame.min_length
    if frame.max_length is not None and len(value) > frame.max_length:
        return "maxLength", frame.max_length
    pattern = next((p for p in frame.patterns if not pattern_matches(p, value)), None)
    if pattern is not None:
        return "pattern", pattern
    if frame.format is not None and not format_matches(frame.format, value):
        return "format", frame.format
    return None


def _array_ok(frame: ArrayFrame, value: list, definitions: Mapping[str, Frame]) -> bool:
    if _size_fault(len(value), frame.min_items, frame.max_items, _ITEMS) is not None:
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
    if _size_fault(len(value), frame.min_properties, frame.max_properties, _PROPERTIES) is not None:
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


def explain(frame: Frame, value: Any, definitions: Mapping[str, Frame] = {}, at: Iterable[str | int] = ()) -> Failure | None:
    """The first failure of ``value`` (found at path ``at``) under
    ``frame``; ``None`` when the frame accepts it, or when the value is
    nested too deep to walk (as :func:`frame_accepts` refuses it)."""
    try:
        return _explain(frame, value, definitions, tuple(at))
    except RecursionError:
        return None


def _explain(frame: Frame, value: Any, definitions: Mapping[str, Frame], path: Path) -> Failure | None:
    match frame:
        case RefFrame():
            return _explain(definitions[frame.name], value, definitions, path)
        case FreeFrame():
            return None
        case UnionFrame():
            return _union(frame, value, definitions, path)
        case EnumFrame():
            if frame_accepts(frame, value):
                return None
            if len(frame.values) == 1:
                return failure(path, "const", value, frame.values[0])
            return failure(path, "enum", value, frame.values)
    if json_type(value) not in json_types(frame):
        return failure(path, "type", value, frame.kind)
    match frame:
        case IntegerFrame() | NumberFrame():
            fault = _number_fault(frame, value)
        case StringFrame():
            fault = _string_fault(frame, value)
        case ArrayFrame():
            return _array(frame, value, definitions, path)
        case ObjectFrame():
            return _object(frame, value, definitions, path)
        case NullFrame() | BooleanFrame():
            return None  # the type is all there is
        case _:
            assert_never(frame)
    return None if fault is None else failure(path, fault[0], value, fault[1])


def _union(frame: UnionFrame, value: Any, definitions: Mapping[str, Frame], path: Path) -> Failure | None:
    """A union's failure: that of the one option the value's type (and,
    for objects, the tags it gives) leaves, else that no option takes it."""
    if frame_accepts(frame, value, definitions):
        return None
    kind = json_type(value)
    fitting = [option for option in frame.options if kind in json_types(option, definitions)]
    if not fitting:
        return failure(path, "type", value, json_types(frame, definitions))
    if len(fitting) > 1 and isinstance(value, dict):
        fitting = [option for option in fitting if _tags_agree(option, value, definitions)] or fitting
    if len(fitting) == 1:
        return _explain(fitting[0], value, definitions, path)
    return failure(path, "anyOf", value, len(frame.options))


def _tags_agree(option: Frame, value: dict, definitions: Mapping[str, Frame]) -> bool:
    """Whether every one-value property (``const``, a discriminator) of the
    object ``option`` that ``value`` gives has that value."""
    option = resolve_frame(option, definitions)
    if not isinstance(option, ObjectFrame):
        return True
    for key, frame in option.properties:
        frame = resolve_frame(frame, definitions)
        if isinstance(frame, EnumFrame) and len(frame.values) == 1 and key in value:
            if not frame_accepts(frame, value[key]):
                return False
    return True


def _array(frame: ArrayFrame, value: list, definitions: Mapping[str, Frame], path: Path) -> Failure | None:
    fault = _size_fault(len(value), frame.min_items, frame.max_items, _ITEMS)
    if fault is not None:
        return failure(path, fault[0], value, fault[1])
    for index, item in enumerate(value):
        item_frame = frame.prefix_items[index] if index < len(frame.prefix_items) else frame.items
        if item_frame is None:
            return failure(path, "items", value, len(frame.prefix_items))
        found = _explain(item_frame, item, definitions, (*path, index))
        if found is not None:
            return found
    return None


def _object(frame: ObjectFrame, value: dict, definitions: Mapping[str, Frame], path: Path) -> Failure | None:
    fault = _size_fault(len(value), frame.min_properties, frame.max_properties, _PROPERTIES)
    missing = next((key for key in frame.required if key not in value), None)
    if fault is None and missing is not None:
        fault = "required", missing
    if fault is not None:
        return failure(path, fault[0], value, fault[1])
    for key, item in value.items():
        frames = member_frames(frame, key)
        if frames is None:
            return failure(path, "additionalProperties", value, key)
        for member in frames:
            found = _explain(member, item, definitions, (*path, key))
            if found is not None:
                return found
    return None

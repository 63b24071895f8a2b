"""A short example value for a frame, valid for it.

A compiled tool set's warm-up (:func:`constrained.runtime.constraint.warm_mask_cache`)
writes one call of each tool with such arguments through its grammar, so
the masks of the markup every call of the tool walks (its keys, the
closings of its values, the end of the call) are computed before the first
request. Only the markup matters there, so an example is the plainest
value the frame accepts (an array has two items where it may, so the
masks after a comma are met, and so has a map: an object of undeclared
keys), or none.
"""

from __future__ import annotations

from typing import Any, Literal, get_args
from collections.abc import Mapping

from .accepts import frame_accepts
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
from .toolset import NormalizedTool

FORMAT_EXAMPLES = {
    "date-time": "2024-05-01T12:30:00Z",
    "date": "2024-05-01",
    "time": "12:30:00Z",
    "email": "someone@example.com",
    "uri": "https://example.com/",
    "uuid": "123e4567-e89b-12d3-a456-426614174000",
    "ipv4": "192.0.2.1",
    "hostname": "example.com",
}
"""A value of each string format an example may take."""

ExampleNumbers = Literal["plain", "fractions", "negative"]
"""Which numbers an example writes where any number goes (:func:`example_arguments`)."""

_DEPTH = 4
"""Nesting an example goes to at most (deeper frames have no example)."""
_ENUM_VALUES = 8
"""The most values of one top-level enum the warm-up's calls write."""


class _NoExample(Exception):
    """The frame has no example this module can write."""


def example_arguments(tool: NormalizedTool, numbers: ExampleNumbers = "plain") -> dict[str, Any] | None:
    """Arguments for a call of ``tool`` that its parameters accept: every
    property with an example, or None when a required one has none. A
    number any JSON number may be is ``1``, or with ``numbers="fractions"``
    ``0.5`` (a leading zero, a point, a decimal), with ``"negative"``
    ``-0.5``, where an integer any integer may be is ``-1`` (a minus)."""
    try:
        value = _example(tool.root, tool.schema.definitions, 0, numbers)
    except _NoExample:
        return None
    if not isinstance(value, dict) or not frame_accepts(tool.root, value, tool.schema.definitions):
        return None
    return value


def warm_up_arguments(tool: NormalizedTool) -> list[dict[str, Any]]:
    """The arguments of the warm-up's calls of ``tool``, each accepted by its
    parameters and each other than the ones before: the example (none:
    ``{}``), with fractions and with negative numbers
    (:func:`example_arguments`); then the example without each optional
    top-level key in turn, so the keys after it are met after the key
    before it too; then with each other value of a top-level enum (up to
    8), whose text the grammar forces once its first token is chosen."""
    examples = [example_arguments(tool, numbers) or {} for numbers in get_args(ExampleNumbers)]
    plain, derived = examples[0], []
    root = resolve_frame(tool.root, tool.schema.definitions)
    if plain and isinstance(root, ObjectFrame):
        derived += [{k: v for k, v in plain.items() if k != key} for key in plain if key not in root.required]
        for key, member in root.properties:
            frame = resolve_frame(member, tool.schema.definitions)
            if key in plain and isinstance(frame, EnumFrame):
                derived += [{**plain, key: value} for value in frame.values[1 : 1 + _ENUM_VALUES]]
    accepted = [arguments for arguments in derived if frame_accepts(tool.root, arguments, tool.schema.definitions)]
    calls: list[dict[str, Any]] = []
    for arguments in examples + accepted:
        if arguments not in calls:
            calls.append(arguments)
    return calls


def _example(frame: Frame, definitions: Mapping[str, Frame], depth: int, numbers: ExampleNumbers) -> Any:
    if depth > _DEPTH:
        raise _NoExample
    if isinstance(frame, RefFrame):
        if frame.name not in definitions:
            raise _NoExample
        return _example(definitions[frame.name], definitions, depth + 1, numbers)
    if isinstance(frame, UnionFrame):
        for option in frame.options:
            try:
                value = _example(option, definitions, depth + 1, numbers)
            except _NoExample:
                continue
            if frame_accepts(option, value, definitions):
                return value
        raise _NoExample
    if isinstance(frame, ObjectFrame):
        return _object(frame, definitions, depth, numbers)
    if isinstance(frame, ArrayFrame):
        count = max(frame.min_items, min(2, frame.max_items if frame.max_items is not None else 2))
        items = [*frame.prefix_items, *[frame.items] * max(count - len(frame.prefix_items), 0)][:count]
        if any(item is None for item in items):
            raise _NoExample
        return [_example(item, definitions, depth + 1, numbers) for item in items if item is not None]
    return _scalar(frame, numbers)


def _object(frame: ObjectFrame, definitions: Mapping[str, Frame], depth: int, numbers: ExampleNumbers) -> dict[str, Any]:
    value: dict[str, Any] = {}
    for key, member in frame.properties:
        if key in frame.forbidden:
            continue
        try:
            value[key] = _example(member, definitions, depth + 1, numbers)
        except _NoExample:
            if key in frame.required:
                raise
    if any(key not in value for key in frame.required):
        raise _NoExample  # a required key only additional or pattern properties define
    if not frame.properties and not frame.pattern_properties and frame.additional is not None \
            and (frame.max_properties is None or frame.max_properties >= 2):
        try:  # a map: two members, as an array has two items
            item = _example(frame.additional, definitions, depth + 1, numbers)
        except _NoExample:
            return value
        value = {"x": item, "y": item}
    return value


def _scalar(frame: Frame, numbers: ExampleNumbers) -> Any:
    if isinstance(frame, EnumFrame):
        if not frame.values:
            raise _NoExample
        return frame.values[0]
    if isinstance(frame, BooleanFrame):
        return True
    if isinstance(frame, NullFrame):
        return None
    if numbers != "plain" and isinstance(frame, (IntegerFrame, NumberFrame)) and frame.minimum is None \
            and frame.maximum is None and frame.multiple_of is None:
        if isinstance(frame, NumberFrame):
            return 0.5 if numbers == "fractions" else -0.5
        if numbers == "negative":
            return -1
    if isinstance(frame, (IntegerFrame, NumberFrame)):
        low = frame.minimum if frame.minimum is not None else min(1, frame.maximum) if frame.maximum is not None else 1
        if isinstance(frame, NumberFrame) and frame.exclusive_minimum and frame.minimum is not None:
            low = frame.minimum + 1
        step = frame.multiple_of
        if step:
            low = -(-low // step) * step
        return int(low) if isinstance(frame, IntegerFrame) or float(low).is_integer() else low
    if isinstance(frame, StringFrame):
        if frame.patterns:
            raise _NoExample
        if frame.format is not None:
            if frame.format not in FORMAT_EXAMPLES:
                raise _NoExample
            return FORMAT_EXAMPLES[frame.format]
        return "x" * max(frame.min_length, 1 if frame.max_length is None or frame.max_length >= 1 else 0)
    if isinstance(frame, FreeFrame):
        return "x"
    raise _NoExample

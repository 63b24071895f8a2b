"""A short example value for a frame, valid for it.

A compiled tool set's warm-up (:func:`constrained.runtime.constraint.warm_mask_cache`)
writes calls of each tool with such arguments through its grammar, so
the masks of the markup every call of the tool walks (its keys, the
closings of its values, the end of the call) are computed before the first
request. Only the markup matters there, so an example is the plainest
value the frame accepts (an array has two items where it may, so the
masks after a comma are met, and so has a map: an object of undeclared
keys), or none; the warm-up's other calls vary what decides the markup
(:func:`warm_up_arguments`): numbers' first characters, which keys are
written, each enum value, each union option, arrays' lengths.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, assert_never, get_args

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

_DEPTH = 8
"""Nesting an example goes to at most (deeper frames have no example)."""
_ENUM_VALUES = 8
"""The most values of each enum the warm-up's calls write."""
_EMPTY_ARRAYS = _ENUM_VALUES
"""The ``choice`` whose arrays have the fewest items they may (``[]``), past
those that write each enum value (so an enum in an array writes them all)."""
_ONE_ITEM = _EMPTY_ARRAYS + 1
"""The ``choice`` whose arrays have one item where they may: the closing
after the first item (the items after it meet again after each comma)."""
_FREE_VALUES: tuple[Any, ...] = ("x", ["x", "x"], 1, {"x": "x"})
"""The value a frame any value may take holds, by ``choice``, then ``"x"``."""


class _NoExample(Exception):
    """The frame has no example this module can write."""


def example_arguments(tool: NormalizedTool, numbers: ExampleNumbers = "plain", choice: int = 0) -> dict[str, Any] | None:
    """Arguments for a call of ``tool`` that its parameters accept: every
    property with an example, or None when a required one has none. A
    number any JSON number may be is ``1``, or with ``numbers="fractions"``
    ``0.5`` (a leading zero, a point, a decimal), with ``"negative"``
    ``-0.5``; where any integer may be, ``0`` (a leading zero, after which
    no digit may come) and ``-1`` (a minus). Every enum is its ``choice``-th
    value, or its first where it has fewer; with ``choice=1`` every boolean
    is ``false``, with ``choice=8`` every array as short as it may be and
    with ``choice=9`` one item long where it may, a value of any type is a
    string, then an array, a number and an object (:data:`_FREE_VALUES`),
    and a union's example is its ``choice``-th option's (counting round;
    its first with ``choice`` 8 and 9), or the next one's that has one."""
    try:
        value = _example(tool.root, tool.schema.definitions, 0, numbers, choice)
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
    before it too, and with the required keys and each optional one alone,
    so it is met after the required key before it; then with every enum,
    at any depth, at its second value, its third, and so on (up to 8
    values; an enum with fewer writes its first), whose text the grammar
    forces once its first token is chosen, with booleans ``false``, values
    of any type of other types and unions' other options along the way;
    then with arrays empty, and with arrays of one item (``choice``)."""
    examples = [example_arguments(tool, numbers) or {} for numbers in get_args(ExampleNumbers)]
    plain, derived = examples[0], []
    root = resolve_frame(tool.root, tool.schema.definitions)
    if plain and isinstance(root, ObjectFrame):
        optional = [key for key in plain if key not in root.required]
        derived += [{k: v for k, v in plain.items() if k != key} for key in optional]
        derived += [{k: v for k, v in plain.items() if k in root.required or k == key} for key in optional]
    accepted = [arguments for arguments in derived if frame_accepts(tool.root, arguments, tool.schema.definitions)]
    accepted += filter(None, (example_arguments(tool, choice=choice) for choice in range(1, _ONE_ITEM + 1)))
    calls: list[dict[str, Any]] = []
    for arguments in examples + accepted:
        if arguments not in calls:
            calls.append(arguments)
    return calls


def _example(frame: Frame, definitions: Mapping[str, Frame], depth: int, numbers: ExampleNumbers,
             choice: int) -> Any:
    if depth > _DEPTH:
        raise _NoExample
    if isinstance(frame, RefFrame):
        if frame.name not in definitions:
            raise _NoExample
        return _example(definitions[frame.name], definitions, depth + 1, numbers, choice)
    if isinstance(frame, UnionFrame):
        start = choice % len(frame.options) if frame.options and choice < _EMPTY_ARRAYS else 0
        for option in (*frame.options[start:], *frame.options[:start]):
            try:
                value = _example(option, definitions, depth + 1, numbers, choice)
            except _NoExample:
                continue
            if frame_accepts(option, value, definitions):
                return value
        raise _NoExample
    if isinstance(frame, ObjectFrame):
        return _object(frame, definitions, depth, numbers, choice)
    if isinstance(frame, ArrayFrame):
        count = max(frame.min_items, min(2, frame.max_items if frame.max_items is not None else 2))
        if choice == _EMPTY_ARRAYS:
            count = frame.min_items
        elif choice == _ONE_ITEM:
            count = max(frame.min_items, min(1, count))
        items = [*frame.prefix_items, *[frame.items] * max(count - len(frame.prefix_items), 0)][:count]
        if any(item is None for item in items):
            raise _NoExample
        return [_example(item, definitions, depth + 1, numbers, choice) for item in items if item is not None]
    return _scalar(frame, numbers, choice)


def _object(frame: ObjectFrame, definitions: Mapping[str, Frame], depth: int, numbers: ExampleNumbers,
            choice: int) -> dict[str, Any]:
    value: dict[str, Any] = {}
    for key, member in frame.properties:
        if key in frame.forbidden:
            continue
        try:
            value[key] = _example(member, definitions, depth + 1, numbers, choice)
        except _NoExample:
            if key in frame.required:
                raise
    if any(key not in value for key in frame.required):
        raise _NoExample  # a required key only additional or pattern properties define
    if not frame.properties and not frame.pattern_properties and frame.additional is not None \
            and (frame.max_properties is None or frame.max_properties >= 2):
        try:  # a map: two members, as an array has two items
            item = _example(frame.additional, definitions, depth + 1, numbers, choice)
        except _NoExample:
            return value
        value = {"x": item, "y": item}
    return value


def _scalar(frame: Frame, numbers: ExampleNumbers, choice: int) -> Any:
    match frame:
        case EnumFrame():
            if not frame.values:
                raise _NoExample
            return frame.values[choice if choice < min(len(frame.values), _ENUM_VALUES) else 0]
        case BooleanFrame():
            return choice != 1
        case NullFrame():
            return None
        case IntegerFrame() | NumberFrame():
            return _number(frame, numbers)
        case StringFrame():
            if frame.patterns:
                raise _NoExample
            if frame.format is not None:
                if frame.format not in FORMAT_EXAMPLES:
                    raise _NoExample
                return FORMAT_EXAMPLES[frame.format]
            return "x" * max(frame.min_length, 1 if frame.max_length is None or frame.max_length >= 1 else 0)
        case FreeFrame():
            return _FREE_VALUES[choice] if choice < len(_FREE_VALUES) else "x"
        case RefFrame() | UnionFrame() | ObjectFrame() | ArrayFrame():
            raise _NoExample  # :func:`_example` reads them before it asks here
        case _:
            assert_never(frame)


def _number(frame: IntegerFrame | NumberFrame, numbers: ExampleNumbers) -> int | float:
    if numbers != "plain" and frame.minimum is None and frame.maximum is None and frame.multiple_of is None:
        if isinstance(frame, NumberFrame):
            return 0.5 if numbers == "fractions" else -0.5
        return 0 if numbers == "fractions" else -1
    low = frame.minimum if frame.minimum is not None else min(1, frame.maximum) if frame.maximum is not None else 1
    if isinstance(frame, NumberFrame) and frame.exclusive_minimum and frame.minimum is not None:
        low = frame.minimum + 1
    step = frame.multiple_of
    if step:
        low = -(-low // step) * step
    return int(low) if isinstance(frame, IntegerFrame) or float(low).is_integer() else low

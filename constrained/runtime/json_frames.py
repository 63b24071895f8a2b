"""What the JSON walk (:mod:`.json_walk`) reads of frames: which frame a
member or item has, which values are free leaves, the automaton of a
number's text, the options of a union a byte can begin; and how the walk
follows a tool set's values at all (:func:`walk_shape`)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, assert_never

from ..dialects import get_dialect
from ..dialects.base import Markers
from ..frames.model import (
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
from ..grammar.syntax import NotWalkable, WalkShape

if TYPE_CHECKING:
    from ..compiler import CompiledTools

NUMBER_START = frozenset(b"-0123456789")
"""The bytes a JSON number begins with."""


def _number_steps(fraction: bool) -> dict[tuple[int, int], int]:
    """The automaton of a JSON number's text (RFC 8259; an integer has no
    fraction or exponent): state 0 is the start, and ``steps[state, byte]``
    the state after ``byte``, absent where the byte cannot follow. States
    2, 3, 5 and 8 are complete numbers."""
    digits, nonzero = b"0123456789", b"123456789"
    steps = {(0, ord("-")): 1, (0, ord("0")): 2, (1, ord("0")): 2}
    steps.update({(state, byte): 3 for state in (0, 1) for byte in nonzero})
    steps.update({(3, byte): 3 for byte in digits})
    if fraction:
        steps.update({(state, ord(".")): 4 for state in (2, 3)})
        steps.update({(state, byte): 6 for state in (2, 3, 5) for byte in b"eE"})
        steps.update({(state, byte): 5 for state in (4, 5) for byte in digits})
        steps.update({(6, ord("+")): 7, (6, ord("-")): 7})
        steps.update({(state, byte): 8 for state in (6, 7, 8) for byte in digits})
    return steps


INTEGER_STEPS, NUMBER_STEPS = _number_steps(False), _number_steps(True)

def member_frame(frame: ObjectFrame, key: str) -> Frame | None:
    """The frame of ``key``'s value in an object of ``frame``: the declared
    one, else the additional one when no pattern may pick another (else
    None: not known here)."""
    declared = frame.property(key)
    if declared is not None:
        return declared
    return frame.additional if not frame.pattern_properties else None


def is_map(frame: Frame | None) -> bool:
    """Whether an object of ``frame`` is a map: its keys free leaves (any
    key, the same frame for every value)."""
    return isinstance(frame, FreeFrame) or (
        isinstance(frame, ObjectFrame) and not frame.properties and not frame.pattern_properties
        and not frame.forbidden and frame.additional is not None
    )


def uncounted_from(frame: Frame | None) -> int | None:
    """From which item index on an array of ``frame`` no longer counts its
    items (the grammar stands in one place after each comma), or None."""
    if isinstance(frame, FreeFrame):
        return 1
    if isinstance(frame, ArrayFrame) and frame.max_items is None and frame.items is not None:
        return max(len(frame.prefix_items), frame.min_items, 1)
    return None


def free_number_steps(frame: Frame | None) -> dict[tuple[int, int], int] | None:
    """The automaton of a number of ``frame`` when it is free (an integer or
    number with no bound or step: the grammar's plain ``%json`` leaf), or
    None."""
    if isinstance(frame, (IntegerFrame, NumberFrame)) and frame.minimum is None and frame.maximum is None \
            and frame.multiple_of is None:
        return INTEGER_STEPS if isinstance(frame, IntegerFrame) else NUMBER_STEPS
    return None


def begins(frame: Frame, byte: int) -> bool:
    """Whether a value of ``frame`` may begin with ``byte``."""
    match frame:
        case FreeFrame() | UnionFrame():
            return True
        case EnumFrame():
            return any(begins_value(value, byte) for value in frame.values)
        case StringFrame():
            return byte == ord('"')
        case IntegerFrame() | NumberFrame():
            return byte in NUMBER_START
        case BooleanFrame():
            return byte in b"tf"
        case NullFrame():
            return byte == ord("n")
        case ObjectFrame():
            return byte == ord("{")
        case ArrayFrame():
            return byte == ord("[")
        case RefFrame():
            return False  # options are resolved before
        case _:
            assert_never(frame)


def is_free_string(frame: Frame | None) -> bool:
    """Whether a string of ``frame`` is a free leaf: any string (no length,
    pattern or format), the grammar's plain ``%json`` string."""
    return isinstance(frame, FreeFrame) or (
        isinstance(frame, StringFrame) and not frame.min_length and frame.max_length is None
        and not frame.patterns and frame.format is None
    )


def begins_value(value: object, byte: int) -> bool:
    return byte < 0x100 and json.dumps(value).encode()[:1] == bytes((byte,))

def walk_shape(compiled: CompiledTools) -> WalkShape | NotWalkable:
    """How the walk follows ``compiled``'s values, as its dialect's value
    syntax declares it (:meth:`~constrained.grammar.syntax.ValueSyntax.walk_shape`),
    or why it cannot."""
    return get_dialect(compiled.dialect).values_syntax(Markers(compiled.tokenizer)).walk_shape(compiled.tokenizer)

"""The effective JSON type of a frame, for schema-aware conversion of values.

Parsers decide how to read an argument's text from this, never from how the
text looks: ``$ref`` chains and unions with ``null`` resolve to the type
underneath (``anyOf[integer, null]`` is an integer that may be null).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import assert_never

from ..schema.json_values import json_type
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

AMBIGUOUS = "ambiguous"


def json_types(frame: Frame, definitions: Mapping[str, Frame] = {}) -> frozenset[str]:
    """Every JSON type a value of ``frame`` may have. ``integer`` appears
    alone only when all numbers allowed are integers; any value gives all
    seven names."""
    return frozenset(_types(frame, definitions, frozenset()))


def effective_type(frame: Frame, definitions: Mapping[str, Frame] = {}) -> str:
    """``"string"``, ``"integer"``, ``"number"``, ``"boolean"``, ``"null"``,
    ``"object"`` or ``"array"`` when values of ``frame`` have that one type,
    ignoring ``null`` beside another type (a nullable parameter) and counting
    integers as numbers beside non-integral numbers; else ``"ambiguous"``."""
    types = set(json_types(frame, definitions))
    if len(types) > 1:
        types.discard("null")
    if types == {"integer", "number"}:
        return "number"
    return next(iter(types)) if len(types) == 1 else AMBIGUOUS


_ALL = ("null", "boolean", "integer", "number", "string", "array", "object")


def _types(frame: Frame, definitions: Mapping[str, Frame], seen: frozenset[str]) -> set[str]:
    match frame:
        case RefFrame():
            if frame.name in seen:
                return set()
            return _types(definitions[frame.name], definitions, seen | {frame.name})
        case FreeFrame():
            return set(_ALL)
        case UnionFrame():
            return set().union(*(_types(option, definitions, seen) for option in frame.options))
        case EnumFrame():
            return {json_type(value) for value in frame.values}
        case NumberFrame():
            return {"integer", "number"}
        case StringFrame() | IntegerFrame() | BooleanFrame() | NullFrame() | ObjectFrame() | ArrayFrame():
            return {frame.kind}
        case _:
            assert_never(frame)

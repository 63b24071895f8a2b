"""The effective JSON type of a frame, for schema-aware conversion of values.

Parsers decide how to read an argument's text from this, never from how the
text looks: ``$ref`` chains and unions with ``null`` resolve to the type
underneath (``anyOf[integer, null]`` is an integer that may be null).
"""

from __future__ import annotations

from collections.abc import Mapping

from .model import EnumFrame, Frame, FreeFrame, RefFrame, UnionFrame
from ..schema.json_values import json_type

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
    if isinstance(frame, RefFrame):
        if frame.name in seen:
            return set()
        return _types(definitions[frame.name], definitions, seen | {frame.name})
    if isinstance(frame, FreeFrame):
        return set(_ALL)
    if isinstance(frame, UnionFrame):
        return set().union(*(_types(option, definitions, seen) for option in frame.options))
    if isinstance(frame, EnumFrame):
        return {json_type(value) for value in frame.values}
    if frame.kind == "number":
        return {"integer", "number"}
    return {frame.kind}

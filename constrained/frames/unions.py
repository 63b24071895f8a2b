"""Union algebra on frames: building unions, and deciding when two frames
cannot both match (which makes ``oneOf`` exactly ``anyOf``)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ..schema.json_values import dedupe_values
from .accepts import frame_accepts
from .model import EnumFrame, Frame, FreeFrame, IntegerFrame, NumberFrame, ObjectFrame, UnionFrame, resolve_frame


def union_of(frames: Iterable[Frame]) -> Frame:
    """One frame allowing what any of ``frames`` allows: nested unions
    flattened, duplicates dropped, enums merged; any value if one is free."""
    options: list[Frame] = []
    enum_values: list[Any] = []
    for frame in frames:
        members = frame.options if isinstance(frame, UnionFrame) else (frame,)
        for member in members:
            if isinstance(member, FreeFrame):
                return member
            if isinstance(member, EnumFrame):
                enum_values.extend(member.values)
            elif member not in options:
                options.append(member)
    if enum_values:
        options.append(EnumFrame(tuple(dedupe_values(enum_values))))
    if len(options) == 1:
        return options[0]
    return UnionFrame(tuple(options))


def frames_disjoint(a: Frame, b: Frame, definitions: Mapping[str, Frame]) -> bool:
    """True only when no value can satisfy both frames (a sound, incomplete test)."""
    a = resolve_frame(a, definitions)
    b = resolve_frame(b, definitions)
    if isinstance(a, FreeFrame) or isinstance(b, FreeFrame):
        return False
    if isinstance(a, UnionFrame):
        return all(frames_disjoint(option, b, definitions) for option in a.options)
    if isinstance(b, UnionFrame):
        return all(frames_disjoint(a, option, definitions) for option in b.options)
    if isinstance(a, EnumFrame):
        return not any(frame_accepts(b, value, definitions) for value in a.values)
    if isinstance(b, EnumFrame):
        return frames_disjoint(b, a, definitions)
    if not (_frame_types(a) & _frame_types(b)):
        return True
    if isinstance(a, ObjectFrame) and isinstance(b, ObjectFrame):
        return _objects_disjoint(a, b, definitions)
    if isinstance(a, (IntegerFrame, NumberFrame)) and isinstance(b, (IntegerFrame, NumberFrame)):
        return _ranges_disjoint(a, b)
    return False


def _objects_disjoint(a: ObjectFrame, b: ObjectFrame, definitions: Mapping[str, Frame]) -> bool:
    for first, second in ((a, b), (b, a)):
        for name in first.required:
            other = second.property(name)
            if other is None:
                if second.additional is None and not second.pattern_properties:
                    return True
                continue
            mine = first.property(name)
            if mine is not None and name in second.required and frames_disjoint(mine, other, definitions):
                return True
    return False


def _ranges_disjoint(a: IntegerFrame | NumberFrame, b: IntegerFrame | NumberFrame) -> bool:
    def strictly_below(x: IntegerFrame | NumberFrame, y: IntegerFrame | NumberFrame) -> bool:
        if x.maximum is None or y.minimum is None:
            return False
        touching = getattr(x, "exclusive_maximum", False) or getattr(y, "exclusive_minimum", False)
        return x.maximum < y.minimum or (x.maximum == y.minimum and touching)

    return strictly_below(a, b) or strictly_below(b, a)


def _frame_types(frame: Frame) -> set[str]:
    if isinstance(frame, IntegerFrame):
        return {"integer"}
    if isinstance(frame, NumberFrame):
        return {"integer", "number"}
    return {frame.kind}

"""Typed frames: the intermediate representation between JSON Schema and grammars.

A frame says what one JSON value may be, with every constraint that applies to
it already merged (``$ref`` followed, ``allOf`` and sibling keys folded in).
Grammar emitters and the parser read frames, never raw schemas, so both sides
agree on one reading of a tool's schema.

Frames are immutable. Recursive schemas are expressed with :class:`RefFrame`,
which names an entry of :attr:`NormalizedSchema.definitions`; every other
frame is a finite tree.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, get_args

from ..errors import SchemaWarning

JSONValue = None | bool | int | float | str | list | dict


@dataclass(frozen=True)
class StringFrame:
    """A string. Lengths count characters (code points), not bytes.

    ``patterns`` must all match (ECMA 262 regular expressions, unanchored, as
    JSON Schema defines them). ``format`` is one of :data:`SUPPORTED_FORMATS`.
    """

    kind: ClassVar[str] = "string"
    min_length: int = 0
    max_length: int | None = None
    patterns: tuple[str, ...] = ()
    format: str | None = None


@dataclass(frozen=True)
class IntegerFrame:
    """An integer (JSON Schema also counts ``1.0`` as one). Bounds are
    inclusive and already tightened to integers."""

    kind: ClassVar[str] = "integer"
    minimum: int | None = None
    maximum: int | None = None
    multiple_of: int | None = None


@dataclass(frozen=True)
class NumberFrame:
    """Any JSON number, with optional bounds and ``multipleOf``."""

    kind: ClassVar[str] = "number"
    minimum: int | float | None = None
    maximum: int | float | None = None
    exclusive_minimum: bool = False
    exclusive_maximum: bool = False
    multiple_of: int | float | None = None


@dataclass(frozen=True)
class BooleanFrame:
    kind: ClassVar[str] = "boolean"


@dataclass(frozen=True)
class NullFrame:
    kind: ClassVar[str] = "null"


@dataclass(frozen=True)
class EnumFrame:
    """Exactly one of ``values`` (from ``enum`` or ``const``), compared as JSON
    Schema does: ``1`` equals ``1.0`` but not ``"1"`` nor ``true``."""

    kind: ClassVar[str] = "enum"
    values: tuple[JSONValue, ...] = ()


@dataclass(frozen=True)
class ObjectFrame:
    """An object.

    ``properties`` keeps schema order. ``additional`` is the frame of keys not
    declared and not matched by ``pattern_properties``; ``None`` means such
    keys are not allowed. ``forbidden`` lists declared keys no value can
    satisfy (``"key": false``): they may not appear even when other keys may.
    """

    kind: ClassVar[str] = "object"
    properties: tuple[tuple[str, Frame], ...] = ()
    required: tuple[str, ...] = ()
    additional: Frame | None = None
    pattern_properties: tuple[tuple[str, Frame], ...] = ()
    min_properties: int = 0
    max_properties: int | None = None
    forbidden: tuple[str, ...] = ()

    def property(self, name: str) -> Frame | None:
        """The frame of a declared property, or ``None``."""
        for key, frame in self.properties:
            if key == name:
                return frame
        return None


@dataclass(frozen=True)
class ArrayFrame:
    """An array: ``prefix_items`` by position, then ``items`` for the rest
    (``None``: no further items allowed)."""

    kind: ClassVar[str] = "array"
    prefix_items: tuple[Frame, ...] = ()
    items: Frame | None = None
    min_items: int = 0
    max_items: int | None = None


@dataclass(frozen=True)
class UnionFrame:
    """Any one of ``options`` (from ``anyOf``, ``oneOf``, type arrays,
    ``nullable``). Options are flattened and deduplicated; never fewer than two."""

    kind: ClassVar[str] = "union"
    options: tuple[Frame, ...] = ()


@dataclass(frozen=True)
class RefFrame:
    """A recursive reference: the value is whatever
    ``NormalizedSchema.definitions[name]`` allows."""

    kind: ClassVar[str] = "ref"
    name: str = ""


@dataclass(frozen=True)
class FreeFrame:
    """Any single well-formed JSON value: the frame for untyped or open parts."""

    kind: ClassVar[str] = "free"


Frame = (
    StringFrame
    | IntegerFrame
    | NumberFrame
    | BooleanFrame
    | NullFrame
    | EnumFrame
    | ObjectFrame
    | ArrayFrame
    | UnionFrame
    | RefFrame
    | FreeFrame
)

FRAME_TYPES: tuple[type, ...] = get_args(Frame)
_BY_KIND: dict[str, Any] = {cls.kind: cls for cls in FRAME_TYPES}  # type: ignore[attr-defined]

# The formats enforced during generation (patterns in constrained.schema.formats).
SUPPORTED_FORMATS = frozenset(
    {"date-time", "date", "time", "duration", "uuid", "email", "uri", "uri-reference", "iri", "iri-reference",
     "uri-template", "ipv4", "ipv6", "hostname", "json-pointer", "relative-json-pointer"}
)


@dataclass(frozen=True)
class NormalizedSchema:
    """A schema read into frames: the root frame, the bodies of recursive
    references, and the warnings for everything relaxed."""

    root: Frame
    definitions: Mapping[str, Frame] = field(default_factory=dict)
    warnings: tuple[SchemaWarning, ...] = ()

    def resolve(self, frame: Frame) -> Frame:
        """``frame`` itself, or the body a :class:`RefFrame` names."""
        return resolve_frame(frame, self.definitions)

    def to_json(self) -> dict[str, Any]:
        return {
            "root": frame_to_json(self.root),
            "definitions": {name: frame_to_json(f) for name, f in self.definitions.items()},
            "warnings": [dataclasses.asdict(w) for w in self.warnings],
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> NormalizedSchema:
        return cls(
            root=frame_from_json(data["root"]),
            definitions={name: frame_from_json(f) for name, f in data["definitions"].items()},
            warnings=tuple(SchemaWarning(**w) for w in data["warnings"]),
        )


def resolve_frame(frame: Frame, definitions: Mapping[str, Frame]) -> Frame:
    """``frame``, or the body the :class:`RefFrame` chain from it names. A
    chain that loops, or names a body not defined yet (while the normalizer is
    still building it), stands for any value."""
    seen: set[str] = set()
    while isinstance(frame, RefFrame) and frame.name not in seen:
        seen.add(frame.name)
        frame = definitions.get(frame.name, FreeFrame())
    return FreeFrame() if isinstance(frame, RefFrame) else frame


def frame_to_json(frame: Frame) -> dict[str, Any]:
    """A JSON-serializable form of ``frame`` (stable: used for fingerprints)."""
    out: dict[str, Any] = {"kind": frame.kind}
    for f in dataclasses.fields(frame):
        out[f.name] = _field_to_json(getattr(frame, f.name))
    return out


def _field_to_json(value: Any) -> Any:
    if isinstance(value, FRAME_TYPES):
        return frame_to_json(value)  # type: ignore[arg-type]
    if isinstance(value, tuple):
        return [_field_to_json(v) for v in value]
    return value


def frame_from_json(data: Mapping[str, Any]) -> Frame:
    """Inverse of :func:`frame_to_json`."""
    cls = _BY_KIND[data["kind"]]
    kwargs = {}
    for f in dataclasses.fields(cls):
        if f.name in data:
            kwargs[f.name] = _field_from_json(f.name, data[f.name])
    return cls(**kwargs)


def _field_from_json(name: str, value: Any) -> Any:
    if name in ("properties", "pattern_properties"):
        return tuple((key, frame_from_json(f)) for key, f in value)
    if name in ("prefix_items", "options"):
        return tuple(frame_from_json(f) for f in value)
    if name in ("additional", "items"):
        return None if value is None else frame_from_json(value)
    if name in ("values", "patterns", "required", "forbidden"):
        return tuple(value)
    return value


def frame_digest(frame: Frame, memo: dict[int, str]) -> str:
    """A digest of ``frame``'s content. Equal frames get equal digests; a
    sub-frame shared in many places (the normalizer shares them) is digested
    once, through ``memo`` (keyed by identity, so the frames must outlive it),
    where :func:`frame_to_json` would write it out every time."""
    known = memo.get(id(frame))
    if known is not None:
        return known
    parts: list[Any] = [frame.kind]
    for f in dataclasses.fields(frame):
        parts.append(_field_digest(getattr(frame, f.name), memo))
    digest = hashlib.sha256(canonical_json(parts).encode("utf-8")).hexdigest()
    memo[id(frame)] = digest
    return digest


def _field_digest(value: Any, memo: dict[int, str]) -> Any:
    if isinstance(value, FRAME_TYPES):
        return ["frame", frame_digest(value, memo)]  # type: ignore[arg-type]
    if isinstance(value, tuple):
        return ["tuple", [_field_digest(v, memo) for v in value]]
    return ["value", value]


def canonical_json(value: Any) -> str:
    """Deterministic JSON text, for fingerprints and equality keys."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)

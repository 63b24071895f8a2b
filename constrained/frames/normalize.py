"""JSON Schema -> typed frames.

A subschema is read as a *conjunction of sites*: the node itself, the targets
of its ``$ref`` chain, its ``allOf`` members. ``anyOf``/``oneOf`` distribute
over that conjunction (``A and (B or C)`` becomes ``(A and B) or (A and C)``),
so every alternative is a flat list of sites whose keywords all apply. Each
alternative then becomes one frame with the tightest merged constraints.

Recursion is found by content: a conjunction of the same schema nodes met again
while it is still being built becomes a :class:`RefFrame`, and its body goes to
``definitions``. A ``$ref`` cycle that returns to a node without descending into
a child value has no content in between; it is relaxed to any value.

This module builds frames from conjunctions and reads ``type``, ``enum`` and
``const``; expanding a conjunction (:mod:`.conjunctions`) and each type's
keywords (:mod:`.objects`, :mod:`.arrays`, :mod:`.scalars`) are mixins on
:class:`~.sites.SiteReader`, put together in :class:`_Normalizer`.
"""

from __future__ import annotations

import math
import re
from typing import Any

from ..errors import UnsatisfiableSchemaError
from ..schema.json_values import dedupe_values, intersect_values, json_type
from ..schema.keywords import misspelt_keywords
from ..schema.limits import MAX_DEPTH, check_nesting
from .accepts import frame_accepts
from .arrays import ArrayReader
from .conjunctions import ConjunctionReader
from .model import BooleanFrame, EnumFrame, Frame, FreeFrame, NormalizedSchema, NullFrame, RefFrame
from .objects import ObjectReader
from .scalars import ScalarReader
from .sites import Alternative, Site, Unsatisfiable, paths
from .unions import union_of

TYPE_NAMES = ("object", "array", "string", "integer", "number", "boolean", "null")

# Keywords the constraint cannot enforce exactly; the frame they sit in is
# relaxed to a superset (the keyword is dropped) and a warning names them.
RELAXED_KEYWORDS = (
    "not",
    "if",
    "then",
    "else",
    "uniqueItems",
    "contains",
    "minContains",
    "maxContains",
    "dependentRequired",
    "dependentSchemas",
    "dependencies",
    "propertyNames",
    "unevaluatedItems",
    "unevaluatedProperties",
    "$dynamicRef",
    "$recursiveRef",
)

_STRING_KEYWORDS = ("minLength", "maxLength", "pattern", "format")
_NUMBER_KEYWORDS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf")
_OBJECT_KEYWORDS = (
    "properties",
    "required",
    "additionalProperties",
    "patternProperties",
    "minProperties",
    "maxProperties",
)
_ARRAY_KEYWORDS = ("items", "prefixItems", "additionalItems", "minItems", "maxItems")


def normalize_schema(
    schema: Any,
    *,
    strict: bool = True,
    tool: str | None = None,
    object_root: bool = False,
) -> NormalizedSchema:
    """Read a JSON Schema into frames.

    ``strict`` (the default) closes objects that declare ``properties`` but say
    nothing of ``additionalProperties``: tool authors list the keys they accept.
    ``strict=False`` follows JSON Schema literally (such objects stay open).
    ``object_root`` reads a typeless root as an object, as tool parameters are.

    Raises :class:`SchemaError` for malformed keywords and
    :class:`UnsatisfiableSchemaError` when merged keywords exclude every value.
    """
    return _Normalizer(schema, strict=strict, tool=tool).run(object_root=object_root)


class _Normalizer(ConjunctionReader, ObjectReader, ArrayReader, ScalarReader):
    """Frames of conjunctions, each built once (by content), recursion
    found while it is being built."""

    def __init__(self, schema: Any, *, strict: bool, tool: str | None) -> None:
        check_nesting(schema, tool)
        super().__init__(schema, strict=strict, tool=tool)
        self.in_progress: set[frozenset[int]] = set()
        self.recursive_names: dict[frozenset[int], str] = {}
        self.memo: dict[frozenset[int], Frame] = {}
        self.depth = 0

    def run(self, *, object_root: bool) -> NormalizedSchema:
        # A misspelt keyword is silently ignored by the constraint and the
        # validator alike: the value it meant to bound goes unchecked.
        for path, keyword, intended in misspelt_keywords(self.schema):
            self.warn(path, keyword, f"not a JSON Schema keyword, so nothing checks it: did you mean {intended!r}?")
        sites = [Site(self.schema, self.resolver, "")]
        if object_root and not self._declares_type(sites):
            sites.append(Site({"type": "object"}, self.resolver, ""))
        try:
            root = self.frame(sites)
        except Unsatisfiable as exc:
            raise UnsatisfiableSchemaError(exc.reason, tool=self.tool, path=exc.path) from None
        return NormalizedSchema(root, dict(self.definitions), tuple(self.warnings.values()))

    def _declares_type(self, sites: list[Site]) -> bool:
        alternatives, _ = self.expand(sites)
        return any(
            isinstance(site.node, dict) and ("type" in site.node or "const" in site.node or "enum" in site.node)
            for alternative in alternatives
            for site in alternative.sites
        )

    # -- a conjunction -> its frame (built once, recursion found) ------------

    def frame(self, sites: list[Site]) -> Frame:
        """The frame of a conjunction of sites (raises :class:`Unsatisfiable`)."""
        alternatives, content = self.expand(sites)
        key = frozenset(id(site.node) for site in content)
        if key and key in self.memo:
            return self.memo[key]
        if key and key in self.in_progress:
            name = self.recursive_names.get(key)
            if name is None:
                name = self._definition_name(content)
                self.recursive_names[key] = name
            return RefFrame(name)
        if self.depth >= MAX_DEPTH:
            raise self.past_limit(
                sites[0].path,
                f"values nest more than {MAX_DEPTH} levels deep here; flatten the schema "
                "(a recursive $ref has no such limit)",
            )
        if key:
            self.in_progress.add(key)
        self.depth += 1
        try:
            frame = self._frame_of_alternatives(alternatives)
        finally:
            self.in_progress.discard(key)
            self.depth -= 1
        if key in self.recursive_names:
            name = self.recursive_names[key]
            self.definitions[name] = frame
            frame = RefFrame(name)
        if key:
            self.memo[key] = frame
        return frame

    def _frame_of_alternatives(self, alternatives: list[Alternative]) -> Frame:
        built: list[tuple[Alternative, Frame]] = []
        errors: list[Unsatisfiable] = []
        for alternative in alternatives:
            try:
                built.append((alternative, self.build(alternative.sites)))
            except Unsatisfiable as exc:
                errors.append(exc)
        if not built:
            error = errors[-1]
            error.forbidden = all(e.forbidden for e in errors)
            raise error
        self._check_one_of(built)
        return union_of([frame for _, frame in built])

    # -- one flat conjunction -> one frame ------------------------------------

    def build(self, sites: list[Site]) -> Frame:
        nodes: list[Site] = []
        for site in sites:
            if site.node is False:
                raise Unsatisfiable(site.path, "the schema is `false`: no value is allowed", forbidden=True)
            if isinstance(site.node, dict):
                nodes.append(site)
        for site in nodes:
            for keyword in RELAXED_KEYWORDS:
                if keyword in site.node:
                    self.warn(site.path, keyword, "not enforced during generation (checked after)")
        types = self._types(nodes)
        values = self._enum_values(nodes)
        if values is not None:
            kept = tuple(v for v in values if self._value_allowed(v, types, nodes))
            if not kept:
                raise Unsatisfiable(paths(nodes), "no enum/const value satisfies the other keywords")
            return EnumFrame(kept)
        declared_types = any("type" in site.node for site in nodes)
        constrained = any(
            keyword in site.node
            for site in nodes
            for keyword in _STRING_KEYWORDS + _NUMBER_KEYWORDS + _OBJECT_KEYWORDS + _ARRAY_KEYWORDS
        )
        if not declared_types and not constrained:
            return FreeFrame()
        frames: list[Frame] = []
        for type_name in types:
            try:
                frames.append(self._typed_frame(type_name, nodes))
            except Unsatisfiable:
                if len(types) == 1:
                    raise
        if not frames:
            raise Unsatisfiable(paths(nodes), "no type satisfies the merged keywords")
        return union_of(frames)

    def _typed_frame(self, type_name: str, nodes: list[Site]) -> Frame:
        if type_name == "string":
            return self._string(nodes)
        if type_name in ("integer", "number"):
            return self._number(nodes, integer=type_name == "integer")
        if type_name == "object":
            return self._object(nodes)
        if type_name == "array":
            return self._array(nodes)
        if type_name == "boolean":
            return BooleanFrame()
        return NullFrame()

    def _types(self, nodes: list[Site]) -> tuple[str, ...]:
        """The JSON types every node allows, in :data:`TYPE_NAMES` order
        (``number`` covers ``integer``; both together mean ``integer``)."""
        allowed = set(TYPE_NAMES)
        for site in nodes:
            if "type" not in site.node:
                continue
            declared = site.node["type"]
            names = [declared] if isinstance(declared, str) else declared
            if not isinstance(names, list) or not names:
                raise self.malformed(site.path, f"type must be a type name or a list of them, got {declared!r}")
            for name in names:
                if name not in TYPE_NAMES:
                    raise self.malformed(
                        site.path, f"unknown type {name!r}; expected one of {', '.join(TYPE_NAMES)}"
                    )
            here = set(names)
            if site.node.get("nullable") is True:
                here.add("null")
            if "number" in here:
                here.add("integer")
            allowed &= here
        if not allowed:
            raise Unsatisfiable(paths(nodes), "the `type` keywords have no type in common")
        if "number" in allowed:
            allowed.discard("integer")
        return tuple(name for name in TYPE_NAMES if name in allowed)

    def _enum_values(self, nodes: list[Site]) -> list[Any] | None:
        values: list[Any] | None = None
        for site in nodes:
            here: list[Any] | None = None
            if "const" in site.node:
                here = [site.node["const"]]
            if "enum" in site.node:
                enum = site.node["enum"]
                if not isinstance(enum, list):
                    raise self.malformed(site.path, f"enum must be a list, got {enum!r}")
                if not enum:
                    raise Unsatisfiable(site.path, "enum is empty, so no value is allowed; list at least one value")
                here = enum if here is None else intersect_values(here, enum)
            if here is not None:
                values = dedupe_values(here) if values is None else intersect_values(values, here)
        return values

    def _value_allowed(self, value: Any, types: tuple[str, ...], nodes: list[Site]) -> bool:
        kind = json_type(value)
        if kind == "integer" and "integer" not in types:
            kind = "number"
        if kind not in types:
            return False
        if kind == "number" and isinstance(value, float) and not math.isfinite(value):
            return False
        try:
            return frame_accepts(self._typed_frame(kind, nodes), value, self.definitions)
        except Unsatisfiable:
            return False
        except KeyError:
            # A recursive definition still being built: keep the value (superset).
            return True

    def _definition_name(self, content: list[Site]) -> str:
        path = min((site.path for site in content), key=len)
        base = re.sub(r"[^A-Za-z0-9_]+", "_", path.rsplit("/", 1)[-1]).strip("_") or "root"
        name, counter = base, 1
        taken = set(self.recursive_names.values())
        while name in taken:
            counter += 1
            name = f"{base}_{counter}"
        return name

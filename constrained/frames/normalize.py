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
"""

from __future__ import annotations

import itertools
import math
import re
from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING, Any, Iterator, Mapping

from referencing.jsonschema import DRAFT3, DRAFT4, DRAFT201909, DRAFT202012

from ..errors import SchemaError, SchemaLimitError, UnsatisfiableSchemaError
from .model import (
    SUPPORTED_FORMATS,
    canonical_json,
    ArrayFrame,
    BooleanFrame,
    EnumFrame,
    Frame,
    FreeFrame,
    IntegerFrame,
    NormalizedSchema,
    NullFrame,
    NumberFrame,
    ObjectFrame,
    RefFrame,
    StringFrame,
)
from ..errors import SchemaWarning
from ..schema.formats import CHECKED_AFTER_GENERATION
from ..schema.limits import MAX_DEPTH, MAX_EXPANSION, MAX_PROPERTIES, check_nesting
from ..schema.patterns import pattern_problem, python_pattern
from ..schema.refs import Unresolvable, enter, pointer_token, resolver_for, specification_of

if TYPE_CHECKING:
    from referencing._core import Resolver
from .numbers import Bound, integer_frame, lcm, number_frame, tighter_lower, tighter_upper
from .unions import frames_disjoint, union_of
from ..schema.json_values import dedupe_values, exact, intersect_values, json_type, pattern_matches
from .accepts import frame_accepts

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

# How many alternatives distributing anyOf/oneOf may produce before the
# remaining unions are relaxed (their branches dropped: a superset).
MAX_ALTERNATIVES = 64

# Keywords that do not constrain a value; a node holding only these (and a
# ``$ref``) adds nothing to the conjunction it is part of.
_ANNOTATIONS = frozenset(
    {
        "$schema",
        "$id",
        "id",
        "$anchor",
        "$dynamicAnchor",
        "$comment",
        "$defs",
        "definitions",
        "$vocabulary",
        "title",
        "description",
        "default",
        "examples",
        "deprecated",
        "readOnly",
        "writeOnly",
        "$ref",
    }
)


@dataclass(frozen=True)
class _Site:
    """One conjunct: a schema node, the resolver for its base URI, and its
    JSON Pointer in the document (for messages)."""

    node: Any
    resolver: Resolver
    path: str


@dataclass
class _Alternative:
    """A flat conjunction of sites, and which branch of each ``oneOf`` it took."""

    sites: list[_Site]
    one_of: dict[int, tuple[str, int]]


class _Unsatisfiable(Exception):
    """No value satisfies a conjunction. ``forbidden`` is true when that was
    written on purpose (a ``false`` schema), not the result of a contradiction:
    an optional key or item with such a schema simply may not appear."""

    def __init__(self, path: str, reason: str, *, forbidden: bool = False) -> None:
        super().__init__(reason)
        self.path = path
        self.reason = reason
        self.forbidden = forbidden


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


class _Normalizer:
    def __init__(self, schema: Any, *, strict: bool, tool: str | None) -> None:
        check_nesting(schema, tool)
        self.schema = schema
        self.strict = strict
        self.tool = tool
        self.specification = specification_of(schema)
        # Before draft 2019-09, keywords beside "$ref" are ignored.
        self.ref_siblings_apply = self.specification in (DRAFT201909, DRAFT202012)
        self.resolver = resolver_for(schema)
        self.definitions: dict[str, Frame] = {}
        self.warnings: dict[tuple[str, str], SchemaWarning] = {}
        self.in_progress: set[frozenset[int]] = set()
        self.recursive_names: dict[frozenset[int], str] = {}
        self.memo: dict[frozenset[int], Frame] = {}
        self.depth = 0
        self.visits = 0
        self.discriminator_sites: dict[tuple[int, tuple[str, ...]], _Site] = {}

    def run(self, *, object_root: bool) -> NormalizedSchema:
        sites = [_Site(self.schema, self.resolver, "")]
        if object_root and not self._declares_type(sites):
            sites.append(_Site({"type": "object"}, self.resolver, ""))
        try:
            root = self.frame(sites)
        except _Unsatisfiable as exc:
            raise UnsatisfiableSchemaError(exc.reason, tool=self.tool, path=exc.path) from None
        return NormalizedSchema(root, dict(self.definitions), tuple(self.warnings.values()))

    def _declares_type(self, sites: list[_Site]) -> bool:
        alternatives, _ = self.expand(sites)
        return any(
            isinstance(site.node, dict) and ("type" in site.node or "const" in site.node or "enum" in site.node)
            for alternative in alternatives
            for site in alternative.sites
        )

    # -- warnings and errors -------------------------------------------------

    def warn(self, path: str, keyword: str, message: str) -> None:
        self.warnings.setdefault((path, keyword), SchemaWarning(path, keyword, message))

    def malformed(self, path: str, message: str) -> SchemaError:
        return SchemaError(message, tool=self.tool, path=path)

    def past_limit(self, path: str, message: str) -> SchemaLimitError:
        return SchemaLimitError(message, tool=self.tool, path=path)

    # -- conjunctions --------------------------------------------------------

    def frame(self, sites: list[_Site]) -> Frame:
        """The frame of a conjunction of sites (raises _Unsatisfiable)."""
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

    def _frame_of_alternatives(self, alternatives: list[_Alternative]) -> Frame:
        built: list[tuple[_Alternative, Frame]] = []
        errors: list[_Unsatisfiable] = []
        for alternative in alternatives:
            try:
                built.append((alternative, self.build(alternative.sites)))
            except _Unsatisfiable as exc:
                errors.append(exc)
        if not built:
            error = errors[-1]
            error.forbidden = all(e.forbidden for e in errors)
            raise error
        self._check_one_of(built)
        return union_of([frame for _, frame in built])

    def expand(self, sites: list[_Site]) -> tuple[list[_Alternative], list[_Site]]:
        """Follow ``$ref`` and ``allOf``, distribute ``anyOf``/``oneOf``.

        Returns the alternatives and every site that carries content (for the
        recursion key)."""
        content: dict[int, _Site] = {}
        alternatives = [_Alternative([], {})]
        self.visits = 0
        for site in sites:
            alternatives = self._bounded_product(alternatives, self._flatten(site, frozenset(), content), site.path)
        return alternatives, list(content.values())

    def _flatten(
        self, site: _Site, chain: frozenset[int], content: dict[int, _Site]
    ) -> list[_Alternative]:
        node = site.node
        if node is True:
            return [_Alternative([], {})]
        if node is False:
            content[id(node)] = site
            return [_Alternative([site], {})]
        if not isinstance(node, dict):
            raise self.malformed(site.path, f"a schema must be an object or a boolean, got {node!r}")
        self.visits += 1
        if self.visits > MAX_EXPANSION:
            raise self.past_limit(
                site.path,
                f"reading this value's schema visits more than {MAX_EXPANSION} subschemas through "
                "$ref/allOf/anyOf/oneOf (definitions referenced many times over); simplify the schema",
            )
        if len(chain) >= MAX_DEPTH:
            raise self.past_limit(
                site.path, f"a chain of $ref/allOf/anyOf/oneOf more than {MAX_DEPTH} long reaches here"
            )
        for keyword in ("$defs", "definitions"):
            self._schema_map(site, keyword)
        identifier = "id" if self.specification in (DRAFT3, DRAFT4) else "$id"
        if identifier in node and not isinstance(node[identifier], str):
            raise self.malformed(site.path, f"{identifier} must be a string (a URI), got {node[identifier]!r}")
        chain = chain | {id(node)}
        if set(node) - _ANNOTATIONS:
            content[id(node)] = site
        if "$ref" in node and not self.ref_siblings_apply:
            return self._flatten_ref(site, chain, content)
        result = [_Alternative([], {})]
        if "$ref" in node:
            result = self._flatten_ref(site, chain, content)
        result = self._product(result, [_Alternative([site], {})])
        for index, member in enumerate(self._schema_list(site, "allOf")):
            member_site = self._child(site, member, f"/allOf/{index}")
            result = self._bounded_product(result, self._flatten(member_site, chain, content), site.path)
        for keyword in ("anyOf", "oneOf"):
            if keyword not in node:
                continue
            branches: list[_Alternative] = []
            members: list[list[_Alternative]] = []
            for index, member in enumerate(self._schema_list(site, keyword)):
                member_site = self._child(site, member, f"/{keyword}/{index}")
                members.append(self._flatten(member_site, chain, content))
                for alternative in members[-1]:
                    if keyword == "oneOf":
                        alternative.one_of[id(node)] = (site.path, index)
                    branches.append(alternative)
            self._require_discriminator(site, keyword, members)
            if len(result) * len(branches) > MAX_ALTERNATIVES:
                self.warn(
                    site.path,
                    keyword,
                    f"distributing this {keyword} would give more than {MAX_ALTERNATIVES} "
                    "alternatives; its branches are not enforced during generation",
                )
                continue
            result = self._product(result, branches)
        return result

    def _require_discriminator(self, site: _Site, keyword: str, members: list[list[_Alternative]]) -> None:
        """Make the key that tells a union's branches apart required in each
        branch: the ``discriminator``'s ``propertyName`` (OpenAPI, Pydantic,
        FastMCP), or, for a ``oneOf`` without one, every key that each branch
        declares with a ``const`` (or a one-value ``enum``) of its own.
        Pydantic writes ``{"const": "GetItem", "default": "GetItem"}``
        without listing the key in ``required``, so branches overlap when it
        is left out and ``oneOf`` could only be enforced as ``anyOf``
        (calls the validation then refuses). Requiring it makes the union
        exact, at the cost of instances that omit the key: the tool's author
        meant the key to pick the branch."""
        keys = self._discriminating_keys(site, keyword, members)
        if not keys:
            return
        extra = self.discriminator_sites.get((id(site.node), keys))
        if extra is None:
            # Kept alive and reused: sites are told apart by the id of their node.
            extra = _Site({"required": list(keys)}, site.resolver, f"{site.path}/{keyword}")
            self.discriminator_sites[(id(site.node), keys)] = extra
        for alternatives in members:
            for alternative in alternatives:
                alternative.sites.append(extra)

    def _discriminating_keys(self, site: _Site, keyword: str, members: list[list[_Alternative]]) -> tuple[str, ...]:
        discriminator = site.node.get("discriminator")
        if isinstance(discriminator, dict) and isinstance(discriminator.get("propertyName"), str):
            return (discriminator["propertyName"],)
        if keyword != "oneOf" or len(members) < 2:
            return ()
        consts = [_const_keys(alternative) for alternatives in members for alternative in alternatives]
        keys = []
        for key in consts[0]:
            values = [const.get(key) for const in consts]
            written = {canonical_json(value[0]) for value in values if value is not None}
            if None not in values and len(written) == len(values):
                keys.append(key)
        return tuple(keys)

    def _flatten_ref(
        self, site: _Site, chain: frozenset[int], content: dict[int, _Site]
    ) -> list[_Alternative]:
        ref = site.node["$ref"]
        if not isinstance(ref, str):
            raise self.malformed(site.path, f"$ref must be a string, got {ref!r}")
        try:
            resolved = site.resolver.lookup(ref)
        except Unresolvable:
            self.warn(
                site.path,
                "$ref",
                f"cannot resolve {ref!r} (only references inside the schema resolve); "
                "relaxed to any value",
            )
            return [_Alternative([], {})]
        target = resolved.contents
        if isinstance(target, dict) and id(target) in chain:
            self.warn(
                site.path,
                "$ref",
                f"{ref!r} leads back to itself with no value in between; relaxed to any value",
            )
            return [_Alternative([], {})]
        target_site = _Site(target, self._enter(resolved.resolver, target), _ref_path(ref))
        return self._flatten(target_site, chain, content)

    def _bounded_product(self, left: list[_Alternative], right: list[_Alternative], path: str) -> list[_Alternative]:
        """``left`` and ``right`` distributed, as long as that gives at most
        :data:`MAX_ALTERNATIVES`; past it, ``right`` is relaxed to the sites
        all its alternatives share (its unions are not enforced)."""
        if len(left) * len(right) <= MAX_ALTERNATIVES:
            return self._product(left, right)
        self.warn(
            path,
            "anyOf/oneOf",
            f"distributing the unions here would give more than {MAX_ALTERNATIVES} alternatives; "
            "their branches are not enforced during generation",
        )
        others = [{id(site) for site in alternative.sites} for alternative in right[1:]]
        shared = [site for site in right[0].sites if all(id(site) in ids for ids in others)]
        return self._product(left, [_Alternative(shared, {})])

    @staticmethod
    def _product(left: list[_Alternative], right: list[_Alternative]) -> list[_Alternative]:
        return [
            _Alternative(a.sites + b.sites, {**a.one_of, **b.one_of})
            for a, b in itertools.product(left, right)
        ]

    def _check_one_of(self, built: list[tuple[_Alternative, Frame]]) -> None:
        """``oneOf`` is enforced as ``anyOf``; that is exact only when the
        branches cannot both match. Warn where they may."""
        for (a, fa), (b, fb) in itertools.combinations(built, 2):
            for node_id, (path, branch) in a.one_of.items():
                other = b.one_of.get(node_id)
                if other is None or other[1] == branch or (path, "oneOf") in self.warnings:
                    continue
                if not frames_disjoint(fa, fb, self.definitions):
                    self.warn(
                        path,
                        "oneOf",
                        f"branches {branch} and {other[1]} may both match; "
                        "enforced as anyOf (exactly one match is checked after generation)",
                    )

    # -- one flat conjunction -> one frame ------------------------------------

    def build(self, sites: list[_Site]) -> Frame:
        nodes: list[_Site] = []
        for site in sites:
            if site.node is False:
                raise _Unsatisfiable(site.path, "the schema is `false`: no value is allowed", forbidden=True)
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
                raise _Unsatisfiable(_paths(nodes), "no enum/const value satisfies the other keywords")
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
            except _Unsatisfiable:
                if len(types) == 1:
                    raise
        if not frames:
            raise _Unsatisfiable(_paths(nodes), "no type satisfies the merged keywords")
        return union_of(frames)

    def _typed_frame(self, type_name: str, nodes: list[_Site]) -> Frame:
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

    def _types(self, nodes: list[_Site]) -> tuple[str, ...]:
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
            raise _Unsatisfiable(_paths(nodes), "the `type` keywords have no type in common")
        if "number" in allowed:
            allowed.discard("integer")
        return tuple(name for name in TYPE_NAMES if name in allowed)

    def _enum_values(self, nodes: list[_Site]) -> list[Any] | None:
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
                    raise _Unsatisfiable(site.path, "enum is empty, so no value is allowed; list at least one value")
                here = enum if here is None else intersect_values(here, enum)
            if here is not None:
                values = dedupe_values(here) if values is None else intersect_values(values, here)
        return values

    def _value_allowed(self, value: Any, types: tuple[str, ...], nodes: list[_Site]) -> bool:
        kind = json_type(value)
        if kind == "integer" and "integer" not in types:
            kind = "number"
        if kind not in types:
            return False
        if kind == "number" and isinstance(value, float) and not math.isfinite(value):
            return False
        try:
            return frame_accepts(self._typed_frame(kind, nodes), value, self.definitions)
        except _Unsatisfiable:
            return False
        except KeyError:
            # A recursive definition still being built: keep the value (superset).
            return True

    # -- strings ---------------------------------------------------------------

    def _string(self, nodes: list[_Site]) -> StringFrame:
        min_length = max((self._count(s, "minLength") for s in nodes if "minLength" in s.node), default=0)
        maxima = [self._count(s, "maxLength") for s in nodes if "maxLength" in s.node]
        max_length = min(maxima) if maxima else None
        patterns: list[str] = []
        formats: list[str] = []
        for site in nodes:
            if "pattern" in site.node:
                pattern = site.node["pattern"]
                if not isinstance(pattern, str):
                    raise self.malformed(site.path, f"pattern must be a string, got {pattern!r}")
                problem = pattern_problem(pattern)
                if problem is not None:
                    raise self.malformed(site.path, f"pattern {pattern!r}: {problem}")
                if pattern not in patterns:
                    patterns.append(pattern)
            if "format" in site.node:
                fmt = site.node["format"]
                if fmt in SUPPORTED_FORMATS:
                    if fmt not in formats:
                        formats.append(fmt)
                    if fmt in CHECKED_AFTER_GENERATION:
                        self.warn(site.path, "format", f"format {fmt!r}: {CHECKED_AFTER_GENERATION[fmt]} are "
                                  "checked after generation, not during it")
                else:
                    self.warn(site.path, "format", f"format {fmt!r} is not enforced during generation")
        if len(formats) > 1:
            self.warn(
                _paths(nodes), "format", f"only format {formats[0]!r} of {formats} is enforced during generation"
            )
        if max_length is not None and min_length > max_length:
            raise _Unsatisfiable(_paths(nodes), f"minLength {min_length} > maxLength {max_length}")
        return StringFrame(min_length, max_length, tuple(patterns), formats[0] if formats else None)

    # -- numbers ---------------------------------------------------------------

    def _number(self, nodes: list[_Site], *, integer: bool) -> IntegerFrame | NumberFrame:
        low: Bound | None = None
        high: Bound | None = None
        multiple: Fraction | None = None
        for site in nodes:
            for bound in self._bounds(site, "minimum", "exclusiveMinimum"):
                low = tighter_lower(low, bound)
            for bound in self._bounds(site, "maximum", "exclusiveMaximum"):
                high = tighter_upper(high, bound)
            if "multipleOf" in site.node:
                step = self._number_value(site, "multipleOf")
                if step <= 0:
                    raise self.malformed(site.path, f"multipleOf must be > 0, got {site.node['multipleOf']!r}")
                multiple = step if multiple is None else lcm(multiple, step)
        frame = integer_frame(low, high, multiple) if integer else number_frame(low, high, multiple)
        if frame is None:
            kind = "integer" if integer else "number"
            raise _Unsatisfiable(_paths(nodes), f"the bounds and multipleOf exclude every {kind}")
        return frame

    def _bounds(self, site: _Site, inclusive: str, exclusive: str) -> Iterator[tuple[Fraction, bool]]:
        """Bounds of one node, in draft-04 (boolean ``exclusive*``) or later form."""
        node = site.node
        flag = node.get(exclusive)
        if inclusive in node:
            yield self._number_value(site, inclusive), flag is True
        if exclusive in node and not isinstance(flag, bool):
            yield self._number_value(site, exclusive), True

    def _number_value(self, site: _Site, keyword: str) -> Fraction:
        value = site.node[keyword]
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise self.malformed(site.path, f"{keyword} must be a number, got {value!r}")
        return exact(value)

    def _count(self, site: _Site, keyword: str) -> int:
        value = site.node[keyword]
        if (
            isinstance(value, bool)
            or not isinstance(value, (int, float))
            or not math.isfinite(value)
            or value < 0
            or value != int(value)
        ):
            raise self.malformed(site.path, f"{keyword} must be a non-negative integer, got {value!r}")
        return int(value)

    # -- objects ---------------------------------------------------------------

    def _object(self, nodes: list[_Site]) -> ObjectFrame:
        names: dict[str, None] = {}
        required: dict[str, None] = {}
        explicit_additional: list[_Site] = []
        patterns: dict[str, list[_Site]] = {}
        declares_keys = False
        for site in nodes:
            declared = self._schema_map(site, "properties")
            pattern_properties = self._schema_map(site, "patternProperties")
            declares_keys = declares_keys or "properties" in site.node or "patternProperties" in site.node
            names.update(dict.fromkeys(declared))
            for pattern in pattern_properties:
                self._check_key_pattern(site, pattern)
                patterns.setdefault(pattern, []).append(
                    self._child(site, pattern_properties[pattern], f"/patternProperties/{pointer_token(pattern)}")
                )
            if "additionalProperties" in site.node:
                explicit_additional.append(
                    self._child(site, site.node["additionalProperties"], "/additionalProperties")
                )
            if "required" in site.node:
                listed = site.node["required"]
                if not isinstance(listed, list) or not all(isinstance(k, str) for k in listed):
                    raise self.malformed(site.path, f"required must be a list of strings, got {listed!r}")
                required.update(dict.fromkeys(listed))
        names.update(required)
        where = _paths(nodes)
        if len(names) > MAX_PROPERTIES:
            raise self.past_limit(
                where, f"the object declares {len(names)} keys, more than {MAX_PROPERTIES}; split the tool or use additionalProperties"
            )
        properties: list[tuple[str, Frame]] = []
        forbidden: list[str] = []
        for name in names:
            member = self._member_sites(nodes, name)
            if name in required:
                try:
                    properties.append((name, self.frame(member)))
                except _Unsatisfiable as exc:
                    raise _Unsatisfiable(exc.path, f"required key {name!r}: {exc.reason}") from None
                continue
            frame = self._optional_frame(member, f"key {name!r}")
            if frame is None:
                forbidden.append(name)
            else:
                properties.append((name, frame))
        additional: Frame | None
        if explicit_additional:
            additional = self._optional_frame(explicit_additional, "undeclared keys")
        else:
            additional = None if (self.strict and declares_keys) else FreeFrame()
        pattern_frames = []
        for pattern, sites in patterns.items():
            frame = self._optional_frame(sites, f"keys matching {pattern!r}")
            if frame is not None:
                pattern_frames.append((pattern, frame))
            elif additional is not None or len(patterns) > 1:
                self.warn(
                    sites[0].path,
                    "patternProperties",
                    f"keys matching {pattern!r} are forbidden, which is not enforced during generation",
                )
        min_properties = max((self._count(s, "minProperties") for s in nodes if "minProperties" in s.node), default=0)
        maxima = [self._count(s, "maxProperties") for s in nodes if "maxProperties" in s.node]
        max_properties = min(maxima) if maxima else None
        if max_properties is not None and max(min_properties, len(required)) > max_properties:
            raise _Unsatisfiable(where, "more keys are required than maxProperties allows")
        if additional is None and not pattern_frames and len(properties) < min_properties:
            raise _Unsatisfiable(where, "minProperties exceeds the keys the object may have")
        return ObjectFrame(
            properties=tuple(properties),
            required=tuple(required),
            additional=additional,
            pattern_properties=tuple(pattern_frames),
            min_properties=min_properties,
            max_properties=max_properties,
            forbidden=tuple(forbidden),
        )

    def _check_key_pattern(self, site: _Site, pattern: str) -> None:
        """A ``patternProperties`` pattern must be a regular expression; one
        no Python engine reads (ECMA's ``\\u{...}``) is kept with a warning,
        and matches every key."""
        path = f"{site.path}/patternProperties/{pointer_token(pattern)}"
        problem = pattern_problem(pattern)
        if problem is not None:
            raise self.malformed(path, f"pattern {pattern!r}: {problem}")
        if python_pattern(pattern) is None:
            self.warn(path, "patternProperties", f"{pattern!r} cannot be read here; it is taken to match every key")

    def _member_sites(self, nodes: list[_Site], name: str) -> list[_Site]:
        """Every node's schema for key ``name``: its ``properties`` entry and the
        ``patternProperties`` it matches, or else its ``additionalProperties``."""
        sites: list[_Site] = []
        for site in nodes:
            properties = self._schema_map(site, "properties")
            matched = [
                self._child(site, schema, f"/patternProperties/{pointer_token(pattern)}")
                for pattern, schema in self._schema_map(site, "patternProperties").items()
                if pattern_matches(pattern, name)
            ]
            if name in properties:
                sites.append(self._child(site, properties[name], f"/properties/{pointer_token(name)}"))
            sites.extend(matched)
            if name not in properties and not matched and "additionalProperties" in site.node:
                sites.append(self._child(site, site.node["additionalProperties"], "/additionalProperties"))
        return sites

    # -- arrays ----------------------------------------------------------------

    def _array(self, nodes: list[_Site]) -> ArrayFrame:
        prefixes: list[list[_Site]] = []
        rests: list[list[_Site]] = []
        for site in nodes:
            prefix, rest = self._array_parts(site)
            prefixes.append(prefix)
            rests.append(rest)
        min_items = max((self._count(s, "minItems") for s in nodes if "minItems" in s.node), default=0)
        maxima = [self._count(s, "maxItems") for s in nodes if "maxItems" in s.node]
        max_items = min(maxima) if maxima else None
        length = max((len(p) for p in prefixes), default=0)
        prefix_frames: list[Frame] = []
        for index in range(length):
            position: list[_Site] = []
            for prefix, rest in zip(prefixes, rests):
                position.extend([prefix[index]] if index < len(prefix) else rest)
            frame = self._optional_frame(position, f"item {index}")
            if frame is None:
                max_items = index if max_items is None else min(max_items, index)
                break
            prefix_frames.append(frame)
        rest_sites = [s for rest in rests for s in rest]
        items = self._optional_frame(rest_sites, "the items") if rest_sites else FreeFrame()
        if items is None:
            limit = len(prefix_frames)
            max_items = limit if max_items is None else min(max_items, limit)
        if max_items is not None and min_items > max_items:
            raise _Unsatisfiable(_paths(nodes), f"minItems {min_items} > the most items allowed ({max_items})")
        if max_items is not None:
            prefix_frames = prefix_frames[:max_items]
        return ArrayFrame(tuple(prefix_frames), items, min_items, max_items)

    def _array_parts(self, site: _Site) -> tuple[list[_Site], list[_Site]]:
        """Positional item schemas and the schema for the rest, in either the
        2020-12 form (``prefixItems`` + ``items``) or the older one (``items``
        as a list + ``additionalItems``)."""
        node = site.node
        items = node.get("items")
        if isinstance(items, list):
            prefix = [self._child(site, s, f"/items/{i}") for i, s in enumerate(items)]
            rest_keyword = "additionalItems"
        else:
            listed = self._schema_list(site, "prefixItems", allow_empty=True)
            prefix = [self._child(site, s, f"/prefixItems/{i}") for i, s in enumerate(listed)]
            rest_keyword = "items"
        rest = [self._child(site, node[rest_keyword], f"/{rest_keyword}")] if rest_keyword in node else []
        return prefix, rest

    # -- helpers ---------------------------------------------------------------

    def _optional_frame(self, sites: list[_Site], what: str) -> Frame | None:
        """The frame of an optional member's conjunction (``what`` names the
        member), or ``None`` when no value satisfies it: the member may not
        appear, as JSON Schema says. A schema that is ``false`` says so on
        purpose; one whose keywords contradict each other (``"type":
        "integer"`` with ``"enum": ["1"]``) gets a warning."""
        try:
            return self.frame(sites)
        except _Unsatisfiable as exc:
            if not exc.forbidden:
                self.warn(exc.path, "unsatisfiable", f"no value satisfies the schema of {what} "
                          f"({exc.reason}); it may not appear")
            return None

    def _child(self, site: _Site, node: Any, suffix: str) -> _Site:
        return _Site(node, self._enter(site.resolver, node), site.path + suffix)

    def _enter(self, resolver: Resolver, node: Any) -> Resolver:
        return enter(resolver, node, self.specification)

    def _schema_list(self, site: _Site, keyword: str, *, allow_empty: bool = False) -> list[Any]:
        value = site.node.get(keyword, [])
        if not isinstance(value, list) or (keyword in site.node and not value and not allow_empty):
            raise self.malformed(site.path, f"{keyword} must be a non-empty list of schemas, got {value!r}")
        return value

    def _schema_map(self, site: _Site, keyword: str) -> Mapping[str, Any]:
        value = site.node.get(keyword, {})
        if not isinstance(value, dict):
            raise self.malformed(site.path, f"{keyword} must be an object, got {value!r}")
        return value

    def _definition_name(self, content: list[_Site]) -> str:
        path = min((site.path for site in content), key=len)
        base = re.sub(r"[^A-Za-z0-9_]+", "_", path.rsplit("/", 1)[-1]).strip("_") or "root"
        name, counter = base, 1
        taken = set(self.recursive_names.values())
        while name in taken:
            counter += 1
            name = f"{base}_{counter}"
        return name


# -- module helpers ------------------------------------------------------------


def _paths(sites: list[_Site]) -> str:
    paths = list(dict.fromkeys(site.path or "/" for site in sites))
    return paths[0] if len(paths) == 1 else " & ".join(paths)


def _const_keys(alternative: _Alternative) -> dict[str, tuple[Any]]:
    """The keys one branch declares with a single value (``const`` or a
    one-value ``enum``) in its own ``properties``, each with that value."""
    consts: dict[str, tuple[Any]] = {}
    for site in alternative.sites:
        properties = site.node.get("properties") if isinstance(site.node, dict) else None
        if not isinstance(properties, dict):
            continue
        for key, schema in properties.items():
            if not isinstance(schema, dict):
                continue
            if "const" in schema:
                consts.setdefault(key, (schema["const"],))
            elif isinstance(schema.get("enum"), list) and len(schema["enum"]) == 1:
                consts.setdefault(key, (schema["enum"][0],))
    return consts


def _ref_path(ref: str) -> str:
    return ref[1:] if ref.startswith("#") else ref


"""Copy the ``type`` of a ``$ref`` target onto the referring schema.

Tool-call parsers in several serving engines decide how to convert an argument
by reading ``properties[key].type``.  A property written as a bare
``{"$ref": "#/$defs/Thing"}`` has no ``type`` there, so those parsers treat the
value as a string and string-encode objects, arrays and numbers.
:func:`annotate_ref_types` returns a copy of the schema in which such ``$ref``
sites also carry the ``type`` their target implies, without changing which
instances the schema accepts:

* drafts 3 to 7 ignore every keyword beside ``$ref``, so there the added
  ``type`` is inert; it is still taken from the schema the chain of references
  really ends at, so that it tells the truth;
* 2019-09 and 2020-12 conjoin ``$ref`` with its siblings, so the added
  ``type`` must already follow from the target: it is the conjunction of the
  ``type`` keywords along the chain of references (each one applies there);
* anything unsure (unresolvable, remote, cyclic, a ``type`` value that is not
  a plain type name, documents that mix dialects in ways that make the
  conjunction doubtful) is left as it was.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any
from urllib.parse import unquote, urldefrag

import referencing
import referencing.exceptions
from referencing.jsonschema import specification_with

from constrained.schema.refs import resolver_for, specification_of

__all__ = ["annotate_ref_types"]

_TYPE_NAMES = frozenset(
    {"array", "boolean", "integer", "null", "number", "object", "string"}
)
# Dialects whose validators ignore the siblings of ``$ref``.
_LEGACY_DIALECTS = frozenset({"draft-03", "draft-04", "draft-06", "draft-07"})

# Where subschemas live.  Keys of the maps are names, never schemas.
_SCHEMA_VALUED = (
    "additionalItems",
    "additionalProperties",
    "contains",
    "else",
    "if",
    "items",
    "not",
    "propertyNames",
    "then",
    "unevaluatedItems",
    "unevaluatedProperties",
    "extends",
)
_SCHEMA_LISTS = ("allOf", "anyOf", "oneOf", "prefixItems", "items", "extends")
_SCHEMA_MAPS = (
    "$defs",
    "definitions",
    "dependencies",
    "dependentSchemas",
    "patternProperties",
    "properties",
)
# Longest chain of references followed before giving up.
_MAX_CHAIN = 64

_Types = tuple[str, ...]


def annotate_ref_types(schema: dict[str, Any]) -> dict[str, Any]:
    """A deep copy of ``schema`` where each ``$ref`` site without a ``type``
    gets the ``type`` its target implies, so parsers that read
    ``properties[key].type`` convert referenced objects, arrays and numbers
    instead of string-encoding them.

    Only ``type`` is added; ``$ref``, ``$defs``/``definitions`` and every data
    keyword (``const``, ``enum``, ``default``, ``examples``) are kept as they
    are, and the accepted instances do not change.  Never raises on a
    malformed schema (it returns an unannotated copy) and never mutates
    ``schema``.
    """
    result = copy.deepcopy(schema)
    if not isinstance(schema, dict):
        return result
    try:
        _Annotator(schema).run(result)
    except Exception:  # a schema too strange to reason about: change nothing
        return copy.deepcopy(schema)
    return result


class _Annotator:
    """Walks the original schema (read-only) and writes into its copy."""

    def __init__(self, schema: dict[str, Any]) -> None:
        self.schema = schema
        # The root dialect, chosen as jsonschema's validator_for chooses it.
        self.specification = specification_of(schema)
        # Validators conjoin siblings of ``$ref`` only in the newer drafts.
        self.legacy = self.specification.name in _LEGACY_DIALECTS
        # A nested ``$schema`` switches dialect part-way through; then only
        # the ``type`` of the schema a chain ends at is sure to apply.
        self.mixed = _has_nested_dialect(schema)
        self.written: dict[int, Any] = {}
        self.poisoned: set[int] = set()
        self.on_path: set[int] = set()

    def run(self, result: dict[str, Any]) -> None:
        if _targets_a_type_keyword(self.schema):
            # A ``$ref`` into some ``.../type`` could start resolving once a
            # ``type`` is added there: leave the whole document alone.
            return
        try:
            resolver = resolver_for(self.schema)
        except Exception:
            return
        self.walk(self.schema, result, resolver, self.specification, root=True)
        for key in self.poisoned:
            site = self.written.get(key)
            if isinstance(site, dict):
                site.pop("type", None)

    def walk(
        self,
        node: Any,
        copied: Any,
        resolver: referencing.Resolver[Any],
        specification: referencing.Specification[Any],
        root: bool = False,
    ) -> None:
        if not isinstance(node, dict) or not isinstance(copied, dict):
            return
        if id(node) in self.on_path:  # a Python-level cycle, not JSON
            return
        try:
            # As jsonschema does when it descends into a subschema: the
            # subschema may set a new base URI (``$id``, or ``id`` before
            # draft 6), read with the dialect of the schema around it even
            # when the subschema has its own ``$schema`` (refs.enter reads it
            # with that one instead, which can differ beside ``$ref``).
            resolver = resolver.in_subresource(specification.create_resource(node))
        except Exception:
            return
        inner = specification
        if not root and isinstance(node.get("$schema"), str):
            try:
                inner = specification_with(node["$schema"], default=specification)
            except Exception:
                return

        ref = node.get("$ref")
        if isinstance(ref, str) and "type" not in node:
            # A site that switches dialect itself is judged by the outer
            # validator's rules with the inner one's type checker: skip it.
            if root or "$schema" not in node:
                self.annotate(node, copied, ref, resolver)

        self.on_path.add(id(node))
        try:
            for keyword, value in node.items():
                for child, child_copy in _children(keyword, value, copied.get(keyword)):
                    self.walk(child, child_copy, resolver, inner)
        finally:
            self.on_path.discard(id(node))

    def annotate(
        self,
        node: dict[str, Any],
        copied: dict[str, Any],
        ref: str,
        resolver: referencing.Resolver[Any],
    ) -> None:
        types = self.implied_types(ref, resolver)
        key = id(copied)
        if types is None:
            if key in self.written:  # the same object elsewhere said otherwise
                self.poisoned.add(key)
            return
        value: Any = types[0] if len(types) == 1 else list(types)
        if key in self.written and copied.get("type") != value:
            self.poisoned.add(key)
            return
        copied["type"] = value
        self.written[key] = copied

    def implied_types(
        self, ref: str, resolver: referencing.Resolver[Any]
    ) -> _Types | None:
        """The types every instance valid against ``{"$ref": ref}`` has,
        or None when unknown."""
        members: list[dict[str, Any]] = []
        seen: set[int] = set()
        for _ in range(_MAX_CHAIN):
            try:
                resolved = resolver.lookup(ref)
            except Exception:  # dangling, remote, malformed pointer...
                return None
            target = resolved.contents
            if not isinstance(target, dict) or id(target) in seen:
                return None  # boolean schema, data, or a cycle
            seen.add(id(target))
            members.append(target)
            if "$ref" not in target:
                break
            ref = target["$ref"]
            if not isinstance(ref, str):
                return None
            resolver = resolved.resolver
        else:
            return None

        end = members[-1]
        if self.legacy or self.mixed:
            # Only the schema the chain ends at has its ``type`` applied
            # under every dialect (it has no ``$ref`` to shadow it).
            if "type" not in end:
                return None
            return _type_names(end["type"])

        conjunction: _Types | None = None
        for member in members:
            if "type" not in member:
                continue
            names = _type_names(member["type"])
            if names is None:
                return None
            conjunction = names if conjunction is None else _conjoin(conjunction, names)
        if not conjunction:
            return None
        return conjunction


def _children(keyword: str, value: Any, copied: Any) -> Iterator[tuple[Any, Any]]:
    """(subschema, its copy) pairs under ``keyword``; data is never yielded."""
    if isinstance(value, dict) and isinstance(copied, dict):
        if keyword in _SCHEMA_MAPS:
            for name, subschema in value.items():
                if isinstance(subschema, dict):
                    yield subschema, copied.get(name)
        elif keyword in _SCHEMA_VALUED:
            yield value, copied
    elif isinstance(value, list) and isinstance(copied, list):
        if keyword in _SCHEMA_LISTS and len(value) == len(copied):
            for subschema, subschema_copy in zip(value, copied):
                if isinstance(subschema, dict):
                    yield subschema, subschema_copy


def _type_names(value: Any) -> _Types | None:
    """``type`` as a tuple of distinct standard names, or None if it is
    anything else (draft-3 schemas or ``any``, unknown names, empty)."""
    names = [value] if isinstance(value, str) else value
    if not isinstance(names, list) or not names:
        return None
    if not all(isinstance(name, str) and name in _TYPE_NAMES for name in names):
        return None
    return tuple(dict.fromkeys(names))


def _conjoin(first: _Types, second: _Types) -> _Types:
    """Types allowed by both, in ``first``'s order (integer is a number)."""
    out: list[str] = []
    for name in first:
        if name in second or (name == "integer" and "number" in second):
            out.append(name)
        elif name == "number" and "integer" in second:
            out.append("integer")
    return tuple(dict.fromkeys(out))


def _json_values(value: Any) -> Iterator[Any]:
    stack = [value]
    seen: set[int] = set()
    while stack:
        item = stack.pop()
        if isinstance(item, (dict, list)):
            if id(item) in seen:
                continue
            seen.add(id(item))
            yield item
            stack.extend(item.values() if isinstance(item, dict) else item)


def _has_nested_dialect(schema: dict[str, Any]) -> bool:
    return any(
        isinstance(item, dict) and item is not schema and "$schema" in item
        for item in _json_values(schema)
    )


def _targets_a_type_keyword(schema: dict[str, Any]) -> bool:
    """Whether some ``$ref`` pointer goes through a ``type`` keyword (not a
    property called "type"): adding ``type`` could make it resolve."""
    for item in _json_values(schema):
        if isinstance(item, dict) and isinstance(item.get("$ref"), str):
            fragment = urldefrag(item["$ref"]).fragment
            if fragment.startswith("/") and _pointer_hits_type(fragment):
                return True
    return False


def _pointer_hits_type(fragment: str) -> bool:
    # Decoded as referencing does: percent-decode, split, then ~1 and ~0.
    segments = [
        segment.replace("~1", "/").replace("~0", "~")
        for segment in unquote(fragment[1:]).split("/")
    ]
    expect = "keyword"
    for segment in segments:
        if expect == "name":
            expect = "keyword"
            continue
        if expect == "index" and segment.isdigit():
            expect = "keyword"
            continue
        if segment == "type":
            return True
        if segment in _SCHEMA_MAPS:
            expect = "name"
        elif segment in _SCHEMA_LISTS:
            expect = "index"
        elif segment in _SCHEMA_VALUED:
            expect = "keyword"
        else:
            return False  # data or an unknown keyword: nothing is added below
    return False

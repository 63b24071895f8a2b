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
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urldefrag

import referencing

from .keywords import SCHEMA_LISTS, SCHEMA_MAPS, SCHEMA_VALUED, child_schemas, walk_schemas
from .refs import resolver_for, specification_of

if TYPE_CHECKING:
    # Not re-exported by referencing/__init__ (mypy: referencing.Resolver is undefined).
    from referencing._core import Resolver

__all__ = ["annotate_ref_types"]

_TYPE_NAMES = frozenset(
    {"array", "boolean", "integer", "null", "number", "object", "string"}
)
# Dialects whose validators ignore the siblings of ``$ref``.
_LEGACY_DIALECTS = frozenset({"draft-03", "draft-04", "draft-06", "draft-07"})

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
    except Exception:  # noqa: BLE001 - too strange to reason about: change nothing
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
        # What each copied site got, by identity: one Python object can sit
        # at two places with different bases; if they disagree, add nothing.
        self.decided: dict[int, tuple[dict[str, Any], Any]] = {}
        self.poisoned: set[int] = set()
        self.on_path: set[int] = set()

    def run(self, result: dict[str, Any]) -> None:
        if _targets_a_type_keyword(self.schema):
            # A ``$ref`` into some ``.../type`` could start resolving once a
            # ``type`` is added there: leave the whole document alone.
            return
        resolver = resolver_for(self.schema)
        self.walk(self.schema, result, resolver, self.specification, root=True)
        for key in self.poisoned:
            self.decided[key][0].pop("type", None)

    def walk(
        self,
        node: Any,
        copied: Any,
        resolver: Resolver[Any],
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
        except Exception:  # noqa: BLE001 - a malformed $id: skip the subtree
            return
        inner = specification if root else specification_of(node, default=specification)

        ref = node.get("$ref")
        # A site that switches dialect itself is judged by the outer
        # validator's rules with the inner one's type checker: skip it.
        if (
            isinstance(ref, str)
            and "type" not in node
            and (root or "$schema" not in node)
        ):
            self.annotate(copied, ref, resolver)

        self.on_path.add(id(node))
        try:
            for keyword, value in node.items():
                for child, child_copy in _children(keyword, value, copied.get(keyword)):
                    self.walk(child, child_copy, resolver, inner)
        finally:
            self.on_path.discard(id(node))

    def annotate(
        self, copied: dict[str, Any], ref: str, resolver: Resolver[Any]
    ) -> None:
        types = self.implied_types(ref, resolver)
        value: Any = None
        if types is not None:
            value = types[0] if len(types) == 1 else list(types)
        key = id(copied)
        if key in self.decided:
            if self.decided[key][1] != value:
                self.poisoned.add(key)
            return
        self.decided[key] = (copied, value)
        if value is not None:
            copied["type"] = value

    def implied_types(self, ref: str, resolver: Resolver[Any]) -> _Types | None:
        """The types every instance valid against ``{"$ref": ref}`` has,
        or None when unknown."""
        members: list[dict[str, Any]] = []
        seen: set[int] = set()
        for _ in range(_MAX_CHAIN):
            try:
                resolved = resolver.lookup(ref)
            except Exception:  # noqa: BLE001 - dangling, remote, bad pointer...
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
    for key, subschema in child_schemas(keyword, value):
        if key is None:
            yield subschema, copied
        elif isinstance(copied, dict):
            yield subschema, copied[key]
        elif isinstance(copied, list) and isinstance(key, int):
            yield subschema, copied[key]


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
    """Whether a subschema (or what a ``$ref`` may point at) declares its own
    ``$schema``; a property *named* ``$schema`` does not."""
    return any(node is not schema and "$schema" in node for node in walk_schemas(schema, possible=True))


def _targets_a_type_keyword(schema: dict[str, Any]) -> bool:
    """Whether some ``$ref`` pointer goes through a ``type`` keyword (not a
    property called "type"): adding ``type`` could make it resolve. Every
    ``$ref`` string in the document counts, data included (a reference
    may point into ``examples``): erring this way only annotates less."""
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
        if segment in SCHEMA_MAPS:
            expect = "name"
        elif segment in SCHEMA_LISTS:
            expect = "index"
        elif segment in SCHEMA_VALUED:
            expect = "keyword"
        else:
            return False  # data or an unknown keyword: nothing is added below
    return False

"""Where JSON Schema keeps subschemas.

Only these positions hold schemas. Everything else is data or annotation: a
property *named* ``type``, ``id`` or ``$ref`` (a key of a map of schemas), or
an ``enum``/``default`` value that looks like a schema, is never read or
rewritten as one. Every walk over a schema goes through
:func:`child_schemas`; one that must also reach what a JSON Pointer ``$ref``
may point at (the value of an unknown keyword) asks for ``possible``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

SCHEMA_VALUED = frozenset(
    {
        "additionalItems",
        "additionalProperties",
        "contains",
        "contentSchema",
        "else",
        "extends",
        "if",
        "items",
        "not",
        "propertyNames",
        "then",
        "unevaluatedItems",
        "unevaluatedProperties",
    }
)
"""Keywords whose value is one schema."""

SCHEMA_LISTS = frozenset({"allOf", "anyOf", "oneOf", "prefixItems", "items", "extends"})
"""Keywords whose value may be a list of schemas."""

SCHEMA_MAPS = frozenset(
    {"$defs", "definitions", "dependencies", "dependentSchemas", "patternProperties", "properties"}
)
"""Keywords whose value maps names to schemas."""

DATA_KEYWORDS = frozenset({"$vocabulary", "const", "default", "dependentRequired", "enum", "examples", "required"})
"""Keywords whose value is never a schema, whatever it looks like: instances
(``const``, ``enum``, ``default``, ``examples``), property names, and
``$vocabulary``."""

_SCHEMA_KEYWORDS = SCHEMA_VALUED | SCHEMA_LISTS | SCHEMA_MAPS


def child_schemas(
    keyword: str, value: Any, *, possible: bool = False
) -> Iterator[tuple[str | int | None, dict[str, Any]]]:
    """The object subschemas under ``keyword``, each with its name (maps), its
    index (lists) or ``None`` (a single schema).

    With ``possible``, also every object under a keyword that is neither a
    known schema position nor :data:`DATA_KEYWORDS` (an unknown keyword, a
    draft-3 ``type`` list), through nested lists, each with ``None``: no
    validator applies it as a schema unless a JSON Pointer ``$ref`` points
    there, which one may. The names in a map of schemas are never among
    them."""
    if isinstance(value, dict) and keyword in SCHEMA_MAPS:
        for name, subschema in value.items():
            if isinstance(subschema, dict):
                yield name, subschema
    elif isinstance(value, list) and keyword in SCHEMA_LISTS:
        for index, subschema in enumerate(value):
            if isinstance(subschema, dict):
                yield index, subschema
    elif isinstance(value, dict) and keyword in SCHEMA_VALUED:
        yield None, value
    elif possible and keyword not in _SCHEMA_KEYWORDS and keyword not in DATA_KEYWORDS:
        stack = [value]
        while stack:
            item = stack.pop()
            if isinstance(item, dict):
                yield None, item
            elif isinstance(item, list):
                stack.extend(reversed(item))


def walk_schemas(
    schema: dict[str, Any],
    *,
    possible: bool = False,
    stop_at: Callable[[dict[str, Any]], bool] | None = None,
) -> Iterator[dict[str, Any]]:
    """``schema`` and every object subschema nested in it, depth first, each
    object once (with a stack, not recursion: it runs on schemas before
    their depth is checked). ``possible`` also walks what
    :func:`child_schemas` calls possible schemas; a node for which
    ``stop_at`` is true is left out, and everything under it."""
    stack = [schema]
    seen: set[int] = set()
    while stack:
        node = stack.pop()
        if id(node) in seen or (stop_at is not None and stop_at(node)):
            continue
        seen.add(id(node))
        yield node
        children = [
            child
            for keyword, value in node.items()
            for _, child in child_schemas(keyword, value, possible=possible)
        ]
        stack.extend(reversed(children))

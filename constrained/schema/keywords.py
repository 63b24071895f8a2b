"""Where JSON Schema keeps subschemas.

Only these positions hold schemas. Everything else is data or annotation: a
property *named* ``type``, or an ``enum``/``default`` value that looks like a
schema, is never read or rewritten as one.
"""

from __future__ import annotations

from collections.abc import Iterator
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


def child_schemas(keyword: str, value: Any) -> Iterator[tuple[str | int | None, dict[str, Any]]]:
    """The object subschemas under ``keyword``, each with its name (maps), its
    index (lists) or ``None`` (a single schema)."""
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


def walk_schemas(schema: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """``schema`` and every object subschema nested in it, depth first
    (with a stack, not recursion: it runs on schemas before their depth is
    checked)."""
    stack = [schema]
    while stack:
        node = stack.pop()
        yield node
        children = [child for keyword, value in node.items() for _, child in child_schemas(keyword, value)]
        stack.extend(reversed(children))

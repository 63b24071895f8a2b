"""Where JSON Schema keeps subschemas.

Only these positions hold schemas. Everything else is data or annotation: a
property *named* ``type``, ``id`` or ``$ref`` (a key of a map of schemas), or
an ``enum``/``default`` value that looks like a schema, is never read or
rewritten as one. Every walk over a schema goes through
:func:`child_schemas`; one that must also reach what a JSON Pointer ``$ref``
may point at (the value of an unknown keyword) asks for ``possible``.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterator
from typing import Any

from .refs import pointer_token

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

KNOWN_KEYWORDS = _SCHEMA_KEYWORDS | DATA_KEYWORDS | frozenset(
    {
        # identifiers and references, drafts 3 to 2020-12
        "$anchor", "$comment", "$dynamicAnchor", "$dynamicRef", "$id", "$recursiveAnchor", "$recursiveRef",
        "$ref", "$schema", "id",
        # assertions
        "disallow", "divisibleBy", "exclusiveMaximum", "exclusiveMinimum", "format", "maxContains", "maxItems",
        "maxLength", "maxProperties", "maximum", "minContains", "minItems", "minLength", "minProperties",
        "minimum", "multipleOf", "pattern", "type", "uniqueItems",
        # annotations
        "contentEncoding", "contentMediaType", "deprecated", "description", "readOnly", "title", "writeOnly",
        # OpenAPI's schema object
        "discriminator", "example", "externalDocs", "nullable", "xml",
    }
)
"""Every keyword of the JSON Schema drafts and of OpenAPI's schema object:
a key of a schema outside this table is ignored by the constraint and by
the validator alike, so one close to a name here is likely a typo."""

_LOWERED = {keyword.lower(): keyword for keyword in KNOWN_KEYWORDS if len(keyword) > 3}
"""The keywords a typo is matched against, by their lower case (``maxlength``
is ``maxLength`` misspelt). Keywords of three letters are left out: ``note``
is as close to ``not`` as ``maxLenght`` is to ``maxLength``, but a note."""


def misspelt_keywords(schema: Any, cutoff: float = 0.8) -> Iterator[tuple[str, str, str]]:
    """``(JSON Pointer, keyword, intended keyword)`` for each key of
    ``schema`` or of a subschema in a schema position that is no keyword but
    close to one (``difflib`` ratio ``cutoff`` and over, ignoring case, at
    most two letters more or fewer). Vendor extensions (``x-...``) and keys
    far from every keyword are extensions, not typos."""
    stack: list[tuple[str, Any]] = [("", schema)]
    seen: set[int] = set()
    while stack:
        path, node = stack.pop()
        if not isinstance(node, dict) or id(node) in seen:
            continue
        seen.add(id(node))
        for keyword in node:
            if not isinstance(keyword, str) or keyword in KNOWN_KEYWORDS or keyword.startswith("x-"):
                continue
            close = difflib.get_close_matches(keyword.lower(), _LOWERED, n=3, cutoff=cutoff)
            # A typo changes a letter or two; a key longer or shorter by more
            # (``enumDescriptions``, ``length``) is a name of its own.
            close = [match for match in close if abs(len(match) - len(keyword)) <= 2]
            if close:
                yield path, keyword, _LOWERED[close[0]]
        for keyword, value in reversed(node.items()):
            for name, child in reversed(list(child_schemas(keyword, value))):
                where = f"{path}/{pointer_token(keyword)}" + ("" if name is None else f"/{pointer_token(str(name))}")
                stack.append((where, child))


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

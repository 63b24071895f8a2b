"""``$ref`` resolution over one schema document, with the `referencing` library.

Tool schemas are single documents: local references (JSON Pointer per RFC 6901,
``$defs``, ``definitions``, anchors, embedded ``$id`` resources) resolve; remote
ones do not, since nothing may be fetched while compiling or parsing.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

import referencing
import referencing.exceptions
from referencing.jsonschema import DRAFT202012, specification_with

if TYPE_CHECKING:
    # referencing does not re-export its Resolver class.
    from referencing._core import Resolver

ROOT_URI = "urn:constrained:root"

Unresolvable = referencing.exceptions.Unresolvable
Specification = referencing.Specification


def specification_of(schema: Any, default: Specification[Any] = DRAFT202012) -> Specification[Any]:
    """The JSON Schema draft ``schema`` declares with ``$schema`` (``default``
    when it declares none or one `referencing` does not know)."""
    if isinstance(schema, dict) and isinstance(schema.get("$schema"), str):
        return specification_with(schema["$schema"], default=default)
    return default


def resolver_for(schema: Any) -> Resolver:
    """A resolver rooted at ``schema``, with its embedded ``$id`` resources.
    An ``$id`` (``id``) that is not a string sets no base URI, where
    `referencing` alone would raise while crawling or looking up."""
    resource = _tolerant(specification_of(schema)).create_resource(schema)
    registry = referencing.Registry().with_resource(ROOT_URI, resource)
    try:
        registry = registry.crawl()
    except (AttributeError, TypeError):
        # A malformed subschema (a number where a schema belongs), or one
        # below a nested $schema (read by referencing's own rules): embedded
        # $id resources are not indexed; the normalizer reports the subschema.
        pass
    return registry.resolver(base_uri=ROOT_URI)


@functools.cache
def _tolerant(specification: Specification[Any]) -> Specification[Any]:
    """``specification`` reading a malformed ``$id``, anchor or subschema
    list as absent instead of raising."""

    def anchors_in(_: Specification[Any], contents: Any) -> list[Any]:
        try:
            return list(specification.anchors_in(contents))
        except (AttributeError, TypeError):
            return []

    def subresources_of(contents: Any) -> list[Any]:
        try:
            return list(specification.subresources_of(contents))
        except (AttributeError, TypeError):
            return []

    return Specification(  # type: ignore[call-arg]
        name=specification.name,
        id_of=functools.partial(schema_id, specification),
        subresources_of=subresources_of,
        anchors_in=anchors_in,
        maybe_in_subresource=specification.maybe_in_subresource,
    )


def pointer_token(name: str) -> str:
    """``name`` as one JSON Pointer reference token (RFC 6901: ``~`` is
    written ``~0``, ``/`` is written ``~1``)."""
    return name.replace("~", "~0").replace("/", "~1")


def schema_id(specification: Specification[Any], schema: Any) -> str | None:
    """The URI ``schema`` identifies itself with by ``specification``'s rules
    (``$id``; ``id`` before draft 6; none beside ``$ref`` before 2019-09),
    or ``None``: also for a value that is not a string, which `referencing`
    would raise on (a malformed schema, or a map of property names a
    ``$ref`` points at, where ``id`` names a property)."""
    if not isinstance(schema, dict):
        return None
    try:
        found = specification.id_of(schema)
    except (AttributeError, TypeError):
        return None
    return found if isinstance(found, str) else None


def enter(
    resolver: Resolver, subschema: Any, specification: Specification[Any]
) -> Resolver:
    """The resolver for references inside ``subschema``, which may set a new
    base URI with ``$id`` (``id`` before draft 6; one that is not a string
    sets none)."""
    if isinstance(subschema, dict) and ("$id" in subschema or "id" in subschema):
        own = specification_of(subschema, default=specification)
        if schema_id(own, subschema) is not None:
            return resolver.in_subresource(own.create_resource(subschema))
    return resolver

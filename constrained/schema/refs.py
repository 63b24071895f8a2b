"""``$ref`` resolution over one schema document, with the `referencing` library.

Tool schemas are single documents: local references (JSON Pointer per RFC 6901,
``$defs``, ``definitions``, anchors, embedded ``$id`` resources) resolve; remote
ones do not, since nothing may be fetched while compiling or parsing.
"""

from __future__ import annotations

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
    """A resolver rooted at ``schema``, with its embedded ``$id`` resources."""
    resource = specification_of(schema).create_resource(schema)
    registry = referencing.Registry().with_resource(ROOT_URI, resource)
    try:
        registry = registry.crawl()
    except (AttributeError, TypeError):
        # A malformed subschema (a number where a schema belongs): embedded
        # $id resources are not indexed; the normalizer reports the subschema.
        pass
    return registry.resolver(base_uri=ROOT_URI)


def pointer_token(name: str) -> str:
    """``name`` as one JSON Pointer reference token (RFC 6901: ``~`` is
    written ``~0``, ``/`` is written ``~1``)."""
    return name.replace("~", "~0").replace("/", "~1")


def enter(
    resolver: Resolver, subschema: Any, specification: Specification[Any]
) -> Resolver:
    """The resolver for references inside ``subschema``, which may set a new
    base URI with ``$id`` (``id`` before draft 6)."""
    if isinstance(subschema, dict) and ("$id" in subschema or "id" in subschema):
        own = specification_of(subschema, default=specification)
        return resolver.in_subresource(own.create_resource(subschema))
    return resolver

"""The normalizer's working parts, shared by its keyword modules.

A :class:`Site` is one schema node with the resolver for its base URI and its
JSON Pointer; an :class:`Alternative` is a flat conjunction of them. Reading
a conjunction is split by keyword family into mixins of :class:`SiteReader`
(:mod:`.conjunctions`, :mod:`.objects`, :mod:`.arrays`, :mod:`.scalars`),
put together in :mod:`.normalize`; this module holds what they all use:
warnings and errors, child sites, and the checks on keyword values that every
family makes the same way.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..errors import SchemaError, SchemaLimitError, SchemaWarning
from ..schema.refs import enter, resolver_for, specification_of
from .model import Frame

if TYPE_CHECKING:
    from referencing._core import Resolver


@dataclass(frozen=True)
class Site:
    """One conjunct: a schema node, the resolver for its base URI, and its
    JSON Pointer in the document (for messages)."""

    node: Any
    resolver: Resolver
    path: str


@dataclass
class Alternative:
    """A flat conjunction of sites, and which branch of each ``oneOf`` it took."""

    sites: list[Site]
    one_of: dict[int, tuple[str, int]]


class Unsatisfiable(Exception):
    """No value satisfies a conjunction. ``forbidden`` is true when that was
    written on purpose (a ``false`` schema), not the result of a contradiction:
    an optional key or item with such a schema simply may not appear."""

    def __init__(self, path: str, reason: str, *, forbidden: bool = False) -> None:
        super().__init__(reason)
        self.path = path
        self.reason = reason
        self.forbidden = forbidden


class SiteReader:
    """The state and the checks every keyword family reads sites with.
    :meth:`frame` (the frame of a conjunction) is the normalizer's."""

    def __init__(self, schema: Any, *, strict: bool, tool: str | None) -> None:
        self.schema = schema
        self.strict = strict
        self.tool = tool
        self.specification = specification_of(schema)
        self.resolver = resolver_for(schema)
        self.definitions: dict[str, Frame] = {}
        self.warnings: dict[tuple[str, str], SchemaWarning] = {}

    def frame(self, sites: list[Site]) -> Frame:
        """The frame of a conjunction of sites (raises :class:`Unsatisfiable`)."""
        raise NotImplementedError

    def warn(self, path: str, keyword: str, message: str) -> None:
        self.warnings.setdefault((path, keyword), SchemaWarning(path, keyword, message))

    def malformed(self, path: str, message: str) -> SchemaError:
        return SchemaError(message, tool=self.tool, path=path)

    def past_limit(self, path: str, message: str) -> SchemaLimitError:
        return SchemaLimitError(message, tool=self.tool, path=path)

    def _optional_frame(self, sites: list[Site], what: str) -> Frame | None:
        """The frame of an optional member's conjunction (``what`` names the
        member), or ``None`` when no value satisfies it: the member may not
        appear, as JSON Schema says. A schema that is ``false`` says so on
        purpose; one whose keywords contradict each other (``"type":
        "integer"`` with ``"enum": ["1"]``) gets a warning."""
        try:
            return self.frame(sites)
        except Unsatisfiable as exc:
            if not exc.forbidden:
                self.warn(exc.path, "unsatisfiable", f"no value satisfies the schema of {what} "
                          f"({exc.reason}); it may not appear")
            return None

    def _child(self, site: Site, node: Any, suffix: str) -> Site:
        return Site(node, self._enter(site.resolver, node), site.path + suffix)

    def _enter(self, resolver: Resolver, node: Any) -> Resolver:
        return enter(resolver, node, self.specification)

    def _schema_list(self, site: Site, keyword: str, *, allow_empty: bool = False) -> list[Any]:
        value = site.node.get(keyword, [])
        if not isinstance(value, list) or (keyword in site.node and not value and not allow_empty):
            raise self.malformed(site.path, f"{keyword} must be a non-empty list of schemas, got {value!r}")
        return value

    def _schema_map(self, site: Site, keyword: str) -> Mapping[str, Any]:
        value = site.node.get(keyword, {})
        if not isinstance(value, dict):
            raise self.malformed(site.path, f"{keyword} must be an object, got {value!r}")
        return value

    def _count(self, site: Site, keyword: str) -> int:
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


def paths(sites: list[Site]) -> str:
    """The paths of ``sites``, for a message about their conjunction."""
    unique = list(dict.fromkeys(site.path or "/" for site in sites))
    return unique[0] if len(unique) == 1 else " & ".join(unique)

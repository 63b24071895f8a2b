"""Objects: ``properties``, ``required``, ``patternProperties``,
``additionalProperties`` and the property counts of a conjunction, merged
into one :class:`ObjectFrame`. A key's schema is every node's schema for it
(its ``properties`` entry and the patterns it matches, or else
``additionalProperties``); an optional key no value satisfies is forbidden.
"""

from __future__ import annotations

from typing import NamedTuple

from ..schema.json_values import pattern_matches
from ..schema.limits import MAX_PROPERTIES
from ..schema.patterns import pattern_problem, python_pattern
from ..schema.refs import pointer_token
from .model import Frame, FreeFrame, ObjectFrame
from .sites import Site, SiteReader, Unsatisfiable, paths


class _Declared(NamedTuple):
    """What the nodes of a conjunction declare about an object's keys."""

    names: dict[str, None]  # declared and required keys, in order
    required: dict[str, None]
    additional: list[Site]  # the explicit additionalProperties
    patterns: dict[str, list[Site]]
    declares_keys: bool


class ObjectReader(SiteReader):
    """Reads the object keywords of a conjunction."""

    def _object(self, nodes: list[Site]) -> ObjectFrame:
        declared = self._declared(nodes)
        where = paths(nodes)
        if len(declared.names) > MAX_PROPERTIES:
            raise self.past_limit(
                where, f"the object declares {len(declared.names)} keys, more than {MAX_PROPERTIES}; split the tool or use additionalProperties"
            )
        properties, forbidden = self._properties(nodes, declared)
        additional: Frame | None
        if declared.additional:
            additional = self._optional_frame(declared.additional, "undeclared keys")
        else:
            additional = None if (self.strict and declared.declares_keys) else FreeFrame()
        pattern_frames = self._pattern_frames(declared.patterns, additional)
        min_properties = max((self._count(s, "minProperties") for s in nodes if "minProperties" in s.node), default=0)
        maxima = [self._count(s, "maxProperties") for s in nodes if "maxProperties" in s.node]
        max_properties = min(maxima) if maxima else None
        if max_properties is not None and max(min_properties, len(declared.required)) > max_properties:
            raise Unsatisfiable(where, "more keys are required than maxProperties allows")
        if additional is None and not pattern_frames and len(properties) < min_properties:
            raise Unsatisfiable(where, "minProperties exceeds the keys the object may have")
        return ObjectFrame(
            properties=tuple(properties),
            required=tuple(declared.required),
            additional=additional,
            pattern_properties=tuple(pattern_frames),
            min_properties=min_properties,
            max_properties=max_properties,
            forbidden=tuple(forbidden),
        )

    def _declared(self, nodes: list[Site]) -> _Declared:
        """The keys, patterns and ``additionalProperties`` the nodes declare."""
        declared = _Declared({}, {}, [], {}, False)
        declares_keys = False
        for site in nodes:
            members = self._schema_map(site, "properties")
            pattern_properties = self._schema_map(site, "patternProperties")
            declares_keys = declares_keys or "properties" in site.node or "patternProperties" in site.node
            declared.names.update(dict.fromkeys(members))
            for pattern in pattern_properties:
                self._check_key_pattern(site, pattern)
                declared.patterns.setdefault(pattern, []).append(
                    self._child(site, pattern_properties[pattern], f"/patternProperties/{pointer_token(pattern)}")
                )
            if "additionalProperties" in site.node:
                additional = self._child(site, site.node["additionalProperties"], "/additionalProperties")
                declared.additional.append(additional)
            if "required" in site.node:
                listed = site.node["required"]
                if not isinstance(listed, list) or not all(isinstance(k, str) for k in listed):
                    raise self.malformed(site.path, f"required must be a list of strings, got {listed!r}")
                declared.required.update(dict.fromkeys(listed))
        declared.names.update(declared.required)
        return declared._replace(declares_keys=declares_keys)

    def _properties(self, nodes: list[Site], declared: _Declared) -> tuple[list[tuple[str, Frame]], list[str]]:
        """Each named key's frame, and the optional keys no value satisfies."""
        properties: list[tuple[str, Frame]] = []
        forbidden: list[str] = []
        for name in declared.names:
            member = self._member_sites(nodes, name)
            if name in declared.required:
                try:
                    properties.append((name, self.frame(member)))
                except Unsatisfiable as exc:
                    raise Unsatisfiable(exc.path, f"required key {name!r}: {exc.reason}") from None
                continue
            frame = self._optional_frame(member, f"key {name!r}")
            if frame is None:
                forbidden.append(name)
            else:
                properties.append((name, frame))
        return properties, forbidden

    def _pattern_frames(self, patterns: dict[str, list[Site]], additional: Frame | None) -> list[tuple[str, Frame]]:
        """Each pattern's frame; a pattern no value satisfies is dropped, with
        a warning where that forbids keys generation cannot keep out."""
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
        return pattern_frames

    def _check_key_pattern(self, site: Site, pattern: str) -> None:
        """A ``patternProperties`` pattern must be a regular expression; one
        no Python engine reads (ECMA's ``\\u{...}``) is kept with a warning,
        and matches every key."""
        path = f"{site.path}/patternProperties/{pointer_token(pattern)}"
        problem = pattern_problem(pattern)
        if problem is not None:
            raise self.malformed(path, f"pattern {pattern!r}: {problem}")
        if python_pattern(pattern) is None:
            self.warn(path, "patternProperties", f"{pattern!r} cannot be read here; it is taken to match every key")

    def _member_sites(self, nodes: list[Site], name: str) -> list[Site]:
        """Every node's schema for key ``name``: its ``properties`` entry and the
        ``patternProperties`` it matches, or else its ``additionalProperties``."""
        sites: list[Site] = []
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

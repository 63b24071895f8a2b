"""Objects: ``properties``, ``required``, ``patternProperties``,
``additionalProperties`` and the property counts of a conjunction, merged
into one :class:`ObjectFrame`. A key's schema is every node's schema for it
(its ``properties`` entry and the patterns it matches, or else
``additionalProperties``); an optional key no value satisfies is forbidden.
"""

from __future__ import annotations

from ..schema.json_values import pattern_matches
from ..schema.limits import MAX_PROPERTIES
from ..schema.patterns import pattern_problem, python_pattern
from ..schema.refs import pointer_token
from .model import Frame, FreeFrame, ObjectFrame
from .sites import Site, SiteReader, Unsatisfiable, paths


class ObjectReader(SiteReader):
    """Reads the object keywords of a conjunction."""

    def _object(self, nodes: list[Site]) -> ObjectFrame:
        names: dict[str, None] = {}
        required: dict[str, None] = {}
        explicit_additional: list[Site] = []
        patterns: dict[str, list[Site]] = {}
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
        where = paths(nodes)
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
                except Unsatisfiable as exc:
                    raise Unsatisfiable(exc.path, f"required key {name!r}: {exc.reason}") from None
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
            raise Unsatisfiable(where, "more keys are required than maxProperties allows")
        if additional is None and not pattern_frames and len(properties) < min_properties:
            raise Unsatisfiable(where, "minProperties exceeds the keys the object may have")
        return ObjectFrame(
            properties=tuple(properties),
            required=tuple(required),
            additional=additional,
            pattern_properties=tuple(pattern_frames),
            min_properties=min_properties,
            max_properties=max_properties,
            forbidden=tuple(forbidden),
        )

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

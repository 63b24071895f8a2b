"""Conjunctions of sites: ``$ref`` and ``allOf`` followed, ``anyOf`` and
``oneOf`` distributed, so each alternative is a flat list of sites whose
keywords all apply (``A and (B or C)`` becomes ``(A and B) or (A and C)``).

Distribution is bounded (:data:`MAX_ALTERNATIVES`; past it a union is relaxed
to a superset), a discriminated union's discriminating key is made required
in each branch, and ``oneOf`` branches that may overlap are reported, since
``oneOf`` is enforced as ``anyOf``.
"""

from __future__ import annotations

import itertools
from typing import Any

from referencing.jsonschema import DRAFT3, DRAFT4, DRAFT201909, DRAFT202012

from ..schema.limits import MAX_DEPTH, MAX_EXPANSION
from ..schema.refs import Unresolvable
from .model import Frame, canonical_json
from .sites import Alternative, Site, SiteReader
from .unions import frames_disjoint

# How many alternatives distributing anyOf/oneOf may produce before the
# remaining unions are relaxed (their branches dropped: a superset).
MAX_ALTERNATIVES = 64

# Keywords that do not constrain a value; a node holding only these (and a
# ``$ref``) adds nothing to the conjunction it is part of.
_ANNOTATIONS = frozenset(
    {
        "$schema",
        "$id",
        "id",
        "$anchor",
        "$dynamicAnchor",
        "$comment",
        "$defs",
        "definitions",
        "$vocabulary",
        "title",
        "description",
        "default",
        "examples",
        "deprecated",
        "readOnly",
        "writeOnly",
        "$ref",
    }
)


class ConjunctionReader(SiteReader):
    """Expands a conjunction of sites into its alternatives."""

    def __init__(self, schema: Any, *, strict: bool, tool: str | None) -> None:
        super().__init__(schema, strict=strict, tool=tool)
        # Before draft 2019-09, keywords beside "$ref" are ignored.
        self.ref_siblings_apply = self.specification in (DRAFT201909, DRAFT202012)
        self.visits = 0
        self.discriminator_sites: dict[tuple[int, tuple[str, ...]], Site] = {}

    def expand(self, sites: list[Site]) -> tuple[list[Alternative], list[Site]]:
        """Follow ``$ref`` and ``allOf``, distribute ``anyOf``/``oneOf``.

        Returns the alternatives and every site that carries content (for the
        recursion key)."""
        content: dict[int, Site] = {}
        alternatives = [Alternative([], {})]
        self.visits = 0
        for site in sites:
            alternatives = self._bounded_product(alternatives, self._flatten(site, frozenset(), content), site.path)
        return alternatives, list(content.values())

    def _flatten(
        self, site: Site, chain: frozenset[int], content: dict[int, Site]
    ) -> list[Alternative]:
        node = site.node
        if node is True:
            return [Alternative([], {})]
        if node is False:
            content[id(node)] = site
            return [Alternative([site], {})]
        if not isinstance(node, dict):
            raise self.malformed(site.path, f"a schema must be an object or a boolean, got {node!r}")
        self._visit(site, node, chain)
        chain = chain | {id(node)}
        if set(node) - _ANNOTATIONS:
            content[id(node)] = site
        if "$ref" in node and not self.ref_siblings_apply:
            return self._flatten_ref(site, chain, content)
        result = [Alternative([], {})]
        if "$ref" in node:
            result = self._flatten_ref(site, chain, content)
        result = self._product(result, [Alternative([site], {})])
        for index, member in enumerate(self._schema_list(site, "allOf")):
            member_site = self._child(site, member, f"/allOf/{index}")
            result = self._bounded_product(result, self._flatten(member_site, chain, content), site.path)
        for keyword in ("anyOf", "oneOf"):
            if keyword in node:
                result = self._distribute(site, keyword, result, chain, content)
        return result

    def _visit(self, site: Site, node: dict[str, Any], chain: frozenset[int]) -> None:
        """Count a visit to ``node`` against the limits and check what every
        schema object must be (its definitions, its identifier)."""
        self.visits += 1
        if self.visits > MAX_EXPANSION:
            raise self.past_limit(
                site.path,
                f"reading this value's schema visits more than {MAX_EXPANSION} subschemas through "
                "$ref/allOf/anyOf/oneOf (definitions referenced many times over); simplify the schema",
            )
        if len(chain) >= MAX_DEPTH:
            raise self.past_limit(
                site.path, f"a chain of $ref/allOf/anyOf/oneOf more than {MAX_DEPTH} long reaches here"
            )
        for keyword in ("$defs", "definitions"):
            self._schema_map(site, keyword)
        identifier = "id" if self.specification in (DRAFT3, DRAFT4) else "$id"
        if identifier in node and not isinstance(node[identifier], str):
            raise self.malformed(site.path, f"{identifier} must be a string (a URI), got {node[identifier]!r}")

    def _distribute(
        self, site: Site, keyword: str, result: list[Alternative], chain: frozenset[int], content: dict[int, Site]
    ) -> list[Alternative]:
        """``result`` times the branches of the node's ``anyOf`` or ``oneOf``
        (a ``oneOf`` branch remembers which it is); ``result`` unchanged, with
        a warning, where the product would be too large."""
        node = site.node
        branches: list[Alternative] = []
        members: list[list[Alternative]] = []
        for index, member in enumerate(self._schema_list(site, keyword)):
            member_site = self._child(site, member, f"/{keyword}/{index}")
            members.append(self._flatten(member_site, chain, content))
            for alternative in members[-1]:
                if keyword == "oneOf":
                    alternative.one_of[id(node)] = (site.path, index)
                branches.append(alternative)
        self._require_discriminator(site, keyword, members)
        if len(result) * len(branches) > MAX_ALTERNATIVES:
            self.warn(
                site.path,
                keyword,
                f"distributing this {keyword} would give more than {MAX_ALTERNATIVES} "
                "alternatives; its branches are not enforced during generation",
            )
            return result
        return self._product(result, branches)

    def _require_discriminator(self, site: Site, keyword: str, members: list[list[Alternative]]) -> None:
        """Make the key that tells a union's branches apart required in each
        branch: the ``discriminator``'s ``propertyName`` (OpenAPI, Pydantic,
        FastMCP), or, for a ``oneOf`` without one, every key that each branch
        declares with a ``const`` (or a one-value ``enum``) of its own.
        Pydantic writes ``{"const": "GetItem", "default": "GetItem"}``
        without listing the key in ``required``, so branches overlap when it
        is left out and ``oneOf`` could only be enforced as ``anyOf``
        (calls the validation then refuses). Requiring it makes the union
        exact, at the cost of instances that omit the key: the tool's author
        meant the key to pick the branch."""
        keys = self._discriminating_keys(site, keyword, members)
        if not keys:
            return
        extra = self.discriminator_sites.get((id(site.node), keys))
        if extra is None:
            # Kept alive and reused: sites are told apart by the id of their node.
            extra = Site({"required": list(keys)}, site.resolver, f"{site.path}/{keyword}")
            self.discriminator_sites[(id(site.node), keys)] = extra
        for alternatives in members:
            for alternative in alternatives:
                alternative.sites.append(extra)

    def _discriminating_keys(self, site: Site, keyword: str, members: list[list[Alternative]]) -> tuple[str, ...]:
        discriminator = site.node.get("discriminator")
        if isinstance(discriminator, dict) and isinstance(discriminator.get("propertyName"), str):
            return (discriminator["propertyName"],)
        if keyword != "oneOf" or len(members) < 2:
            return ()
        consts = [_const_keys(alternative) for alternatives in members for alternative in alternatives]
        keys = []
        for key in consts[0]:
            values = [const.get(key) for const in consts]
            written = {canonical_json(value[0]) for value in values if value is not None}
            if None not in values and len(written) == len(values):
                keys.append(key)
        return tuple(keys)

    def _flatten_ref(
        self, site: Site, chain: frozenset[int], content: dict[int, Site]
    ) -> list[Alternative]:
        ref = site.node["$ref"]
        if not isinstance(ref, str):
            raise self.malformed(site.path, f"$ref must be a string, got {ref!r}")
        try:
            resolved = site.resolver.lookup(ref)
        except Unresolvable:
            self.warn(
                site.path,
                "$ref",
                f"cannot resolve {ref!r} (only references inside the schema resolve); "
                "relaxed to any value",
            )
            return [Alternative([], {})]
        target = resolved.contents
        if isinstance(target, dict) and id(target) in chain:
            self.warn(
                site.path,
                "$ref",
                f"{ref!r} leads back to itself with no value in between; relaxed to any value",
            )
            return [Alternative([], {})]
        target_site = Site(target, self._enter(resolved.resolver, target), _ref_path(ref))
        return self._flatten(target_site, chain, content)

    def _bounded_product(self, left: list[Alternative], right: list[Alternative], path: str) -> list[Alternative]:
        """``left`` and ``right`` distributed, as long as that gives at most
        :data:`MAX_ALTERNATIVES`; past it, ``right`` is relaxed to the sites
        all its alternatives share (its unions are not enforced)."""
        if len(left) * len(right) <= MAX_ALTERNATIVES:
            return self._product(left, right)
        self.warn(
            path,
            "anyOf/oneOf",
            f"distributing the unions here would give more than {MAX_ALTERNATIVES} alternatives; "
            "their branches are not enforced during generation",
        )
        others = [{id(site) for site in alternative.sites} for alternative in right[1:]]
        shared = [site for site in right[0].sites if all(id(site) in ids for ids in others)]
        return self._product(left, [Alternative(shared, {})])

    @staticmethod
    def _product(left: list[Alternative], right: list[Alternative]) -> list[Alternative]:
        return [
            Alternative(a.sites + b.sites, {**a.one_of, **b.one_of})
            for a, b in itertools.product(left, right)
        ]

    def _check_one_of(self, built: list[tuple[Alternative, Frame]]) -> None:
        """``oneOf`` is enforced as ``anyOf``; that is exact only when the
        branches cannot both match. Warn where they may."""
        for (a, fa), (b, fb) in itertools.combinations(built, 2):
            for node_id, (path, branch) in a.one_of.items():
                other = b.one_of.get(node_id)
                if other is None or other[1] == branch or (path, "oneOf") in self.warnings:
                    continue
                if not frames_disjoint(fa, fb, self.definitions):
                    self.warn(
                        path,
                        "oneOf",
                        f"branches {branch} and {other[1]} may both match; "
                        "enforced as anyOf (exactly one match is checked after generation)",
                    )


def _const_keys(alternative: Alternative) -> dict[str, tuple[Any]]:
    """The keys one branch declares with a single value (``const`` or a
    one-value ``enum``) in its own ``properties``, each with that value."""
    consts: dict[str, tuple[Any]] = {}
    for site in alternative.sites:
        properties = site.node.get("properties") if isinstance(site.node, dict) else None
        if not isinstance(properties, dict):
            continue
        for key, schema in properties.items():
            if not isinstance(schema, dict):
                continue
            if "const" in schema:
                consts.setdefault(key, (schema["const"],))
            elif isinstance(schema.get("enum"), list) and len(schema["enum"]) == 1:
                consts.setdefault(key, (schema["enum"][0],))
    return consts


def _ref_path(ref: str) -> str:
    return ref[1:] if ref.startswith("#") else ref

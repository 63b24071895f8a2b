"""Arrays: positional items (``prefixItems``, or ``items`` as a list before
2020-12), the items after them, and the item counts of a conjunction, merged
into one :class:`ArrayFrame`. A position no value satisfies ends the array
there.
"""

from __future__ import annotations

from .model import ArrayFrame, Frame, FreeFrame
from .sites import Site, SiteReader, Unsatisfiable, paths


class ArrayReader(SiteReader):
    """Reads the array keywords of a conjunction."""

    def _array(self, nodes: list[Site]) -> ArrayFrame:
        prefixes: list[list[Site]] = []
        rests: list[list[Site]] = []
        for site in nodes:
            prefix, rest = self._array_parts(site)
            prefixes.append(prefix)
            rests.append(rest)
        min_items = max((self._count(s, "minItems") for s in nodes if "minItems" in s.node), default=0)
        maxima = [self._count(s, "maxItems") for s in nodes if "maxItems" in s.node]
        max_items = min(maxima) if maxima else None
        length = max((len(p) for p in prefixes), default=0)
        prefix_frames: list[Frame] = []
        for index in range(length):
            position: list[Site] = []
            for prefix, rest in zip(prefixes, rests):
                position.extend([prefix[index]] if index < len(prefix) else rest)
            frame = self._optional_frame(position, f"item {index}")
            if frame is None:
                max_items = index if max_items is None else min(max_items, index)
                break
            prefix_frames.append(frame)
        rest_sites = [s for rest in rests for s in rest]
        items = self._optional_frame(rest_sites, "the items") if rest_sites else FreeFrame()
        if items is None:
            limit = len(prefix_frames)
            max_items = limit if max_items is None else min(max_items, limit)
        if max_items is not None and min_items > max_items:
            raise Unsatisfiable(paths(nodes), f"minItems {min_items} > the most items allowed ({max_items})")
        if max_items is not None:
            prefix_frames = prefix_frames[:max_items]
        return ArrayFrame(tuple(prefix_frames), items, min_items, max_items)

    def _array_parts(self, site: Site) -> tuple[list[Site], list[Site]]:
        """Positional item schemas and the schema for the rest, in either the
        2020-12 form (``prefixItems`` + ``items``) or the older one (``items``
        as a list + ``additionalItems``)."""
        node = site.node
        items = node.get("items")
        if isinstance(items, list):
            prefix = [self._child(site, s, f"/items/{i}") for i, s in enumerate(items)]
            rest_keyword = "additionalItems"
        else:
            listed = self._schema_list(site, "prefixItems", allow_empty=True)
            prefix = [self._child(site, s, f"/prefixItems/{i}") for i, s in enumerate(listed)]
            rest_keyword = "items"
        rest = [self._child(site, node[rest_keyword], f"/{rest_keyword}")] if rest_keyword in node else []
        return prefix, rest

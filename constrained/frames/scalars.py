"""Strings and numbers: lengths, ``pattern`` and ``format`` of a
conjunction merged into one :class:`StringFrame` (unsupported formats
reported), and its bounds and ``multipleOf`` merged exactly (:mod:`.numbers`)
into one :class:`IntegerFrame` or :class:`NumberFrame`.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from fractions import Fraction

from ..schema.formats import CHECKED_AFTER_GENERATION
from ..schema.json_values import exact
from ..schema.patterns import pattern_problem
from .model import SUPPORTED_FORMATS, IntegerFrame, NumberFrame, StringFrame
from .numbers import Bound, integer_frame, lcm, number_frame, tighter_lower, tighter_upper
from .sites import Site, SiteReader, Unsatisfiable, paths


class ScalarReader(SiteReader):
    """Reads the string and number keywords of a conjunction."""

    # -- strings ---------------------------------------------------------------

    def _string(self, nodes: list[Site]) -> StringFrame:
        min_length = max((self._count(s, "minLength") for s in nodes if "minLength" in s.node), default=0)
        maxima = [self._count(s, "maxLength") for s in nodes if "maxLength" in s.node]
        max_length = min(maxima) if maxima else None
        patterns: list[str] = []
        formats: list[str] = []
        for site in nodes:
            if "pattern" in site.node:
                pattern = site.node["pattern"]
                if not isinstance(pattern, str):
                    raise self.malformed(site.path, f"pattern must be a string, got {pattern!r}")
                problem = pattern_problem(pattern)
                if problem is not None:
                    raise self.malformed(site.path, f"pattern {pattern!r}: {problem}")
                if pattern not in patterns:
                    patterns.append(pattern)
            if "format" in site.node:
                fmt = site.node["format"]
                if fmt in SUPPORTED_FORMATS:
                    if fmt not in formats:
                        formats.append(fmt)
                    if fmt in CHECKED_AFTER_GENERATION:
                        self.warn(site.path, "format", f"format {fmt!r}: {CHECKED_AFTER_GENERATION[fmt]} are "
                                  "checked after generation, not during it")
                else:
                    self.warn(site.path, "format", f"format {fmt!r} is not enforced during generation")
        if len(formats) > 1:
            self.warn(
                paths(nodes), "format", f"only format {formats[0]!r} of {formats} is enforced during generation"
            )
        if max_length is not None and min_length > max_length:
            raise Unsatisfiable(paths(nodes), f"minLength {min_length} > maxLength {max_length}")
        return StringFrame(min_length, max_length, tuple(patterns), formats[0] if formats else None)

    # -- numbers ---------------------------------------------------------------

    def _number(self, nodes: list[Site], *, integer: bool) -> IntegerFrame | NumberFrame:
        low: Bound | None = None
        high: Bound | None = None
        multiple: Fraction | None = None
        for site in nodes:
            for bound in self._bounds(site, "minimum", "exclusiveMinimum"):
                low = tighter_lower(low, bound)
            for bound in self._bounds(site, "maximum", "exclusiveMaximum"):
                high = tighter_upper(high, bound)
            if "multipleOf" in site.node:
                step = self._number_value(site, "multipleOf")
                if step <= 0:
                    raise self.malformed(site.path, f"multipleOf must be > 0, got {site.node['multipleOf']!r}")
                multiple = step if multiple is None else lcm(multiple, step)
        frame = integer_frame(low, high, multiple) if integer else number_frame(low, high, multiple)
        if frame is None:
            kind = "integer" if integer else "number"
            raise Unsatisfiable(paths(nodes), f"the bounds and multipleOf exclude every {kind}")
        return frame

    def _bounds(self, site: Site, inclusive: str, exclusive: str) -> Iterator[tuple[Fraction, bool]]:
        """Bounds of one node, in draft-04 (boolean ``exclusive*``) or later form."""
        node = site.node
        flag = node.get(exclusive)
        if inclusive in node:
            yield self._number_value(site, inclusive), flag is True
        if exclusive in node and not isinstance(flag, bool):
            yield self._number_value(site, exclusive), True

    def _number_value(self, site: Site, keyword: str) -> Fraction:
        value = site.node[keyword]
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise self.malformed(site.path, f"{keyword} must be a number, got {value!r}")
        return exact(value)

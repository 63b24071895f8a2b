"""Numeric constraints merged exactly: bounds as fractions, ``multipleOf`` as a
least common multiple, integer bounds tightened to integers."""

from __future__ import annotations

import math
from fractions import Fraction

from .model import IntegerFrame, NumberFrame

Bound = tuple[Fraction, bool]
"""A bound and whether it is exclusive."""


def tighter_lower(current: Bound | None, new: Bound) -> Bound:
    if current is None or new[0] > current[0] or (new[0] == current[0] and new[1]):
        return new
    return current


def tighter_upper(current: Bound | None, new: Bound) -> Bound:
    if current is None or new[0] < current[0] or (new[0] == current[0] and new[1]):
        return new
    return current


def lcm(a: Fraction, b: Fraction) -> Fraction:
    """Least common multiple of two positive rationals: a value is a multiple
    of both exactly when it is a multiple of this."""
    return Fraction(math.lcm(a.numerator, b.numerator), math.gcd(a.denominator, b.denominator))


def integer_frame(low: Bound | None, high: Bound | None, multiple: Fraction | None) -> IntegerFrame | None:
    """The integers within the bounds, or ``None`` when there are none."""
    minimum = None if low is None else (math.floor(low[0]) + 1 if low[1] else math.ceil(low[0]))
    maximum = None if high is None else (math.ceil(high[0]) - 1 if high[1] else math.floor(high[0]))
    # An integer n is a multiple of p/q (in lowest terms) exactly when p divides n.
    step = None if multiple is None or multiple.numerator == 1 else multiple.numerator
    if step is not None and minimum is not None:
        minimum = -(-minimum // step) * step
    if step is not None and maximum is not None:
        maximum = (maximum // step) * step
    if minimum is not None and maximum is not None and minimum > maximum:
        return None
    return IntegerFrame(minimum, maximum, step)


def number_frame(low: Bound | None, high: Bound | None, multiple: Fraction | None) -> NumberFrame | None:
    """The numbers within the bounds, or ``None`` when there are none."""
    if low is not None and high is not None:
        if low[0] > high[0] or (low[0] == high[0] and (low[1] or high[1])):
            return None
        if multiple is not None and not _has_multiple(low, high, multiple):
            return None
    return NumberFrame(
        minimum=None if low is None else _plain(low[0]),
        maximum=None if high is None else _plain(high[0]),
        exclusive_minimum=bool(low and low[1]),
        exclusive_maximum=bool(high and high[1]),
        multiple_of=None if multiple is None else _plain(multiple),
    )


def _has_multiple(low: Bound, high: Bound, step: Fraction) -> bool:
    first = math.ceil(low[0] / step) * step
    if first == low[0] and low[1]:
        first += step
    return first < high[0] or (first == high[0] and not high[1])


def _plain(value: Fraction) -> int | float:
    return value.numerator if value.denominator == 1 else float(value)

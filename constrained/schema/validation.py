"""Validation against a tool's full JSON Schema, read as the normalizer reads it.

``jsonschema`` on its own would fetch a remote ``$ref`` over the network,
fail on a reference that does not resolve, recurse without end on a ``$ref``
cycle with no value in between, raise on an ECMA 262 pattern Python's ``re``
cannot read (``\\p{L}``), and test ``multipleOf`` in floating point
(``0.123456789`` is no multiple of ``1e-9`` there). Here nothing is
fetched; a reference that does not resolve or that comes back to itself
accepts any value, as the normalizer relaxed it with a warning; patterns
(``pattern``, ``patternProperties``, and so ``additionalProperties``) match
as the frames match them, in linear time where RE2 can say the pattern
(``re`` backtracks: a second on ``^(a+)+$`` and 26 characters);
``multipleOf`` is exact, on the numbers as written; formats are checked
as the constraint enforces them, plus what no pattern can say
(:data:`~constrained.schema.formats.FORMAT_CHECKS`).
"""

from __future__ import annotations

import functools
import math
import threading
from typing import Any
from collections.abc import Callable, Iterator

import attrs
import jsonschema
import referencing
import referencing.exceptions
from jsonschema.exceptions import ValidationError
from jsonschema.protocols import Validator
from jsonschema_specifications import REGISTRY as SPECIFICATIONS

from .formats import FORMAT_CHECKS
from .json_values import exact, pattern_matches

Keyword = Callable[[Any, Any, Any, Any], Iterator[ValidationError]]


def _not_fetched(uri: str) -> referencing.Resource[Any]:
    raise referencing.exceptions.NoSuchResource(ref=uri)  # type: ignore[call-arg]


OFFLINE_REGISTRY: referencing.Registry[Any] = SPECIFICATIONS.combine(referencing.Registry(retrieve=_not_fetched))  # type: ignore[call-arg]
"""The JSON Schema metaschemas, and nothing fetched for any other URI."""


def validator_for(schema: dict[str, Any]) -> Validator:
    """A validator for ``schema`` (its ``$schema`` draft, 2020-12 by
    default, formats checked) that never fetches, reads a reference that
    does not resolve or comes back to itself as any value, and matches
    patterns and ``multipleOf`` as the frames do."""
    base = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    cls = _offline_class(base)
    return cls(schema, registry=OFFLINE_REGISTRY, format_checker=_format_checker(base))


@functools.cache
def _format_checker(base: type[Validator]) -> jsonschema.FormatChecker:
    """``base``'s format checker with :data:`FORMAT_CHECKS` in place of its own."""
    checker = jsonschema.FormatChecker(formats=())
    checker.checkers = dict(base.FORMAT_CHECKER.checkers)
    for name, check in FORMAT_CHECKS.items():
        checker.checks(name)(lambda instance, check=check: not isinstance(instance, str) or check(instance))
    return checker


@functools.cache
def _offline_class(base: type[Validator]) -> type[Validator]:
    keywords: dict[str, Keyword] = {
        "pattern": _pattern,
        "patternProperties": _pattern_properties,
        "additionalProperties": _additional_properties,
        "multipleOf": _multiple_of,
    }
    for name in ("$ref", "$dynamicRef", "$recursiveRef"):
        if name in base.VALIDATORS:
            keywords[name] = _lenient_reference(base.VALIDATORS[name])
    cls = jsonschema.validators.extend(base, keywords)
    stock_evolve = cls.evolve

    def evolve(self: Any, **changes: Any) -> Validator:
        # jsonschema validates a subschema that declares its own $schema with
        # the stock class of that draft (its own table of them): keep to the
        # offline ones, so that patterns, references and multipleOf read the
        # same there (and re prints no warning about a pattern).
        evolved = stock_evolve(self, **changes)
        kind = type(evolved)
        if kind in _OFFLINE_CLASSES:
            return evolved
        fields = {field.alias: getattr(evolved, field.name) for field in attrs.fields(kind) if field.init}
        return _offline_class(kind)(**fields)  # type: ignore[arg-type]

    cls.evolve = evolve  # type: ignore[method-assign]
    _OFFLINE_CLASSES.add(cls)
    return cls


_OFFLINE_CLASSES: set[type[Validator]] = set()


_following = threading.local()


def _lenient_reference(keyword: Keyword) -> Keyword:
    """``keyword`` (``$ref`` or kin) reading a reference that does not
    resolve, or that reaches the same schema node again for the same value
    (a cycle with no value in between: a JSON value never contains itself),
    as any value."""

    def validate(validator: Any, ref: Any, instance: Any, schema: Any) -> Iterator[ValidationError]:
        active: set[tuple[int, int]] = _following.__dict__.setdefault("active", set())
        here = (id(schema), id(instance))
        if here in active:
            return
        active.add(here)
        try:
            yield from keyword(validator, ref, instance, schema)
        except referencing.exceptions.Unresolvable:
            return
        finally:
            active.discard(here)

    return validate


def _pattern(validator: Any, pattern: Any, instance: Any, schema: Any) -> Iterator[ValidationError]:
    if validator.is_type(instance, "string") and isinstance(pattern, str) and not pattern_matches(pattern, instance):
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


def _pattern_properties(validator: Any, patterns: Any, instance: Any, schema: Any) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in patterns.items():
        for key, value in instance.items():
            if pattern_matches(pattern, key):
                yield from validator.descend(value, subschema, path=key, schema_path=pattern)


def _additional_properties(validator: Any, additional: Any, instance: Any, schema: Any) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "object"):
        return
    declared = schema.get("properties", {})
    patterns = schema.get("patternProperties", {})
    extras = [k for k in instance if k not in declared and not any(pattern_matches(p, k) for p in patterns)]
    if validator.is_type(additional, "object"):
        for key in extras:
            yield from validator.descend(instance[key], additional, path=key)
    elif additional is False and extras:
        yield ValidationError(f"additional properties are not allowed ({', '.join(map(repr, sorted(extras)))} unexpected)")


def _multiple_of(validator: Any, step: Any, instance: Any, schema: Any) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "number") or not validator.is_type(step, "number") or step <= 0:
        return
    if (isinstance(instance, float) and not math.isfinite(instance)) or (exact(instance) / exact(step)).denominator != 1:
        yield ValidationError(f"{instance!r} is not a multiple of {step}")

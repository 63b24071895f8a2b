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

A failure is said in one line, as :class:`Failure`: the JSON Pointer of
the value, the keyword and its bound (:func:`explain_error`; the frames'
own check says its failures the same way).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import attrs
import jsonschema
import referencing
import referencing.exceptions
from jsonschema.exceptions import ValidationError
from jsonschema.protocols import Validator
from jsonschema_specifications import REGISTRY as SPECIFICATIONS

from .formats import FORMAT_CHECKS
from .json_values import exact, pattern_matches
from .refs import pointer_token

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


@dataclasses.dataclass(frozen=True)
class Failure:
    """Where and why a value fails its schema: ``pointer`` (RFC 6901, from
    the arguments object: ``/items/0/qty``), the JSON Schema ``keyword`` that
    fails, and a one-line ``message`` naming both, the value and the bound,
    so that whoever reads a rejection (a model asked to retry, a person)
    knows what to fix."""

    pointer: str
    keyword: str
    message: str


SHOWN_CHARS = 80
"""How much of a value a message shows, as JSON: enough to recognize it."""
_ENUM_SHOWN = 6


def json_pointer(path: Iterable[str | int]) -> str:
    """The RFC 6901 pointer of ``path`` (``~`` and ``/`` escaped)."""
    return "".join("/" + pointer_token(str(part)) for part in path)


def shown(value: Any, limit: int = SHOWN_CHARS) -> str:
    """``value`` as one line of JSON, cut to about ``limit`` characters."""
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError, RecursionError):
        text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def failure(path: Iterable[str | int], keyword: str, value: Any, bound: Any) -> Failure:
    """The :class:`Failure` of ``value`` at ``path`` under ``keyword``.
    ``bound`` is what the message names: the keyword's value, except for
    ``required`` and ``additionalProperties`` (the key missing or not
    allowed) and ``items`` (how many items are allowed)."""
    pointer = json_pointer(path)
    return Failure(pointer, keyword, f"{_written(pointer)}: {shown(value)} {_phrase(keyword, bound)}")


def _written(pointer: str) -> str:
    """``pointer`` as a message shows it: ``/`` for the whole arguments, a
    character that would break the line (a key may hold one) escaped as in JSON."""
    return "".join(c if c.isprintable() else json.dumps(c)[1:-1] for c in pointer) or "/"


_ARTICLES = {"null": "null", "boolean": "a boolean", "integer": "an integer", "number": "a number",
             "string": "a string", "array": "an array", "object": "an object"}


def _either(names: list[str]) -> str:
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " or " + names[-1]


def _not_of_type(types: Any) -> str:
    names = {types} if isinstance(types, str) else set(types)
    if "number" in names:
        names.discard("integer")  # an integer is a number
    order = [name for name in _ARTICLES if name in names and name != "null"] + ["null"] * ("null" in names)
    return "is not " + _either([_ARTICLES[name] for name in order] + sorted(names - set(_ARTICLES)))


def _not_one_of(values: Any) -> str:
    values = list(values)
    listed: list[str] = []
    size = 0
    for value in values[:_ENUM_SHOWN]:
        text = shown(value, SHOWN_CHARS // 2)
        if listed and size + len(text) > SHOWN_CHARS:
            break
        listed.append(text)
        size += len(text) + 2
    rest = f", ... ({len(values)} in all)" if len(listed) < len(values) else ""
    return f"is not one of {', '.join(listed)}{rest}"


_SAID = {
    "const": "is not {}",
    "minimum": "is less than the minimum {}",
    "maximum": "is greater than the maximum {}",
    "exclusiveMinimum": "is not greater than the exclusive minimum {}",
    "exclusiveMaximum": "is not less than the exclusive maximum {}",
    "multipleOf": "is not a multiple of {}",
    "minLength": "is shorter than the minimum length {}",
    "maxLength": "is longer than the maximum length {}",
    "pattern": "does not match the pattern '{}'",
    "format": "does not match the format '{}'",
    "minItems": "has fewer than the minimum {} items",
    "maxItems": "has more than the maximum {} items",
    "items": "has more items than the {} allowed",
    "uniqueItems": "has repeated items (uniqueItems)",
    "minProperties": "has fewer than the minimum {} properties",
    "maxProperties": "has more than the maximum {} properties",
    "required": "lacks the required property {}",
    "additionalProperties": "has the property {}, which is not allowed (additionalProperties)",
    "anyOf": "matches none of the {} options",
}
"""What a value that fails each keyword does, its bound in place of ``{}``."""
_AS_WRITTEN = {"pattern", "format"}
"""Keywords whose bound a message shows as written, not as JSON (a
pattern's backslashes stay single)."""
_PHRASES = {"type", "enum", *_SAID}


def _phrase(keyword: str, bound: Any) -> str:
    if keyword == "type":
        return _not_of_type(bound)
    if keyword == "enum":
        return _not_one_of(bound)
    return _SAID[keyword].format(bound if keyword in _AS_WRITTEN else shown(bound))


def explain_error(error: ValidationError) -> Failure:
    """``error`` (from :func:`validator_for`'s validation) as a
    :class:`Failure`, said as the frames' failures are (a keyword this
    module has no phrase for keeps ``jsonschema``'s message)."""
    keyword = "false" if error.validator is None else str(error.validator)  # None: a `false` schema
    bound, instance = error.validator_value, error.instance
    schema = error.schema if isinstance(error.schema, dict) else {}
    if keyword in ("minimum", "maximum") and schema.get("exclusive" + keyword.title()) is True:
        keyword = "exclusive" + keyword.title()  # draft 4's boolean form
    elif keyword == "required" and isinstance(instance, dict) and isinstance(bound, list):
        bound = next((key for key in bound if key not in instance), bound)
    elif keyword == "additionalProperties" and isinstance(instance, dict):
        declared, patterns = schema.get("properties", {}), schema.get("patternProperties", {})
        bound = next((k for k in instance if k not in declared and not any(pattern_matches(p, k) for p in patterns)), "")
    elif keyword in ("items", "additionalItems") and bound is False:
        keyword, bound = "items", len(schema.get("prefixItems" if keyword == "items" else "items", ()))
    elif keyword == "anyOf" and isinstance(bound, list):
        bound = len(bound)
    if keyword in _PHRASES:
        return failure(error.absolute_path, keyword, instance, bound)
    pointer = json_pointer(error.absolute_path)
    said = " ".join(error.message.split())
    said = said if len(said) <= 2 * SHOWN_CHARS else said[: 2 * SHOWN_CHARS - 3] + "..."
    return Failure(pointer, keyword, f"{_written(pointer)}: {said}")

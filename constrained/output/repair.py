"""Repairs for tool-call arguments that another engine produced.

Engines that type arguments by how the text looks send an object parameter
(often one typed through ``$ref``) as a JSON-encoded string, and models
sometimes give the members of a tool's single required object parameter as
the arguments themselves. :func:`repair_arguments` undoes exactly these two
mistakes, and only when the result validates against the tool's schema and
uses no key the schema does not declare: a repair is never a guess. Anything
else comes back as it was, with every validation error.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any, assert_never

import jsonschema
import referencing.exceptions
from jsonschema.exceptions import ValidationError
from jsonschema.protocols import Validator

from ..errors import SchemaError
from ..frames.accepts import member_frames
from ..frames.model import (
    ArrayFrame,
    BooleanFrame,
    EnumFrame,
    Frame,
    FreeFrame,
    IntegerFrame,
    NormalizedSchema,
    NullFrame,
    NumberFrame,
    ObjectFrame,
    RefFrame,
    StringFrame,
    UnionFrame,
)
from ..frames.normalize import normalize_schema
from ..frames.types import effective_type, json_types
from ..schema.json_values import json_type
from ..schema.validation import OFFLINE_REGISTRY, json_pointer


@dataclass(frozen=True)
class RepairResult:
    """What :func:`repair_arguments` made of a call's arguments.

    ``arguments`` is the repaired dict when ``repaired``, else exactly the
    value given (the same object: a JSON string stays that string).
    ``repairs`` says what changed, one line per repair. ``errors`` says why
    the arguments given are invalid, one ``"<JSON path>: <message>"`` line per
    error; it is empty when they were valid or have been repaired.
    """

    arguments: dict[str, Any] | str
    repaired: bool = False
    repairs: tuple[str, ...] = ()
    errors: tuple[str, ...] = ()


def repair_arguments(arguments: dict[str, Any] | str, schema: dict[str, Any]) -> RepairResult:
    """Repair the arguments of one tool call against the tool's ``schema``
    (its ``parameters``), as another engine produced them: a dict, or the
    JSON string OpenAI puts in ``function.arguments``.

    Repairs, tried in this order, the first accepted one kept:

    1. *unwrap*: each top-level value that is a string the schema rejects
       there (a validation error lies at or under its key), which decodes to
       an object or array, where the key's type (read by the normalizer, so
       ``$ref`` chains and ``anyOf[object, null]`` count) admits that JSON
       type, is replaced by what it decodes to. A string the parameter
       accepts stays a string.
    2. *wrap*: when the schema's one and only required property has type
       object, non-empty arguments ``a`` become ``{that_key: a}``.

    A repair is accepted only when the result validates (``jsonschema``, the
    validator the schema's ``$schema`` names, Draft 2020-12 by default, with
    its format checker) and declares every key it uses. A key is declared at
    an object when it is in that object's ``properties`` or matches its
    ``patternProperties``; any other key only when the object has an explicit
    ``additionalProperties`` other than ``false``, or declares no
    ``properties`` and no ``patternProperties`` at all (a free-form object).
    This is the normalizer's strict reading: an absent
    ``additionalProperties`` beside declared keys counts as closed, though
    JSON Schema would let extra keys validate. It applies to the whole
    result, unions taken branch by branch.

    Errors list every error ``jsonschema`` reports for the arguments given
    (the top-level ones: an ``anyOf`` that fails is one error at its
    location), or why the arguments could not be read: a string that is not
    JSON, JSON that is not an object, a value that is not JSON data.
    Nothing here raises for any ``arguments``.

    Raises :class:`SchemaError` when ``schema`` itself is malformed: rejected
    by the normalizer (an :class:`UnsatisfiableSchemaError` included) or by
    its JSON Schema metaschema, or holding a ``$ref`` that cannot be resolved
    (found when validation reaches it). A malformed schema is the caller's
    bug, not the model's, and no arguments can be checked against it.
    """
    normalized = normalize_schema(schema, object_root=True)
    validator = _validator(schema)
    try:
        return _repair(arguments, validator, normalized)
    except RecursionError:
        return RepairResult(arguments, errors=("$: the arguments are nested too deeply to check",))
    except referencing.exceptions.Unresolvable as exc:
        raise SchemaError(f"cannot resolve a $ref: {exc}") from None


class _Unreadable(Exception):
    """The arguments are not a JSON object (internal); the message says why."""


def _repair(given: dict[str, Any] | str, validator: Validator, normalized: NormalizedSchema) -> RepairResult:
    try:
        arguments = _as_object(given)
    except _Unreadable as exc:
        return RepairResult(given, errors=(str(exc),))
    not_json = tuple(_describe(error) for error in _not_json(arguments, ()))
    if not_json:
        return RepairResult(given, errors=not_json)
    errors = list(validator.iter_errors(arguments))
    if not errors:
        return RepairResult(given)
    for repairs, candidate in _candidates(arguments, errors, normalized):
        if validator.is_valid(candidate) and _declared_only(candidate, normalized.root, normalized):
            return RepairResult(candidate, True, repairs)
    return RepairResult(given, errors=tuple(_describe(error) for error in errors))


def _validator(schema: dict[str, Any]) -> Validator:
    """The validator ``jsonschema`` picks for ``schema`` (nothing fetched: a
    remote ``$ref`` does not resolve), after checking the schema against its
    metaschema (so validation itself cannot trip on it)."""
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    try:
        cls.check_schema(schema)
    except jsonschema.exceptions.SchemaError as exc:
        raise SchemaError(exc.message, path=json_pointer(exc.absolute_path)) from None
    return cls(schema, registry=OFFLINE_REGISTRY, format_checker=cls.FORMAT_CHECKER)


def _as_object(given: object) -> dict[str, Any]:
    """The arguments as a dict (raises :class:`_Unreadable`)."""
    if isinstance(given, str):
        try:
            decoded = json.loads(given)
        except (ValueError, RecursionError) as exc:
            raise _Unreadable(f"$: the arguments are not valid JSON: {exc}") from None
        if not isinstance(decoded, dict):
            raise _Unreadable(f"$: the arguments must be a JSON object, got {json_type(decoded)}")
        return decoded
    if not isinstance(given, dict):
        raise _Unreadable(f"$: the arguments must be a dict or a JSON string, got {type(given).__name__}")
    return given


def _not_json(value: object, path: tuple[str | int, ...]) -> Iterator[ValidationError]:
    """Every place in a given dict that holds what JSON cannot (a key that is
    not a string, a set, bytes): ``jsonschema`` may raise on those."""
    if isinstance(value, dict):
        for key, item in value.items():
            if isinstance(key, str):
                yield from _not_json(item, path + (key,))
            else:
                yield ValidationError(f"key {key!r} is not a string", path=path)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _not_json(item, path + (index,))
    elif not isinstance(value, (str, int, float, type(None))):
        yield ValidationError(f"{value!r} is not a JSON value", path=path)


def _describe(error: ValidationError) -> str:
    return f"{error.json_path}: {error.message}"


def _candidates(
    arguments: dict[str, Any], errors: list[ValidationError], normalized: NormalizedSchema
) -> Iterator[tuple[tuple[str, ...], dict[str, Any]]]:
    """The repaired arguments to try, in order, each with its repairs. A
    repaired dict is new; the values it did not repair are the given ones."""
    failing = _failing_keys(errors)
    unwrapped = dict(arguments)
    repairs: list[str] = []
    for key, value in arguments.items():
        if key not in failing or not isinstance(value, str):
            continue
        decoded = _decode(value)
        if isinstance(decoded, (dict, list)) and json_type(decoded) in _key_types(normalized, key):
            unwrapped[key] = decoded
            repairs.append(f"unwrapped {key!r} from a JSON string")
    if repairs:
        yield tuple(repairs), unwrapped
    wrapper = _wrapper(normalized)
    if wrapper is not None and arguments:
        yield (f"wrapped the arguments into {wrapper!r}",), {wrapper: dict(arguments)}


def _failing_keys(errors: Iterable[ValidationError]) -> set[str | int]:
    """The top-level keys with an error at or under them, in any branch of
    a union (``anyOf`` errors keep their branches' errors as context)."""
    keys: set[str | int] = set()
    for error in errors:
        if error.absolute_path:
            keys.add(error.absolute_path[0])
        keys |= _failing_keys(error.context or ())
    return keys


def _decode(text: str) -> object:
    """``text`` read as JSON, or ``None`` when it is not JSON."""
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return None


def _key_types(normalized: NormalizedSchema, key: str) -> frozenset[str]:
    """The JSON types a top-level ``key`` may have, over every object branch
    of the root that allows the key."""
    types: frozenset[str] = frozenset()
    for branch in _branches(normalized.resolve(normalized.root), normalized):
        if isinstance(branch, ObjectFrame):
            frames = member_frames(branch, key)
            if frames:
                types |= frozenset.intersection(*(json_types(f, normalized.definitions) for f in frames))
    return types


def _branches(frame: Frame, normalized: NormalizedSchema) -> list[Frame]:
    options = frame.options if isinstance(frame, UnionFrame) else (frame,)
    return [normalized.resolve(option) for option in options]


def _wrapper(normalized: NormalizedSchema) -> str | None:
    """The root's one required property, when it is the only one and has
    type object: the parameter flat arguments may belong in."""
    root = normalized.resolve(normalized.root)
    if not isinstance(root, ObjectFrame) or len(root.required) != 1:
        return None
    key = root.required[0]
    frame = root.property(key)
    if frame is None or effective_type(frame, normalized.definitions) != "object":
        return None
    return key


def _declared_only(value: object, frame: Frame, normalized: NormalizedSchema) -> bool:
    """Whether ``value`` reads under ``frame`` with every object key declared
    (see :func:`repair_arguments`). Types are matched only as far as choosing
    a union's branch needs; validation checks the rest."""
    frame = normalized.resolve(frame)
    match frame:
        case UnionFrame():
            return any(_declared_only(value, option, normalized) for option in frame.options)
        case ObjectFrame():
            if not isinstance(value, dict):
                return False
            for key, item in value.items():
                frames = member_frames(frame, key)
                if frames is None or not all(_declared_only(item, f, normalized) for f in frames):
                    return False
            return True
        case ArrayFrame():
            if not isinstance(value, list):
                return False
            for index, item in enumerate(value):
                item_frame = frame.prefix_items[index] if index < len(frame.prefix_items) else frame.items
                if item_frame is None or not _declared_only(item, item_frame, normalized):
                    return False
            return True
        case FreeFrame() | EnumFrame():
            return True
        case StringFrame() | IntegerFrame() | NumberFrame() | BooleanFrame() | NullFrame() | RefFrame():
            return not isinstance(value, (dict, list))
        case _:
            assert_never(frame)


__all__ = ["RepairResult", "repair_arguments"]

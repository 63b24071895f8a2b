"""Frames -> Lark rules for values, in JSON syntax or Gemma's value syntax.

One emitter serves every dialect: a :class:`ValueSyntax` says how a dialect
writes keys, strings, separators and literals; the emitter turns each frame
into rules with every constraint the token automaton can enforce exactly.
Numbers and JSON strings are ``%json`` leaves (llguidance enforces bounds,
``multipleOf``, lengths, patterns and formats there); objects and arrays are
rules of our own, so key order, required keys, closed objects and recursion
are ours to decide. What cannot be enforced exactly is relaxed to a superset
and reported through :attr:`ValueEmitter.warnings`.
"""

from __future__ import annotations

import itertools
import json
import re
from dataclasses import dataclass
from decimal import Decimal
from functools import lru_cache
from typing import Any, Callable, Mapping, Sequence

import llguidance

from ..frames.model import (
    ArrayFrame,
    BooleanFrame,
    EnumFrame,
    Frame,
    FreeFrame,
    IntegerFrame,
    NullFrame,
    NumberFrame,
    ObjectFrame,
    RefFrame,
    StringFrame,
    UnionFrame,
    frame_digest,
    resolve_frame,
)
from ..errors import SchemaWarning
from ..schema.formats import FORMAT_PATTERNS
from ..schema.json_values import exact
from .lark import RuleSet, json_leaf, literal, literals, regex, repeat
from .regex import ecma_to_rust, without_text

KEY_ORDERS = ("trained", "schema", "alphabetical", "any")

# Largest object tracked exactly in any key order (2**8 subsets of keys).
MAX_ANY_ORDER_KEYS = 8

# Largest item count spelled out as a repetition; beyond it the count is relaxed.
MAX_COUNTED_ITEMS = 100

# Largest multipleOf step enforced, as its decimal digits without trailing
# zeros read as an integer (0.0075 -> 75, 86400 -> 864): llguidance builds an
# automaton with about that many states (a prime near 10**5 adds half a
# second to a compile; 123456789 exhausts memory and aborts the process).
MAX_MULTIPLE_STEP = 10_000

# Largest magnitude of a numeric bound enforced: llguidance 1.9.1 refuses
# integer ranges from about 2**62 on, and beyond 2**63 turns an integer bound
# into a wrong one without a word (maximum 1e300 rejected 10**299).
MAX_BOUND = 10**18

# Largest length counted in raw text that must also exclude its closing text:
# llguidance 1.9.1 rejects valid text for larger counts in such an intersection.
MAX_COUNTED_TEXT = 100

Member = Callable[[str, Frame], str]
"""Lark expression for one ``key: value`` member of an object."""


@dataclass(frozen=True)
class ValueSyntax:
    """How one family of dialects writes structured values."""

    name: str
    member_separator: str
    item_separator: str
    free_rule: str
    key_pattern: str
    """Regex of the key text written for a key that is not declared (declared
    keys are literals): JSON keys without escapes, Gemma's bare keys."""
    string_delimiter: str | None = None
    excluded_text: str | None = None
    """Text no JSON string (value or key) may contain: a closing marker the
    dialect's parsers look for in the raw text of a whole value."""

    def key(self, name: str) -> str:
        """Lark for a declared key and the separator after it, lexed as
        :meth:`any_key` is (a union may allow both at one place)."""
        if self.name == "json":
            return literals('"', json.dumps(name, ensure_ascii=False)[1:-1], '": ')
        # A ':' in a declared Gemma key is its own lexeme, as the separator is:
        # keys ``a`` and ``a:b`` then lex alike up to where they part.
        return literals(*re.split("(:)", name), ":")

    def any_key(self, name_terminal: str) -> str:
        """Lark for a key that is not declared, given the terminal of its text."""
        if self.name == "json":
            return f'"\\"" {name_terminal} "\\": "'
        return f'{name_terminal} ":"'


    def scalar(self, value: Any) -> str:
        """Lark for one literal value (enum and const members). Arrays and
        objects are written piece by piece, lexed as the rules for other
        values of their type are (a union may allow both at one place)."""
        if isinstance(value, list):
            items = f" {literal(self.item_separator)} ".join(self.scalar(v) for v in value)
            return f'"[" {items} "]"' if value else '"[]"'
        if isinstance(value, dict):
            members = f" {literal(self.member_separator)} ".join(f"{self.key(k)} {self.scalar(v)}" for k, v in value.items())
            return f'"{{" {members} "}}"' if value else '"{}"'
        if isinstance(value, (int, float)) and not isinstance(value, bool) and exact(value).denominator == 1:
            # JSON Schema's equality makes 2 and 2.0 (and 1e30) one member: both spellings.
            return f"({literal(str(int(exact(value))))} | {literal(json.dumps(float(value)))})"
        if self.name == "json" or not isinstance(value, str):
            return literal(json.dumps(value, ensure_ascii=False))
        inner = f" {literal(value)} " if value else " "
        return f"{self.string_delimiter}{inner}{self.string_delimiter}"


# Literal alternatives past this many are emitted as one lexeme (ValueEmitter.choice).
LARGE_CHOICE = 256

JSON_SYNTAX = ValueSyntax("json", ", ", ", ", "json_value", r'[^"\\\x00-\x1f]+')


def gemma_syntax(string_delimiter: str) -> ValueSyntax:
    """Gemma's value syntax with its string delimiter token (``<|"|>`` for
    Gemma 4, ``<escape>`` for FunctionGemma)."""
    return ValueSyntax("gemma", ",", ",", "gemma_value", r"[A-Za-z_$][A-Za-z0-9_$.\-]*", string_delimiter)




class ValueEmitter:
    """Emits value rules into a :class:`RuleSet`, one rule per distinct frame."""

    def __init__(
        self,
        rules: RuleSet,
        syntax: ValueSyntax,
        definitions: Mapping[str, Frame],
        *,
        key_order: str,
        tool: str,
    ) -> None:
        self.rules = rules
        self.syntax = syntax
        self.definitions = definitions
        self.key_order = key_order
        self.tool = tool
        self.warnings: list[SchemaWarning] = []
        self._memo: dict[str, str] = {}
        self._digests: dict[int, str] = {}

    def warn(self, path: str, keyword: str, message: str) -> None:
        warning = SchemaWarning(path, keyword, message)
        if warning not in self.warnings:
            self.warnings.append(warning)

    def resolve(self, frame: Frame) -> Frame:
        """``frame``, or the definition a :class:`RefFrame` names (any value
        for a reference cycle)."""
        return resolve_frame(frame, self.definitions)

    # -- values ------------------------------------------------------------------

    def value(self, frame: Frame, path: str = "") -> str:
        """The name of a rule matching one value of ``frame``."""
        if isinstance(frame, FreeFrame):
            return self._free_value()
        key = frame_digest(frame, self._digests)
        if key in self._memo:
            return self._memo[key]
        if isinstance(frame, RefFrame):
            name = self.rules.reserve(f"def_{frame.name}")
            self._memo[key] = name
            self.rules.define(name, self.value(self.definitions[frame.name], path))
            return name
        name = self.rules.add(frame.kind, self._body(frame, path))
        self._memo[key] = name
        return name

    def _free_value(self) -> str:
        """The rule for any value: the grammar's own, or with
        :attr:`ValueSyntax.excluded_text` one that keeps it out of strings and keys."""
        excluded = self.syntax.excluded_text
        if excluded is None:
            return self.syntax.free_rule
        if "free" not in self._memo:
            text = {"type": "string", "pattern": without_text(excluded)}
            scalars = [text, {"type": "number"}, {"type": "boolean"}, {"type": "null"}]
            value = {"$ref": "#/$defs/value"}
            composites = [
                {"type": "array", "items": value},
                {"type": "object", "patternProperties": {text["pattern"]: value}, "additionalProperties": False},
            ]
            schema = {"$defs": {"value": {"anyOf": scalars + composites}}, **value}
            self._memo["free"] = self.rules.add("free_value", json_leaf(schema))
        return self._memo["free"]

    def _body(self, frame: Frame, path: str) -> str:
        if isinstance(frame, StringFrame):
            return self.string(frame, path)
        if isinstance(frame, (IntegerFrame, NumberFrame)):
            return self.number(frame, path)
        if isinstance(frame, BooleanFrame):
            return '"true" | "false"'
        if isinstance(frame, NullFrame):
            return '"null"'
        if isinstance(frame, EnumFrame):
            return self.enum(frame.values)
        if isinstance(frame, UnionFrame):
            return " | ".join(self.value(option, path) for option in frame.options)
        if isinstance(frame, ArrayFrame):
            return self.array(frame, path)
        if isinstance(frame, ObjectFrame):
            return self.object(frame, path)
        raise TypeError(f"not a frame: {frame!r}")

    def enum(self, values: Sequence[Any]) -> str:
        """Lark for one of ``values``. Past :data:`LARGE_CHOICE` members the
        scalars become one lexeme (see :meth:`choice`); strings between
        delimiter tokens keep the tokens outside it."""
        delimiter = self.syntax.string_delimiter
        if len(values) <= LARGE_CHOICE:
            return " | ".join(self.syntax.scalar(v) for v in values)
        delimited = [v for v in values if isinstance(v, str) and delimiter is not None]
        composite = [v for v in values if isinstance(v, (list, dict))]
        plain = [v for v in values if v not in composite and v not in delimited]
        parts = [self.syntax.scalar(v) for v in composite + [v for v in delimited if v == ""]]
        if plain:
            parts.append(self.choice("enum", [self.syntax.scalar(v) for v in plain]))
        texts = [literal(v) for v in delimited if v]
        if texts:
            parts.append(f"{delimiter} {self.choice('enum_text', texts)} {delimiter}")
        return " | ".join(parts)

    def choice(self, hint: str, alternatives: Sequence[str]) -> str:
        """``alternatives`` (Lark literals) as one choice: joined, or past
        :data:`LARGE_CHOICE` of them one terminal, a single lexeme. As rule
        alternatives each would be an item of one Earley row, and llguidance
        refuses rows of more than 2,000 items (valid members would be
        rejected)."""
        joined = " | ".join(alternatives)
        return joined if len(alternatives) <= LARGE_CHOICE else self.rules.terminal(hint, joined)

    def number(self, frame: IntegerFrame | NumberFrame, path: str) -> str:
        """A ``%json`` number leaf, without the keywords llguidance cannot
        enforce (each reported): a ``multipleOf`` it gets wrong or cannot
        afford, bounds beyond :data:`MAX_BOUND` or that it refuses."""
        schema = number_schema(frame)
        if frame.multiple_of is not None and not multiple_enforceable(frame.kind, frame.multiple_of):
            del schema["multipleOf"]
            self.warn(path, "multipleOf", f"multipleOf {frame.multiple_of} is not enforced during generation")
        bounds = [k for k in schema if k not in ("type", "multipleOf")]
        for keyword in [k for k in bounds if abs(schema[k]) > MAX_BOUND]:
            self.warn(path, keyword, f"{keyword} {schema.pop(keyword)} is not enforced during generation")
        if not llguidance_reads(json.dumps(schema)):
            bounds = [k for k in schema if k not in ("type", "multipleOf")]
            # One bound alone may be the trouble.
            alone = [k for k in bounds if llguidance_reads(json.dumps({x: v for x, v in schema.items() if x != k}))]
            for keyword in alone[:1] or bounds:
                self.warn(path, keyword, f"{keyword} {schema.pop(keyword)} is not enforced during generation")
        return json_leaf(schema)

    def string(self, frame: StringFrame, path: str) -> str:
        if self.syntax.name == "json":
            schema: dict[str, Any] = {"type": "string"}
            if frame.min_length:
                schema["minLength"] = frame.min_length
            if frame.max_length is not None:
                schema["maxLength"] = frame.max_length
            # Whole-string patterns in the automaton's syntax, the format's
            # first: llguidance's own formats and ECMA reading differ from
            # the frames' (its dates ignore leap years, its \s is Rust's).
            patterns = [FORMAT_PATTERNS[frame.format]] if frame.format is not None else []
            patterns += [t for t in (self._translated(p, path) for p in frame.patterns) if t is not None]
            if patterns:
                schema["pattern"] = f"^(?:{patterns[0]})$"
                if len(patterns) > 1:
                    self.warn(path, "pattern", "only the first of several patterns is enforced during generation")
            if self.syntax.excluded_text is not None:
                return json_leaf({"allOf": [schema, {"pattern": without_text(self.syntax.excluded_text)}]})
            return json_leaf(schema)
        delimiter = self.syntax.string_delimiter
        return f"{delimiter} {self.raw_text(frame, path) or 'GEMMA_TEXT?'} {delimiter}"

    def raw_text(self, frame: StringFrame, path: str, excluded: str | None = None) -> str | None:
        """Lark for the unquoted text of a constrained string (``None`` when
        ``frame`` has no constraint on its text); ``excluded`` as for
        :meth:`string_content`."""
        content = self.string_content(frame, path, excluded)
        if content is None:
            return None
        terminal = self.rules.terminal("text", content)
        may_be_empty = frame.min_length == 0 and frame.format is None and not frame.patterns
        return f"{terminal}?" if may_be_empty else terminal

    def closed_text(self, frame: StringFrame, path: str, excluded: str | None, closing: str) -> str | None:
        """One terminal for the text of a constrained string and the
        ``closing`` text after it, so the text ends at the first closing
        (``None`` when nothing constrains the text)."""
        content = self.string_content(frame, path, excluded)
        if content is None:
            return None
        return self.rules.lazy_lexeme("text", f"({content}) {literal(closing)}")

    def string_content(self, frame: StringFrame, path: str, excluded: str | None = None) -> str | None:
        """A terminal body for raw string text under ``frame``'s constraints
        (``None`` when unconstrained). ``excluded`` is a regex of text the
        string may not be (containing its closing sequence, when that is text)."""
        parts: list[str] = []
        if frame.format is not None:
            parts.append(regex(FORMAT_PATTERNS[frame.format]))
        counted = max(frame.min_length, frame.max_length or 0)
        if excluded is not None and counted > MAX_COUNTED_TEXT:
            self.warn(
                path,
                "minLength/maxLength",
                f"lengths above {MAX_COUNTED_TEXT} on raw text are not enforced during generation",
            )
        elif frame.min_length or frame.max_length is not None:
            upper = "" if frame.max_length is None else str(frame.max_length)
            parts.append(regex(f"(?s:.){{{frame.min_length},{upper}}}"))
        for pattern in frame.patterns:
            translated = self._translated(pattern, path)
            if translated is not None:
                parts.append(regex(translated))
        if not parts:
            return None
        if excluded is not None:
            parts.append(f"~{regex(excluded)}")
        return " & ".join(parts)

    def _translated(self, pattern: str, path: str) -> str | None:
        """``pattern`` in the automaton's regex syntax, or ``None`` (with a
        warning) when it has no exact translation."""
        translated = ecma_to_rust(pattern)
        if translated is None:
            self.warn(path, "pattern", f"pattern {pattern!r} has no exact translation; not enforced during generation")
        return translated

    # -- arrays ----------------------------------------------------------------

    def array(self, frame: ArrayFrame, path: str) -> str:
        sep = literal(self.syntax.item_separator)
        low, high = frame.min_items, frame.max_items
        prefix = [self.value(f, f"{path}/prefixItems/{i}") for i, f in enumerate(frame.prefix_items)]
        rest = None if frame.items is None else self.value(frame.items, f"{path}/items")
        if high is not None and high > MAX_COUNTED_ITEMS or low > MAX_COUNTED_ITEMS:
            self.warn(path, "maxItems", f"item counts above {MAX_COUNTED_ITEMS} are not enforced during generation")
            low, high = min(low, len(prefix)), None
        items = self._item_sequence(prefix, rest, low, high, sep)
        if not items:
            return '"[]"' if low == 0 else '"[" "]"'
        return f'"[" {items} "]"'

    def _item_sequence(self, prefix: list[str], rest: str | None, low: int, high: int | None, sep: str) -> str:
        """Lark for the items between the brackets (may match nothing when
        ``low`` is 0); ``prefix`` items come first, then ``rest`` ones."""
        # Build from the back: after position i, what may follow.
        def tail(index: int) -> str:
            if index < len(prefix):
                step = f"{sep} {prefix[index]}"
                after = tail(index + 1)
                body = f"{step} {after}".strip()
                return body if index < low else f"({body})?"
            if rest is None:
                return ""
            need = max(low - index, 0)
            most = None if high is None else high - index
            if most is not None and most <= 0:
                return ""
            return repeat(f"{sep} {rest}", need, most)

        if high == 0:
            return ""
        if prefix:
            first, after = prefix[0], tail(1)
        elif rest is not None:
            first, after = rest, tail(1)
        else:
            return ""
        sequence = f"{first} {after}".strip()
        return sequence if low >= 1 else f"({sequence})?"

    # -- objects ---------------------------------------------------------------

    def object(self, frame: ObjectFrame, path: str) -> str:
        def member(key: str, value: Frame) -> str:
            return f"{self.syntax.key(key)} {self.value(value, f'{path}/properties/{key}')}"

        key_regex = regex(self.syntax.key_pattern)
        if self.syntax.excluded_text is not None:
            key_regex += f" & ~{regex('(?s:.*)' + re.escape(self.syntax.excluded_text) + '(?s:.*)')}"
        extra = self.additional_member(
            frame, path, key_regex, self.syntax.any_key, lambda v: self.value(v, f"{path}/additionalProperties")
        )
        body = self.members(frame, member, literal(self.syntax.member_separator), extra, path)
        return f'"{{" {body} "}}"' if body else '"{}"'

    def additional_member(
        self,
        frame: ObjectFrame,
        path: str,
        base_key: str,
        key_syntax: Callable[[str], str],
        value_rule: Callable[[Frame], str],
    ) -> str | None:
        """Lark for one member whose key is not declared (pattern or
        additional properties), or ``None`` when the object is closed.
        ``base_key`` is the regex of key text the dialect can write."""
        declared = [name for name, _ in frame.properties] + list(frame.forbidden)
        not_declared = "".join(f" & ~{literal(name)}" for name in declared)
        options = []
        pattern_regexes = []
        if len({value for _, value in frame.pattern_properties}) > 1:
            self.warn(path, "patternProperties", "a key matching several patterns is held to one of their schemas "
                      "during generation (to all of them after)")
        for pattern, value in frame.pattern_properties:
            translated = ecma_to_rust(pattern)
            if translated is None:
                self.warn(path, "patternProperties", f"pattern {pattern!r} has no exact translation; keys matching it are not allowed during generation")
                continue
            pattern_regexes.append(translated)
            terminal = self.rules.terminal("key", f"{base_key} & {regex(translated)}{not_declared}")
            options.append(f"{key_syntax(terminal)} {value_rule(value)}")
        if frame.additional is not None:
            excluded = "".join(f" & ~{regex(p)}" for p in pattern_regexes)
            terminal = self.rules.terminal("key", f"{base_key}{not_declared}{excluded}")
            options.append(f"{key_syntax(terminal)} {value_rule(frame.additional)}")
        if not options:
            return None
        return self.rules.add("extra_member", " | ".join(options))

    def members(self, frame: ObjectFrame, member: Member, sep: str, extra: str | None, path: str) -> str:
        """Lark for an object's members (possibly empty) in the configured key
        order: every required key once, declared keys at most once, extra
        members after the declared ones."""
        keys = [name for name, _ in frame.properties]
        frames = dict(frame.properties)
        required = set(frame.required)
        most = frame.max_properties
        if frame.min_properties > len(required) or (most is not None and (extra is not None or most < len(keys))):
            self.warn(path, "minProperties/maxProperties", "property counts are not enforced during generation")
        order = self.key_order
        if order == "any" and len(keys) > MAX_ANY_ORDER_KEYS:
            self.warn(path, "key_order", f"more than {MAX_ANY_ORDER_KEYS} keys: keys follow schema order")
            order = "schema"
        if order == "alphabetical":
            keys = sorted(keys)
        rendered = {key: member(key, frames[key]) for key in keys}
        extras = f"({sep} {extra})*" if extra is not None else ""
        first_extra = f"{extra} ({sep} {extra})*" if extra is not None else None
        if order == "any":
            return self._any_order(keys, rendered, required, sep, extras, first_extra)
        return self._in_order(keys, rendered, required, sep, extras, first_extra)

    def _in_order(
        self,
        keys: list[str],
        rendered: Mapping[str, str],
        required: set[str],
        sep: str,
        extras: str,
        first_extra: str | None,
    ) -> str:
        # started[i] / fresh[i]: the members from keys[i:] after at least one
        # member / before any; "" stands for "nothing more".
        started = self.rules.add("members", extras) if extras else ""
        fresh = self.rules.add("members", first_extra) if first_extra else ""
        fresh_optional = True
        for key in reversed(keys):
            take_started = f"{sep} {rendered[key]} {started}".strip()
            take_fresh = f"{rendered[key]} {started}".strip()
            if key in required:
                started = self.rules.add("members", take_started)
                fresh = self.rules.add("members", take_fresh)
                fresh_optional = False
            else:
                started = self.rules.add("members", _either(take_started, started))
                fresh = self.rules.add("members", _either(take_fresh, fresh))
        return f"{fresh}?" if fresh and fresh_optional else fresh

    def _any_order(
        self,
        keys: list[str],
        rendered: Mapping[str, str],
        required: set[str],
        sep: str,
        extras: str,
        first_extra: str | None,
    ) -> str:
        """Keys in any order, each at most once, the required ones all: one
        rule per (keys used so far, whether a member was written)."""
        states: dict[tuple[frozenset[str], bool], str] = {}
        for size in range(len(keys), -1, -1):
            for used in map(frozenset, itertools.combinations(keys, size)):
                for started in (True, False):
                    prefix = f"{sep} " if started else ""
                    options = [
                        f"{prefix}{rendered[key]} {states[(used | {key}, True)]}".strip()
                        for key in keys
                        if key not in used
                    ]
                    done = required <= used
                    tail = extras if started else first_extra
                    if done and tail:
                        options.append(tail)
                    body = " | ".join(f"({option})" for option in options)
                    if done and body:
                        body = f"({body})?"
                    states[(used, started)] = self.rules.add("any", body) if body else ""
        return states[(frozenset(), False)]


def _either(first: str, second: str) -> str:
    if not second:
        return f"({first})?"
    return f"({first}) | {second}"


@lru_cache(maxsize=1024)
def multiple_enforceable(kind: str, step: int | float) -> bool:
    """Whether llguidance enforces ``multipleOf: step`` on a ``kind`` number
    exactly, as measured with llguidance 1.9.1: an integral step of at most
    :data:`MAX_MULTIPLE_STEP` units, or a power of ten down to 0.0001.
    Other fractional steps are not: it refuses some floats it cannot read
    exactly (0.07 becomes 7000000000000001 units), rejects multiples written
    with fewer decimals than the step (0.5 for 0.25, 0.015 for 0.0075), and
    rejects the exponent form ``json.dumps`` gives below 0.0001 (3e-08)."""
    digits, exponent = Decimal(repr(step)).normalize().as_tuple()[1:]
    units = int("".join(map(str, digits)))
    if not ((exponent >= 0 and units <= MAX_MULTIPLE_STEP) or (units == 1 and exponent >= -4)):
        return False
    return llguidance_reads(json.dumps({"type": kind, "multipleOf": step}))


@lru_cache(maxsize=1024)
def llguidance_reads(schema: str) -> bool:
    """Whether llguidance compiles the JSON Schema ``schema`` (JSON text) as
    a ``%json`` leaf."""
    return not llguidance.LLMatcher.validate_grammar(f"start: %json {schema}")


def number_schema(frame: IntegerFrame | NumberFrame) -> dict[str, Any]:
    """The JSON Schema llguidance enforces for a numeric frame."""
    schema: dict[str, Any] = {"type": frame.kind}
    if isinstance(frame, IntegerFrame):
        if frame.minimum is not None:
            schema["minimum"] = frame.minimum
        if frame.maximum is not None:
            schema["maximum"] = frame.maximum
    else:
        if frame.minimum is not None:
            schema["exclusiveMinimum" if frame.exclusive_minimum else "minimum"] = frame.minimum
        if frame.maximum is not None:
            schema["exclusiveMaximum" if frame.exclusive_maximum else "maximum"] = frame.maximum
    if frame.multiple_of is not None:
        schema["multipleOf"] = frame.multiple_of
    return schema

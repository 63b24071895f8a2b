"""Frames -> Lark rules for values, in any dialect's value syntax.

One emitter serves every dialect: a :class:`~.syntax.ValueSyntax` says how
a dialect writes keys, strings, separators and literals; the emitter turns
each frame into rules with every constraint the token automaton can enforce
exactly. Numbers and JSON strings are ``%json`` leaves (llguidance enforces
bounds, ``multipleOf``, lengths, patterns and formats there, see
:mod:`.number_leaves`); objects and arrays are rules of our own, so key
order, required keys, closed objects and recursion are ours to decide. What
cannot be enforced exactly is relaxed to a superset and reported through
:attr:`ValueEmitter.warnings`.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any, assert_never

from ..errors import SchemaWarning
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
from ..schema.formats import FORMAT_PATTERNS
from .lark import RuleSet, json_leaf, literal, regex, repeat
from .number_leaves import number_leaf
from .regex import ecma_to_rust, without_text
from .syntax import ValueSyntax

# Largest object tracked exactly in any key order (2**8 subsets of keys).
MAX_ANY_ORDER_KEYS = 8

# Largest item count spelled out as a repetition; beyond it the count is relaxed.
MAX_COUNTED_ITEMS = 100

# Largest length counted in raw text that must also exclude its closing text:
# llguidance 1.9.1 rejects valid text for larger counts in such an intersection.
MAX_COUNTED_TEXT = 100

Member = Callable[[str, Frame], str]
"""Lark expression for one ``key: value`` member of an object."""


# Literal alternatives past this many are emitted as one lexeme (ValueEmitter.choice).
LARGE_CHOICE = 256


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
        :attr:`ValueSyntax.excluded_texts` one that keeps them out of strings and keys."""
        excluded = self.syntax.excluded_texts
        if not excluded:
            return self.syntax.free_rule
        if "free" not in self._memo:
            text = {"type": "string", "pattern": without_text(*excluded)}
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
        match frame:
            case StringFrame():
                return self.string(frame, path)
            case IntegerFrame() | NumberFrame():
                return number_leaf(frame, path, self.warn)
            case BooleanFrame():
                return '"true" | "false"'
            case NullFrame():
                return '"null"'
            case EnumFrame():
                return self.enum(frame.values)
            case UnionFrame():
                return " | ".join(self.value(option, path) for option in frame.options)
            case ArrayFrame():
                return self.array(frame, path)
            case ObjectFrame():
                return self.object(frame, path)
            case FreeFrame() | RefFrame():  # :meth:`value` makes their rules itself
                return self.value(frame, path)
            case _:
                assert_never(frame)

    def enum(self, values: Sequence[Any]) -> str:
        """Lark for one of ``values``. Past :data:`LARGE_CHOICE` members the
        scalars become one lexeme (see :meth:`choice`); strings between
        delimiter tokens keep the tokens outside it."""
        if len(values) <= LARGE_CHOICE:
            return " | ".join(self.syntax.scalar(v) for v in values)
        delimited = self.syntax.delimited_strings(values)
        composite = [v for v in values if isinstance(v, (list, dict))]
        plain = [v for v in values if v not in composite and v not in delimited]
        parts = [self.syntax.scalar(v) for v in composite + [v for v in delimited if v == ""]]
        if plain:
            parts.append(self.choice("enum", [self.syntax.scalar(v) for v in plain]))
        texts = [literal(v) for v in delimited if v]
        if texts:
            parts.append(self.syntax.delimit(self.choice("enum_text", texts)))
        return " | ".join(parts)

    def choice(self, hint: str, alternatives: Sequence[str]) -> str:
        """``alternatives`` (Lark literals) as one choice: joined, or past
        :data:`LARGE_CHOICE` of them one terminal, a single lexeme. As rule
        alternatives each would be an item of one Earley row, and llguidance
        refuses rows of more than 2,000 items (valid members would be
        rejected)."""
        joined = " | ".join(alternatives)
        return joined if len(alternatives) <= LARGE_CHOICE else self.rules.terminal(hint, joined)

    def string(self, frame: StringFrame, path: str) -> str:
        """Lark for a string under ``frame``'s constraints, as the syntax writes it."""
        return self.syntax.string(self, frame, path)

    def json_string(self, frame: StringFrame, path: str) -> str:
        """A ``%json`` string leaf: lengths, the format's pattern and the
        first pattern enforced, and none of :attr:`ValueSyntax.excluded_texts`."""
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
        if self.syntax.excluded_texts:
            return json_leaf({"allOf": [schema, {"pattern": without_text(*self.syntax.excluded_texts)}]})
        return json_leaf(schema)

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
        if self.syntax.excluded_texts:
            held = "|".join(map(re.escape, self.syntax.excluded_texts))
            key_regex += f" & ~{regex(f'(?s:.*)({held})(?s:.*)')}"
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

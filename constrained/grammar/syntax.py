"""How a family of dialects writes structured values, as one object.

The emitter (:mod:`.emitter`) asks a :class:`ValueSyntax` for everything that
differs between value syntaxes (keys, string literals, constrained strings,
separators, the rule for any value), so it never needs to know which syntax it
writes. :data:`JSON_SYNTAX` is JSON, the neutral syntax: hermes calls and the
JSON values of the raw-value dialects. A dialect with a value syntax of its
own subclasses :class:`ValueSyntax` in its own module (Gemma's bare keys and
delimited strings are in :mod:`constrained.dialects.gemma`).
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from ..frames.model import StringFrame
from ..schema.json_values import exact
from .lark import literal, literals

if TYPE_CHECKING:
    from ..tokenizers import Tokenizer
    from .emitter import ValueEmitter


@dataclass(frozen=True)
class WalkShape:
    """What the runtime's JSON walk needs to follow a syntax's values token
    by token (and so share masks across values: :mod:`constrained.runtime.json_walk`)."""

    delimiter: int | None = None
    """The token that opens and closes a string, whose text has no escapes;
    None: JSON's quotes, with backslash escapes."""
    bare_keys: bool = False
    """Keys are written without quotes and end at their ``:``."""
    ends_at_value: bool = False
    """A value ends where it is complete: the bytes after it are the
    dialect's markup, not the walk's."""


JSON_SHAPE = WalkShape()
"""JSON's shape: quoted strings with escapes, quoted keys."""


@dataclass(frozen=True)
class NotWalkable:
    """A syntax whose values the JSON walk cannot follow: masks inside its
    values are then kept per token history, not shared across values."""

    reason: str


@dataclass(frozen=True)
class ValueSyntax(ABC):
    """How one family of dialects writes structured values. Subclasses say
    how keys and strings are written; the rest is JSON's."""

    member_separator: str
    item_separator: str
    free_rule: str
    key_pattern: str
    """Regex of the key text written for a key that is not declared (declared
    keys are literals): JSON keys without escapes, Gemma's bare keys."""
    excluded_texts: tuple[str, ...] = ()
    """Texts no JSON string (value or key) may contain: closing markers the
    dialect's parsers look for in the raw text of a whole value (all
    starting with one character that none repeats, see :func:`~.regex.without_text`)."""

    free_keys_keep_pattern: ClassVar[bool] = False
    """Whether the keys inside an untyped value (:attr:`free_rule`) keep to
    :attr:`key_pattern` too, as bare keys do (JSON writes any key, escaped)."""

    @abstractmethod
    def key(self, name: str) -> str:
        """Lark for a declared key and the separator after it, lexed as
        :meth:`any_key` is (a union may allow both at one place)."""

    @abstractmethod
    def any_key(self, name_terminal: str) -> str:
        """Lark for a key that is not declared, given the terminal of its text."""

    @abstractmethod
    def string_literal(self, value: str) -> str:
        """Lark for one string constant (enum and const members)."""

    @abstractmethod
    def string(self, emitter: ValueEmitter, frame: StringFrame, path: str) -> str:
        """Lark for a string under ``frame``'s constraints."""

    @abstractmethod
    def walk_shape(self, tokenizer: Tokenizer) -> WalkShape | NotWalkable:
        """How the runtime follows values of this syntax over ``tokenizer``,
        or why it cannot: every syntax must say, so that one the
        walk cannot follow is a declared reason, never a silent slowdown."""

    def delimited_strings(self, values: Sequence[Any]) -> list[str]:
        """The strings among ``values`` written as text between delimiter
        tokens, which a large enum keeps out of its one lexeme (see
        :meth:`delimit`); none where a string is one lexeme with its quotes."""
        return []

    def delimit(self, text: str) -> str:
        """Lark for a string whose text (between the delimiters) is ``text``;
        only for syntaxes with :meth:`delimited_strings`."""
        raise NotImplementedError(f"{type(self).__name__} writes no delimited strings")

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
        if isinstance(value, str):
            return self.string_literal(value)
        return literal(json.dumps(value, ensure_ascii=False))


@dataclass(frozen=True)
class JsonSyntax(ValueSyntax):
    """JSON: quoted keys and strings with escapes, ``%json`` string leaves."""

    def key(self, name: str) -> str:
        return literals('"', json.dumps(name, ensure_ascii=False)[1:-1], '": ')

    def any_key(self, name_terminal: str) -> str:
        return f'"\\"" {name_terminal} "\\": "'

    def string_literal(self, value: str) -> str:
        return literal(json.dumps(value, ensure_ascii=False))

    def string(self, emitter: ValueEmitter, frame: StringFrame, path: str) -> str:
        return emitter.json_string(frame, path)

    def walk_shape(self, tokenizer: Tokenizer) -> WalkShape | NotWalkable:
        if self.excluded_texts:
            return NotWalkable("its strings keep a closing marker out of their text, which the walk does not follow")
        return JSON_SHAPE


JSON_SYNTAX = JsonSyntax(", ", ", ", "json_value", r'[^"\\\x00-\x1f]+')

"""gemma4 and functiongemma: ``call:NAME{key:value,...}`` in Gemma's value
syntax: bare keys, strings between delimiter tokens with no escaping, bare
scalars, ``{k:v}`` objects and ``[a,b]`` arrays without spaces. The official
template renders keys sorted, which is the trained key order. The parser
also reads drift seen from Gemma 4, at any depth (the grammar keeps writing
the template's form): keys wrapped in the string delimiter, a string whose
opening delimiter is missing, and spaces after the ``,`` between members
and items."""

from __future__ import annotations

import copy
import functools
import json
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from types import MappingProxyType
from typing import Any, ClassVar

from ..frames.accepts import member_frames
from ..frames.model import ArrayFrame, EnumFrame, Frame, ObjectFrame, StringFrame, UnionFrame, resolve_frame
from ..frames.toolset import NormalizedTool
from ..grammar.emitter import ValueEmitter
from ..grammar.lark import literal, literals
from ..grammar.syntax import NotWalkable, ValueSyntax, WalkShape
from ..tokenizers import Tokenizer
from .base import Dialect, Markers, openai_function
from .description import CallMarkup, ChatFormat, ReasoningMarkup
from .gemma_template import CALL, gemma_chat_template
from .raw_values import RawTextSyntax, top_level_value_kind
from .segments import Malformed, MarkedText, Nested, Parsed, Partial, Value, held_back


@dataclass(frozen=True)
class GemmaSyntax(ValueSyntax):
    """Gemma's value syntax: bare keys, strings as raw text between
    delimiter tokens, no spaces."""

    string_delimiter: str = field(kw_only=True)
    free_keys_keep_pattern: ClassVar[bool] = True

    def key(self, name: str) -> str:
        # A ':' in a declared key is its own lexeme, as the separator is:
        # keys ``a`` and ``a:b`` then lex alike up to where they part.
        return literals(*re.split("(:)", name), ":")

    def any_key(self, name_terminal: str) -> str:
        return f'{name_terminal} ":"'

    def string_literal(self, value: str) -> str:
        return self.delimit(literal(value)) if value else f"{self.string_delimiter} {self.string_delimiter}"

    def string(self, emitter: ValueEmitter, frame: StringFrame, path: str) -> str:
        return self.delimit(emitter.raw_text(frame, path) or "GEMMA_TEXT?")

    def delimited_strings(self, values: Sequence[Any]) -> list[str]:
        return [v for v in values if isinstance(v, str)]

    def delimit(self, text: str) -> str:
        return f"{self.string_delimiter} {text} {self.string_delimiter}"

    def walk_shape(self, tokenizer: Tokenizer) -> WalkShape | NotWalkable:
        if self.excluded_texts:  # the walk's free leaves are llguidance's plain ones
            return NotWalkable("its strings keep a closing marker out of their text, which the walk does not follow")
        delimiter = tokenizer.token_id(self.string_delimiter)
        if delimiter is None or not tokenizer.is_special(delimiter):
            return NotWalkable(f"its string delimiter {self.string_delimiter!r} is not one special token")
        return WalkShape(delimiter, bare_keys=True, ends_at_value=True)


def gemma_syntax(string_delimiter: str) -> GemmaSyntax:
    """Gemma's value syntax with its string delimiter token (``<|"|>`` for
    Gemma 4, ``<escape>`` for FunctionGemma)."""
    return GemmaSyntax(",", ",", "gemma_value", r"[A-Za-z_$][A-Za-z0-9_$.\-]*", string_delimiter=string_delimiter)


class Gemma4(Dialect):
    name = "gemma4"
    family = "Gemma 4"
    default_tokenizer = "gemma4"
    value_syntax = gemma_syntax('<|"|>')
    string_delimiter: ClassVar[str] = '<|"|>'
    markup = CallMarkup(
        open="<|tool_call>",
        close="<tool_call|>",
        separator="",
        turn_ends=("<turn|>", "<eos>"),
        ends_after_calls=("<|tool_response>",),
        other_tokens=(string_delimiter,),
    )
    reasoning = ReasoningMarkup(
        tokens=("<|channel>", "<channel|>"),
        label="thought\n",
        interleaved=True,
        lone_closing=True,
        thinks_by_default=False,  # Gemma 4's template turns thinking on only with enable_thinking
    )
    chat = ChatFormat(
        prefix="<bos>", turn="<|turn>{role}\n{text}<turn|>\n", roles={"assistant": "model"}, trained_key_order="alphabetical"
    )

    declaration_markers: ClassVar[tuple[str, str]] = ("<|tool>", "<tool|>")
    tools: Mapping[str, NormalizedTool] = MappingProxyType({})
    """The tools whose declared keys the parser knows (:meth:`for_tools`)."""

    def call_body(self, tool: NormalizedTool, emitter: ValueEmitter, markers: Markers) -> str:
        return f"{literal(tool.name)} {emitter.value(tool.root)}"

    def name_problem(self, name: str) -> str | None:
        return "call:NAME{ ends the name at its first '{'" if "{" in name else None

    def key_problem(self, key: str, top_level: bool) -> str | None:
        """A declared key is a literal of the grammar, and the parser, which
        knows the declared keys, reads the longest one that the text starts
        with and that is followed by ``:``. So a declared key may hold ``:``:
        ``vcard:fn:<|"|>x<|"|>`` has one reading, since as key ``vcard`` the
        value would start ``fn:``, and a value made of key characters is a bare
        scalar, which only ``,``, ``}`` or ``]`` may follow. No key may be
        empty or hold ``{}[],<``: those open or end a value (``{a:1,b:2}``
        would also read as the one key ``a:1,b``), and ``<`` starts the string
        delimiter and every marker. A key the model invents in an open object
        is read up to its first ``:`` and keeps to
        :attr:`~constrained.grammar.syntax.ValueSyntax.key_pattern`: its
        ``:`` stays ambiguous, as it is in any untyped value."""
        if not key or any(c in key for c in _UNWRITABLE):
            return f"a bare key may not be empty or hold any of {_UNWRITABLE}"
        return None

    def declare_tools(self, tools: Sequence[NormalizedTool]) -> str:
        """Each tool as ``declaration:NAME{description:...,parameters:...}``
        in Gemma's value syntax, keys sorted, between the declaration markers,
        as the family's template writes them."""
        opening, closing = self.declaration_markers
        parts = []
        for tool in tools:
            function = openai_function(tool)
            name = function.pop("name")
            body = render_value(_sorted_keys(function), self.string_delimiter)
            parts.append(f"{opening}declaration:{name}{body}{closing}")
        return "".join(parts)

    def chat_template(self) -> str:
        """Gemma's template as Jinja (:func:`.gemma_template.gemma_chat_template`)."""
        return gemma_chat_template(self)

    def render_call(self, tool: NormalizedTool, arguments: dict[str, Any], key_order: str) -> str:
        body = render_value(self.arranged(tool, arguments, key_order), self.string_delimiter)
        return f"{self.markup.open}{CALL}{tool.name}{body}{self.markup.close}"

    def raw_text_syntax(self, markers: Markers) -> RawTextSyntax:
        """A top-level string is raw text up to the delimiter token, so the
        constraint can follow it like a raw value: its opening is the key
        and the delimiter, after the call's name or a top-level ``,`` (and
        any scalar members before it). A top-level number is written in the
        markup, after the same members and its key. Markup with a nested
        object or array never matches, and the tracker leaves that call's
        values to llguidance."""
        key, scalar = rb"[^:,{}\[\]<]+", rb"-?[0-9][0-9.eE+\-]*|true|false|null"
        delimiter = re.escape(self.string_delimiter.encode())
        members = rb"(?:" + re.escape(CALL.encode()) + rb"(?P<tool>[^{]*)\{|,)(?:" + key + rb":(?:" + scalar + rb"),)*"
        opening = re.compile(members + rb"(?P<key>" + key + rb"):" + delimiter)
        return RawTextSyntax(
            call_open=self.markup.open,
            call_close=self.markup.close,
            opening=opening,
            close=self.string_delimiter,
            close_is_token=True,
            close_at_start=True,
            json_may_hold_close=False,
            value_lead="",
            value_guards=lambda tool: (),
            value_kind=functools.partial(top_level_value_kind, self, close=self.string_delimiter),
            text_may_spell_close=True,
            number_opening=re.compile(members + rb"(?P<key>" + key + rb"):"),
            arguments_close=re.compile(rb"(?:" + members + rb"(?:" + key + rb":(?:" + scalar + rb"))?)?\}"),
        )

    def for_tools(self, tools: Mapping[str, NormalizedTool]) -> Gemma4:
        bound = copy.copy(self)
        bound.tools = tools
        return bound

    def parse_body(self, body: str) -> tuple[str, list[tuple[str, Value]]]:
        """``call:NAME{key:value,...}``, values in Gemma's syntax."""
        reader, place = self._reader(body)
        if reader is None:
            raise Malformed("expected 'call:NAME{' after the call token")
        pairs = reader.pairs(place)
        if reader.position != len(body):
            raise reader.fail("the end of the call")
        return reader.name, [(key, Parsed(value)) for key, value in pairs]

    def partial_body(self, body: str, resume: Partial | None = None) -> Partial:
        """The complete top-level members so far, and the text of a string
        member still being written. A member is complete once its string,
        object or array has closed, a bare scalar (which may go on) once its
        ``,`` has come."""
        delimiter = self.string_delimiter
        if resume is None:
            reader, place = self._reader(body)
            if reader is None:
                if not body.startswith(CALL) and not CALL.startswith(body):
                    raise Malformed("expected 'call:NAME{' after the call token")
                return Partial()
            reader.position += 1
            pairs: list[tuple[str, Value]] = []
        else:
            assert resume.name is not None
            reader, place = _ValueReader(body, delimiter, resume.name), self._place(resume.name)
            pairs = list(resume.pairs)
        name = reader.name
        while True:
            member = reader.position
            if pairs:
                if not body.startswith(",", member):
                    return Partial(name, pairs, resume_at=member)
                reader.separator(place)
            try:
                key = reader.key(place)
            except Malformed:
                return Partial(name, pairs, resume_at=member)
            value_at, start = reader.position, reader.position + len(delimiter)
            if body.startswith(delimiter, value_at) and body.find(delimiter, start) < 0:
                held = held_back(body[start:], delimiter)
                text = MarkedText(re.compile(re.escape(delimiter)), (delimiter,), body[start + len(held) :])
                return Partial(name, pairs, key, held, resume_at=member, open_value=text)
            try:
                value = reader.value(place.member(key))
            except Malformed:
                nested = body.startswith(("{", "["), value_at)
                follow = Nested(body[value_at:], delimiter, escapes=False) if nested else None
                return Partial(name, pairs, resume_at=member, open_value=follow)
            if not isinstance(value, (str, dict, list)) and not body.startswith(",", reader.position):
                return Partial(name, pairs, resume_at=member)
            pairs.append((key, Parsed(value)))

    def _reader(self, body: str) -> tuple[_ValueReader | None, _Place]:
        """A reader at the ``{`` of ``call:NAME{``, and the place of the
        arguments in the named tool's frames (nowhere for an unknown tool);
        no reader when the body does not start so."""
        brace = body.find("{")
        if not body.startswith(CALL) or brace < 0:
            return None, _NOWHERE
        name = body[len(CALL) : brace]
        reader = _ValueReader(body, self.string_delimiter, name)
        reader.position = brace
        return reader, self._place(name)

    def _place(self, name: str) -> _Place:
        """The place of a call's arguments in the named tool's frames."""
        tool = self.tools.get(name)
        return _NOWHERE if tool is None else _Place((tool.root,), tool.schema.definitions)


class FunctionGemma(Gemma4):
    name = "functiongemma"
    family = "FunctionGemma (Gemma 3 270M)"
    default_tokenizer = "functiongemma"
    value_syntax = gemma_syntax("<escape>")
    string_delimiter = "<escape>"
    markup = CallMarkup(
        open="<start_function_call>",
        close="<end_function_call>",
        separator="",
        turn_ends=("<end_of_turn>", "<eos>"),
        ends_after_calls=("<start_function_response>",),
        other_tokens=(string_delimiter,),
    )
    reasoning = ReasoningMarkup(thinks_by_default=False)
    chat = ChatFormat(
        prefix="<bos>",
        turn="<start_of_turn>{role}\n{text}<end_of_turn>\n",
        roles={"assistant": "model", "system": "developer"},
        trained_key_order="alphabetical",
    )
    declaration_markers = ("<start_function_declaration>", "<end_function_declaration>")


def _sorted_keys(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _sorted_keys(value[k]) for k in sorted(value)}
    if isinstance(value, list):
        return [_sorted_keys(v) for v in value]
    return value


def render_value(value: Any, delimiter: str) -> str:
    """A value in Gemma's syntax, keys in the order given."""
    if isinstance(value, str):
        return f"{delimiter}{value}{delimiter}"
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, list):
        return "[" + ",".join(render_value(v, delimiter) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ",".join(f"{k}:{render_value(v, delimiter)}" for k, v in value.items()) + "}"
    return repr(value) if isinstance(value, float) else str(value)


@dataclass(frozen=True)
class _Place:
    """What a tool's frames declare at one place of a call: the frames its
    value may take (several for a union), for the keys it declares."""

    frames: tuple[Frame, ...] = ()
    definitions: Mapping[str, Frame] = field(default_factory=dict)

    def options(self) -> Iterator[Frame]:
        """The frames, references followed and unions spread."""
        stack, seen = list(self.frames), set()
        while stack:
            frame = resolve_frame(stack.pop(), self.definitions)
            if id(frame) in seen:
                continue
            seen.add(id(frame))
            if isinstance(frame, UnionFrame):
                stack.extend(frame.options)
            else:
                yield frame

    @cached_property
    def declared_keys(self) -> frozenset[str]:
        """The keys declared here: declared properties and the keys of
        enum/const objects (worked out once for all the members of an object)."""
        keys: set[str] = set()
        for frame in self.options():
            if isinstance(frame, ObjectFrame):
                keys.update(key for key, _ in frame.properties)
            elif isinstance(frame, EnumFrame):
                keys.update(key for value in frame.values if isinstance(value, dict) for key in value)
        return frozenset(keys)

    @cached_property
    def colon_keys(self) -> list[str]:
        """The declared keys here that hold ``:``, longest first."""
        return sorted((key for key in self.declared_keys if ":" in key), key=len, reverse=True)

    @cached_property
    def spaced_keys(self) -> tuple[str, ...]:
        """The declared keys here that start with a space: after a ``,``,
        such a key keeps its space (see :meth:`_ValueReader.separator`)."""
        return tuple(key for key in self.declared_keys if key.startswith(" "))

    def member(self, key: str) -> _Place:
        """The place of the value of ``key`` in an object here."""
        frames: list[Frame] = []
        for frame in self.options():
            if isinstance(frame, ObjectFrame):
                frames.extend(member_frames(frame, key) or ())
            elif isinstance(frame, EnumFrame):
                values = tuple(v[key] for v in frame.values if isinstance(v, dict) and key in v)
                frames.extend([EnumFrame(values)] if values else [])
        return _Place(tuple(frames), self.definitions)

    def item(self, index: int) -> _Place:
        """The place of item ``index`` of an array here."""
        frames: list[Frame] = []
        for frame in self.options():
            if isinstance(frame, ArrayFrame):
                item = frame.prefix_items[index] if index < len(frame.prefix_items) else frame.items
                frames.extend([item] if item is not None else [])
            elif isinstance(frame, EnumFrame):
                values = tuple(v[index] for v in frame.values if isinstance(v, list) and index < len(v))
                frames.extend([EnumFrame(values)] if values else [])
        return _Place(tuple(frames), self.definitions)


_NOWHERE = _Place()
"""A place no frame declares (an untyped value, an unknown tool): bare keys."""


class _ValueReader:
    """Reads Gemma's value syntax exactly as the grammar writes it, each
    object's keys as its :class:`_Place` declares them."""

    def __init__(self, text: str, delimiter: str, name: str) -> None:
        self.text = text
        self.delimiter = delimiter
        self.name = name
        self.position = 0

    def fail(self, what: str) -> Malformed:
        return Malformed(f"expected {what} at offset {self.position} of the call", self.name)

    def pairs(self, place: _Place) -> list[tuple[str, Any]]:
        """The members of an object, in order (``{`` at the current position)."""
        if not self.text.startswith("{", self.position):
            raise self.fail("'{'")
        self.position += 1
        members: list[tuple[str, Any]] = []
        if self.text.startswith("}", self.position):
            self.position += 1
            return members
        while True:
            key = self.key(place)
            members.append((key, self.value(place.member(key))))
            if self.text.startswith(",", self.position):
                self.separator(place)
            elif self.text.startswith("}", self.position):
                self.position += 1
                return members
            else:
                raise self.fail("',' or '}'")

    def separator(self, place: _Place | None = None) -> None:
        """Past the ``,`` at the current position, and the spaces after it:
        models write ``, `` between members and items (drift; the grammar
        writes ``,``). No bare key or value starts with a space, so the
        spaces belong to the separator, unless a key declared in the object
        at ``place`` starts with them and follows (then it is that key, as
        the grammar writes it)."""
        self.position += 1
        end = self.position
        while self.text.startswith(" ", end):
            end += 1
        if end == self.position or place is not None and any(
            self.text.startswith(f"{key}:", self.position) for key in place.spaced_keys
        ):
            return
        self.position = end

    def key(self, place: _Place) -> str:
        """A key and its ``:``: the longest key declared here that the text
        starts with, followed by ``:``, else a bare key up to the first ``:``.
        A key wrapped in the string delimiter (drift seen from Gemma 4,
        which the grammar never writes) is the text between the delimiters:
        no bare key starts with ``<``, so that reading is the only one."""
        if self.text.startswith(self.delimiter, self.position):
            start = self.position + len(self.delimiter)
            end = self.text.find(self.delimiter, start)
            if end < 0 or not self.text.startswith(":", end + len(self.delimiter)):
                raise self.fail("a key, its closing delimiter and ':'")
            self.position = end + len(self.delimiter) + 1
            return self.text[start:end]
        for key in place.colon_keys:
            if self.text.startswith(f"{key}:", self.position):
                self.position += len(key) + 1
                return key
        colon = self.text.find(":", self.position)
        key = self.text[self.position : colon] if colon >= 0 else ""
        if not key or any(c in key for c in _KEY_STOPS) or self.delimiter in key:
            raise self.fail("a key and ':'")
        self.position = colon + 1
        return key

    def value(self, place: _Place, item: bool = False) -> Any:
        """The value at the current position (an array's item when ``item``)."""
        text, start = self.text, self.position
        if text.startswith(self.delimiter, start):
            end = text.find(self.delimiter, start + len(self.delimiter))
            if end < 0:
                raise self.fail(f"a closing {self.delimiter}")
            self.position = end + len(self.delimiter)
            return text[start + len(self.delimiter) : end]
        if text.startswith("{", start):
            members = self.pairs(place)
            keys = [key for key, _ in members]
            if len(set(keys)) != len(keys):
                raise Malformed("a key is given twice in an object", self.name)
            return dict(members)
        if text.startswith("[", start):
            return self.array(place)
        scalar = self.scalar(start)
        if scalar is not None and (scalar[1] == len(text) or text[scalar[1]] in _VALUE_ENDS):
            self.position = scalar[1]
            return scalar[0]
        unopened = self.unopened_string(start, item)
        if unopened is not None:
            return unopened
        if scalar is None:
            raise self.fail("a value")
        self.position = scalar[1]
        return scalar[0]

    def scalar(self, start: int) -> tuple[Any, int] | None:
        """The bare scalar (``true``, ``false``, ``null`` or a number) at
        ``start`` and where it ends, or ``None``."""
        for word, meaning in (("true", True), ("false", False), ("null", None)):
            if self.text.startswith(word, start):
                return meaning, start + len(word)
        number = _NUMBER.match(self.text, start)
        return None if number is None else (json.loads(number.group()), number.end())

    def unopened_string(self, start: int, item: bool) -> str | None:
        """A string whose opening delimiter the model left out (drift seen
        from Gemma 4: ``city:Paris<|"|>``), read where no value the grammar
        writes starts at ``start`` (or a bare scalar there runs into more
        text): the text up to the next delimiter, when a ``,``, ``}`` or
        ``]`` follows that delimiter. Not read (``None``) where the text
        could also be more than one value: in an array, when it holds a
        ``,``; in an object, when it holds a ``,`` and then a key and its
        ``:`` (``start:2025,end:<|"|>...``); nor when it starts with
        whitespace (``key: text``: whether the space is the string's is
        not known) or with what ends a value (``key:}<|"|>``)."""
        end = self.text.find(self.delimiter, start)
        after = end + len(self.delimiter)
        if end <= start or after >= len(self.text) or self.text[after] not in _VALUE_ENDS:
            return None
        string = self.text[start:end]
        if string[0].isspace() or string[0] in _VALUE_ENDS:
            return None  # an empty value and then more, or a space that may be the string's or not
        if ("," in string) if item else _MEMBER_START.search(string) is not None:
            return None
        self.position = after
        return string

    def array(self, place: _Place) -> list[Any]:
        self.position += 1
        items: list[Any] = []
        if self.text.startswith("]", self.position):
            self.position += 1
            return items
        while True:
            items.append(self.value(place.item(len(items)), item=True))
            if self.text.startswith(",", self.position):
                self.separator()
            elif self.text.startswith("]", self.position):
                self.position += 1
                return items
            else:
                raise self.fail("',' or ']'")


_UNWRITABLE = "{}[],<"
"""Characters no key may hold (:meth:`Gemma4.key_problem`)."""
_KEY_STOPS = ":" + _UNWRITABLE
"""Characters a bare key (one not declared with a ``:``) may not hold."""
_NUMBER = re.compile(r"-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?")
_VALUE_ENDS = ",}]"
"""What may follow a value: the next member or item, or the end of its object or array."""
_MEMBER_START = re.compile(r",[^:{}\[\],<]+:")
"""A ``,`` then a bare key and its ``:``: where a text holding it could be
two members of an object."""

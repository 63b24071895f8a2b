"""Top-level argument values of the XML-style dialects (qwen3_coder, glm):
strings raw, every other value JSON, each followed by its closing marker."""

from __future__ import annotations

import copy
import functools
import json
import re
from abc import abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any, ClassVar

from ..frames.accepts import member_frames
from ..frames.model import (
    BooleanFrame,
    EnumFrame,
    Frame,
    FreeFrame,
    IntegerFrame,
    NullFrame,
    NumberFrame,
    ObjectFrame,
    StringFrame,
    UnionFrame,
)
from ..frames.toolset import NormalizedTool
from ..frames.types import json_types
from ..grammar.emitter import ValueEmitter
from ..grammar.lark import literal, regex
from .base import Dialect, Markers
from .segments import Malformed, MarkedText, Partial, Value, held_back_all


@dataclass(frozen=True)
class RawValues:
    """How one dialect closes a top-level value.

    ``any_text`` is Lark for any raw text *with* its closing; ``close`` is
    Lark for the closing after other values; ``close_text`` the closing as
    text, or ``None`` when it is a special token (text closings join the
    constrained text in one lexeme, so the text cannot run into them);
    ``excluded`` a regex raw text may not match in full (``None``: nothing,
    since a special-token closing cannot occur in text); ``python_literals``
    allows ``True``/``False``/``None`` as the template's ``str()`` writes them.
    """

    any_text: str
    close: str
    close_text: str | None
    excluded: str | None
    python_literals: bool

    def value(self, frame: Frame, emitter: ValueEmitter, path: str, contested: bool = False) -> str:
        """Lark for one top-level value of ``frame`` and its closing.

        ``contested``: the parameters are a union of parameter sets that give
        this key different frames (see :func:`contested_keys`), so the value
        stands beside other sets' values of the key in the grammar. Where
        the closing is text, such a value is then one lexeme with its
        closing wherever it can be (any text, constrained and enum strings,
        scalars without bounds): llguidance's lexer does not backtrack, so a
        number's lexeme beside a line of raw text (qwen3_coder: ``5`` then
        the closing as one lexeme, the text as ``5``, a newline, the closing)
        or beside a lazy text lexeme that runs on to the closing (glm) would
        drop one set's reading of the same text. Lexemes that all end at the
        same closing keep every set that can read the text, and the call's
        other keys (a discriminator after the value) decide."""
        frame = emitter.resolve(frame)
        if contested and self.close_text is not None:
            single = self._single_lexeme(frame, emitter)
            if single is not None:
                return single
        if _any_string(frame):
            return self.any_text
        if isinstance(frame, UnionFrame):
            return self.union([emitter.resolve(option) for option in frame.options], emitter, path)
        if isinstance(frame, StringFrame):
            if self.close_text is not None:
                return emitter.closed_text(frame, path, self.excluded, self.close_text) or self.any_text
            text = emitter.raw_text(frame, path, self.excluded)
            return f"{text} {self.close}" if text else self.any_text
        if isinstance(frame, EnumFrame):
            texts = [literal(v) for v in frame.values if isinstance(v, str)]
            others = [v for v in frame.values if not isinstance(v, str)]
            options = [f"({emitter.enum(others)}) {self.close}"] if others else []
            if texts and self.close_text is not None:
                options.append(emitter.rules.terminal("text", f"({' | '.join(texts)}) {literal(self.close_text)}"))
            elif texts:
                options.append(f"({emitter.choice('enum_text', texts)}) {self.close}")
            return " | ".join(options) if len(options) == 1 else f"({' | '.join(options)})"
        if isinstance(frame, BooleanFrame) and self.python_literals:
            return f'("true" | "false" | "True" | "False") {self.close}'
        if isinstance(frame, NullFrame) and self.python_literals:
            return f'("null" | "None") {self.close}'
        return f"{emitter.value(frame, path)} {self.close}"

    def _single_lexeme(self, frame: Frame, emitter: ValueEmitter) -> str | None:
        """One lexeme for a value of ``frame`` and its text closing, or
        ``None`` (constrained strings are one already; other values, JSON
        with structure or bounds, keep their rules)."""
        assert self.close_text is not None
        close = literal(self.close_text)
        if _any_string(frame):
            text = f"(/(?s:.*)/ & ~{regex(self.excluded)})" if self.excluded else "/(?s:.*)/"
            return emitter.rules.lazy_lexeme("text", f"{text} {close}")
        scalar = _scalar_regex(frame, self.python_literals)
        if scalar is not None:
            return emitter.rules.lazy_lexeme("text", f"{regex(f'(?:{scalar})')} {close}")
        if isinstance(frame, EnumFrame) and all(not isinstance(v, (list, dict)) for v in frame.values):
            texts = [literal(raw_text(v)) for v in frame.values]
            return emitter.rules.terminal("text", f"({' | '.join(texts)}) {close}")
        return None

    def union(self, options: list[Frame], emitter: ValueEmitter, path: str) -> str:
        """Lark for a top-level union. A constrained string's lexeme runs to
        its text closing, and llguidance's lexer (greedy, no backtracking)
        follows it past where a number beside it ends: "1" then the closing
        was lost when the string needs two characters. So the options that
        are plain scalars (a number without bounds, a boolean, null) join the
        string's lexeme as regexes of their JSON text."""
        text = next((option for option in options if isinstance(option, StringFrame)), None)
        scalars = [_scalar_regex(option, self.python_literals) for option in options]
        content = None
        if self.close_text is not None and text is not None and any(scalars):
            content = emitter.string_content(text, path, self.excluded)
        if content is None:
            return "(" + " | ".join(self.value(option, emitter, path) for option in options) + ")"
        alternatives = regex("|".join(f"(?:{scalar})" for scalar in scalars if scalar))
        lexeme = emitter.rules.lazy_lexeme("text", f"(({content}) | {alternatives}) {literal(self.close_text or '')}")
        rest = [self.value(o, emitter, path) for o, scalar in zip(options, scalars) if o is not text and not scalar]
        return "(" + " | ".join([lexeme, *rest]) + ")"


_INTEGER = "-?(0|[1-9][0-9]*)"


def _scalar_regex(frame: Frame, python_literals: bool) -> str | None:
    """The JSON text of every value of ``frame`` as one regex, for frames
    that have one (numbers without bounds, booleans, null), else ``None``."""
    if frame == IntegerFrame():
        return _INTEGER
    if frame == NumberFrame():
        return _INTEGER + "(\\.[0-9]+)?([eE][+-]?[0-9]+)?"
    if isinstance(frame, BooleanFrame):
        return "true|false|True|False" if python_literals else "true|false"
    if isinstance(frame, NullFrame):
        return "null|None" if python_literals else "null"
    return None


class ValueKind(Enum):
    """How the constraint can follow one top-level value (:mod:`constrained.runtime.text_masks`)."""

    ANY_TEXT = "any text"
    """Raw text of any content: its masks are precomputed rows."""
    OTHER = "other"
    """Constrained text or JSON; it ends at the first closing."""
    UNTRACKED = "untracked"
    """Its text may hold the closing, so its end is not known from the text."""


@dataclass(frozen=True)
class RawTextSyntax:
    """Where a call's top-level values start and end, for the constraint's
    precomputed masks of raw-text frames.

    ``opening`` matches, in full, the call's markup from the call token (or
    from the end of the previous value) up to where a value starts; group
    ``key`` is the parameter, group ``tool`` (first value only) the tool.
    ``close`` ends a value: text (a value runs to its first occurrence) or,
    with ``close_is_token``, a special token. ``close_at_start``: whether the
    closing may be completed by text that began in the opening (qwen3_coder:
    no, a value's first line may not be ``</parameter>``). ``json_may_hold_close``:
    JSON values may contain the closing text, so only raw strings are followed.
    The dialect's hooks come with it, so the tracker needs nothing else:
    ``value_lead`` and ``value_guards`` as :class:`RawValueDialect` has them,
    ``value_kind`` as :meth:`RawValueDialect.value_kind` with this closing.
    """

    call_open: str
    call_close: str
    opening: re.Pattern[bytes]
    close: str
    close_is_token: bool
    close_at_start: bool
    json_may_hold_close: bool
    value_lead: str
    value_guards: Callable[[NormalizedTool | None], tuple[str, ...]]
    value_kind: Callable[[NormalizedTool, str], ValueKind]
    text_may_spell_close: bool = False
    """Whether a value's text may spell a closing token out as text (Gemma:
    the parser splits on the token); else the grammar keeps it out."""
    number_opening: re.Pattern[bytes] | None = None
    """In a dialect that writes top-level numbers in its markup (Gemma):
    matches, in full, the markup up to where such a member's value starts,
    as ``opening`` does (groups ``key`` and, first member only, ``tool``);
    the value is a number when the next byte begins one, and ends at the
    first byte that cannot continue it."""
    open_repeats: bool = False
    """Whether ``call_open`` also starts markup inside a call (DSML's
    ``｜DSML｜`` starts every tag): it then opens tracking only outside a
    call, and inside one it is markup (or ends a value) like text."""
    arguments_close: re.Pattern[bytes] | None = None
    """Matches, in full, the markup from the call's name or the end of its
    last value through the end of its arguments (Gemma: scalar members and
    the object's ``}``; group ``tool`` as in ``opening``): the grammar then
    stands in one place whichever members came before."""


@dataclass(frozen=True)
class TaggedValue:
    """A top-level value read from its start (:meth:`RawValueDialect.value_at`):
    up to its closing (``closed``) or a guard, its text and where the markup
    after it starts; or, in text that stops before either, the text that
    streams (``text``, the tail that may begin a closing held back) and the
    value's reading from there (``tail``)."""

    text: str
    end: int = -1
    closed: bool = False
    tail: MarkedText | None = None


class RawValueDialect(Dialect):
    """A dialect whose calls are read by one walk over the call's text:
    complete (``final``) or as far as an unfinished call goes.

    **Guards.** A model that leaves out a value's closing writes the next
    argument's opening inside the value. So no raw value may hold a *guard*
    (:meth:`value_guards`, the start of an argument's markup, as
    ``value_lead + value + value_trail`` shows it), the grammar keeps them
    out, and the walk reads one as the end of the value before it (a
    lenient reading of text the grammar never writes)."""

    value_lead: ClassVar[str] = ""
    """Text the guards see before a value (qwen3_coder: the newline of its
    opening, so a guard may be a line)."""
    value_trail: ClassVar[str] = ""
    """Text the guards see after a value (qwen3_coder: the newline its
    closing begins with)."""
    any_guard: ClassVar[re.Pattern[str]] = re.compile("(?!)")
    """The guards of any tool (in ``value_lead + text + value_trail``), for
    a literal string judged without its tool."""
    tools: Mapping[str, NormalizedTool] = {}

    def for_tools(self, tools: Mapping[str, NormalizedTool]) -> RawValueDialect:
        bound = copy.copy(self)
        bound.tools = tools
        bound.__dict__["_cache"] = {}
        return bound

    def cached(self, key: tuple[Any, ...], make: Callable[[], Any]) -> Any:
        """``make()``, kept per bound tool set (not kept without tools)."""
        if not self.tools:
            return make()
        cache: dict[tuple[Any, ...], Any] = self.__dict__["_cache"]
        if key not in cache:
            cache[key] = make()
        return cache[key]

    def value_guards(self, tool: NormalizedTool | None) -> tuple[str, ...]:
        """The guards of ``tool``'s raw values (of a tool not known: those
        every tool has)."""
        return ()

    def closing_problem(self, text: str, top_level: bool) -> str | None:
        """Why ``text`` (a whole raw value when ``top_level``, else a string
        inside a JSON value) would end its value early, or ``None``."""
        return None

    def text_problem(self, text: str, top_level: bool) -> str | None:
        """The closing, and for a raw value the guards of any tool (a literal
        string is judged without its tool)."""
        if (problem := self.closing_problem(text, top_level)) is not None:
            return problem
        held = self.any_guard.search(self.value_lead + text + self.value_trail) if top_level else None
        return None if held is None else f"a raw value may not hold {held.group()!r}, the start of an argument"

    def value_problem(self, tool: NormalizedTool, text: str) -> str | None:
        """Why ``text`` cannot be a raw value of ``tool``: its closing or
        one of the tool's guards."""
        if (problem := self.closing_problem(text, True)) is not None:
            return problem
        whole = self.value_lead + text + self.value_trail
        held = next((guard for guard in self.value_guards(tool) if guard in whole), None)
        return None if held is None else f"a raw value may not hold {held!r}, the start of an argument"

    def guards_for(self, name: str, key: str) -> tuple[str, ...]:
        """The guards that end a value of ``key`` in a call of tool ``name``
        (of the tools given to :meth:`for_tools`): every guard when no text
        the grammar writes for the value can hold one (raw text, scalars),
        else only those that begin with :attr:`value_lead` (JSON text is one
        line)."""

        def make() -> tuple[str, ...]:
            tool = self.tools.get(name)
            guards = self.value_guards(tool)
            if tool is None or _guarded(tool, key, self):
                return guards
            return tuple(g for g in guards if self.value_lead and g.startswith(self.value_lead))

        return self.cached(("guards", name, key), make)

    def tagged_bodies(self, tool: NormalizedTool, emitter: ValueEmitter, values: RawValues, head: str,
                      opening: Callable[[str], str]) -> str:
        """Lark for the bodies of ``tool``'s calls (one per argument object)
        where each argument is its key in tags: ``head`` (the name and what
        follows it), then each member as ``opening(key)`` (the key's Lark in
        its tags; an undeclared key's by :attr:`CallMarkup.argument_key`)
        and its value with its closing."""
        assert self.markup.argument_key is not None, "a dialect of tagged arguments has argument_key"
        key_text, contested = regex(self.markup.argument_key), contested_keys(tool)
        bodies = []
        for frame in self.argument_objects(tool):
            extra = emitter.additional_member(
                frame, "", key_text, opening, lambda value: values.value(value, emitter, "/additionalProperties")
            )
            members = emitter.members(
                frame,
                lambda key, value: f"{opening(literal(key))} "
                + values.value(value, emitter, f"/properties/{key}", key in contested),
                "",
                extra,
                "",
            )
            bodies.append(f"{head} {members}".strip())
        return " | ".join(f"({body})" for body in bodies)

    def value_at(self, body: str, start: int, name: str, key: str, closing: str, *, final: bool) -> TaggedValue:
        """The value of ``key`` (in a call of ``name``) from ``body[start:]``:
        to the first ``closing`` or, before it, a guard, where the one line
        break before the guard is the layout's. When ``final``, a value
        that reaches neither is malformed, as one that is empty before a guard."""
        guards = self.guards_for(name, key)
        ends = self.cached(("ends", name, key), lambda: ends_pattern((closing,), guards))
        match = ends.search(body, start)
        if match is None:
            if final:
                raise Malformed(f"the value of {key!r} is not closed with {closing!r}", name)
            markers = self.cached(("holds", name, key), lambda: (closing, *guards, *("\n" + g for g in guards)))
            held = held_back_all(body[start:], markers)
            return TaggedValue(held, tail=MarkedText(ends, markers, body[start + len(held) :]))
        if match.lastgroup == "close":
            return TaggedValue(body[start : match.start()], match.end(), closed=True)
        if match.start() == start:
            raise Malformed(f"the value of {key!r} is missing before the next argument", name)
        return TaggedValue(body[start : match.start()].removesuffix("\n"), match.start())

    @abstractmethod
    def raw_text_syntax(self, markers: Markers) -> RawTextSyntax:
        """How calls written for this tokenizer open and close their values
        (:meth:`text_syntax` of the dialect's opening and closing)."""

    def text_syntax(
        self, opening: re.Pattern[bytes], close: str, *, close_is_token: bool, close_at_start: bool
    ) -> RawTextSyntax:
        """The :class:`RawTextSyntax` of this dialect's calls whose values
        ``opening`` starts and ``close`` ends."""
        return RawTextSyntax(
            call_open=self.markup.open,
            call_close=self.markup.close,
            opening=opening,
            close=close,
            close_is_token=close_is_token,
            close_at_start=close_at_start,
            json_may_hold_close=False,
            value_lead=self.value_lead,
            value_guards=self.value_guards,
            value_kind=functools.partial(top_level_value_kind, self, close=close),
        )

    @abstractmethod
    def walk(self, body: str, *, final: bool, resume: Partial | None = None) -> Partial:
        """What ``body`` holds; when ``final``, malformed markup raises
        :class:`Malformed` instead of ending the walk. With ``resume`` (see
        :meth:`Dialect.partial_body`), ``body`` is the text from its
        ``resume_at`` on."""

    def parse_body(self, body: str) -> tuple[str, list[tuple[str, Value]]]:
        partial = self.walk(body, final=True)
        assert partial.name is not None
        return partial.name, partial.pairs

    def partial_body(self, body: str, resume: Partial | None = None) -> Partial:
        return self.walk(body, final=False, resume=resume)


def top_level_value_kind(dialect: Dialect, tool: NormalizedTool, key: str, close: str) -> ValueKind:
    """What the grammar allows as the value of ``key`` in a call of ``tool``
    in ``dialect``: any text only when every argument object that allows
    the key takes any text for it. A tool whose enum strings hold ``close``
    is not followed at all."""
    objects = dialect.argument_objects(tool)
    values = [frame for obj in objects for frame in _member_frames(obj)]
    if any(_holds(tool.schema.resolve(frame), close, tool) for frame in values):
        return ValueKind.UNTRACKED
    allowed = []
    for obj in objects:
        frame = obj.property(key)
        if frame is None and key not in obj.forbidden:
            if obj.pattern_properties:
                return ValueKind.OTHER
            frame = obj.additional
        if frame is not None:
            allowed.append(tool.schema.resolve(frame))
    if allowed and all(_any_string(frame) for frame in allowed):
        return ValueKind.ANY_TEXT
    return ValueKind.OTHER


def contested_keys(tool: NormalizedTool) -> frozenset[str]:
    """The declared keys that parameter sets of ``tool`` (a union of them,
    such as a discriminated union) give different frames, and not all any
    text: where a raw value's type depends on the set, which the grammar
    writes as :meth:`RawValues.value` says for ``contested``."""
    objects = Dialect.argument_objects(tool)
    if len(objects) < 2:
        return frozenset()
    contested = set()
    for key in declared_keys(tool):
        frames = [tool.schema.resolve(found[0]) for obj in objects if (found := member_frames(obj, key))]
        if len(set(frames)) > 1 and not all(_any_string(frame) for frame in frames):
            contested.add(key)
    return frozenset(contested)


def declared_keys(tool: NormalizedTool) -> list[str]:
    """The keys the tool's argument objects declare, in schema order."""
    return list(dict.fromkeys(key for obj in Dialect.argument_objects(tool) for key, _ in obj.properties))


def ends_pattern(closings: tuple[str, ...], guards: tuple[str, ...]) -> re.Pattern[str]:
    """One regex finding the first of ``closings`` (group ``close``) or
    ``guards`` (group ``guard``)."""
    close = "|".join(re.escape(c) for c in closings)
    guard = "|".join(re.escape(g) for g in guards)
    return re.compile(f"(?P<close>{close})" + (f"|(?P<guard>{guard})" if guards else ""))


def skip_space(text: str, position: int) -> int:
    """``position`` after any whitespace (between the tags of a call)."""
    while position < len(text) and text[position] in " \t\r\n":
        position += 1
    return position


def _guarded(tool: NormalizedTool, key: str, dialect: RawValueDialect) -> bool:
    """Whether every text the grammar writes for ``key`` keeps the guards
    out: raw text, or JSON without strings (scalars)."""
    definitions = tool.schema.definitions
    for obj in dialect.argument_objects(tool):
        for frame in member_frames(obj, key) or ():
            resolved = tool.schema.resolve(frame)
            if not _any_string(resolved) and not json_types(resolved, definitions) <= _SCALARS:
                return False
    return True


_SCALARS = frozenset({"string", "integer", "number", "boolean", "null"})


def raw_text(value: Any) -> str:
    """A value as these dialects write it: strings raw, the rest JSON."""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _member_frames(obj: ObjectFrame) -> list[Frame]:
    frames = [frame for _, frame in obj.properties + obj.pattern_properties]
    return frames + ([obj.additional] if obj.additional is not None else [])


def _holds(frame: Frame, close: str, tool: NormalizedTool) -> bool:
    """Whether a literal string of ``frame`` (an enum, a union's) contains ``close``."""
    if isinstance(frame, EnumFrame):
        return any(isinstance(v, str) and close in v for v in frame.values)
    if isinstance(frame, UnionFrame):
        return any(_holds(tool.schema.resolve(option), close, tool) for option in frame.options)
    return False


def _any_string(frame: Frame) -> bool:
    """Raw text of any content is a valid value of ``frame``: then every
    other option of a union is covered too (its JSON text is such text)."""
    if isinstance(frame, (FreeFrame,)) or frame == StringFrame():
        return True
    return isinstance(frame, UnionFrame) and any(_any_string(option) for option in frame.options)

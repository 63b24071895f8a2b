"""qwen3_coder: XML parameters with raw-text strings and JSON for the rest.

String values are written raw (no quotes, no escapes) between
``<parameter=KEY>\\n`` and ``\\n</parameter>\\n``; every other value is JSON,
constrained by its frame. The official template renders scalar history values
with Python's ``str()``, so top-level booleans and nulls may also be written
``True``, ``False``, ``None``; the parser reads both spellings.

Model drift the parser reads (the grammar writes only the template's form):
a value whose ``</parameter>`` is missing, ended by a line that opens the
next parameter (a guard, see :class:`RawValueDialect`) or by the call's
``</function>``; values on one
line (``<parameter=city>Tokyo</parameter>``); missing or extra newlines
between the tags; and a call whose ``<tool_call>`` is missing (a bare
``<function=NAME>`` block in the text, which the grammar under ``auto``
also reads as a call).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

from ..frames.toolset import NormalizedTool
from ..grammar.emitter import ValueEmitter
from ..grammar.lark import literal, literals, regex
from ..grammar.regex import escape
from ..grammar.syntax import JSON_SYNTAX
from .base import Markers
from .description import CallMarkup, Drift, ReasoningMarkup, TextCalls
from .raw_values import (
    RawTextSyntax,
    RawValueDialect,
    RawValues,
    contested_keys,
    declared_keys,
    ends_pattern,
    raw_text,
    skip_space,
)
from .segments import (
    FENCED,
    CallSegment,
    Malformed,
    MarkedText,
    Partial,
    Raw,
    Segment,
    Value,
    fences_in,
    held_back,
    held_back_all,
)

# The call markup, spelled once: the grammar, scanner, renderer, guards and
# writability checks below are made from these.
OPEN_FUNCTION = "<function="
END_FUNCTION = "</function>"
OPEN_PARAMETER = "<parameter="
CLOSING = "</parameter>"
TAG_END = ">"
CLOSE = f"\n{CLOSING}\n"
"""What ends a value: its closing tag on a line of its own."""
_NAME_CHAR = rf"[^{re.escape(TAG_END)}\n]"
"""A character of a tool name or argument key: anything but the end of
its tag and a newline."""
_KEY_TEXT = _NAME_CHAR + "+"
"""Tool names and argument keys in the call markup."""
_NAME = re.compile(_KEY_TEXT)
_TAG_REST = re.compile(rf"({_KEY_TEXT}){re.escape(TAG_END)}")
_TAG_START = re.compile(_NAME_CHAR + "*")
_OPENING = re.compile(
    rf"(?:\n{re.escape(OPEN_FUNCTION)}(?P<tool>{_KEY_TEXT}){re.escape(TAG_END)}\n)?"
    rf"{re.escape(OPEN_PARAMETER)}(?P<key>{_KEY_TEXT}){re.escape(TAG_END)}\n".encode()
)
"""The markup from the call token (or the end of the previous value) to
where a value starts, for the raw-text masks."""


def _parameter(key: str) -> str:
    """The tag that opens the value of ``key``."""
    return f"{OPEN_PARAMETER}{key}{TAG_END}"


class Qwen3Coder(RawValueDialect):
    name = "qwen3_coder"
    family = "Qwen3-Coder, Qwen3.5, Qwen3.6"
    value_syntax = JSON_SYNTAX
    markup = CallMarkup(
        turn_ends=("<|im_end|>",),
        ends_after_calls=("<|im_end|>",),
        text_calls=TextCalls(OPEN_FUNCTION, rest="bare_rest", later="any_call"),
        argument_key=_KEY_TEXT,
    )
    reasoning = ReasoningMarkup(
        tokens=("<think>", "</think>"),
        prompt_opens=True,
        thinks_by_default=False,  # Qwen3-Coder has no thinking mode
    )
    drift = Drift(bare_call_ends=(END_FUNCTION,), python_literals=True)
    value_lead = "\n"
    value_trail = "\n"
    any_guard = re.compile(
        rf"\n({re.escape(CLOSING)})?({re.escape(OPEN_PARAMETER)}{_KEY_TEXT}{re.escape(TAG_END)}"
        rf"|{re.escape(END_FUNCTION)})(?=\n)"
    )

    def value_guards(self, tool: NormalizedTool | None) -> tuple[str, ...]:
        """A line that is ``<parameter=KEY>`` of a declared KEY or
        ``</function>``, alone or right after ``</parameter>``."""
        keys = declared_keys(tool) if tool is not None else []
        tags = [*map(_parameter, keys), END_FUNCTION]
        return tuple(f"\n{closing}{tag}\n" for closing in ("", CLOSING) for tag in tags)

    def raw_values(self, tool: NormalizedTool, emitter: ValueEmitter) -> RawValues:
        """The raw-text rules of ``tool``'s values: lines of text, ended by a
        line that is exactly ``</parameter>``; no line is a guard. Lines
        excluded as literals keep every mask within llguidance's slicer
        (a regex such as "a line that begins with" would not)."""
        lines = [CLOSING, *(guard.strip("\n") for guard in self.value_guards(tool))]
        line = emitter.rules.terminal("raw_line", f"/[^\\n]+/ & ~({' | '.join(map(literal, lines))})")
        keys = "|".join(escape(key) for key in declared_keys(tool))
        closing, end = escape(CLOSING), escape(END_FUNCTION)
        tag = f"{escape(OPEN_PARAMETER)}({keys}){escape(TAG_END)}"
        tags = f"({closing})?({tag}|{end})" if keys else f"({closing})?{end}"
        return RawValues(
            any_text=emitter.rules.add("raw_value", f'({line}? "\\n")+ {literal(CLOSING + chr(10))}'),
            close=literal(CLOSE),
            close_text=CLOSE,
            excluded=f"(?s:(.*\\n)?({closing}|{tags})(\\n.*)?)",
            python_literals=self.drift.python_literals,
        )

    def call_body(self, tool: NormalizedTool, emitter: ValueEmitter, markers: Markers) -> str:
        values = self.raw_values(tool, emitter)
        contested = contested_keys(tool)
        bodies = []
        for frame in self.argument_objects(tool):
            members = emitter.members(
                frame,
                lambda key, value: f"{literals(OPEN_PARAMETER, key, TAG_END + chr(10))} "
                + values.value(value, emitter, "/properties/" + key, key in contested),
                "",
                emitter.additional_member(
                    frame, "", regex(_KEY_TEXT), self.any_key, lambda v: values.value(v, emitter, "/additionalProperties")
                ),
                "",
            )
            bodies.append(f"{literal(tool.name + TAG_END + chr(10))} {members}".strip())
        return " | ".join(f"({body})" for body in bodies)

    def raw_text_syntax(self, markers: Markers) -> RawTextSyntax:
        return self.text_syntax(_OPENING, CLOSE, close_is_token=False, close_at_start=False)

    def name_problem(self, name: str) -> str | None:
        return None if _NAME.fullmatch(name) else "<function=NAME> needs a name without '>' or a newline"

    def key_problem(self, key: str, top_level: bool) -> str | None:
        if top_level and not _NAME.fullmatch(key):
            return "<parameter=KEY> needs a key without '>' or a newline"
        return None

    def closing_problem(self, text: str, top_level: bool) -> str | None:
        if top_level and CLOSE in f"\n{text}\n":
            return "a raw value ends at its first line </parameter>"
        return None

    @staticmethod
    def any_key(name_terminal: str) -> str:
        return f"{literal(OPEN_PARAMETER)} {name_terminal} {literal(TAG_END + chr(10))}"

    def render_call(self, tool: NormalizedTool, arguments: dict[str, Any], key_order: str) -> str:
        lines = [self.markup.open, f"{OPEN_FUNCTION}{tool.name}{TAG_END}"]
        for key, value in self.arranged(tool, arguments, key_order).items():
            lines += [_parameter(key), raw_text(value), CLOSING]
        lines += [END_FUNCTION, self.markup.close]
        return "\n".join(lines)

    # -- reading -------------------------------------------------------------------

    def walk(self, body: str, *, final: bool, resume: Partial | None = None) -> Partial:
        """The name and raw values of one call, from the text between the call
        tokens. A value runs to the first ``\\n</parameter>\\n``, exactly as
        the grammar ends it, or to a guard; whitespace between the tags is
        read as the model left it."""
        if resume is None:
            partial, end = self._call(body, 0, final=final)
        else:
            assert resume.name is not None
            partial, end = self._parameters(body, 0, resume.name, list(resume.pairs), final=final)
        if final and body[end:].strip():
            raise Malformed("expected nothing but whitespace after '</function>'", partial.name)
        return partial

    def _call(self, text: str, position: int, *, final: bool) -> tuple[Partial, int]:
        """``<function=NAME>``, its parameters and ``</function>`` from
        ``position`` (after whitespace): what it holds, and where it ends."""
        position = skip_space(text, position)
        if not text.startswith(OPEN_FUNCTION, position):
            if final or not OPEN_FUNCTION.startswith(text[position:]):
                raise Malformed("expected '<function=NAME>' after <tool_call>")
            return Partial(), position
        name, position = _tag(text, position + len(OPEN_FUNCTION), final, "<function=NAME>")
        if name is None:
            return Partial(), position
        return self._parameters(text, position, name, [], final=final)

    def _parameters(
        self, text: str, position: int, name: str, pairs: list[tuple[str, Value]], *, final: bool
    ) -> tuple[Partial, int]:
        """The parameters after ``pairs`` from ``position``, and
        ``</function>``: what the call holds, and where it ends."""
        while True:
            position = skip_space(text, position)
            if text.startswith(END_FUNCTION, position):
                return Partial(name, pairs, resume_at=position), position + len(END_FUNCTION)
            if not text.startswith(OPEN_PARAMETER, position):
                rest = text[position:]
                if final or not (OPEN_PARAMETER.startswith(rest) or END_FUNCTION.startswith(rest)):
                    raise Malformed(f"expected '<parameter=KEY>' or '</function>' at offset {position} of the call", name)
                return Partial(name, pairs, resume_at=position), position
            key, start = _tag(text, position + len(OPEN_PARAMETER), final, "<parameter=KEY>", name)
            if key is None or start == len(text) and not final:
                return Partial(name, pairs, resume_at=position), position
            value = self._value(text, start, name, key, final=final)
            if isinstance(value, Partial):
                return replace(value, name=name, pairs=pairs, resume_at=position), position
            pairs.append((key, Raw(value[0])))
            position = value[1]

    def _value(self, text: str, start: int, name: str, key: str, *, final: bool) -> tuple[str, int] | Partial:
        """The value after ``<parameter=KEY>`` at ``start`` and where the
        markup goes on; a :class:`Partial` when it is not complete yet.

        After the template's opening newline, the value ends at the first
        ``\\n</parameter>\\n`` or guard line (``<parameter=K>`` or
        ``</function>``, alone: a ``</parameter>`` that ends the value
        before it is the value's closing; or right after ``</parameter>``),
        the end of a complete call counting as a line end. Without that
        newline (one line), at the first ``</parameter>``, ``<parameter=K>``
        or ``</function>``. One newline on each side is the template's.

        A value whose ``</parameter>`` the model left out before the call's
        ``</function>`` ends there: at a ``</function>`` line (a guard), or,
        when the value has no closing and no guard at all, at the last
        ``</function>`` of the body, when only whitespace follows it; in
        both cases only where the value could be nothing else (see
        :func:`_may_end_unclosed`)."""
        template = text.startswith("\n", start)
        ends, markers = self._ends(name, key, template)
        begin = start + template
        match = ends.search(text + "\n" if final else text, start)
        if match is None:
            if final:
                end = _last_function_end(text, begin)
                if end is None or end == begin or not _may_end_unclosed(text[begin:end]):
                    raise Malformed(f"parameter {key!r} is not closed with '</parameter>'", name)
                return text[begin:end], end
            held = _held_back(text[start:], markers, template)
            kind = _LineValueText if template else MarkedText
            tail = kind(ends, markers, text[start + len(held) :], lead=max(0, template - len(held)))
            return Partial(name, [], key, held[template:], open_value=tail)
        end = match.start()
        if match.lastgroup == "close":
            return text[begin : max(begin, end)], min(match.end(), len(text))
        tag = match.group("guard").strip("\n")
        value = text[begin:end]
        if tag.startswith(CLOSING):  # the newline after </parameter> left out
            return value, end + template + len(CLOSING)
        if end < begin or end == begin and not template:
            raise Malformed(f"parameter {key!r} has no value before the next tag", name)
        if tag == END_FUNCTION and not value.endswith(CLOSING) and not _may_end_unclosed(value):
            raise Malformed(f"parameter {key!r} is not closed with '</parameter>'", name)
        if template:  # a line opens the next tag; a closing right before it is the value's
            return value.removesuffix(CLOSING), end + 1
        return value.removesuffix("\n"), end

    def _ends(self, name: str, key: str, template: bool) -> tuple[re.Pattern[str], tuple[str, ...]]:
        """The regex of a value's ends and the texts a value still being
        written may end in the start of."""

        def make() -> tuple[re.Pattern[str], tuple[str, ...]]:
            guards = self.guards_for(name, key)
            if template:
                return ends_pattern((CLOSE,), guards), (CLOSE, *guards, *(CLOSING + g for g in guards))
            inline = tuple(dict.fromkeys(g.strip("\n") for g in guards if not g.startswith("\n" + CLOSING)))
            closes = ("\n" + CLOSING, CLOSING)
            return ends_pattern(closes, inline), (*closes, *inline, *("\n" + g for g in inline))

        return self.cached(("ends", name, key, template), make)

    # -- calls without <tool_call> ---------------------------------------------------

    def scan(
        self, text: str, start: int = 0, fenced: bool = False, after_call: bool = False
    ) -> Iterator[Segment | CallSegment]:
        """As :meth:`RawValueDialect.scan`, and a bare ``<function=NAME>``
        block in the text (its ``<tool_call>`` missing) is a call too: up to
        its ``</function>`` and a ``</tool_call>`` after it, if any. Code
        fences count in the text outside both kinds of call, as the plain
        scan counts them."""
        segments = list(super().scan(text, start, fenced, after_call))
        spans = [span for segment in segments if segment.kind == "text" for span in self._bare(text, segment)]
        if not spans:
            yield from segments
            return
        # Blank the bare calls, so fences and markers inside them count for nothing.
        characters = list(text)
        for span in spans:
            characters[span.start : span.end] = "x" * (span.end - span.start)
        blanked = "".join(characters)
        for segment in super().scan(blanked, start, fenced, after_call):
            if segment.kind != "text":
                yield segment
                continue
            position = segment.start
            for span in (s for s in spans if segment.start <= s.start < segment.end):
                if span.start > position:
                    yield Segment("text", text[position : span.start], position, span.start, fenced)
                fenced ^= fences_in(blanked, position, span.start) % 2 == 1
                yield CallSegment(span.text, span.start, span.end, None, error=FENCED, fenced=True) if fenced else span
                position = span.end
            if position < segment.end:
                yield Segment("text", text[position : segment.end], position, segment.end, fenced)
            fenced ^= fences_in(blanked, position, segment.end) % 2 == 1

    def _bare(self, text: str, segment: Segment | CallSegment) -> Iterator[CallSegment]:
        """The bare calls in a text segment (before fences are judged)."""
        end, piece = segment.start, text[: segment.end]
        while (start := piece.find(OPEN_FUNCTION, end)) >= 0:
            try:
                partial, end = self._call(piece, start, final=True)
                error = None
            except Malformed as exc:
                partial, error = Partial(exc.name), exc.reason
                found = piece.find(END_FUNCTION, start)
                end = segment.end if found < 0 else found + len(END_FUNCTION)
            after = skip_space(piece, end)
            if piece.startswith(self.markup.close, after):
                end = after + len(self.markup.close)
            yield CallSegment(text[start:end], start, end, partial.name, tuple(partial.pairs), error)


def _last_function_end(text: str, begin: int) -> int | None:
    """Where a value from ``begin`` (on its own lines, with no closing and
    no guard after it) ends at the call's ``</function>``: the last one,
    when only whitespace follows it, less the value's last newline (the
    template's); else ``None``."""
    end = text.rfind(END_FUNCTION, begin)
    if end < 0 or skip_space(text, end + len(END_FUNCTION)) != len(text):
        return None
    return end - text.endswith("\n", begin, end)


def _may_end_unclosed(value: str) -> bool:
    """Whether ``value`` may be a whole value that ``</function>`` ends, its
    ``</parameter>`` left out: not when it holds ``</parameter>`` or
    ``<parameter=`` (it could be two values as well as one), nor when its
    last line holds ``</`` (that may be its closing misspelt, ``</paramter>``,
    which the value's text must not take in)."""
    if CLOSING in value or OPEN_PARAMETER in value:
        return False
    return "</" not in value.removesuffix("\n").rsplit("\n", 1)[-1]


def _held_back(text: str, markers: tuple[str, ...], template: bool) -> str:
    """``text`` of a value being written, less the tail that may still turn
    out to be markup: a start of one of ``markers`` (see
    :func:`held_back_all`), and then, for a value on its own lines, a tail
    where the call's ``</function>`` may end it (see :meth:`Qwen3Coder._value`):
    ``</function>`` with only whitespace after it (and a line break before
    it, the template's), or a start of ``</function>``."""
    certain = held_back_all(text, markers)
    if not template:
        return certain
    stripped = certain.rstrip(" \t\r\n")
    if stripped.endswith(END_FUNCTION):  # and the template's newline before it
        return stripped[: -len(END_FUNCTION)].removesuffix("\n")
    return held_back(certain, END_FUNCTION)


class _LineValueText(MarkedText):
    """A value on its own lines being written: as :class:`MarkedText`, its
    text held back as :func:`_held_back` holds it for such a value."""

    def more(self, text: str) -> str | None:
        window = self.tail + text
        if self.ends.search(window):
            return None
        certain = _held_back(window, self.holds, True)
        self.tail = window[len(certain) :]
        skipped = min(self.lead, len(certain))
        self.lead -= skipped
        return certain[skipped:]


def _tag(text: str, position: int, final: bool, what: str, name: str | None = None) -> tuple[str | None, int]:
    """The name in a tag that began before ``position`` and ends at ``>``,
    and where the tag ends; ``None`` while an unfinished tag may still end."""
    match = _TAG_REST.match(text, position)
    if match is not None:
        return match.group(1), match.end()
    if not final and _TAG_START.fullmatch(text, position):
        return None, position
    raise Malformed(f"{what} is not closed with '>'", name)


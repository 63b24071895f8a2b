"""hermes: ``{"name": ..., "arguments": {...}}`` inside ``<tool_call>`` tokens.

The arguments are ordinary JSON (strings escaped), written as ``json.dumps``
writes them, and constrained by the tool's frames. The parser also reads
what models drift to where the reading is unambiguous: the object on the
markers' line or with other whitespace around it, a last call cut off
before ``</tool_call>`` whose object is complete, arguments given as a
JSON-encoded string, and a call without ``"arguments"`` (no arguments).
"""

from __future__ import annotations

import json
import re
from typing import Any

from ..frames.toolset import NormalizedTool
from ..grammar.emitter import ValueEmitter
from ..grammar.lark import literal
from ..grammar.syntax import JSON_SYNTAX
from .base import Dialect, Markers
from .description import CallMarkup, Drift, ReasoningMarkup
from .segments import Decoded, Malformed, Nested, OpenValue, Parsed, Partial, Value

_STRING = r'"(?:[^"\\]|\\.)*"'
"""A JSON string, escapes included."""


class Hermes(Dialect):
    name = "hermes"
    family = "Qwen2.5, Qwen3 (JSON in tags)"
    value_syntax = JSON_SYNTAX
    markup = CallMarkup(
        turn_ends=("<|im_end|>",),
        ends_after_calls=("<|im_end|>",),
        arguments_opening=re.compile(rb'\n\{"name": (?P<tool>' + _STRING.encode() + rb'), "arguments": '),
    )
    reasoning = ReasoningMarkup(tokens=("<think>", "</think>"))
    drift = Drift(reads_cut_off_call=True)

    def call_body(self, tool: NormalizedTool, emitter: ValueEmitter, markers: Markers) -> str:
        name = json.dumps(tool.name, ensure_ascii=False)
        return f'{literal(name + ", " + json.dumps("arguments") + ": ")} {emitter.value(tool.root)}'

    def render_call(self, tool: NormalizedTool, arguments: dict[str, Any], key_order: str) -> str:
        ordered = self.arranged(tool, arguments, key_order)
        body = json.dumps({"name": tool.name, "arguments": ordered}, ensure_ascii=False)
        return f"{self.markup.open}\n{body}\n{self.markup.close}"

    def parse_body(self, body: str) -> tuple[str, list[tuple[str, Value]]]:
        """``{"name": ..., "arguments": {...}}`` with any JSON whitespace
        around it (the template writes it on its own line; models also write
        it on the markers' line); a key given twice anywhere in it, or
        ``NaN``/``Infinity``, is malformed (JSON readers disagree on them).
        Arguments given as a JSON-encoded string are read as the object it
        decodes to (:class:`Decoded`), and are malformed when it decodes to
        anything else. A call without ``"arguments"`` (``{"name": "now"}``,
        models write it for tools without parameters) has no arguments:
        the parser then accepts it only for a tool whose parameters accept
        ``{}``."""
        call = json_object(body, "the call")
        name = call.get("name")
        if not isinstance(name, str) or set(call) - {"arguments"} != {"name"}:
            raise Malformed('expected exactly {"name": ..., "arguments": {...}}', name if isinstance(name, str) else None)
        arguments = call.get("arguments", {})
        if isinstance(arguments, str):
            decoded = json_object(arguments, "the arguments, a JSON-encoded string,", name)
            return name, [(key, Decoded(value)) for key, value in decoded.items()]
        if not isinstance(arguments, dict):
            raise Malformed("the arguments are not a JSON object", name)
        return name, [(key, Parsed(value)) for key, value in arguments.items()]

    def partial_body(self, body: str, resume: Partial | None = None) -> Partial:
        """The complete members of the arguments so far, as the grammar
        writes them, and the decoded text of a string member still open. A
        member is complete once something its value cannot go on with
        follows it (a number can: ``1.5`` then ``e3``); a name or key that is
        no JSON string is malformed."""
        pairs: list[tuple[str, Value]]
        if resume is None:
            head = _HEAD.match(body)
            if head is None:
                if not _HEAD_SO_FAR.fullmatch(body):  # (a call read only whole, or no call)
                    raise Malformed('expected {"name": ..., "arguments": {...}} as the grammar writes it')
                return Partial()
            name, position, pairs = _string(head.group(1)), head.end(), []
        else:
            assert resume.name is not None
            name, position, pairs = resume.name, 0, list(resume.pairs)
        return read_members(body, name, position, pairs)


def read_members(body: str, name: str, position: int, pairs: list[tuple[str, Value]]) -> Partial:
    """The complete members of a JSON arguments object in ``body`` from
    ``position`` (after its ``{`` or after ``pairs``, the members read so
    far), as ``json.dumps`` writes them: what a call's arguments show while
    they are written (see :meth:`Hermes.partial_body`)."""
    decoder = json.JSONDecoder(object_pairs_hook=_unique_keys, parse_constant=_no_constant)
    while True:
        member = position
        if pairs:
            if not body.startswith(", ", position):
                return Partial(name, pairs, resume_at=member)
            position += 2
        key = _KEY.match(body, position)
        if key is None:
            return Partial(name, pairs, resume_at=member)
        start = key.end()
        try:
            value, end = decoder.raw_decode(body, start)
        except ValueError:
            if body.startswith('"', start):
                string = _OpenString(body[start + 1 :])
                open_key = _string(key.group(1), name)
                return Partial(name, pairs, open_key, string.text, resume_at=member, open_value=string)
            nested = Nested(body[start:], '"', escapes=True) if body.startswith(("{", "["), start) else None
            return Partial(name, pairs, resume_at=member, open_value=nested)
        if end >= len(body) or _is_number(value) and body[end] in _NUMBER_GOES_ON:  # a number may still grow
            return Partial(name, pairs, resume_at=member)
        pairs.append((_string(key.group(1), name), Parsed(value)))
        position = end


_HEAD = re.compile(r'[ \t\n\r]*\{"name": (' + _STRING + r'), "arguments": \{')
_KEY = re.compile(r"(" + _STRING + r"): ")


def starts_of(literal: str) -> str:
    """A regex of any start of ``literal``, empty or whole."""
    pattern = ""
    for char in reversed(literal):
        pattern = f"(?:{re.escape(char)}{pattern})?"
    return pattern


_HEAD_SO_FAR = re.compile(
    r'[ \t\n\r]*(?:' + starts_of('{"name": ') + "|" + re.escape('{"name": ')
    + r'(?:"(?:[^"\\]|\\.)*\\?|' + _STRING + starts_of(', "arguments": {') + "))"
)
"""What :data:`_HEAD` may still match once the text goes on."""
_NUMBER_GOES_ON = "0123456789.eE+-"
"""What may follow the part of a number ``raw_decode`` read, in a longer number."""
_UNITS = re.compile(r'(?:[^"\\]+|\\[^u]|\\u[0-9a-fA-F]{4})*', re.S)
"""Characters and escapes of a JSON string, from the boundary of one."""
_CUT_SHORT = re.compile(r"\\(u[0-9a-fA-F]{0,3})?")
_HIGH_SURROGATE = re.compile(r"\\u[dD][89abAB][0-9a-fA-F]{2}")


def _string(text: str, name: str | None = None) -> str:
    """The text of the JSON string ``text`` (a name or key the regexes
    matched; raises :class:`Malformed` when it has a bad escape or a control
    character)."""
    try:
        return json.loads(text)  # type: ignore[no-any-return]
    except ValueError:
        raise Malformed(f"{text} is not a JSON string", name) from None


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


class _OpenString(OpenValue):
    """A JSON string whose closing quote has not come yet, read as its text
    comes: ``text`` is what is certain of it, decoded (``None`` when the
    string holds what no JSON string may, which stays so). Held back: an
    escape cut short at the end, and a high surrogate's escape, which the
    escape after it may pair with (``\\ud83d\\ude00`` is one character)."""

    def __init__(self, raw: str) -> None:
        self.tail = ""
        self.broken = False
        # The reading found no closing quote it could read: a quote here
        # comes after something broken, as does anything that breaks it.
        self.text = self.more(raw)
        self.broken = self.text is None

    def more(self, text: str) -> str | None:
        if self.broken:
            return ""
        raw = self.tail + text
        end = _UNITS.match(raw).end()  # type: ignore[union-attr]
        # The string closes, or holds a \\u escape without its four hex digits.
        if raw.startswith('"', end) or end < len(raw) and not _CUT_SHORT.fullmatch(raw, end):
            return None
        if end >= 6 and _HIGH_SURROGATE.fullmatch(raw, end - 6, end) and _escape_starts(raw, end - 6):
            end -= 6
        try:
            decoded = json.loads(f'"{raw[:end]}"')
        except ValueError:  # a control character or an unknown escape
            return None
        self.tail = raw[end:]
        return decoded


def _escape_starts(raw: str, position: int) -> bool:
    """Whether the backslash at ``position`` of ``raw`` (a string's text from
    the boundary of a character or escape) starts an escape, not ends one."""
    run = position
    while run > 0 and raw[run - 1] == "\\":
        run -= 1
    return (position - run) % 2 == 0


def json_object(text: str, what: str, name: str | None = None, strings: bool = False) -> Any:
    """The JSON object ``text`` holds, or with ``strings`` a JSON string
    (raises :class:`Malformed` saying ``what`` it should have been). A key
    given twice, ``NaN`` or ``Infinity`` is malformed: JSON readers
    disagree on them."""
    try:
        value = json.loads(text, object_pairs_hook=_unique_keys, parse_constant=_no_constant)
    except ValueError as exc:
        raise Malformed(f"{what} is not valid JSON: {exc}", name) from None
    if not isinstance(value, dict) and not (strings and isinstance(value, str)):
        raise Malformed(f"{what} is not a JSON object", name)
    return value


def _no_constant(word: str) -> Any:
    raise ValueError(f"{word} is not JSON")


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    keys = [key for key, _ in pairs]
    repeated = sorted({key for key in keys if keys.count(key) > 1})
    if repeated:
        raise ValueError(f"key(s) {', '.join(map(repr, repeated))} given twice")
    return dict(pairs)

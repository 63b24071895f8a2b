"""glm45 and glm47: ``<arg_key>``/``<arg_value>`` pairs, raw strings, JSON
for the rest. GLM-4.7 writes the same bytes without the newlines.

No value (raw or JSON, at any depth) holds ``</arg_value>``: a value ends at
the first one, in both layouts. The parser reads either layout (each
newline optional, whitespace between the tags), and a raw value whose
``</arg_value>`` is missing ends at the next ``<arg_key>`` (a guard, which
no raw value may hold). A value of a parameter that must be an array or
an object, written with every quote escaped (``[\\"a\\", \\"b\\"]``: the
JSON text encoded as a JSON string's contents, seen from GLM models), is
read as the JSON it encodes.
"""

from __future__ import annotations

import json
import re
from dataclasses import replace
from typing import Any

from ..frames.accepts import member_frames
from ..frames.toolset import NormalizedTool
from ..frames.types import json_types
from ..grammar.emitter import ValueEmitter
from ..grammar.lark import literal
from ..grammar.regex import escape
from ..grammar.syntax import JSON_SYNTAX, ValueSyntax
from .base import Markers
from .description import CallMarkup, ChatFormat, ReasoningMarkup
from .raw_values import RawTextSyntax, RawValueDialect, RawValues, raw_text, skip_space
from .segments import Malformed, Parsed, Partial, Raw, Value

# The call markup, spelled once: the grammar, scanner, renderer, guards and
# writability checks below are made from these.
OPEN_KEY, CLOSE_KEY, OPEN_VALUE, CLOSE = "<arg_key>", "</arg_key>", "<arg_value>", "</arg_value>"
TAG_START = "<"
"""What every tag starts with: a name or key ends before it."""
_KEY_TEXT = rf"[^{re.escape(TAG_START)}\n]+"
"""Tool names and argument keys in the call markup."""
_NAME = re.compile(_KEY_TEXT)
_NAME_END = re.compile(re.escape(TAG_START))
_BROKEN_NAME = re.compile(r"\S\s*\n\s*\S")
"""A line break inside a name, which no whitespace around it can make one."""


class Glm45(RawValueDialect):
    name = "glm45"
    family = "GLM-4.5, GLM-4.6"
    value_syntax = JSON_SYNTAX
    markup = CallMarkup(
        turn_ends=("<|user|>", "<|endoftext|>"),
        ends_after_calls=("<|observation|>", "<|endoftext|>"),
        argument_key=_KEY_TEXT,
    )
    reasoning = ReasoningMarkup(tokens=("<think>", "</think>"), interleaved=True)
    chat = ChatFormat(prefix="[gMASK]<sop>", turn="<|{role}|>\n{text}")
    newline = "\n"
    any_guard = re.compile(re.escape(OPEN_KEY))

    def value_guards(self, tool: NormalizedTool | None) -> tuple[str, ...]:
        """``<arg_key>``, of any key (a raw value never holds it)."""
        return (OPEN_KEY,)

    def call_body(self, tool: NormalizedTool, emitter: ValueEmitter, markers: Markers) -> str:
        newline = f" {literal(self.newline)}" if self.newline else ""
        values = self._values(markers, newline)
        key_open = markers(OPEN_KEY)
        key_close = f"{markers(CLOSE_KEY)}{newline} {markers(OPEN_VALUE)}"
        return self.tagged_bodies(tool, emitter, values, f"{literal(tool.name)}{newline}", lambda key: f"{key_open} {key} {key_close}")

    def values_syntax(self, markers: Markers) -> ValueSyntax:
        # A value ends at the first </arg_value> (as a token or as text),
        # so no string inside a JSON value may hold that text.
        return replace(self.value_syntax, excluded_texts=(CLOSE,))

    def name_problem(self, name: str) -> str | None:
        return None if _NAME.fullmatch(name) else "the name after <tool_call> may not be empty or hold '<' or a newline"

    def key_problem(self, key: str, top_level: bool) -> str | None:
        if top_level and not _NAME.fullmatch(key):
            return "<arg_key>KEY</arg_key> needs a key without '<' or a newline"
        return self.text_problem(key, top_level)

    def closing_problem(self, text: str, top_level: bool) -> str | None:
        return f"a value ends at the first {CLOSE!r}" if CLOSE in text else None

    def _values(self, markers: Markers, newline: str) -> RawValues:
        # Raw text never holds the closing, nor spelled out before a closing
        # token (the parser reads text), nor the guard <arg_key>.
        excluded = f"(?s:.*({escape(CLOSE)}|{escape(OPEN_KEY)}).*)"
        if markers.is_token(CLOSE):
            close = f"{markers(CLOSE)}{newline}"
            return RawValues(f"ARG_TEXT? {close}", close, None, excluded, python_literals=False)
        return RawValues(
            f"arg_text_closed{newline}", f'"{CLOSE}"{newline}', CLOSE + self.newline, excluded, python_literals=False
        )

    def raw_text_syntax(self, markers: Markers) -> RawTextSyntax:
        nl, key_open, key_close, value_open = map(re.escape, (self.newline, OPEN_KEY, CLOSE_KEY, OPEN_VALUE))
        opening = rf"(?:(?P<tool>{_KEY_TEXT})|){nl}{key_open}(?P<key>{_KEY_TEXT}){key_close}{nl}{value_open}"
        return self.text_syntax(
            re.compile(opening.encode()), CLOSE, close_is_token=markers.is_token(CLOSE), close_at_start=True
        )

    def render_call(self, tool: NormalizedTool, arguments: dict[str, Any], key_order: str) -> str:
        nl = self.newline
        pairs = "".join(
            f"{OPEN_KEY}{key}{CLOSE_KEY}{nl}{OPEN_VALUE}{raw_text(value)}{CLOSE}{nl}"
            for key, value in self.arranged(tool, arguments, key_order).items()
        )
        return f"{self.markup.open}{tool.name}{nl}{pairs}{self.markup.close}"

    def walk(self, body: str, *, final: bool, resume: Partial | None = None) -> Partial:
        """The name, then ``<arg_key>K</arg_key>`` / ``<arg_value>V</arg_value>``
        pairs in either layout (any whitespace between the tags, none
        inside a name or key); a value runs to the first ``</arg_value>``
        or, in a raw value, to a guard (one newline before it belongs to the
        layout)."""
        pairs: list[tuple[str, Value]]
        if resume is not None:
            assert resume.name is not None
            name, pairs, position = resume.name, list(resume.pairs), 0
        else:
            name_end = _NAME_END.search(body)
            if name_end is None and not final:
                if _BROKEN_NAME.search(body):
                    raise Malformed("expected the tool name right after <tool_call>")
                return Partial()
            name = body[: len(body) if name_end is None else name_end.start()].strip("\n")
            if name not in self.tools:  # whitespace around a name no tool has belongs to the layout
                name = name.strip()
            if not _NAME.fullmatch(name):
                raise Malformed("expected the tool name right after <tool_call>")
            pairs = []
            position = len(body) if name_end is None else name_end.start()
        while (position := skip_space(body, position)) < len(body):
            key_end = body.find(CLOSE_KEY, position)
            if not body.startswith(OPEN_KEY, position) or key_end < 0:
                rest = body[position:]
                if final or not (OPEN_KEY.startswith(rest) or rest.startswith(OPEN_KEY)):
                    raise Malformed(f"expected '<arg_key>KEY</arg_key>' then '<arg_value>' at offset {position}", name)
                return Partial(name, pairs, resume_at=position)
            key = body[position + len(OPEN_KEY) : key_end]
            start = skip_space(body, key_end + len(CLOSE_KEY))
            if not body.startswith(OPEN_VALUE, start):
                if final or not OPEN_VALUE.startswith(body[start:]):
                    raise Malformed(f"expected '<arg_value>' after the key {key!r}", name)
                return Partial(name, pairs, resume_at=position)
            start += len(OPEN_VALUE)
            value = self.value_at(body, start, name, key, CLOSE, final=final)
            if value.tail is not None:
                return Partial(name, pairs, key, value.text, resume_at=position, open_value=value.tail)
            pairs.append((key, self._value(name, key, value.text) if value.closed else Raw(value.text)))
            position = value.end
        return Partial(name, pairs, resume_at=position)

    def _value(self, name: str, key: str, text: str) -> Value:
        """A value closed by ``</arg_value>``: raw text, typed later by its
        parameter's frame. Except GLM's drift ``[\\"a\\"]``: for a parameter
        that is never a string and may be an array or an object (see
        :meth:`_structured`), text that is no JSON as it stands but, with
        every quote escaped, the contents of a JSON string whose text is a
        JSON array or object is read as that array or object. A parameter
        that may be a string keeps the text as it is."""
        if '\\"' not in text or not self.cached(("structured", name, key), lambda: self._structured(name, key)):
            return Raw(text)
        return Raw(text) if (decoded := _escaped_json(text)) is None else Parsed(decoded)

    def _structured(self, name: str, key: str) -> bool:
        """Whether the value of ``key`` in a call of ``name`` may be an array
        or an object, and never a string."""
        tool = self.tools.get(name)
        if tool is None:
            return False
        definitions = tool.schema.definitions
        frames = [frame for obj in self.argument_objects(tool) for frame in member_frames(obj, key) or ()]
        types = frozenset().union(*(json_types(frame, definitions) for frame in frames))
        return "string" not in types and bool(types & {"array", "object"})


def _escaped_json(text: str) -> list[Any] | dict[str, Any] | None:
    """The array or object whose JSON text ``text`` is as a JSON string's
    contents (every quote escaped), or ``None`` when it is not that: JSON
    as it stands, a quote not escaped, or contents that decode to no JSON
    array or object."""
    if text != text.strip(" \t\n\r"):
        return None
    try:
        json.loads(text)
    except ValueError:
        pass
    else:
        return None  # JSON as it stands: read as written
    try:
        decoded = json.loads(json.loads(f'"{text}"'), parse_constant=_no_constant)
    except ValueError:
        return None
    return decoded if isinstance(decoded, (list, dict)) else None


def _no_constant(word: str) -> Any:
    raise ValueError(f"{word} is not JSON")


class Glm47(Glm45):
    name = "glm47"
    family = "GLM-4.7"
    markup = replace(Glm45.markup, separator="")
    reasoning = replace(Glm45.reasoning, prompt_opens=True)
    newline = ""

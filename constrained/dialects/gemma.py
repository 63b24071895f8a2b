"""gemma4 and functiongemma: ``call:NAME{key:value,...}`` in Gemma's value
syntax: bare keys, strings between delimiter tokens with no escaping, bare
scalars, ``{k:v}`` objects and ``[a,b]`` arrays without spaces. The official
template renders keys sorted, which is the trained key order."""

from __future__ import annotations

import json
import re

from typing import Any, ClassVar, Sequence

from ..grammar.lark import literal
from ..grammar.values import ValueEmitter, ValueSyntax, gemma_syntax
from ..schema.tool import NormalizedTool
from .base import Dialect, Markers, openai_function
from .segments import Malformed, Parsed, Partial, Value, held_back


class Gemma4(Dialect):
    name = "gemma4"
    default_tokenizer = "gemma4"
    value_syntax = gemma_syntax('<|"|>')
    trained_key_order = "alphabetical"
    string_delimiter: ClassVar[str] = '<|"|>'
    call_open: ClassVar[str] = "<|tool_call>"
    call_close: ClassVar[str] = "<tool_call|>"
    required_tokens = ("<|tool_call>", "<tool_call|>", '<|"|>')
    end_tokens = ("<turn|>", "<eos>")
    call_end_tokens = ("<|tool_response>",)
    chat_prefix = "<bos>"
    chat_turn = "<|turn>{role}\n{text}<turn|>\n"
    chat_roles = {"assistant": "model"}
    reasoning_tokens: ClassVar[tuple[str, ...]] = ("<|channel>", "<channel|>")
    reasoning_markers: ClassVar[tuple[str, str] | None] = ("<|channel>thought\n", "<channel|>")
    call_separator = False

    declaration_markers: ClassVar[tuple[str, str]] = ("<|tool>", "<tool|>")

    def call_body(self, tool: NormalizedTool, emitter: ValueEmitter, markers: Markers) -> str:
        return f"{literal(tool.name)} {emitter.value(tool.root)}"

    def name_problem(self, name: str) -> str | None:
        return "call:NAME{ ends the name at its first '{'" if "{" in name else None

    def key_problem(self, key: str, top_level: bool) -> str | None:
        if not key or any(c in key for c in _KEY_STOPS):
            return f"a bare key may not be empty or hold any of {_KEY_STOPS}"
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

    def render_call(self, tool: NormalizedTool, arguments: dict[str, Any], key_order: str) -> str:
        body = render_value(self.arranged(tool, arguments, key_order), self.string_delimiter)
        return f"{self.call_open}call:{tool.name}{body}{self.call_close}"

    def parse_body(self, body: str) -> tuple[str, list[tuple[str, Value]]]:
        """``call:NAME{key:value,...}``, values in Gemma's syntax."""
        brace = body.find("{")
        if not body.startswith("call:") or brace < 0:
            raise Malformed("expected 'call:NAME{' after the call token")
        name = body[len("call:") : brace]
        reader = _ValueReader(body, self.string_delimiter, name)
        reader.position = brace
        pairs = reader.pairs()
        if reader.position != len(body):
            raise reader.fail("the end of the call")
        return name, [(key, Parsed(value)) for key, value in pairs]

    def partial_body(self, body: str) -> Partial:
        """The complete top-level members so far, and the text of a string
        member still being written."""
        brace = body.find("{")
        if not body.startswith("call:") or brace < 0:
            return Partial()
        name = body[len("call:") : brace]
        reader = _ValueReader(body, self.string_delimiter, name)
        reader.position = brace + 1
        pairs: list[tuple[str, Value]] = []
        while True:
            colon = body.find(":", reader.position)
            if colon < 0:
                return Partial(name, pairs)
            key, start = body[reader.position : colon], colon + 1
            if body.startswith(self.string_delimiter, start) and self.string_delimiter not in body[start + len(self.string_delimiter) :]:
                text = held_back(body[start + len(self.string_delimiter) :], self.string_delimiter)
                return Partial(name, pairs, key, text)
            reader.position = start
            try:
                value = reader.value()
            except Malformed:
                return Partial(name, pairs)
            if not body.startswith(",", reader.position):
                return Partial(name, pairs)
            pairs.append((key, Parsed(value)))
            reader.position += 1


class FunctionGemma(Gemma4):
    name = "functiongemma"
    default_tokenizer = "functiongemma"
    value_syntax: ClassVar[ValueSyntax] = gemma_syntax("<escape>")
    string_delimiter = "<escape>"
    call_open = "<start_function_call>"
    call_close = "<end_function_call>"
    required_tokens = ("<start_function_call>", "<end_function_call>", "<escape>")
    end_tokens = ("<end_of_turn>", "<eos>")
    call_end_tokens = ("<start_function_response>",)
    chat_turn = "<start_of_turn>{role}\n{text}<end_of_turn>\n"
    chat_roles = {"assistant": "model", "system": "developer"}
    reasoning_tokens = ()
    reasoning_markers = None
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


class _ValueReader:
    """Reads Gemma's value syntax exactly as the grammar writes it."""

    def __init__(self, text: str, delimiter: str, name: str) -> None:
        self.text = text
        self.delimiter = delimiter
        self.name = name
        self.position = 0

    def fail(self, what: str) -> Malformed:
        return Malformed(f"expected {what} at offset {self.position} of the call", self.name)

    def pairs(self) -> list[tuple[str, Any]]:
        """The members of an object, in order (``{`` at the current position)."""
        if not self.text.startswith("{", self.position):
            raise self.fail("'{'")
        self.position += 1
        members: list[tuple[str, Any]] = []
        if self.text.startswith("}", self.position):
            self.position += 1
            return members
        while True:
            colon = self.text.find(":", self.position)
            key = self.text[self.position : colon] if colon >= 0 else ""
            if not key or any(c in key for c in _KEY_STOPS) or self.delimiter in key:
                raise self.fail("a key and ':'")
            self.position = colon + 1
            members.append((key, self.value()))
            if self.text.startswith(",", self.position):
                self.position += 1
            elif self.text.startswith("}", self.position):
                self.position += 1
                return members
            else:
                raise self.fail("',' or '}'")

    def value(self) -> Any:
        text, start = self.text, self.position
        if text.startswith(self.delimiter, start):
            end = text.find(self.delimiter, start + len(self.delimiter))
            if end < 0:
                raise self.fail(f"a closing {self.delimiter}")
            self.position = end + len(self.delimiter)
            return text[start + len(self.delimiter) : end]
        if text.startswith("{", start):
            members = self.pairs()
            keys = [key for key, _ in members]
            if len(set(keys)) != len(keys):
                raise Malformed("a key is given twice in an object", self.name)
            return dict(members)
        if text.startswith("[", start):
            return self.array()
        for word, meaning in (("true", True), ("false", False), ("null", None)):
            if text.startswith(word, start):
                self.position += len(word)
                return meaning
        number = _NUMBER.match(text, start)
        if number is None:
            raise self.fail("a value")
        self.position = number.end()
        return json.loads(number.group())

    def array(self) -> list[Any]:
        self.position += 1
        items: list[Any] = []
        if self.text.startswith("]", self.position):
            self.position += 1
            return items
        while True:
            items.append(self.value())
            if self.text.startswith(",", self.position):
                self.position += 1
            elif self.text.startswith("]", self.position):
                self.position += 1
                return items
            else:
                raise self.fail("',' or ']'")


_KEY_STOPS = ":{}[],<"
_NUMBER = re.compile(r"-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?")

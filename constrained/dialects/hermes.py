"""hermes: ``{"name": ..., "arguments": {...}}`` inside ``<tool_call>`` tokens.

The arguments are ordinary JSON (strings escaped), written as ``json.dumps``
writes them, and constrained by the tool's frames. The parser also reads
what models drift to where the reading is unambiguous: the object on the
markers' line or with other whitespace around it, a last call cut off
before ``</tool_call>`` whose object is complete, and arguments given as a
JSON-encoded string.
"""

from __future__ import annotations

import json
import re
from typing import Any

from ..grammar.lark import literal
from ..grammar.emitter import ValueEmitter
from ..grammar.syntax import JSON_SYNTAX
from ..frames.toolset import NormalizedTool
from .base import Dialect, Markers
from .segments import Decoded, Malformed, Parsed, Partial, Value


class Hermes(Dialect):
    name = "hermes"
    value_syntax = JSON_SYNTAX
    trained_key_order = "schema"
    end_tokens = ("<|im_end|>",)
    call_end_tokens = ("<|im_end|>",)
    reasoning_tokens = ("<think>", "</think>")
    reads_cut_off_call = True

    def call_body(self, tool: NormalizedTool, emitter: ValueEmitter, markers: Markers) -> str:
        name = json.dumps(tool.name, ensure_ascii=False)
        return f'{literal(name + ", " + json.dumps("arguments") + ": ")} {emitter.value(tool.root)}'

    def render_call(self, tool: NormalizedTool, arguments: dict[str, Any], key_order: str) -> str:
        ordered = self.arranged(tool, arguments, key_order)
        body = json.dumps({"name": tool.name, "arguments": ordered}, ensure_ascii=False)
        return f"{self.call_open}\n{body}\n{self.call_close}"

    def parse_body(self, body: str) -> tuple[str, list[tuple[str, Value]]]:
        """``{"name": ..., "arguments": {...}}`` with any JSON whitespace
        around it (the template writes it on its own line; models also write
        it on the markers' line); a key given twice anywhere in it, or
        ``NaN``/``Infinity``, is malformed (JSON readers disagree on them).
        Arguments given as a JSON-encoded string are read as the object it
        decodes to (:class:`Decoded`), and are malformed when it decodes to
        anything else."""
        call = _object(body, "the call")
        name = call.get("name")
        if not isinstance(name, str) or set(call) != {"name", "arguments"}:
            raise Malformed('expected exactly {"name": ..., "arguments": {...}}', name if isinstance(name, str) else None)
        arguments = call["arguments"]
        if isinstance(arguments, str):
            decoded = _object(arguments, "the arguments, a JSON-encoded string,", name)
            return name, [(key, Decoded(value)) for key, value in decoded.items()]
        if not isinstance(arguments, dict):
            raise Malformed("the arguments are not a JSON object", name)
        return name, [(key, Parsed(value)) for key, value in arguments.items()]

    def partial_body(self, body: str) -> Partial:
        """The complete members of the arguments so far, as the grammar
        writes them, and the decoded text of a string member still open."""
        head = _HEAD.match(body)
        if head is None:
            return Partial()
        name = json.loads(head.group(1))
        decoder = json.JSONDecoder(object_pairs_hook=_unique_keys, parse_constant=_no_constant)
        position = head.end()
        pairs: list[tuple[str, Value]] = []
        while True:
            if pairs:
                if not body.startswith(", ", position):
                    return Partial(name, pairs)
                position += 2
            key = _KEY.match(body, position)
            if key is None:
                return Partial(name, pairs)
            start = key.end()
            try:
                value, end = decoder.raw_decode(body, start)
            except ValueError:
                if body.startswith('"', start):
                    return Partial(name, pairs, json.loads(key.group(1)), _open_string(body[start + 1 :]))
                return Partial(name, pairs)
            if end >= len(body):  # a number may still grow
                return Partial(name, pairs)
            pairs.append((json.loads(key.group(1)), Parsed(value)))
            position = end


_STRING = r'"(?:[^"\\]|\\.)*"'
_HEAD = re.compile(r'[ \t\n\r]*\{"name": (' + _STRING + r'), "arguments": \{')
_KEY = re.compile(r"(" + _STRING + r"): ")
# An escape cut short, or the first half of a surrogate pair.
_UNFINISHED_ESCAPE = re.compile(r"\\(u[0-9a-fA-F]{0,3}|u[dD][89abAB][0-9a-fA-F]{2})?$")


def _open_string(raw: str) -> str | None:
    """The text of a JSON string whose closing quote has not come yet,
    without an escape sequence that is not complete."""
    trailing = len(raw) - len(raw.rstrip("\\"))
    if trailing % 2:
        raw = raw[:-1]
    elif (cut := _UNFINISHED_ESCAPE.search(raw)) is not None and cut.group(1):
        raw = raw[: cut.start()]
    try:
        return json.loads(f'"{raw}"')
    except ValueError:
        return None


def _object(text: str, what: str, name: str | None = None) -> dict[str, Any]:
    """The JSON object ``text`` holds (raises :class:`Malformed` saying
    ``what`` it should have been)."""
    try:
        value = json.loads(text, object_pairs_hook=_unique_keys, parse_constant=_no_constant)
    except ValueError as exc:
        raise Malformed(f"{what} is not valid JSON: {exc}", name) from None
    if not isinstance(value, dict):
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

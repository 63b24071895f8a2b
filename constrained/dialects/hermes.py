"""hermes: ``{"name": ..., "arguments": {...}}`` inside ``<tool_call>`` tokens.

The arguments are ordinary JSON (strings escaped), written as ``json.dumps``
writes them, and constrained by the tool's frames.
"""

from __future__ import annotations

import json
import re
from typing import Any

from ..grammar.lark import literal
from ..grammar.values import JSON_SYNTAX, ValueEmitter
from ..schema.tool import NormalizedTool
from .base import Dialect, Markers
from .segments import Malformed, Parsed, Partial, Value


class Hermes(Dialect):
    name = "hermes"
    value_syntax = JSON_SYNTAX
    trained_key_order = "schema"
    required_tokens = ("<tool_call>", "</tool_call>")
    end_tokens = ("<|im_end|>",)
    call_end_tokens = ("<|im_end|>",)
    reasoning_tokens = ("<think>", "</think>")

    def call_body(self, tool: NormalizedTool, emitter: ValueEmitter, markers: Markers) -> str:
        name = json.dumps(tool.name, ensure_ascii=False)
        return f'{literal(name + ", " + json.dumps("arguments") + ": ")} {emitter.value(tool.root)}'

    def render_call(self, tool: NormalizedTool, arguments: dict[str, Any], key_order: str) -> str:
        ordered = self.arranged(tool, arguments, key_order)
        body = json.dumps({"name": tool.name, "arguments": ordered}, ensure_ascii=False)
        return f"<tool_call>\n{body}\n</tool_call>"

    def parse_body(self, body: str) -> tuple[str, list[tuple[str, Value]]]:
        """``{"name": ..., "arguments": {...}}`` between newlines; a key
        given twice anywhere in it is malformed (JSON readers disagree on it)."""
        if not (body.startswith("\n") and body.endswith("\n")):
            raise Malformed("expected the call's JSON on its own line between <tool_call> and </tool_call>")
        try:
            call = json.loads(body, object_pairs_hook=_unique_keys)
        except ValueError as exc:
            raise Malformed(f"the call is not valid JSON: {exc}") from None
        name = call.get("name") if isinstance(call, dict) else None
        if not isinstance(name, str) or set(call) != {"name", "arguments"}:
            raise Malformed('expected exactly {"name": ..., "arguments": {...}}', name if isinstance(name, str) else None)
        arguments = call["arguments"]
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
        decoder = json.JSONDecoder(object_pairs_hook=_unique_keys)
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
_HEAD = re.compile(r'\n\{"name": (' + _STRING + r'), "arguments": \{')
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


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    keys = [key for key, _ in pairs]
    repeated = sorted({key for key in keys if keys.count(key) > 1})
    if repeated:
        raise ValueError(f"key(s) {', '.join(map(repr, repeated))} given twice")
    return dict(pairs)

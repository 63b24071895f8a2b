"""hermes: ``{"name": ..., "arguments": {...}}`` inside ``<tool_call>`` tokens.

The arguments are ordinary JSON (strings escaped), written as ``json.dumps``
writes them, and constrained by the tool's frames.
"""

from __future__ import annotations

import json
from typing import Any

from ..grammar.lark import literal
from ..grammar.values import JSON_SYNTAX, ValueEmitter
from ..schema.tool import NormalizedTool
from .base import Dialect, Markers
from .segments import Malformed, Parsed, Value


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


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    keys = [key for key, _ in pairs]
    repeated = sorted({key for key in keys if keys.count(key) > 1})
    if repeated:
        raise ValueError(f"key(s) {', '.join(map(repr, repeated))} given twice")
    return dict(pairs)

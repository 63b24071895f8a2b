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
        ordered = {key: arguments[key] for key in self.ordered(arguments, tool, key_order)}
        body = json.dumps({"name": tool.name, "arguments": ordered}, ensure_ascii=False)
        return f"<tool_call>\n{body}\n</tool_call>"

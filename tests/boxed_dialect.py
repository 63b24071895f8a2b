"""A dialect defined outside the package, as another package ships one:
``{"name": ..., "arguments": {...}}`` between Qwen's box tokens, over the
built-in ``qwen3`` tokenizer (docs/design.md walks through the same)."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from typing import Any

from constrained.dialects import JSON_SYNTAX, CallMarkup, Dialect, Malformed, Markers, Parsed, Value
from constrained.frames.toolset import NormalizedTool
from constrained.grammar.emitter import ValueEmitter
from constrained.grammar.lark import literal

GRAMMAR = r"""
text: TEXT
TEXT: /(.|\n)+/ & ~/(?s:.*)<\|box_start\|>(?s:.*)/
call: <|box_start|> "{\"name\": " tool_body "}" <|box_end|>
call_separator: "\n"
json_value: %json {"x-guidance": {"whitespace_flexible": false, "item_separator": ", ", "key_separator": ": "}}
"""


class Boxed(Dialect):
    name = "boxed"
    family = "an example: JSON calls in box tokens"
    value_syntax = JSON_SYNTAX
    grammar_source = GRAMMAR
    markup = CallMarkup(
        open="<|box_start|>", close="<|box_end|>", turn_ends=("<|im_end|>",), ends_after_calls=("<|im_end|>",),
        # Where the arguments begin: the mask cache then follows them as JSON, so other values reuse its masks.
        arguments_opening=re.compile(rb'\{"name": (?P<tool>"(?:[^"\\]|\\.)*"), "arguments": '),
    )

    def call_body(self, tool: NormalizedTool, emitter: ValueEmitter, markers: Markers) -> str:
        head = json.dumps(tool.name) + ', "arguments": '
        return f"{literal(head)} {emitter.value(tool.root)}"

    def parse_body(self, body: str) -> tuple[str, list[tuple[str, Value]]]:
        try:
            call = json.loads(body)
        except ValueError as exc:
            raise Malformed(f"the call is not JSON: {exc}") from None
        if not isinstance(call, dict) or set(call) != {"name", "arguments"} or not isinstance(call["arguments"], dict):
            raise Malformed('expected {"name": ..., "arguments": {...}}')
        return str(call["name"]), [(key, Parsed(value)) for key, value in call["arguments"].items()]

    def render_call(self, tool: NormalizedTool, arguments: dict[str, Any], key_order: str) -> str:
        call = {"name": tool.name, "arguments": self.arranged(tool, arguments, key_order)}
        return f"{self.markup.open}{json.dumps(call)}{self.markup.close}"


class Shipped(Boxed):
    """The same format under another name, shipped through an entry point."""

    name = "boxed_shipped"


class Unopened(Boxed):
    """The same format without ``arguments_opening``."""

    name = "boxed_unopened"
    markup = replace(Boxed.markup, arguments_opening=None)

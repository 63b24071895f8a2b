"""qwen3_coder: XML parameters with raw-text strings and JSON for the rest.

String values are written raw (no quotes, no escapes) between
``<parameter=KEY>\\n`` and ``\\n</parameter>\\n``; every other value is JSON,
constrained by its frame. The official template renders scalar history values
with Python's ``str()``, so top-level booleans and nulls may also be written
``True``, ``False``, ``None``; the parser reads both spellings.
"""

from __future__ import annotations

from typing import Any

from ..grammar.lark import literal
from ..grammar.values import JSON_SYNTAX, ValueEmitter
from ..schema.tool import NormalizedTool
from .base import Dialect, Markers
from .raw_values import RawValues, raw_text

CLOSE = "\n</parameter>\n"


class Qwen3Coder(Dialect):
    name = "qwen3_coder"
    value_syntax = JSON_SYNTAX
    trained_key_order = "schema"
    required_tokens = ("<tool_call>", "</tool_call>")
    end_tokens = ("<|im_end|>",)
    call_end_tokens = ("<|im_end|>",)
    reasoning_tokens = ("<think>", "</think>")

    values = RawValues(any_text="raw_value", close=literal(CLOSE), excluded=r"\n</parameter>\n", python_literals=True)

    def call_body(self, tool: NormalizedTool, emitter: ValueEmitter, markers: Markers) -> str:
        bodies = []
        for frame in self.argument_objects(tool):
            members = emitter.members(
                frame,
                lambda key, value: f"{literal(f'<parameter={key}>' + chr(10))} {self.values.value(value, emitter, '/properties/' + key)}",
                "",
                emitter.additional_member(
                    frame, "", r"/[^>\n]+/", self.any_key, lambda v: self.values.value(v, emitter, "/additionalProperties")
                ),
                "",
            )
            bodies.append(f"{literal(tool.name + '>' + chr(10))} {members}".strip())
        return " | ".join(f"({body})" for body in bodies)

    @staticmethod
    def any_key(name_terminal: str) -> str:
        return f'"<parameter=" {name_terminal} ">\\n"'

    def render_call(self, tool: NormalizedTool, arguments: dict[str, Any], key_order: str) -> str:
        lines = ["<tool_call>", f"<function={tool.name}>"]
        for key in self.ordered(arguments, tool, key_order):
            lines += [f"<parameter={key}>", raw_text(arguments[key]), "</parameter>"]
        lines += ["</function>", "</tool_call>"]
        return "\n".join(lines)

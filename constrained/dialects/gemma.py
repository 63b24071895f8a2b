"""gemma4 and functiongemma: ``call:NAME{key:value,...}`` in Gemma's value
syntax: bare keys, strings between delimiter tokens with no escaping, bare
scalars, ``{k:v}`` objects and ``[a,b]`` arrays without spaces. The official
template renders keys sorted, which is the trained key order."""

from __future__ import annotations

from typing import Any, ClassVar

from ..grammar.lark import literal
from ..grammar.values import ValueEmitter, ValueSyntax, gemma_syntax
from ..schema.tool import NormalizedTool
from .base import Dialect, Markers


class Gemma4(Dialect):
    name = "gemma4"
    value_syntax = gemma_syntax('<|"|>')
    trained_key_order = "alphabetical"
    string_delimiter: ClassVar[str] = '<|"|>'
    call_open: ClassVar[str] = "<|tool_call>"
    call_close: ClassVar[str] = "<tool_call|>"
    required_tokens = ("<|tool_call>", "<tool_call|>", '<|"|>')
    end_tokens = ("<turn|>", "<eos>")
    call_end_tokens = ("<|tool_response>",)
    reasoning_tokens = ("<|channel>", "<channel|>")
    call_separator = False

    def call_body(self, tool: NormalizedTool, emitter: ValueEmitter, markers: Markers) -> str:
        return f"{literal(tool.name)} {emitter.value(tool.root)}"

    def render_call(self, tool: NormalizedTool, arguments: dict[str, Any], key_order: str) -> str:
        ordered = {key: arguments[key] for key in self.ordered(arguments, tool, key_order)}
        body = render_value(ordered, self.string_delimiter, sort_keys=self.ordered_nested(key_order))
        return f"{self.call_open}call:{tool.name}{body}{self.call_close}"

    def ordered_nested(self, key_order: str) -> bool:
        return (self.trained_key_order if key_order in ("trained", "any") else key_order) == "alphabetical"


class FunctionGemma(Gemma4):
    name = "functiongemma"
    value_syntax: ClassVar[ValueSyntax] = gemma_syntax("<escape>")
    string_delimiter = "<escape>"
    call_open = "<start_function_call>"
    call_close = "<end_function_call>"
    required_tokens = ("<start_function_call>", "<end_function_call>", "<escape>")
    end_tokens = ("<end_of_turn>", "<eos>")
    call_end_tokens = ("<start_function_response>",)
    reasoning_tokens = ()


def render_value(value: Any, delimiter: str, *, sort_keys: bool) -> str:
    """A value in Gemma's syntax (keys of nested objects sorted when
    ``sort_keys``; the top level keeps the order given)."""
    if isinstance(value, str):
        return f"{delimiter}{value}{delimiter}"
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, list):
        return "[" + ",".join(render_value(v, delimiter, sort_keys=sort_keys) for v in value) + "]"
    if isinstance(value, dict):
        items = value.items()
        return "{" + ",".join(f"{k}:{render_value(v, delimiter, sort_keys=sort_keys)}" for k, v in items) + "}"
    return repr(value) if isinstance(value, float) else str(value)

"""qwen3_coder: XML parameters with raw-text strings and JSON for the rest.

String values are written raw (no quotes, no escapes) between
``<parameter=KEY>\\n`` and ``\\n</parameter>\\n``; every other value is JSON,
constrained by its frame. The official template renders scalar history values
with Python's ``str()``, so top-level booleans and nulls may also be written
``True``, ``False``, ``None``; the parser reads both spellings.
"""

from __future__ import annotations

import re
from typing import Any

from ..grammar.lark import literal, literals, regex
from ..grammar.values import JSON_SYNTAX, ValueEmitter
from ..schema.tool import NormalizedTool
from .base import Markers
from .raw_values import RawTextSyntax, RawValueDialect, RawValues, raw_text
from .segments import Malformed, Partial, Raw, Value, held_back

CLOSE = "\n</parameter>\n"


_KEY_TEXT = r"[^>\n]+"
"""Tool names and argument keys in the call markup."""


class Qwen3Coder(RawValueDialect):
    name = "qwen3_coder"
    argument_key = _KEY_TEXT
    value_syntax = JSON_SYNTAX
    trained_key_order = "schema"
    required_tokens = ("<tool_call>", "</tool_call>")
    end_tokens = ("<|im_end|>",)
    call_end_tokens = ("<|im_end|>",)
    reasoning_tokens = ("<think>", "</think>")
    python_literals = True

    values = RawValues(
        any_text="raw_value",
        close=literal(CLOSE),
        close_text=CLOSE,
        excluded=r"(?s:(.*\n)?</parameter>(\n.*)?)",
        python_literals=python_literals,
    )

    def call_body(self, tool: NormalizedTool, emitter: ValueEmitter, markers: Markers) -> str:
        bodies = []
        for frame in self.argument_objects(tool):
            members = emitter.members(
                frame,
                lambda key, value: f"{literals('<parameter=', key, '>' + chr(10))} {self.values.value(value, emitter, '/properties/' + key)}",
                "",
                emitter.additional_member(
                    frame, "", regex(_KEY_TEXT), self.any_key, lambda v: self.values.value(v, emitter, "/additionalProperties")
                ),
                "",
            )
            bodies.append(f"{literal(tool.name + '>' + chr(10))} {members}".strip())
        return " | ".join(f"({body})" for body in bodies)

    def raw_text_syntax(self, markers: Markers) -> RawTextSyntax:
        return RawTextSyntax(
            call_open="<tool_call>",
            call_close="</tool_call>",
            opening=re.compile(rb"(?:\n<function=(?P<tool>[^>\n]+)>\n)?<parameter=(?P<key>[^>\n]+)>\n"),
            close=CLOSE,
            close_is_token=False,
            close_at_start=False,
            json_may_hold_close=False,
        )

    def name_problem(self, name: str) -> str | None:
        return None if _NAME.fullmatch(name) else "<function=NAME> needs a name without '>' or a newline"

    def key_problem(self, key: str, top_level: bool) -> str | None:
        if top_level and not _NAME.fullmatch(key):
            return "<parameter=KEY> needs a key without '>' or a newline"
        return None

    def text_problem(self, text: str, top_level: bool) -> str | None:
        if top_level and CLOSE in f"\n{text}\n":
            return "a raw value ends at its first line </parameter>"
        return None

    @staticmethod
    def any_key(name_terminal: str) -> str:
        return f'"<parameter=" {name_terminal} ">\\n"'

    def render_call(self, tool: NormalizedTool, arguments: dict[str, Any], key_order: str) -> str:
        lines = ["<tool_call>", f"<function={tool.name}>"]
        for key, value in self.arranged(tool, arguments, key_order).items():
            lines += [f"<parameter={key}>", raw_text(value), "</parameter>"]
        lines += ["</function>", "</tool_call>"]
        return "\n".join(lines)

    def walk(self, body: str, *, final: bool) -> Partial:
        """The name and raw values of one call, from the text between the call
        tokens. A value runs to the first ``\\n</parameter>\\n``, exactly as
        the grammar ends it."""
        head = _FUNCTION.match(body)
        if head is None:
            if final:
                raise Malformed("expected '\\n<function=NAME>\\n' after <tool_call>")
            return Partial()
        name, position = head.group(1), head.end()
        pairs: list[tuple[str, Value]] = []
        while body[position:] != "</function>\n":
            key = _PARAMETER.match(body, position)
            if key is None:
                if final:
                    raise Malformed(f"expected '<parameter=KEY>' or '</function>' at offset {position} of the call", name)
                return Partial(name, pairs)
            end = body.find(CLOSE, key.end())
            if end < 0:
                if final:
                    raise Malformed(f"parameter {key.group(1)!r} is not closed with '</parameter>'", name)
                return Partial(name, pairs, key.group(1), held_back(body[key.end() :], CLOSE))
            pairs.append((key.group(1), Raw(body[key.end() : end])))
            position = end + len(CLOSE)
        return Partial(name, pairs)


_NAME = re.compile(_KEY_TEXT)
_FUNCTION = re.compile(r"\n<function=([^>\n]+)>\n")
_PARAMETER = re.compile(r"<parameter=([^>\n]+)>\n")

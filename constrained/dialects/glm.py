"""glm45 and glm47: ``<arg_key>``/``<arg_value>`` pairs, raw strings, JSON
for the rest. GLM-4.7 writes the same bytes without the newlines."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from typing import Any

from ..grammar.lark import literal, regex
from ..grammar.values import JSON_SYNTAX, ValueEmitter, ValueSyntax
from ..schema.tool import NormalizedTool
from .base import Markers
from .raw_values import RawTextSyntax, RawValueDialect, RawValues, raw_text
from .segments import Malformed, Partial, Raw, Value, held_back


_KEY_TEXT = r"[^<\n]+"
"""Tool names and argument keys in the call markup."""


class Glm45(RawValueDialect):
    name = "glm45"
    argument_key = _KEY_TEXT
    value_syntax = JSON_SYNTAX
    trained_key_order = "schema"
    required_tokens = ("<tool_call>", "</tool_call>")
    end_tokens = ("<|user|>", "<|endoftext|>")
    call_end_tokens = ("<|observation|>", "<|endoftext|>")
    chat_prefix = "[gMASK]<sop>"
    chat_turn = "<|{role}|>\n{text}"
    reasoning_tokens = ("<think>", "</think>")
    newline = "\n"

    def call_body(self, tool: NormalizedTool, emitter: ValueEmitter, markers: Markers) -> str:
        newline = f" {literal(self.newline)}" if self.newline else ""
        values = self._values(markers, newline)
        key_open = markers("<arg_key>")
        key_close = f"{markers('</arg_key>')}{newline} {markers('<arg_value>')}"
        bodies = []
        for frame in self.argument_objects(tool):
            extra = emitter.additional_member(
                frame,
                "",
                regex(_KEY_TEXT),
                lambda name: f"{key_open} {name} {key_close}",
                lambda value: values.value(value, emitter, "/additionalProperties"),
            )
            members = emitter.members(
                frame,
                lambda key, value: f"{key_open} {literal(key)} {key_close} "
                + values.value(value, emitter, f"/properties/{key}"),
                "",
                extra,
                "",
            )
            bodies.append(f"{literal(tool.name)}{newline} {members}".strip())
        return " | ".join(f"({body})" for body in bodies)

    def values_syntax(self, markers: Markers) -> ValueSyntax:
        # Without the newline a JSON value ends at the first </arg_value>
        # text too, so no string inside it may hold that text.
        if self.newline or markers.is_token("</arg_value>"):
            return self.value_syntax
        return replace(self.value_syntax, excluded_text="</arg_value>")

    def name_problem(self, name: str) -> str | None:
        return None if _NAME.fullmatch(name) else "the name after <tool_call> may not be empty or hold '<' or a newline"

    def key_problem(self, key: str, top_level: bool) -> str | None:
        if top_level and not _NAME.fullmatch(key):
            return "<arg_key>KEY</arg_key> needs a key without '<' or a newline"
        return self.text_problem(key, top_level)

    def text_problem(self, text: str, top_level: bool) -> str | None:
        # A raw value ends at its first </arg_value>; a JSON one where that is
        # followed by the newline (glm45), which JSON text never holds unescaped.
        close = "</arg_value>" if top_level else "</arg_value>" + self.newline
        if close in (text if top_level else json.dumps(text, ensure_ascii=False)):
            return f"a value ends at the first {close!r}"
        return None

    def _values(self, markers: Markers, newline: str) -> RawValues:
        if markers.is_token("</arg_value>"):
            close = f"</arg_value>{newline}"
            return RawValues(f"ARG_TEXT? {close}", close, None, None, python_literals=False)
        return RawValues(
            f"arg_text_closed{newline}",
            f'"</arg_value>"{newline}',
            "</arg_value>" + self.newline,
            "(?s:.*</arg_value>.*)",
            python_literals=False,
        )

    def raw_text_syntax(self, markers: Markers) -> RawTextSyntax:
        nl = re.escape(self.newline.encode())
        special = markers.is_token("</arg_value>")
        return RawTextSyntax(
            call_open="<tool_call>",
            call_close="</tool_call>",
            opening=re.compile(
                rb"(?:(?P<tool>[^<\n]+)|)" + nl + rb"<arg_key>(?P<key>[^<\n]+)</arg_key>" + nl + rb"<arg_value>"
            ),
            close="</arg_value>",
            close_is_token=special,
            close_at_start=True,
            json_may_hold_close=not special and bool(self.newline),
        )

    def render_call(self, tool: NormalizedTool, arguments: dict[str, Any], key_order: str) -> str:
        nl = self.newline
        pairs = "".join(
            f"<arg_key>{key}</arg_key>{nl}<arg_value>{raw_text(value)}</arg_value>{nl}"
            for key, value in self.arranged(tool, arguments, key_order).items()
        )
        return f"<tool_call>{tool.name}{nl}{pairs}</tool_call>"


    def walk(self, body: str, *, final: bool) -> Partial:
        """The name, then ``<arg_key>K</arg_key>`` / ``<arg_value>V</arg_value>``
        pairs; a raw value runs to the first ``</arg_value>``."""
        nl = self.newline
        name_end = body.find(nl) if nl else body.find("<arg_key>")
        if name_end < 0:
            if not final:
                return Partial()
            name_end = len(body)
        name, position = body[:name_end], name_end + len(nl)
        pairs: list[tuple[str, Value]] = []
        if not name or "<" in name or "\n" in name:
            raise Malformed("expected the tool name right after <tool_call>")
        key_close, value_close = f"</arg_key>{nl}<arg_value>", f"</arg_value>{nl}"
        while position < len(body):
            key_end = body.find(key_close, position)
            if not body.startswith("<arg_key>", position) or key_end < 0:
                if final or not ("<arg_key>".startswith(body[position:]) or body.startswith("<arg_key>", position)):
                    raise Malformed(f"expected '<arg_key>KEY</arg_key>' then '<arg_value>' at offset {position}", name)
                return Partial(name, pairs)
            key, value_start = body[position + len("<arg_key>") : key_end], key_end + len(key_close)
            value_end = body.find(value_close, value_start)
            if value_end < 0:
                if final:
                    raise Malformed(f"the value of {key!r} is not closed with '</arg_value>'", name)
                return Partial(name, pairs, key, held_back(body[value_start:], value_close))
            pairs.append((key, Raw(body[value_start:value_end])))
            position = value_end + len(value_close)
        return Partial(name, pairs)


_NAME = re.compile(_KEY_TEXT)


class Glm47(Glm45):
    name = "glm47"
    newline = ""
    call_separator = False

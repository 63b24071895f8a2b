"""MiniMax-M2 (M2, M2.1, M2.5, M2.7): a turn's calls in one
``<minimax:tool_call>`` block, each an ``<invoke>`` of ``<parameter>`` tags::

    <minimax:tool_call>
    <invoke name="get_weather">
    <parameter name="city">Paris</parameter>
    <parameter name="days">3</parameter>
    </invoke>
    </minimax:tool_call>

The block's markers are special tokens; the tags inside it are text. A
string is written raw, any other value as JSON (the template's ``tojson``),
so the schema says which a value is. No value holds ``</parameter>`` (a
value ends at the first), nor ``</invoke>`` (a call ends at the first); a
raw value never holds ``<parameter name="`` either: the parser reads it
as the next parameter of a value whose ``</parameter>`` the model left out.

The template opens the reasoning block in the prompt (``<think>\\n``), so
the output starts inside it. Model drift the parser reads: whitespace
between the tags, a missing ``</parameter>`` before the next parameter,
and an ``<invoke>`` outside the block.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

from ..frames.toolset import NormalizedTool
from ..grammar.emitter import ValueEmitter
from ..grammar.lark import literal
from ..grammar.regex import escape
from ..grammar.syntax import JSON_SYNTAX, ValueSyntax
from .base import Markers
from .description import CallMarkup, CallSection, ChatFormat, ReasoningMarkup
from .minimax_prompt import MiniMaxPrompt
from .raw_values import RawTextSyntax, RawValueDialect, RawValues, raw_text, skip_space
from .segments import Malformed, Partial, Raw

# The call markup, spelled once: the grammar, scanner, renderer, guards and
# writability checks below are made from these.
OPEN_SECTION, CLOSE_SECTION = "<minimax:tool_call>", "</minimax:tool_call>"
INVOKE, END_INVOKE = '<invoke name="', "</invoke>"
OPEN_PARAMETER, CLOSING = '<parameter name="', "</parameter>"
TAG_END = '">'
"""What ends a tool name or a key, in its tag."""
END_OF_MESSAGE = "[e~["
_KEY_TEXT = r'[^"\n]+'
"""Tool names and argument keys, inside the tags' double quotes."""
_NAME = re.compile(_KEY_TEXT)
_TAG_TEXT = "{tag} needs text without '\"', a newline or </invoke> (a call ends at the first)"
_HELD_OUT = (CLOSING, END_INVOKE)
"""Texts no value holds, raw or inside JSON: the parser ends a value at the
first ``</parameter>`` and a call at the first ``</invoke>``."""


class MiniMaxM2(MiniMaxPrompt, RawValueDialect):
    name = "minimax_m2"
    family = "MiniMax-M2, M2.1, M2.5, M2.7"
    default_tokenizer = "minimax_m2"
    value_syntax = JSON_SYNTAX
    markup = CallMarkup(
        turn_ends=(END_OF_MESSAGE,),
        ends_after_calls=(END_OF_MESSAGE,),
        open=INVOKE,
        close=END_INVOKE,
        separator="\n",
        section=CallSection(OPEN_SECTION, CLOSE_SECTION, lead="\n", inner="\n"),
        markers_in_section=True,
        argument_key=_KEY_TEXT,
    )
    reasoning = ReasoningMarkup(tokens=("<think>", "</think>"), prompt_opens=True)
    chat = ChatFormat(prefix="]~!b[", turn="]~b]{role}\n{text}[e~[\n", roles={"assistant": "ai"})
    any_guard = re.compile(f"{re.escape(OPEN_PARAMETER)}|{re.escape(END_INVOKE)}")

    def value_guards(self, tool: NormalizedTool | None) -> tuple[str, ...]:
        """``<parameter name="``, of any key, and ``</invoke>``: a raw value
        never holds them (the call's closing ends a value left open)."""
        return (OPEN_PARAMETER, END_INVOKE)

    def values_syntax(self, markers: Markers) -> ValueSyntax:
        return replace(self.value_syntax, excluded_texts=_HELD_OUT)

    def call_body(self, tool: NormalizedTool, emitter: ValueEmitter, markers: Markers) -> str:
        # The key apart from the tag around it, as an undeclared key's is:
        # the lexer then splits a declared key where it splits any other.
        def opening(key: str) -> str:
            return f"{literal(OPEN_PARAMETER)} {key} {literal(TAG_END)}"

        values = RawValues(
            'parameter_text_closed "\\n"',
            literal(CLOSING + "\n"),
            CLOSING + "\n",
            f"(?s:.*({'|'.join(map(escape, (*_HELD_OUT, OPEN_PARAMETER)))}).*)",
            python_literals=False,
        )
        return self.tagged_bodies(tool, emitter, values, literal(tool.name + TAG_END + "\n"), opening)

    def raw_text_syntax(self, markers: Markers) -> RawTextSyntax:
        """Tracking starts at the block's opening token and ends at its
        closing; a value ends at ``</parameter>``. The markup between values
        says which call and key the next one is."""
        invoke, end_invoke, parameter = map(re.escape, (INVOKE, END_INVOKE, OPEN_PARAMETER))
        opening = (
            rf"\n(?:{end_invoke}\n)?(?:{invoke}{_KEY_TEXT}\">\n{end_invoke}\n)*"
            rf"(?:{invoke}(?P<tool>{_KEY_TEXT})\">\n)?{parameter}(?P<key>{_KEY_TEXT})\">"
        )
        syntax = self.text_syntax(re.compile(opening.encode()), CLOSING, close_is_token=False, close_at_start=True)
        call_open, call_close = self.markup.call_tokens
        return replace(syntax, call_open=call_open, call_close=call_close)

    def name_problem(self, name: str) -> str | None:
        return None if _NAME.fullmatch(name) and END_INVOKE not in name else _TAG_TEXT.format(tag=INVOKE + 'NAME">')

    def key_problem(self, key: str, top_level: bool) -> str | None:
        if top_level:
            return None if _NAME.fullmatch(key) and END_INVOKE not in key else _TAG_TEXT.format(tag=OPEN_PARAMETER + 'KEY">')
        return self.closing_problem(key, top_level)

    def closing_problem(self, text: str, top_level: bool) -> str | None:
        held = next((marker for marker in _HELD_OUT if marker in text), None)
        return None if held is None else f"no value may hold {held!r}: the parser ends a value or a call at the first"

    def render_call(self, tool: NormalizedTool, arguments: dict[str, Any], key_order: str) -> str:
        parameters = "".join(
            f"{OPEN_PARAMETER}{key}{TAG_END}{raw_text(value)}{CLOSING}\n"
            for key, value in self.arranged(tool, arguments, key_order).items()
        )
        return f"{INVOKE}{tool.name}{TAG_END}\n{parameters}{END_INVOKE}"

    def walk(self, body: str, *, final: bool, resume: Partial | None = None) -> Partial:
        """The name and ``">``, then parameter tags (any whitespace between
        them); a value runs to its first ``</parameter>``, or to the next
        ``<parameter name="`` (one newline before it belongs to the layout)."""
        if resume is not None:
            assert resume.name is not None
            name, pairs, position = resume.name, list(resume.pairs), 0
        else:
            end = body.find(TAG_END)
            if end < 0:
                if final or "\n" in body:
                    raise Malformed(f'expected the tool name and ">" after {INVOKE}')
                return Partial()
            name = body[:end]
            if not _NAME.fullmatch(name):
                raise Malformed(f'expected the tool name and ">" after {INVOKE}')
            pairs, position = [], end + len(TAG_END)
        while (position := skip_space(body, position)) < len(body):
            key_end = body.find(TAG_END, position + len(OPEN_PARAMETER))
            if not body.startswith(OPEN_PARAMETER, position) or key_end < 0:
                rest = body[position:]
                if final or "\n" in rest or not (OPEN_PARAMETER.startswith(rest) or rest.startswith(OPEN_PARAMETER)):
                    raise Malformed(f'expected {OPEN_PARAMETER}KEY"> at offset {position}', name)
                return Partial(name, pairs, resume_at=position)
            key, start = body[position + len(OPEN_PARAMETER) : key_end], key_end + len(TAG_END)
            if not _NAME.fullmatch(key):
                raise Malformed(f'expected {OPEN_PARAMETER}KEY"> at offset {position}', name)
            value = self.value_at(body, start, name, key, CLOSING, final=final)
            if value.tail is not None:
                return Partial(name, pairs, key, value.text, resume_at=position, open_value=value.tail)
            pairs.append((key, Raw(value.text)))
            position = value.end
        return Partial(name, pairs, resume_at=position)

"""DeepSeek V3.1 and DeepSeek V3/R1: JSON arguments between DeepSeek's
tool-call tokens, a turn's calls inside ``<｜tool▁calls▁begin｜>`` and
``<｜tool▁calls▁end｜>``.

deepseek_v31 (DeepSeek-V3.1, its Terminus update)::

    <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{"city": "Paris"}<｜tool▁call▁end｜><｜tool▁calls▁end｜>

deepseek_r1 (DeepSeek-V3, DeepSeek-R1): the call's type before the name and
the arguments in a fenced JSON block; calls one per line::

    <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather
    ```json
    {"city": "Paris"}
    ```<｜tool▁call▁end｜><｜tool▁calls▁end｜>

The arguments are JSON as ``json.dumps`` writes them, constrained by the
tool's frames. The parser also reads what models drift to: whitespace
around the name and the arguments, V3.1 arguments in a ``json`` fence, R1
arguments without one, and arguments given as a JSON-encoded string.
"""

from __future__ import annotations

import json
import re
from dataclasses import replace
from typing import Any, ClassVar

from ..frames.toolset import NormalizedTool
from ..grammar.emitter import ValueEmitter
from ..grammar.lark import literal
from ..grammar.syntax import JSON_SYNTAX
from .base import Markers
from .deepseek_prompt import END_OF_SENTENCE, DeepSeekPrompt
from .description import CallMarkup, CallSection, ReasoningMarkup
from .hermes import json_object, read_members, starts_of
from .segments import Decoded, Malformed, Parsed, Partial, Value

SEP = "<｜tool▁sep｜>"
_NAME = re.compile(r"[^\s<>`]+")
"""A tool name: no whitespace (it ends at the separator or a line break) and no markup."""
_FENCE = re.compile(r"\A\s*```(?:json)?\s*\n(?P<body>.*?)\n?\s*```\s*\Z", re.S)


_GRAMMAR = "\n".join(
    [
        "// DeepSeek's JSON tool calls: fixed parts; tool_body is generated.",
        "reasoning: <think> reasoning_rest",
        "reasoning_rest: THINK_TEXT? </think> BLANK?",
        r"THINK_TEXT: /(.|\n)+/",
        r"BLANK: /[ \t\n]+/",
        "text: TEXT",
        # Never a call marker spelled out as text (the parser reads text).
        "TEXT: /(.|\\n)+/ & ~/(?s:.*)(<｜tool▁calls▁begin｜>|<｜tool▁call▁begin｜>)(?s:.*)/",
        "call: <｜tool▁call▁begin｜> tool_body <｜tool▁call▁end｜>",
        'json_value: %json {"x-guidance": {"whitespace_flexible": false, "item_separator": ", ", "key_separator": ": "}}',
    ]
)
"""The fixed parts of both grammars (tool_body is generated)."""


class DeepSeekV31(DeepSeekPrompt):
    name = "deepseek_v31"
    family = "DeepSeek-V3.1"
    default_tokenizer = "deepseek_v4"
    value_syntax = JSON_SYNTAX
    markup = CallMarkup(
        turn_ends=(END_OF_SENTENCE,),
        ends_after_calls=(END_OF_SENTENCE,),
        open="<｜tool▁call▁begin｜>",
        close="<｜tool▁call▁end｜>",
        separator="",
        section=CallSection("<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>"),
        other_tokens=(SEP,),
        arguments_opening=re.compile(rb"(?P<name>[^<\s]+)" + SEP.encode()),
    )
    reasoning = ReasoningMarkup(tokens=("<think>", "</think>"), thinks_by_default=False, prompt_opens=True)
    grammar_source = _GRAMMAR
    head: ClassVar[str] = "{name}" + SEP
    """What a call writes before its arguments."""
    tail: ClassVar[str] = ""
    """What a call writes after its arguments."""

    def call_body(self, tool: NormalizedTool, emitter: ValueEmitter, markers: Markers) -> str:
        head = self.head.split(SEP)
        parts = [literal(head[0].format(name=tool.name)), SEP, literal(head[1].format(name=tool.name))]
        body = " ".join(part for part in parts if part != '""')
        return f"{body} {emitter.value(tool.root)}" + (f" {literal(self.tail)}" if self.tail else "")

    def render_call(self, tool: NormalizedTool, arguments: dict[str, Any], key_order: str) -> str:
        ordered = json.dumps(self.arranged(tool, arguments, key_order), ensure_ascii=False)
        return f"{self.markup.open}{self.head.format(name=tool.name)}{ordered}{self.tail}{self.markup.close}"

    def partial_body(self, body: str, resume: Partial | None = None) -> Partial:
        return partial_arguments(body, resume, *self._heads())

    @classmethod
    def _heads(cls) -> tuple[re.Pattern[str], re.Pattern[str]]:
        """The call's text up to the arguments' ``{`` as the grammar writes
        it, and what may still become that text."""
        before, after = cls.head.split("{name}")
        name = r"[^\s<>`]"
        return (
            re.compile(re.escape(before) + f"(?P<name>{name}+)" + re.escape(after) + r"\{"),
            re.compile(f"{starts_of(before)}|{re.escape(before)}{name}*(?:{starts_of(after + '{')})"),
        )

    def tool_result(self, content: str, first: bool, last: bool, closing: str) -> str:
        """Each result between ``<｜tool▁output▁begin｜>`` and its end, as
        V3.1's template writes them (the model goes on after the last)."""
        return f"<｜tool▁output▁begin｜>{content}<｜tool▁output▁end｜>"

    def declare_tools(self, tools: Any) -> str:
        """The tools section of V3.1's template: each tool's name,
        description and parameters, then the call format."""
        described = "".join(
            f"### {tool.name}\nDescription: {tool.description or ''}\n\nParameters: "
            f"{json.dumps(tool.parameters, ensure_ascii=False)}\n\n"
            for tool in tools
        )
        example = self.markup.calls_text([f"{self.markup.open}{self.head.format(name='tool_call_name')}tool_call_arguments"
                                          f"{self.tail}{self.markup.close}"])
        return (
            f"## Tools\nYou have access to the following tools:\n\n{described}"
            f"IMPORTANT: ALWAYS adhere to this exact format for tool use:\n{example}\n\n"
            "Where:\n- `tool_call_name` must be an exact match to one of the available tools\n"
            "- `tool_call_arguments` must be valid JSON that strictly follows the tool's Parameters Schema\n"
        )

    def name_problem(self, name: str) -> str | None:
        return None if _NAME.fullmatch(name) else "a tool name before <｜tool▁sep｜> may not hold whitespace, '<', '>' or '`'"

    def parse_body(self, body: str) -> tuple[str, list[tuple[str, Value]]]:
        """The name, ``<｜tool▁sep｜>`` and the arguments (whitespace around
        each read as layout; a ``json`` fence around the arguments too)."""
        name, separator, arguments = body.partition(SEP)
        name = name.strip()
        if not separator or not _NAME.fullmatch(name):
            raise Malformed("expected the tool name, then <｜tool▁sep｜> and the arguments", name or None)
        return name, json_arguments(arguments, name)


class DeepSeekR1(DeepSeekV31):
    name = "deepseek_r1"
    family = "DeepSeek-V3, DeepSeek-R1"
    markup = replace(DeepSeekV31.markup, separator="\n", arguments_opening=re.compile(
        rb"function" + SEP.encode() + rb"(?P<name>[^<\s]+)\n```json\n"))
    reasoning = replace(DeepSeekV31.reasoning, thinks_by_default=True)
    head = "function" + SEP + "{name}\n```json\n"
    tail = "\n```"
    grammar_source = _GRAMMAR + '\ncall_separator: "\\n"\n'  # calls one per line

    def tool_result(self, content: str, first: bool, last: bool, closing: str) -> str:
        """A run of results inside ``<｜tool▁outputs▁begin｜>`` and its end,
        one per line, as R1's template writes them."""
        text = ("<｜tool▁outputs▁begin｜>" if first else "\n") + f"<｜tool▁output▁begin｜>{content}<｜tool▁output▁end｜>"
        return text + ("<｜tool▁outputs▁end｜>" if last else "")

    def parse_body(self, body: str) -> tuple[str, list[tuple[str, Value]]]:
        """``function``, ``<｜tool▁sep｜>``, the name on its line, then the
        arguments in a ``json`` fence (or without one)."""
        kind, separator, rest = body.partition(SEP)
        if not separator or kind.strip() != "function":
            raise Malformed("expected function<｜tool▁sep｜> then the tool name")
        name, _, arguments = rest.strip(" \t").partition("\n")
        name = name.strip()
        if not _NAME.fullmatch(name):
            raise Malformed("expected the tool name after <｜tool▁sep｜>", name or None)
        return name, json_arguments(arguments, name)


def partial_arguments(body: str, resume: Partial | None, head: re.Pattern[str], head_so_far: re.Pattern[str]) -> Partial:
    """The complete members of a call's JSON arguments so far, where the
    call is written as the grammar writes it: ``head`` (the markup up to
    the arguments' ``{``, group ``name``), of which ``head_so_far`` matches
    any start (else the call is read when complete)."""
    if resume is not None:
        assert resume.name is not None
        return read_members(body, resume.name, 0, list(resume.pairs))
    found = head.match(body)
    if found is not None:
        return read_members(body, found.group("name"), found.end(), [])
    if not head_so_far.fullmatch(body):  # (read when complete)
        raise Malformed("the call is not written as the grammar writes it")
    return Partial()


def json_arguments(text: str, name: str) -> list[tuple[str, Value]]:
    """The arguments object ``text`` holds (in a ``json`` fence or not);
    one given as a JSON-encoded string is read as the object it encodes."""
    fenced = _FENCE.match(text)
    value = json_object(fenced.group("body") if fenced else text, "the arguments", name, strings=True)
    if isinstance(value, str):
        decoded = json_object(value, "the arguments, a JSON-encoded string,", name)
        return [(key, Decoded(item)) for key, item in decoded.items()]
    return [(key, Parsed(item)) for key, item in value.items()]

"""Kimi K2 (K2 Instruct, K2 Thinking, K2.5): JSON arguments between Kimi's
tool-call tokens, a turn's calls inside ``<|tool_calls_section_begin|>`` and
``<|tool_calls_section_end|>``, each named ``functions.NAME:INDEX``::

    <|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>{"city": "Paris"}<|tool_call_end|><|tool_calls_section_end|>

``INDEX`` counts the calls of the whole conversation; the grammar lets the
model write any index, the renderer numbers a turn's calls from 0 and
:meth:`KimiK2.chat_prompt` by the conversation's count, as Kimi's template
and servers do. The arguments are JSON as ``json.dumps`` writes them,
constrained by the tool's frames. The parser also reads what models drift
to: whitespace around the name and the arguments, a name without
``functions.``, arguments given as a JSON-encoded string. A call that
gives only a counter (no name) is rejected: the tool is not guessed.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..frames.toolset import NormalizedTool
from ..grammar.emitter import ValueEmitter
from ..grammar.lark import literal
from ..grammar.syntax import JSON_SYNTAX
from .base import Dialect, Markers, history_call, last_answer, openai_function
from .deepseek import json_arguments, partial_arguments
from .deepseek_prompt import message_text
from .description import CallMarkup, CallSection, ChatFormat, ReasoningMarkup
from .hermes import starts_of
from .segments import Malformed, Partial, Value

if TYPE_CHECKING:
    from ..options import Reasoning

ARGUMENTS = "<|tool_call_argument_begin|>"
IM_END = "<|im_end|>"
_NAME_TEXT = r"[^\s<|]+"
_NAME = re.compile(_NAME_TEXT)
"""A tool name: no whitespace (the call's id ends at the arguments' token) and no markup."""
_ID = re.compile(rf"(?:functions\.)?(?P<name>{_NAME_TEXT}):(?P<index>[0-9]+)")
_OPENING = rf"functions\.(?P<name>{_NAME_TEXT}):[0-9]+{re.escape(ARGUMENTS)}"
"""A call's markup from after its opening token to where the arguments begin."""
_HEAD = re.compile(_OPENING + r"\{")
_HEAD_SO_FAR = re.compile(rf"{starts_of('functions.')}|functions\.[^\s<|]*(?::[0-9]*{starts_of(ARGUMENTS + '{')})?")
_ROLE_TOKENS = {"user": "<|im_user|>", "assistant": "<|im_assistant|>"}
"""The token a turn opens with, by role (every other role: ``<|im_system|>``)."""
_SYSTEM = "You are Kimi, an AI assistant created by Moonshot AI."
"""The system turn Kimi's template writes when the conversation has none."""

_GRAMMAR = "\n".join(
    [
        "// Kimi K2's tool calls: fixed parts; tool_body is generated.",
        "reasoning: <think> reasoning_rest",
        "reasoning_rest: THINK_TEXT? </think> BLANK?",
        r"THINK_TEXT: /(.|\n)+/",
        r"BLANK: /[ \t\n]+/",
        "text: TEXT",
        # Never a call marker spelled out as text (the parser reads text).
        r"TEXT: /(.|\n)+/ & ~/(?s:.*)(<\|tool_calls_section_begin\|>|<\|tool_call_begin\|>)(?s:.*)/",
        "call: <|tool_call_begin|> tool_body <|tool_call_end|>",
        r"CALL_INDEX: /0|[1-9][0-9]{0,5}/",
        'json_value: %json {"x-guidance": {"whitespace_flexible": false, "item_separator": ", ", "key_separator": ": "}}',
    ]
)


class KimiK2(Dialect):
    name = "kimi_k2"
    family = "Kimi K2, K2 Thinking, K2.5"
    default_tokenizer = "kimi_k2"
    value_syntax = JSON_SYNTAX
    markup = CallMarkup(
        turn_ends=(IM_END,),
        ends_after_calls=(IM_END,),
        open="<|tool_call_begin|>",
        close="<|tool_call_end|>",
        separator="",
        section=CallSection("<|tool_calls_section_begin|>", "<|tool_calls_section_end|>"),
        other_tokens=(ARGUMENTS,),
        arguments_opening=re.compile(_OPENING.encode()),
    )
    reasoning = ReasoningMarkup(tokens=("<think>", "</think>"))
    chat = ChatFormat(
        turn="{role}<|im_middle|>{text}" + IM_END,
        roles={role: _ROLE_TOKENS.get(role, "<|im_system|>") + role for role in ("system", "user", "assistant", "tool")},
    )
    grammar_source = _GRAMMAR

    def call_body(self, tool: NormalizedTool, emitter: ValueEmitter, markers: Markers) -> str:
        return f"{literal(f'functions.{tool.name}:')} CALL_INDEX {ARGUMENTS} {emitter.value(tool.root)}"

    def render_call(self, tool: NormalizedTool, arguments: dict[str, Any], key_order: str) -> str:
        return self.indexed_call(tool, arguments, key_order, 0)

    def render_calls(self, calls: Sequence[tuple[NormalizedTool, dict[str, Any]]], key_order: str) -> str:
        """A turn's calls numbered from 0, in their section."""
        return self.markup.calls_text([self.indexed_call(*call, key_order, index) for index, call in enumerate(calls)])

    def indexed_call(self, tool: NormalizedTool, arguments: dict[str, Any], key_order: str, index: int) -> str:
        """A call with the conversation's ``index`` in its id."""
        ordered = json.dumps(self.arranged(tool, arguments, key_order), ensure_ascii=False)
        return f"{self.markup.open}functions.{tool.name}:{index}{ARGUMENTS}{ordered}{self.markup.close}"

    def name_problem(self, name: str) -> str | None:
        return None if _NAME.fullmatch(name) else "a tool name in a Kimi call id may not hold whitespace, '<' or '|'"

    def parse_body(self, body: str) -> tuple[str, list[tuple[str, Value]]]:
        """The call's id (``functions.NAME:INDEX``), the arguments' token
        and the arguments (whitespace around each read as layout)."""
        call_id, separator, arguments = body.partition(ARGUMENTS)
        call_id = call_id.strip()
        found = _ID.fullmatch(call_id)
        if not separator or found is None:
            named = None if not call_id or call_id.isdigit() else call_id
            raise Malformed(f"expected functions.NAME:INDEX, then {ARGUMENTS} and the arguments", named)
        return found.group("name"), json_arguments(arguments, found.group("name"))

    def partial_body(self, body: str, resume: Partial | None = None) -> Partial:
        return partial_arguments(body, resume, _HEAD, _HEAD_SO_FAR)

    def chat_prompt(
        self, messages: list[dict[str, Any]], tools: Sequence[NormalizedTool], reasoning: Reasoning = True
    ) -> str:
        """The conversation as Kimi K2 Thinking's template writes it: the
        tools declared as JSON, Kimi's system turn when there is none, each
        earlier call named ``functions.NAME:INDEX`` by the conversation's
        count (the results answer to the same), the reasoning of the turns
        since the last plain answer kept, then the assistant's opening (the
        model opens its own reasoning block)."""
        by_name = {tool.name: tool for tool in tools}
        text = ""
        if tools:
            declared = [{"type": "function", "function": openai_function(tool)} for tool in tools]
            text += f"<|im_system|>tool_declare<|im_middle|>{json.dumps(declared, ensure_ascii=False)}{IM_END}"
        if not messages or messages[0].get("role") != "system":
            text += f"<|im_system|>system<|im_middle|>{_SYSTEM}{IM_END}"
        answered = last_answer(messages)
        ids: dict[str, str] = {}  # the conversation's call ids, as this prompt writes them
        opening = self.chat.turn.split("{text}")[0]
        for index, message in enumerate(messages):
            role, content = str(message.get("role", "user")), message_text(message.get("content"))
            text += opening.format(role=_ROLE_TOKENS.get(role, "<|im_system|>") + str(message.get("name") or role))
            if role == "assistant":
                thought = message_text(message.get("reasoning_content")) if index > answered else ""
                text += f"<think>{thought}</think>{content}" + self._calls(message.get("tool_calls") or (), by_name, ids)
            elif role == "tool":
                called = ids.get(str(message.get("tool_call_id")), f"functions.{message.get('name', 'unknown')}:{len(ids)}")
                text += f"## Return of {called}\n{content}"
            else:
                text += content
            text += IM_END
        return text + opening.format(role=self.chat.roles["assistant"])

    def _calls(self, calls: Sequence[dict[str, Any]], tools: dict[str, NormalizedTool], ids: dict[str, str]) -> str:
        """An assistant's earlier calls in their section, numbered on from
        the conversation's calls so far (``ids`` learns each one's id)."""
        written = []
        for call in calls:
            tool, arguments = history_call(call, tools)
            index = len(ids)
            ids[str(call.get("id", index))] = f"functions.{tool.name}:{index}"
            written.append(self.indexed_call(tool, arguments, self.chat.trained_key_order, index))
        return self.markup.calls_text(written) if written else ""

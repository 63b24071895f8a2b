"""MiniMax-M2's conversation, as its chat template writes it: ``]~!b[``, a
system turn with the tools declared as ``<tool>`` JSON lines and an example
call, the turns between ``]~b]ROLE`` and ``[e~[``, tool results as
``<response>`` elements of one tool turn, and the next assistant turn
opened inside its reasoning block."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..frames.toolset import NormalizedTool
from .base import Dialect, history_call, openai_function
from .deepseek_prompt import message_text

if TYPE_CHECKING:
    from ..options import Reasoning

_SYSTEM = "You are a helpful assistant."
"""The system text the template writes when the conversation has none."""


class MiniMaxPrompt(Dialect):
    """:meth:`chat_prompt` as MiniMax-M2's template writes it."""

    def chat_prompt(
        self, messages: list[dict[str, Any]], tools: Sequence[NormalizedTool], reasoning: Reasoning = True
    ) -> str:
        """The conversation, then ``]~b]ai`` and, unless ``reasoning`` is
        False, ``<think>`` (the template always opens it; the model always
        reasons). An assistant turn after the last user turn keeps its
        reasoning, as the template does."""
        skip = 1 if messages and messages[0].get("role") == "system" else 0
        system = message_text(messages[0].get("content")) if skip else _SYSTEM
        text = "]~!b[" + self._turn("system", system + (self.declare_tools(tools) if tools else ""))
        by_name = {tool.name: tool for tool in tools}
        last_user = max((i for i, m in enumerate(messages) if m.get("role") == "user"), default=-1)
        for index, message in enumerate(messages[skip:], start=skip):
            role, content = str(message.get("role", "user")), message_text(message.get("content"))
            if role == "assistant":
                thought = message_text(message.get("reasoning_content"))
                body = f"<think>\n{thought}\n</think>\n\n" if thought and index > last_user else ""
                calls = [self.render_call(*history_call(call, by_name), "trained") for call in message.get("tool_calls") or ()]
                text += self._turn("ai", body + content + (self.markup.calls_text(calls) if calls else ""))
            elif role == "tool":
                first = index == 0 or messages[index - 1].get("role") != "tool"
                last = index + 1 == len(messages) or messages[index + 1].get("role") != "tool"
                text += ("]~b]tool" if first else "") + f"\n<response>{content}</response>" + ("[e~[\n" if last else "")
            else:
                text += self._turn(role, content)
        return text + "]~b]ai\n" + ("<think>\n" if reasoning is not False else "")

    @staticmethod
    def _turn(role: str, text: str) -> str:
        return f"]~b]{role}\n{text}[e~[\n"

    def declare_tools(self, tools: Sequence[NormalizedTool]) -> str:
        """The tools section of the system turn: each tool's function as a
        ``<tool>`` line, then how to call them."""
        declared = "".join(f"<tool>{json.dumps(openai_function(tool), ensure_ascii=False)}</tool>\n" for tool in tools)
        example = (
            '<invoke name="tool-name-1">\n<parameter name="param-key-1">param-value-1</parameter>\n'
            '<parameter name="param-key-2">param-value-2</parameter>\n...\n</invoke>'
        )
        section = self.markup.section
        assert section is not None
        return (
            "\n\n# Tools\nYou may call one or more tools to assist with the user query.\n"
            "Here are the tools available in JSONSchema format:\n"
            f"\n<tools>\n{declared}</tools>\n\n"
            "When making tool calls, use XML format to invoke tools and pass parameters:\n"
            f"\n{section.opening}\n{example}\n{section.closing}"
        )

"""DeepSeek's conversation encoding, shared by its JSON (V3/R1, V3.1) and
DSML (V3.2, V4, V4.1) dialects: the system text then the tools section,
user turns between ``<｜User｜>`` and ``<｜Assistant｜>``, then ``<think>`` in
thinking mode or ``</think>`` in chat mode, earlier calls as the family
writes them, each assistant turn ended by ``<｜end▁of▁sentence｜>``; a
version says how tool results are written."""

from __future__ import annotations

import json
from abc import abstractmethod
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..frames.toolset import NormalizedTool
from .base import Dialect

if TYPE_CHECKING:
    from ..options import Reasoning

BEGIN_OF_SENTENCE = "<｜begin▁of▁sentence｜>"
END_OF_SENTENCE = "<｜end▁of▁sentence｜>"
THINK, END_THINK = "<think>", "</think>"


class DeepSeekPrompt(Dialect):
    """:meth:`chat_prompt` as DeepSeek's encoding writes it."""

    def chat_prompt(
        self, messages: list[dict[str, Any]], tools: Sequence[NormalizedTool], reasoning: Reasoning = True
    ) -> str:
        """The conversation as DeepSeek's encoding writes it; the last user
        turn or tool result ends with ``<think>`` when ``reasoning`` is on
        (thinking mode) and ``</think>`` when it is off (chat mode)."""
        thinking = reasoning is True or reasoning == "open"
        by_name = {tool.name: tool for tool in tools}
        last_user = max((i for i, m in enumerate(messages) if m.get("role") not in ("system", "assistant", "tool")), default=-1)
        text, declared = BEGIN_OF_SENTENCE, False
        for index, message in enumerate(messages):
            role, content = message.get("role", "user"), message_text(message.get("content"))
            closing = THINK if thinking and index >= last_user else END_THINK
            if role == "system":
                text += content + (f"\n\n{self.declare_tools(tools)}" if tools and not declared else "")
                declared = True
            elif role == "assistant":
                calls = [self._history_call(call, by_name) for call in message.get("tool_calls") or ()]
                thought = message_text(message.get("reasoning_content")) + END_THINK if thinking and index > last_user else ""
                text += thought + content + (self.markup.calls_text(calls) if calls else "") + END_OF_SENTENCE
            elif role == "tool":
                first = index == 0 or messages[index - 1].get("role") != "tool"
                last = index + 1 == len(messages) or messages[index + 1].get("role") != "tool"
                text += self.tool_result(content, first, last, closing)
            else:
                if tools and not declared:
                    text, declared = text + self.declare_tools(tools), True
                text += f"<｜User｜>{content}<｜Assistant｜>{closing}"
        return text

    @abstractmethod
    def tool_result(self, content: str, first: bool, last: bool, closing: str) -> str:
        """One tool result (``first`` and ``last`` of a run of them), with
        ``closing`` (the thinking mode's marker) after the last where the
        version writes it."""


def message_text(content: Any) -> str:
    """A message's content as text (JSON for anything but a string)."""
    return "" if content is None else content if isinstance(content, str) else json.dumps(content, ensure_ascii=False)

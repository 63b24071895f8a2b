"""gpt-oss's conversation, as its chat template writes it: a system message
(identity, dates, reasoning effort, channels), a developer message with the
instructions and the tools declared as a TypeScript-like namespace, then
the turns as Harmony messages; earlier calls name their recipient first."""

from __future__ import annotations

import datetime
import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..frames.toolset import NormalizedTool
from .base import history_call, last_answer
from .deepseek_prompt import message_text

if TYPE_CHECKING:
    from ..options import Reasoning
    from .base import Dialect

_IDENTITY = "You are ChatGPT, a large language model trained by OpenAI."
_CHANNELS = "# Valid channels: analysis, commentary, final. Channel must be included for every message."
_SCALARS = {"string": "string", "number": "number", "integer": "number", "boolean": "boolean"}


def harmony_prompt(
    dialect: Dialect, messages: list[dict[str, Any]], tools: Sequence[NormalizedTool], reasoning: Reasoning
) -> str:
    """The prompt for the next assistant turn. ``reasoning=False`` asks for
    low effort (gpt-oss always reasons; the constraint then leaves its
    analysis message out); ``"open"`` ends the prompt inside one. Each
    earlier call is a message of its own (the template keeps a turn's
    first call only), its reasoning kept until a later plain answer."""
    effort = "low" if reasoning is False else "medium"
    system = f"{_IDENTITY}\nKnowledge cutoff: 2024-06\nCurrent date: {datetime.date.today():%Y-%m-%d}\n\n"
    system += f"Reasoning: {effort}\n\n{_CHANNELS}"
    if tools:
        system += "\nCalls to these tools must go to the commentary channel: 'functions'."
    text = _message("system", system)
    skip = 1 if messages and messages[0].get("role") in ("system", "developer") else 0
    instructions = message_text(messages[0].get("content")) if skip else ""
    if instructions or tools:
        developer = f"# Instructions\n\n{instructions}" if instructions else ""
        developer += f"\n\n# Tools\n\n{_namespace(tools)}" if tools else ""
        text += _message("developer", developer)
    by_name = {tool.name: tool for tool in tools}
    answered = last_answer(messages)
    called: dict[str, str] = {}  # call id -> tool name, for the results
    last = ""
    for index, message in enumerate(messages[skip:], start=skip):
        role, content = str(message.get("role", "user")), message_text(message.get("content"))
        if role == "assistant" and message.get("tool_calls"):
            thought = message_text(message.get("reasoning_content") or message.get("thinking")) or content
            if thought and index > answered:
                text += _message("assistant<|channel|>analysis", thought)
            for call in message["tool_calls"]:
                tool, arguments = history_call(call, by_name)
                called[str(call.get("id"))] = last = tool.name
                ordered = json.dumps(dialect.arranged(tool, arguments, "trained"), ensure_ascii=False)
                text += f"<|start|>assistant to=functions.{tool.name}<|channel|>commentary json<|message|>{ordered}<|call|>"
        elif role == "assistant":
            text += _message("assistant<|channel|>final", content)
        elif role == "tool":
            name = called.get(str(message.get("tool_call_id")), str(message.get("name") or last))
            text += _message(f"functions.{name} to=assistant<|channel|>commentary", json.dumps(content, ensure_ascii=False))
        else:
            text += _message("user" if role == "user" else "developer", content)
    return text + "<|start|>assistant" + ("<|channel|>analysis<|message|>" if reasoning == "open" else "")


def _message(header: str, text: str) -> str:
    return f"<|start|>{header}<|message|>{text}<|end|>"


def _namespace(tools: Sequence[NormalizedTool]) -> str:
    """The tools as the template's ``functions`` namespace."""
    text = "## functions\n\nnamespace functions {\n\n"
    for tool in tools:
        text += f"// {tool.description or ''}\ntype {tool.name} = "
        properties = tool.parameters.get("properties") or {}
        if not properties:
            text += "() => any;\n\n"
            continue
        text += "(_: {\n"
        required = tool.parameters.get("required") or []
        for name, spec in properties.items():
            spec = spec if isinstance(spec, Mapping) else {}
            text += f"// {spec['description']}\n" if spec.get("description") else ""
            text += f"{name}{'' if name in required else '?'}: {typescript(spec)}"
            if "default" in spec:
                default = spec["default"] if spec.get("enum") or spec.get("oneOf") else json.dumps(spec["default"])
                text += f"{'' if spec.get('oneOf') else ','} // default: {default}"
            text += ",\n"
        text += "}) => any;\n\n"
    return text + "} // namespace functions"


def typescript(spec: Mapping[str, Any]) -> str:
    """A parameter's type as the template's ``render_typescript_type`` writes it."""
    kind = spec.get("type")
    nullable = " | null" if spec.get("nullable") else ""
    if kind == "array":
        items = spec.get("items")
        if not isinstance(items, Mapping) or not items:
            return "any[]" + nullable
        if items.get("type") in _SCALARS:
            return _SCALARS[items["type"]] + "[]" + nullable
        inner = typescript(items)
        return ("any[]" if inner == "object | object" or len(inner) > 50 else inner + "[]") + nullable
    if isinstance(kind, list) and kind:
        return " | ".join(map(str, kind))
    variants = spec.get("oneOf")
    if isinstance(variants, list) and variants:
        if len(variants) > 1 and any(isinstance(v, Mapping) and v.get("type") == "object" for v in variants):
            return "any"
        return " | ".join(typescript(v) if isinstance(v, Mapping) else "any" for v in variants)
    if kind == "string":
        return " | ".join(f'"{v}"' for v in spec["enum"]) if spec.get("enum") else "string" + nullable
    if kind in _SCALARS:
        return _SCALARS[kind]
    if kind == "object":
        properties = spec.get("properties")
        if not isinstance(properties, Mapping) or not properties:
            return "object"
        required = spec.get("required") or []
        members = ", ".join(
            f"{name}{'' if name in required else '?'}: {typescript(value if isinstance(value, Mapping) else {})}"
            for name, value in properties.items()
        )
        return "{\n" + members + "}"
    return "any"

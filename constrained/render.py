"""Tool calls -> the exact text a model's chat template writes for them."""

from __future__ import annotations

import json
from typing import Any, Iterable, Mapping

from .dialects import get_dialect
from .errors import ToolDefinitionError
from .schema.tool import normalize_tools


def render_tool_calls(
    calls: Iterable[Mapping[str, Any]],
    tools: Any,
    dialect: str,
    *,
    key_order: str = "trained",
) -> str:
    """The text of ``calls`` in ``dialect``: for chat history and tests.

    A call is OpenAI-shaped (``{"function": {"name", "arguments"}}``, the
    arguments a JSON string or an object) or ``{"name", "arguments"}``.
    Arguments are written in the order the dialect's grammar expects for
    ``key_order``.
    """
    chosen = get_dialect(dialect)
    by_name = {tool.name: tool for tool in normalize_tools(tools)}
    texts = []
    for call in calls:
        name, arguments = _name_and_arguments(call)
        if name not in by_name:
            raise ToolDefinitionError(f"call of {name!r}, which is not among the tools ({', '.join(by_name)})")
        texts.append(chosen.render_call(by_name[name], arguments, key_order))
    return ("\n" if chosen.call_separator else "").join(texts)


def _name_and_arguments(call: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
    function = call.get("function", call)
    name = function.get("name")
    arguments = function.get("arguments", {})
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except json.JSONDecodeError as exc:
            raise ToolDefinitionError(f"call of {name!r}: arguments are not valid JSON: {exc}") from None
    if not isinstance(name, str) or not isinstance(arguments, dict):
        raise ToolDefinitionError(f"not a tool call (needs a name and an arguments object): {dict(call)!r}")
    return name, arguments

"""Tool calls -> the exact text a model's chat template writes for them."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from ..dialects import get_dialect
from ..errors import ToolDefinitionError
from ..frames.toolset import normalize_tool_set


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
    ``key_order``. A call of a tool that cannot be read (see
    :func:`normalize_tool_set`) raises :class:`ToolDefinitionError` with
    the reason; the other tools still render.
    """
    chosen = get_dialect(dialect)
    tool_set = normalize_tool_set(tools)
    by_name, left_out = tool_set.by_name(), tool_set.left_out_by_name()
    chosen_calls = []
    for call in calls:
        name, arguments = _name_and_arguments(call)
        if name in left_out:
            raise ToolDefinitionError(f"call of {name!r}, a tool left out of the set: {left_out[name].reason}")
        if name not in by_name:
            raise ToolDefinitionError(f"call of {name!r}, which is not among the tools ({', '.join(by_name)})")
        chosen_calls.append((by_name[name], arguments))
    return chosen.render_calls(chosen_calls, key_order)


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

"""The tools the SGLang plug-in's tests call, as OpenAI function tools."""

from __future__ import annotations

import json
from typing import Any

from sglang.srt.entrypoints.openai.protocol import Tool


def function_tool(name: str, required: list[str], **properties: dict[str, Any]) -> dict[str, Any]:
    parameters = {"type": "object", "properties": properties, "required": required}
    return {"type": "function", "function": {"name": name, "parameters": parameters}}


WRITE = function_tool("write_file", ["path", "content"], path={"type": "string"}, content={"type": "string"},
                      mode={"type": "integer"})
WEATHER = function_tool("get_weather", ["city"], city={"type": "string", "maxLength": 12}, days={"type": "integer"})
NOTE = function_tool("add_note", ["text"], text={"type": "string"})


def sglang_tools(tools: list[dict[str, Any]]) -> list[Tool]:
    """The tools as SGLang's request model holds them."""
    return [Tool(**json.loads(json.dumps(tool))) for tool in tools]

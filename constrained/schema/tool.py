"""A tool's parameters read into frames: what the compiler and the parser share."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..errors import ToolDefinitionError
from ..frames import Frame, NormalizedSchema, ObjectFrame, SchemaWarning, UnionFrame
from ..tools import Tool, load_tools
from .limits import too_deep
from .normalize import normalize_schema


@dataclass(frozen=True)
class NormalizedTool:
    """A tool with its parameter schema normalized.

    ``root`` is an :class:`ObjectFrame` (or a union of them: parameter sets
    that exclude each other); ``parameters`` keeps the original schema, which
    the parser validates every call against; ``strict`` is the object policy
    it was read with (the frames follow from ``parameters`` and ``strict``).
    """

    name: str
    description: str
    parameters: dict[str, Any]
    schema: NormalizedSchema
    strict: bool = True

    @property
    def root(self) -> Frame:
        return self.schema.root

    @property
    def warnings(self) -> tuple[SchemaWarning, ...]:
        return self.schema.warnings


def normalize_tool(tool: Tool, *, strict: bool = True) -> NormalizedTool:
    """Normalize one tool (see :func:`normalize_schema` for ``strict``).

    Raises :class:`ToolDefinitionError` when the parameters, once resolved,
    are not an object schema, and :class:`SchemaLimitError` for a schema
    past the limits in :mod:`constrained.schema.limits`."""
    try:
        schema = normalize_schema(tool.parameters, strict=strict, tool=tool.name, object_root=True)
    except RecursionError:
        raise too_deep(tool.name) from None
    if not _is_object(schema.resolve(schema.root), schema):
        raise ToolDefinitionError(
            f"tool {tool.name!r}: parameters must be an object schema, "
            f"but they resolve to {schema.resolve(schema.root).kind!r}"
        )
    return NormalizedTool(tool.name, tool.description, tool.parameters, schema, strict)


def normalize_tools(tools: Any, *, strict: bool = True) -> list[NormalizedTool]:
    """Normalize tools given in any form :func:`load_tools` accepts, as
    :class:`Tool` objects, or already normalized (returned as they are).
    Two tools with one name raise :class:`ToolDefinitionError`."""
    if isinstance(tools, (list, tuple)) and tools:
        if all(isinstance(t, NormalizedTool) for t in tools):
            return _unique(list(tools))
        if all(isinstance(t, Tool) for t in tools):
            return [normalize_tool(tool, strict=strict) for tool in _unique(list(tools))]
    return [normalize_tool(tool, strict=strict) for tool in load_tools(tools)]


def _unique(tools: list[Any]) -> list[Any]:
    """``tools`` (``Tool`` or ``NormalizedTool``), checked to have distinct names."""
    seen: dict[str, int] = {}
    for index, tool in enumerate(tools):
        if tool.name in seen:
            raise ToolDefinitionError(f"tool {tool.name!r} is defined twice: tools[{seen[tool.name]}] and tools[{index}]")
        seen[tool.name] = index
    return tools


def _is_object(frame: Frame, schema: NormalizedSchema) -> bool:
    if isinstance(frame, UnionFrame):
        return all(_is_object(schema.resolve(option), schema) for option in frame.options)
    return isinstance(frame, ObjectFrame)

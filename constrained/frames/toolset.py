"""A tool's parameters read into frames: what the compiler and the parser share."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from ..caches import LruCache
from ..errors import ConstrainedError, SchemaError, SchemaWarning, ToolDefinitionError
from ..schema.json_values import json_text, text_digest
from ..schema.limits import too_deep
from ..tools import Tool, load_tool_entries
from .model import Frame, NormalizedSchema, ObjectFrame, UnionFrame
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
    schema = replace(schema, warnings=tool.warnings + schema.warnings)  # the loader's (type names mapped) first
    return NormalizedTool(tool.name, tool.description, tool.parameters, schema, strict)


def normalize_tools(tools: Any, *, strict: bool = True) -> list[NormalizedTool]:
    """Normalize tools given in any form :func:`load_tools` accepts, as
    :class:`Tool` objects, or already normalized (returned as they are).
    Raises the error of the first tool that cannot be used (two tools with
    one name: :class:`ToolDefinitionError`); :func:`normalize_tool_set`
    leaves such tools out instead."""
    tool_set = normalize_tool_set(tools, strict=strict)
    tool_set.raise_first()
    return list(tool_set.tools)


@dataclass(frozen=True)
class LeftOutTool:
    """A tool left out of a tool set: its name (``tools[i]`` when it has
    none), the JSON Pointer inside its parameters where the problem is
    (``""``: the tool as a whole), and why. ``error`` is the exception the
    strict path raises for it."""

    name: str
    reason: str
    path: str = ""
    error: ConstrainedError | None = field(default=None, compare=False, repr=False)

    @classmethod
    def from_error(cls, name: str, error: ConstrainedError) -> LeftOutTool:
        if isinstance(error, SchemaError):
            return cls(error.tool or name, error.reason, error.path, error)
        reason = str(error)
        prefix = f"tool {name!r}: "
        return cls(name, reason[len(prefix) :] if reason.startswith(prefix) else reason, "", error)

    @property
    def warning(self) -> SchemaWarning:
        """The warning a compiled tool set records for it."""
        return SchemaWarning(self.path, "tool", f"left out of the tool set: {self.reason}")

    def __str__(self) -> str:
        where = f" at {self.path}" if self.path else ""
        return f"tool {self.name!r} left out{where}: {self.reason}"


@dataclass(frozen=True)
class ToolSet:
    """The tools of a set that can be used, and those left out with why:
    one tool that cannot be read (or written, see
    :func:`constrained.dialects.writable.writable_tool_set`) never takes the others down."""

    tools: tuple[NormalizedTool, ...]
    left_out: tuple[LeftOutTool, ...] = ()

    def by_name(self) -> dict[str, NormalizedTool]:
        return {tool.name: tool for tool in self.tools}

    def left_out_by_name(self) -> Mapping[str, LeftOutTool]:
        return {tool.name: tool for tool in self.left_out}

    def raise_first(self) -> None:
        """Raise the error of the first tool left out, if any (the strict policy)."""
        for tool in self.left_out:
            if tool.error is not None:
                raise tool.error


_cache: LruCache[tuple[bool, str], ToolSet] = LruCache("normalized tool sets", 32)
"""Normalized sets of tools given as JSON, by their text (see :func:`normalize_tool_set`)."""


def normalize_tool_set(tools: Any, *, strict: bool = True) -> ToolSet:
    """Normalize each tool on its own (any form :func:`normalize_tools`
    reads): a tool whose definition or schema cannot be used
    (:class:`ToolDefinitionError`, :class:`SchemaError` and its
    subclasses: malformed, unsatisfiable, past a limit) is left out with
    the reason, and the others are kept. Two tools with one name are both
    left out (a call could mean either).

    Tools given as JSON (lists and dicts, as a server receives them) are
    normalized once per content and kept (the 32 last used sets): a
    server's check, each parse, the stream parser and the compile of one
    request would otherwise normalize them four times (13 ms for 100
    tools each). They are read from their own copy of the JSON text, so
    editing the given dicts afterwards changes nothing kept; what comes
    back is shared and never changed by this library, and must not be by
    its callers. :func:`clear_normalize_cache` forgets them."""
    if isinstance(tools, ToolSet):
        return tools
    text = json_text(tools) if isinstance(tools, (list, tuple, dict)) else None
    if text is None:  # tool objects, Pydantic classes: normalized as given
        return _normalize_entries(tools, strict)
    tool_set = _cache.get_or_make((strict, text_digest(text)), lambda: _normalize_entries(json.loads(text), strict))
    return _with_own_errors(tool_set)


def clear_normalize_cache() -> None:
    """Forget every tool set :func:`normalize_tool_set` kept
    (:func:`constrained.clear_caches` forgets them too)."""
    _cache.clear()


def _with_own_errors(tool_set: ToolSet) -> ToolSet:
    """``tool_set`` with a copy of each left-out tool's error: a kept set
    is shared, and one exception object raised again and again (the strict
    path, a server's check) would chain every raise's traceback onto it."""
    if all(tool.error is None for tool in tool_set.left_out):
        return tool_set
    left_out = (tool if tool.error is None else replace(tool, error=_copy(tool.error)) for tool in tool_set.left_out)
    return ToolSet(tool_set.tools, tuple(left_out))


def _copy(error: ConstrainedError) -> ConstrainedError:
    copied = type(error).__new__(type(error), *error.args)
    copied.__dict__.update(error.__dict__)
    return copied


def _normalize_entries(tools: Any, strict: bool) -> ToolSet:
    if isinstance(tools, (list, tuple)) and tools and all(isinstance(t, NormalizedTool) for t in tools):
        entries: list[Any] = _duplicates_marked(list(tools))
    elif isinstance(tools, (list, tuple)) and tools and all(isinstance(t, Tool) for t in tools):
        entries = _duplicates_marked(list(tools))
    else:
        entries = list(load_tool_entries(tools))
    kept: list[NormalizedTool] = []
    left_out: list[LeftOutTool] = []
    for index, entry in enumerate(entries):
        if isinstance(entry, ToolDefinitionError):
            left_out.append(LeftOutTool.from_error(entry.tool or f"tools[{index}]", entry))
        elif isinstance(entry, NormalizedTool):
            kept.append(entry)
        else:
            try:
                kept.append(normalize_tool(entry, strict=strict))
            except (ToolDefinitionError, SchemaError) as exc:
                left_out.append(LeftOutTool.from_error(entry.name, exc))
    return ToolSet(tuple(kept), tuple(left_out))


def _duplicates_marked(tools: list[Any]) -> list[Any]:
    """``tools`` (``Tool`` or ``NormalizedTool``) with every tool whose name
    another one shares replaced by the error saying so."""
    first: dict[str, int] = {}
    marked: list[Any] = list(tools)
    for index, tool in enumerate(tools):
        earlier = first.setdefault(tool.name, index)
        if earlier != index:
            error = ToolDefinitionError(
                f"tool {tool.name!r} is defined twice: tools[{earlier}] and tools[{index}]", tool=tool.name
            )
            marked[earlier] = marked[index] = error
    return marked


def _is_object(frame: Frame, schema: NormalizedSchema) -> bool:
    if isinstance(frame, UnionFrame):
        return all(_is_object(schema.resolve(option), schema) for option in frame.options)
    return isinstance(frame, ObjectFrame)

"""Tool loading: every accepted way of writing a tool becomes one ``Tool``.

The normalizer, the emitters and the parser all read ``Tool`` only, so the
differences between OpenAI tools, bare function dicts, MCP ``tools/list``
results, Pydantic models and BFCL definitions are settled here, once, and a
definition that cannot work is reported here, by the tool's name, before any
schema is compiled.
"""

from __future__ import annotations

import copy
import difflib
import inspect
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from .errors import SchemaWarning, ToolDefinitionError
from .schema.keywords import child_schemas, walk_schemas
from .schema.limits import check_nesting, too_deep
from .schema.refs import pointer_token

__all__ = ["Tool", "load_tool_entries", "load_tools", "load_tools_file", "read_tools_file"]

_FORMATS = ("openai", "function", "mcp", "anthropic", "pydantic", "bfcl")
_SCHEMA_KEYS = {"mcp": "inputSchema", "anthropic": "input_schema"}
"""The key that holds the parameters' schema, where it is not ``parameters``."""

# BFCL's own type names and what BFCL maps them to; None means untyped (BFCL's
# ``any``: any value). JSON Schema's own names are left as they are.
_BFCL_TYPES: dict[str, str | None] = {
    "dict": "object",
    "float": "number",
    "tuple": "array",
    "list": "array",
    "bool": "boolean",
    "any": None,
    "Any": None,
    "byte": "integer",
    "short": "integer",
    "long": "integer",
    "Bigint": "integer",
    "double": "number",
    "char": "string",
    "String": "string",
    "ArrayList": "array",
    "Array": "array",
    "Queue": "array",
    "Stack": "array",
    "HashMap": "object",
    "Hashtable": "object",
}
# Python's own names, which BFCL does not have but hand-written tool lists do.
_PYTHON_TYPES: dict[str, str | None] = {"int": "integer", "str": "string", "None": "null", "NoneType": "null"}
# Every type name read as JSON Schema's, in whatever form the tool came.
_TYPE_NAMES = {**_BFCL_TYPES, **_PYTHON_TYPES}

@dataclass(frozen=True)
class Tool:
    """One tool, whatever form it was written in.

    ``parameters`` is the JSON Schema of the arguments as a plain dict: a deep
    copy of the input (callers may keep editing theirs), BFCL type names
    already mapped, a boolean schema written as its dict equivalent. ``source``
    records the input form ("openai", "function", "mcp", "anthropic",
    "pydantic", "bfcl")
    for messages and round trips. ``warnings`` says where a type name was
    mapped that is not the form's own (BFCL's or Python's names outside a
    BFCL definition, Python's inside one); :func:`normalize_tool` adds them
    to the normalized tool's warnings.
    """

    name: str
    description: str
    parameters: dict[str, Any]
    source: str
    warnings: tuple[SchemaWarning, ...] = ()


def load_tools(source: object, *, format: str | None = None) -> list[Tool]:
    """Load tools from any accepted form, detected per entry (mixed lists are
    fine); ``format`` forces one form and rejects entries not written in it.

    Accepts a list of entries or a single entry, an MCP ``tools/list`` result
    ``{"tools": [...]}`` and its JSON-RPC envelope. Raises ToolDefinitionError
    naming the tool (or ``tools[i]``) for anything that cannot be used.
    """
    tools: list[Tool] = []
    for loaded in load_tool_entries(source, format=format):
        if isinstance(loaded, ToolDefinitionError):
            raise loaded
        tools.append(loaded)
    return tools


def load_tool_entries(source: object, *, format: str | None = None) -> list[Tool | ToolDefinitionError]:
    """Like :func:`load_tools`, one result per entry: the ``Tool``, or the
    ``ToolDefinitionError`` that entry raises (every entry of a name given
    twice gets one), so one bad entry need not take the others down. A
    ``source`` that is no tool list at all (an envelope without a result)
    still raises."""
    if format is not None and format not in _FORMATS:
        raise ToolDefinitionError(
            f"unknown tool format {format!r}; expected one of {', '.join(map(repr, _FORMATS))}"
        )
    loaded: list[Tool | ToolDefinitionError] = []
    first_index: dict[str, int] = {}
    for index, entry in enumerate(_entries(source)):
        try:
            tool = _load_entry(entry, index, format)
        except ToolDefinitionError as exc:
            exc.tool = exc.tool or _name_or_position(entry, index)
            loaded.append(exc)
            continue
        first_index.setdefault(tool.name, index)
        loaded.append(tool)
    for index, item in enumerate(loaded):
        if isinstance(item, Tool) and first_index[item.name] != index:
            first = first_index[item.name]
            twice = ToolDefinitionError(
                f"tool {item.name!r} is defined twice: tools[{first}] and tools[{index}]", tool=item.name
            )
            loaded[first] = loaded[index] = twice
    return loaded


def load_tools_file(path: str | os.PathLike[str], *, format: str | None = None) -> list[Tool]:
    """Read a JSON file (a list or an object in any form ``load_tools``
    accepts) and load its tools."""
    return load_tools(read_tools_file(path), format=format)


def read_tools_file(path: str | os.PathLike[str]) -> Any:
    """The JSON in a tools file, as given (for :func:`load_tool_entries` and
    the compiler, which leave bad entries out); a file that is not UTF-8
    text or not JSON is a ToolDefinitionError naming it, so callers such as
    the command line handle one error type."""
    with open(path, encoding="utf-8") as f:
        try:
            text = f.read()
        except UnicodeDecodeError as exc:
            raise ToolDefinitionError(f"{os.fspath(path)}: not UTF-8 text: {exc}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ToolDefinitionError(f"{os.fspath(path)}: not valid JSON: {exc}") from exc


def _entries(source: object) -> list[object]:
    """The tool entries in ``source``, unwrapping a JSON-RPC envelope and an
    MCP ``tools/list`` result; anything else is one entry or a list of them."""
    if isinstance(source, dict):
        if "jsonrpc" in source:
            result = source.get("result")
            if not isinstance(result, dict):
                raise ToolDefinitionError(
                    f"JSON-RPC response has no result object (keys: {_keys(source)})"
                )
            source = result
        if "tools" in source and "name" not in source:
            tools = source["tools"]
            if not isinstance(tools, list):
                raise ToolDefinitionError(
                    f"'tools' must be a list of tools, got {type(tools).__name__}"
                )
            return list(tools)
        return [source]
    if isinstance(source, (list, tuple)):
        return list(source)
    return [source]


def _detect(entry: object) -> str | None:
    """The form ``entry`` is written in, or None when it is none of them."""
    if inspect.isclass(entry) and callable(getattr(entry, "model_json_schema", None)):
        return "pydantic"
    if not isinstance(entry, dict):
        return None
    if entry.get("type") == "function" and "function" in entry:
        return "openai"
    if "inputSchema" in entry:
        return "mcp"
    if "input_schema" in entry:
        return "anthropic"
    if "name" in entry or "parameters" in entry:
        return "bfcl" if _uses_bfcl_types(entry.get("parameters")) else "function"
    return None


def _load_entry(entry: object, index: int, format: str | None) -> Tool:
    """Build the Tool for one entry, checking its name and parameters."""
    form = _detect(entry)
    if format is not None and form is not None and {form, format} <= {"function", "bfcl"}:
        form = format  # the two share a shape; the caller decides which names are the tool's own
    if form is None or (format is not None and form != format):
        expected = (
            f"a tool definition in format {format!r}" if format is not None
            else "an OpenAI tool {type: function, function: {...}}, a function "
            "{name, description, parameters}, an MCP tool {name, description, "
            "inputSchema}, an Anthropic tool {name, description, input_schema} or a Pydantic model class"
        )
        if isinstance(entry, dict):
            found = f"keys: {_keys(entry)}"
        elif inspect.isclass(entry):
            found = f"class {entry.__name__}"
        else:
            found = type(entry).__name__
        raise ToolDefinitionError(
            f"{_label(entry, index)}: cannot recognise the tool definition ({found}); expected {expected}"
        )

    if form == "pydantic":
        cls: Any = entry
        where = f"tool {cls.__name__!r}"
        try:
            raw = cls.model_json_schema()
        except Exception as exc:  # user code: report it against the tool
            raise ToolDefinitionError(f"{where}: model_json_schema() failed: {exc}") from exc
        params, warnings = _parameters(raw, cls.__name__, form)
        # The class's own docstring only: inspect.getdoc would fall back to
        # BaseModel's docstring for a model that has none.
        doc = cls.__doc__
        description = inspect.cleandoc(doc) if doc else params.get("description")
        return Tool(cls.__name__, _description(description, where), params, form, warnings)

    assert isinstance(entry, dict)
    fields = entry
    if form == "openai":
        fields = entry["function"]
        if not isinstance(fields, dict):
            raise ToolDefinitionError(
                f"tools[{index}]: 'function' must be an object, got {type(fields).__name__}"
            )
    name = fields.get("name")
    if name is None:
        raise ToolDefinitionError(f"tools[{index}]: tool has no name")
    if not isinstance(name, str) or not name:
        raise ToolDefinitionError(f"tools[{index}]: tool name must be a non-empty string, got {name!r}")
    where = f"tool {name!r}"
    key = _SCHEMA_KEYS.get(form, "parameters")
    if key not in fields:
        _refuse_misspelt_schema(fields, key, where)
    raw = fields.get(key, {"type": "object", "properties": {}})
    params, warnings = _parameters(raw, name, form)
    return Tool(name, _description(fields.get("description"), where), params, form, warnings)


_SCHEMA_KEY_SLIPS = frozenset({"parameter", "params", "param", "arguments", "args", "schema", "json_schema",
                               "input", "inputs", "inputSchema", "input_schema", "parameters", "properties"})
"""Keys a tool definition that leaves out its schema key may hold the schema
under instead (with the close misspellings :func:`difflib.get_close_matches`
finds of the schema keys)."""


def _refuse_misspelt_schema(fields: dict[str, Any], key: str, where: str) -> None:
    """Raise :class:`ToolDefinitionError` when a definition without ``key``
    (a tool without parameters, as written) holds a key that is likely the
    schema under another name (``parameter``, ``input_schema`` in an OpenAI
    function): read as written, the tool would take no arguments, and every
    real call of it would be refused."""
    others = [k for k in fields if isinstance(k, str) and k not in ("name", "description", "type", "strict")]
    slips = [k for k in others if k in _SCHEMA_KEY_SLIPS]
    slips += difflib.get_close_matches(key, [k for k in others if k not in slips], n=1, cutoff=0.75)
    if slips:
        raise ToolDefinitionError(
            f"{where}: has no {key!r} but has {slips[0]!r}; write the parameters' schema under {key!r} "
            f"(a tool without parameters has neither)"
        )


def _description(value: object, where: str) -> str:
    """The description as a string; a missing one is empty."""
    if value is None:
        return ""
    if not isinstance(value, str):
        raise ToolDefinitionError(f"{where}: description must be a string, got {type(value).__name__}")
    return value


def _parameters(raw: object, name: str, form: str) -> tuple[dict[str, Any], tuple[SchemaWarning, ...]]:
    """A private copy of the parameters schema, checked to nest no deeper
    than :data:`~constrained.schema.limits.MAX_NESTING` and to describe an
    object (arguments are always a JSON object), BFCL and Python type names
    mapped (in every form), with the warnings of :attr:`Tool.warnings`."""
    where = f"tool {name!r}"
    if isinstance(raw, bool):
        # Same meaning, dict form: every later stage can assume a dict.
        return ({} if raw else {"not": {}}), ()
    if not isinstance(raw, dict):
        raise ToolDefinitionError(
            f"{where}: parameters must be a JSON object or boolean schema, got {type(raw).__name__}"
        )
    check_nesting(raw, name)
    try:
        params = copy.deepcopy(raw)
    except RecursionError:
        raise too_deep(name) from None
    warnings = _map_type_names(params, form)
    declared = params.get("type", "object")
    if declared != "object" and not (isinstance(declared, list) and "object" in declared):
        raise ToolDefinitionError(f"{where}: parameters must be an object schema, got type {declared!r}")
    return params, warnings


def _type_names(schema: dict[str, Any]) -> list[object]:
    """The names in a schema's ``type`` (a string or a list of them)."""
    declared = schema.get("type")
    if isinstance(declared, list):
        return declared
    return [declared] if isinstance(declared, str) else []


def _uses_bfcl_types(parameters: object) -> bool:
    """Whether a schema uses a type name JSON Schema lacks (``dict``, ``float``, ``int``...)."""
    return isinstance(parameters, dict) and any(
        isinstance(name, str) and name in _TYPE_NAMES
        for schema in walk_schemas(parameters)
        for name in _type_names(schema)
    )


def _map_type_names(parameters: dict[str, Any], form: str) -> tuple[SchemaWarning, ...]:
    """Rewrite BFCL and Python type names to JSON Schema in place (on our own
    copy), as BFCL does, except that ``any`` drops ``type`` (any value) where
    BFCL would say string. JSON Schema has none of these names, so a schema
    that is valid JSON Schema is left as it is. The warnings: each name
    mapped that is not the form's own, where (BFCL's names are a BFCL
    definition's own)."""
    warnings: list[SchemaWarning] = []
    for pointer, schema in _schemas_at(parameters):
        if "type" not in schema:
            continue
        names = _type_names(schema)
        mapped = [_TYPE_NAMES.get(name, name) if isinstance(name, str) else name for name in names]
        warnings.extend(
            SchemaWarning(pointer, "type", f"{_habit(name)} type name {name!r} read as {_meaning(_TYPE_NAMES[name])}")
            for name in names
            if isinstance(name, str) and name in _TYPE_NAMES and not (form == "bfcl" and name in _BFCL_TYPES)
        )
        if None in mapped:
            del schema["type"]
        elif isinstance(schema["type"], list):
            schema["type"] = [t for i, t in enumerate(mapped) if t not in mapped[:i]]
        elif mapped:
            schema["type"] = mapped[0]
    return tuple(warnings)


def _habit(name: str) -> str:
    return "BFCL" if name in _BFCL_TYPES else "Python"


def _meaning(mapped: str | None) -> str:
    return "any value (no type)" if mapped is None else repr(mapped)


def _schemas_at(schema: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """``schema`` and every object subschema in it, each once, with its JSON
    Pointer (as :func:`~constrained.schema.keywords.walk_schemas` walks them)."""
    stack: list[tuple[str, dict[str, Any]]] = [("", schema)]
    seen: set[int] = set()
    while stack:
        pointer, node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        yield pointer, node
        children = [
            (f"{pointer}/{pointer_token(keyword)}" + ("" if key is None else f"/{pointer_token(str(key))}"), child)
            for keyword, value in node.items()
            for key, child in child_schemas(keyword, value)
        ]
        stack.extend(reversed(children))


def _label(entry: object, index: int) -> str:
    """How a message names an entry: by its name when it has a usable one."""
    name = _name_or_position(entry, index)
    return name if name == f"tools[{index}]" else f"tool {name!r}"


def _name_or_position(entry: object, index: int) -> str:
    """An entry's tool name when it has a usable one, else ``tools[i]``."""
    if isinstance(entry, dict):
        function = entry.get("function")
        fields = function if isinstance(function, dict) else entry
        name = fields.get("name")
        if isinstance(name, str) and name:
            return name
    return f"tools[{index}]"


def _keys(entry: dict[str, Any]) -> str:
    """The keys of a dict, for messages."""
    return ", ".join(map(repr, entry)) or "none"

"""What a dialect can write: tool names, declared keys and enum/const strings
are checked before compiling.

A name, key or literal string a dialect cannot write and read back (a Qwen
key with ``>``, a Gemma key with ``{``, text holding one of the tokenizer's
special tokens, a raw value holding its own closing) would give a grammar
that accepts calls the parser then misreads, or none at all. Such a tool
is left out of the set (the compiler and the parser alike), with a
:class:`CompileError` naming the tool, the place, the dialect and why.
The walk of a value's keys and strings (:func:`parts`) also serves the check
of a call's arguments (:mod:`.representable`).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, assert_never

from ..errors import CompileError
from ..frames.accepts import union_branch
from ..frames.model import (
    ArrayFrame,
    BooleanFrame,
    EnumFrame,
    Frame,
    FreeFrame,
    IntegerFrame,
    NormalizedSchema,
    NullFrame,
    NumberFrame,
    ObjectFrame,
    RefFrame,
    StringFrame,
    UnionFrame,
)
from ..frames.toolset import LeftOutTool, NormalizedTool, ToolSet
from ..schema.json_values import pattern_matches
from ..schema.refs import pointer_token
from ..tokenizers import Tokenizer
from .base import Dialect

_SHOWN = 60
"""Characters of a long text a message shows."""


@dataclass(frozen=True)
class _Text:
    """A name, key or string the grammar writes literally."""

    kind: str  # "tool name", "key" or "string"
    text: str
    where: str  # a schema pointer, references followed ("" for the tool name)
    top_level: bool


def writable_tool_set(dialect: Dialect, tool_set: ToolSet, tokenizer: Tokenizer | None = None) -> ToolSet:
    """``tool_set`` less the tools ``dialect`` cannot write: each is left
    out with a :class:`CompileError` naming its first name, declared key or
    enum/const string the dialect cannot write and read back. With a
    ``tokenizer``, text holding one of its special tokens counts too (the
    texts of every tool are encoded in one batch: one call per tool cost a
    third of a cold compile of 829 tools)."""
    texts = [(tool, item) for tool in tool_set.tools for item in _texts(tool)]
    problems: dict[str, LeftOutTool] = {}
    for tool, item in texts:
        if tool.name not in problems and (problem := _problem(dialect, item)) is not None:
            problems[tool.name] = _unwritable(tool, dialect, item, problem)
    if tokenizer is not None:
        texts = [(tool, item) for tool, item in texts if tool.name not in problems]
        for (tool, item), special in zip(texts, tokenizer.special_tokens_in([item.text for _, item in texts])):
            if special is not None and tool.name not in problems:
                problem = f"it holds {special!r}, a special token of tokenizer {tokenizer.name!r}"
                problems[tool.name] = _unwritable(tool, dialect, item, problem)
    if not problems:
        return tool_set
    kept = tuple(tool for tool in tool_set.tools if tool.name not in problems)
    return ToolSet(kept, tool_set.left_out + tuple(problems.values()))


def _problem(dialect: Dialect, item: _Text) -> str | None:
    """Why ``dialect``'s syntax cannot hold ``item``, or ``None``."""
    try:
        item.text.encode("utf-8")
    except UnicodeEncodeError as exc:
        return f"it holds {exc.object[exc.start]!r}, a lone surrogate UTF-8 cannot encode"
    if item.kind == "tool name":
        return dialect.name_problem(item.text)
    if item.kind == "key":
        return dialect.key_problem(item.text, item.top_level)
    return dialect.text_problem(item.text, item.top_level)


def _unwritable(tool: NormalizedTool, dialect: Dialect, item: _Text, problem: str) -> LeftOutTool:
    # backslashreplace: a lone surrogate in the pointer would make the message unprintable.
    pointer = item.where.encode("utf-8", "backslashreplace").decode("utf-8")
    where = f" at {_shown(pointer)}" if item.kind != "tool name" else ""
    remedy = "leave the value out" if item.kind == "string" else "rename it"
    reason = (
        f"{item.kind} {_shown(item.text)!r}{where} cannot be written in dialect {dialect.name!r}: "
        f"{problem}; {remedy} or use another dialect"
    )
    return LeftOutTool(tool.name, reason, pointer, CompileError(f"tool {_shown(tool.name)!r}: {reason}"))


def _shown(text: str) -> str:
    """``text``, cut short for a message when long."""
    return text if len(text) <= _SHOWN else f"{text[:_SHOWN]}... ({len(text)} characters)"


def _texts(tool: NormalizedTool) -> Iterator[_Text]:
    """The tool's name, then every declared key and enum/const string its
    frames hold; ``top_level`` for an argument's key or whole value."""
    yield _Text("tool name", tool.name, "", False)
    definitions = tool.schema.definitions
    # Frames are shared (a DAG): each is visited once per kind of place,
    # by identity. Depth 0 is the arguments object, 1 an argument, 2 deeper.
    seen: set[tuple[int, int]] = set()
    stack: list[tuple[Frame, str, int]] = [(tool.root, "", 0)]
    while stack:
        frame, where, depth = stack.pop()
        if (id(frame), min(depth, 2)) in seen:
            continue
        seen.add((id(frame), min(depth, 2)))
        match frame:
            case RefFrame():
                stack.append((definitions[frame.name], where, depth))
            case UnionFrame():
                stack.extend((option, where, depth) for option in frame.options)
            case ObjectFrame():
                for key, value in frame.properties:
                    yield _Text("key", key, f"{where}/properties/{pointer_token(key)}", depth == 0)
                    stack.append((value, f"{where}/properties/{pointer_token(key)}", depth + 1))
                for pattern, value in frame.pattern_properties:
                    stack.append((value, f"{where}/patternProperties/{pointer_token(pattern)}", depth + 1))
                if frame.additional is not None:
                    stack.append((frame.additional, f"{where}/additionalProperties", depth + 1))
            case ArrayFrame():
                stack.extend((item, f"{where}/prefixItems/{i}", depth + 1) for i, item in enumerate(frame.prefix_items))
                if frame.items is not None:
                    stack.append((frame.items, f"{where}/items", depth + 1))
            case EnumFrame():
                for literal in frame.values:
                    yield from _literal_texts(literal, frame, tool.schema, f"{where}/enum", depth)
            case StringFrame() | IntegerFrame() | NumberFrame() | BooleanFrame() | NullFrame() | FreeFrame():
                pass  # no declared key or string to check
            case _:
                assert_never(frame)


def _literal_texts(value: Any, frame: Frame, schema: NormalizedSchema, where: str, depth: int) -> Iterator[_Text]:
    """The keys and strings of one enum/const value of ``frame``."""
    for part in parts(value, frame, schema, depth):
        yield _Text(part.kind, part.text, where, part.top)


@dataclass(frozen=True)
class Part:
    """A key or a string inside a value (a call's arguments, an enum member)."""

    kind: str  # "key" or "string"
    text: str
    top: bool  # a top-level argument: its key, or its whole value
    position: str  # keys: "declared", "extra" (an object frame's undeclared key) or "free" (inside an untyped value)


def parts(value: Any, frame: Frame, schema: NormalizedSchema, depth: int = 0) -> Iterator[Part]:
    """The keys and strings of ``value`` (the arguments at ``depth`` 0), each
    with how the grammar writes it (a union takes its first option that
    accepts the value, as the renderer does)."""
    frame = schema.resolve(frame)
    if isinstance(frame, UnionFrame):
        frame = union_branch(frame, value, schema.definitions) or FreeFrame()
        frame = schema.resolve(frame)
    if isinstance(value, str):
        yield Part("string", value, depth == 1, "")
    elif isinstance(value, dict):
        for key, item in value.items():
            child: Frame = FreeFrame()
            position = "free"
            if isinstance(frame, ObjectFrame):
                declared = frame.property(key)
                matched = [f for pattern, f in frame.pattern_properties if pattern_matches(pattern, key)]
                position = "extra" if declared is None else "declared"
                child = declared or (matched[0] if matched else frame.additional) or FreeFrame()
            elif isinstance(frame, EnumFrame):
                position = "declared"
            yield Part("key", key, depth == 0, position)
            yield from parts(item, child, schema, depth + 1)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            child = FreeFrame()
            if isinstance(frame, ArrayFrame):
                prefix = frame.prefix_items
                child = prefix[index] if index < len(prefix) else frame.items or FreeFrame()
            yield from parts(item, child, schema, depth + 1)

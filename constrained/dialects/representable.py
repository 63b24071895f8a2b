"""Which arguments a dialect's syntax cannot write at all.

Some values have no text in a dialect: a key or string holding one of the
tokenizer's special tokens (the grammar never lets a marker into text), an
undeclared key the dialect's key syntax cannot spell (Gemma's bare keys, XML
parameter names, JSON keys without escapes), text that would end its own
value (a line ``</parameter>`` in qwen3_coder's raw text, ``</arg_value>``
in any string or key of a glm value) or one of its tool's guards (raw text
holding the start of an argument's markup, see
:class:`~constrained.dialects.raw_values.RawValueDialect`). A
conformance check must tell those apart from values the constraint wrongly
rejects; :func:`unrepresentable` says why, or ``None``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Iterator

from ..frames.model import ArrayFrame, EnumFrame, Frame, FreeFrame, NormalizedSchema, ObjectFrame, UnionFrame
from ..frames.toolset import NormalizedTool
from ..frames.accepts import frame_accepts
from ..schema.json_values import pattern_matches
from ..tokenizers import Tokenizer
from . import get_dialect
from .base import Markers
from .raw_values import RawValueDialect

@dataclass(frozen=True)
class Part:
    """A key or a string inside a call's arguments."""

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
        frame = next((o for o in frame.options if frame_accepts(o, value, schema.definitions)), FreeFrame())
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


def unrepresentable(dialect: str, tool: NormalizedTool, arguments: dict[str, Any], tokenizer: Tokenizer) -> str | None:
    """Why ``dialect`` (with ``tokenizer``'s special tokens) cannot write
    these arguments of ``tool``, or ``None``."""
    chosen = get_dialect(dialect)
    syntax = chosen.values_syntax(Markers(tokenizer))
    for part in parts(arguments, tool.root, tool.schema):
        if any(0xD800 <= ord(c) <= 0xDFFF for c in part.text):
            return f"{part.kind} {part.text!r} holds a lone surrogate, which UTF-8 cannot encode"
        if any(tokenizer.is_special(t) for t in tokenizer.encode(part.text)):
            return f"{part.kind} {part.text!r} holds a special token"
        if part.kind == "key":
            if part.position == "declared":
                continue
            pattern = chosen.argument_key if part.top and chosen.argument_key else syntax.key_pattern
            # An untyped value's keys are JSON strings (any text, escaped) or Gemma's bare keys.
            if (part.position == "extra" or syntax.name == "gemma") and not re.fullmatch(pattern, part.text):
                return f"undeclared key {part.text!r} has characters the key syntax ({pattern}) cannot hold"
            if not part.top and (problem := chosen.key_problem(part.text, top_level=False)) is not None:
                return f"key {part.text[:40]!r}: {problem}"
        elif part.top and isinstance(chosen, RawValueDialect):  # by its own tool's guards
            if (problem := chosen.value_problem(tool, part.text)) is not None:
                return f"raw text {part.text[:40]!r}: {problem}"
        elif (problem := chosen.text_problem(part.text, top_level=part.top)) is not None:
            return f"{'raw text' if part.top else 'string'} {part.text[:40]!r}: {problem}"
    return None

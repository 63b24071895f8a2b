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
from typing import Any

from ..frames.toolset import NormalizedTool
from ..tokenizers import Tokenizer
from .base import Markers
from .registry import get_dialect
from .writable import parts


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
            pattern = chosen.markup.argument_key if part.top and chosen.markup.argument_key else syntax.key_pattern
            # An untyped value's keys are JSON strings (any text, escaped) or Gemma's bare keys.
            if (part.position == "extra" or syntax.free_keys_keep_pattern) and not re.fullmatch(pattern, part.text):
                return f"undeclared key {part.text!r} has characters the key syntax ({pattern}) cannot hold"
            if not part.top and (problem := chosen.key_problem(part.text, top_level=False)) is not None:
                return f"key {part.text[:40]!r}: {problem}"
        elif part.top:  # a whole value, judged with its own tool (raw text: the tool's guards)
            if (problem := chosen.value_problem(tool, part.text)) is not None:
                return f"raw text {part.text[:40]!r}: {problem}"
        elif (problem := chosen.text_problem(part.text, top_level=False)) is not None:
            return f"string {part.text[:40]!r}: {problem}"
    return None

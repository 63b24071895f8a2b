"""Model text -> OpenAI-style ``tool_calls``, with types from the schema.

Each dialect scans its own markup (:meth:`Dialect.scan`) into text,
reasoning and call segments; this module turns call segments into typed,
validated calls. Values follow the schema, never the look of the text: a
string parameter keeps its text exactly, whatever it looks like. Anything
wrong fails closed: no call, the text stays in ``content``, and ``errors``
says why. Nothing here raises on any input text.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

import jsonschema

from ..compiler import CompiledTools
from ..dialects import get_dialect
from ..dialects.base import Dialect
from ..dialects.segments import CallSegment, Decoded, Parsed, Raw, Segment
from ..frames.model import Frame, FreeFrame, ObjectFrame
from ..frames.toolset import LeftOutTool, NormalizedTool, ToolSet, normalize_tool_set
from ..frames.types import json_types
from ..schema.validation import validator_for
from ..frames.accepts import frame_accepts, member_frames
from ..dialects.writable import writable_tool_set

# Calls longer than this (in bytes of markup) are rejected, not parsed.
MAX_CALL_BYTES = 4 * 1024 * 1024

_PYTHON_LITERALS = {"True": True, "False": False, "None": None}


@dataclass(frozen=True)
class RejectedCall:
    """Why one call was rejected: the reason, the tool's name when known,
    and the call's byte span in the text. A record in
    :attr:`ParseResult.errors`, not an exception."""

    reason: str
    tool: str | None
    span: tuple[int, int]

    def to_json(self) -> dict[str, Any]:
        return {"reason": self.reason, "tool": self.tool, "span": list(self.span)}


@dataclass(frozen=True)
class ParseResult:
    """``content``: the text outside accepted calls, literally (the newline
    between two calls included; rejected calls stay in it); ``reasoning``: the reasoning block's text, if any; ``tool_calls``:
    OpenAI-shaped calls in source order; ``errors``: one per rejected call."""

    content: str
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    errors: list[RejectedCall] = field(default_factory=list)
    reasoning: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "content": self.content,
            "reasoning": self.reasoning,
            "tool_calls": self.tool_calls,
            "errors": [error.to_json() for error in self.errors],
        }


class CallRejected(Exception):
    """A call segment that does not make a valid call (internal)."""


def parse_tool_calls(text: str, tools: Any, dialect: str) -> ParseResult:
    """Read ``text`` (a model's output in ``dialect``) into content and
    typed tool calls. ``tools`` in any form :func:`load_tools` accepts, or
    the :class:`CompiledTools` the output was generated under. A call of a
    tool left out of the set (see :func:`usable_tools`) is an error."""
    chosen = get_dialect(dialect)
    tool_set = usable_tools(tools, chosen)
    by_name = tool_set.by_name()
    left_out = tool_set.left_out_by_name()
    content: list[str] = []
    reasoning: list[str] = []
    calls: list[dict[str, Any]] = []
    errors: list[RejectedCall] = []
    for segment in chosen.for_tools(by_name).scan(text):
        if segment.kind == "reasoning":
            reasoning.append(segment.text)
        elif segment.kind == "text":
            content.append(segment.text)
        else:
            assert isinstance(segment, CallSegment)
            try:
                calls.append(openai_call(segment, by_name, chosen.python_literals, left_out))
            except CallRejected as exc:
                content.append(segment.text)
                errors.append(RejectedCall(str(exc), segment.name, _byte_span(text, segment.start, segment.end)))
    return ParseResult("".join(content), calls, errors, "".join(reasoning) if reasoning else None)


def usable_tools(tools: Any, dialect: Dialect) -> ToolSet:
    """The tools whose calls the parser reads, and those left out with why:
    a :class:`CompiledTools`' own (the grammar's, exactly), else ``tools``
    normalized one by one less those ``dialect`` cannot write (as the
    compiler leaves them out; text holding a special token is judged only
    with a compiled set, which knows the tokenizer)."""
    if isinstance(tools, CompiledTools):
        return tools.tool_set
    return writable_tool_set(dialect, normalize_tool_set(tools))


def openai_call(
    segment: CallSegment,
    tools: Mapping[str, NormalizedTool],
    python_literals: bool,
    left_out: Mapping[str, LeftOutTool] | None = None,
) -> dict[str, Any]:
    """One call segment as an OpenAI tool call (raises CallRejected)."""
    if segment.error is not None:
        raise CallRejected(segment.error)
    if len(segment.text.encode("utf-8")) > MAX_CALL_BYTES:
        raise CallRejected(f"the call is larger than {MAX_CALL_BYTES} bytes")
    tool = tools.get(segment.name or "")
    if tool is None and left_out and segment.name in left_out:
        raise CallRejected(f"tool {segment.name!r} was left out of the tool set: {left_out[segment.name].reason}")
    if tool is None:
        raise CallRejected(f"no tool is called {segment.name!r}")
    try:
        arguments = typed_arguments(tool, segment.arguments, python_literals)
    except CallRejected as exc:
        if any(isinstance(value, Decoded) for _, value in segment.arguments):
            raise CallRejected(f"the arguments, a JSON-encoded string, decoded do not fit {tool.name!r}: {exc}") from None
        raise
    return {
        "id": call_id(segment.start, tool.name),
        "type": "function",
        "function": {"name": tool.name, "arguments": json.dumps(arguments, ensure_ascii=False)},
    }


def typed_arguments(
    tool: NormalizedTool, pairs: Iterable[tuple[str, Raw | Parsed]], python_literals: bool
) -> dict[str, Any]:
    """The arguments of one call, each value read by its parameter's frame,
    then checked against the frames and validated against the full schema."""
    root = tool.schema.resolve(tool.root)
    arguments: dict[str, Any] = {}
    for key, value in pairs:
        if key in arguments:
            raise CallRejected(f"parameter {key!r} is given twice")
        frame = member_frame(root, key)
        if frame is None:
            raise CallRejected(f"{tool.name!r} has no parameter {key!r}")
        arguments[key] = value.value if isinstance(value, Parsed) else read_raw(value.text, frame, tool, key, python_literals)
    missing = [key for key in _required(root) if key not in arguments]
    if missing:
        raise CallRejected(f"missing required parameter(s) {', '.join(map(repr, missing))}")
    if not frame_accepts(tool.root, arguments, tool.schema.definitions):
        raise CallRejected(f"the arguments do not match the schema of {tool.name!r}")
    validate(tool, arguments)
    return arguments


def read_raw(text: str, frame: Frame, tool: NormalizedTool, key: str, python_literals: bool) -> Any:
    """A raw-text value read by its frame: text for a string parameter; JSON
    (or, where the grammar allows them, ``True``/``False``/``None``) for the
    rest. A parameter that may be a string or something else takes the
    non-string reading only when that reading is valid for it."""
    definitions = tool.schema.definitions
    types = json_types(frame, definitions)
    if types == {"string"}:
        return text
    reading = _non_string_reading(text, python_literals)
    if reading is not _NO_READING and frame_accepts(frame, reading[0], definitions):
        return reading[0]
    if "string" in types and frame_accepts(frame, text, definitions):
        return text
    expected = " or ".join(sorted(types - {"string"})) if types != set(json_types(FreeFrame())) else "a value"
    raise CallRejected(f"parameter {key!r} is not a valid {expected}: {text[:80]!r}")


_NO_READING: Any = object()
_JSON_WHITESPACE = " \t\n\r"


def _non_string_reading(text: str, python_literals: bool) -> Any:
    if python_literals and text in _PYTHON_LITERALS:
        return (_PYTHON_LITERALS[text],)
    if text != text.strip(_JSON_WHITESPACE):
        # json.loads skips it; the grammar never writes a JSON value with it.
        return _NO_READING
    try:
        return (json.loads(text),)
    except ValueError:
        return _NO_READING


def member_frame(root: Frame, key: str) -> Frame | None:
    """The frame that types top-level key ``key`` (the first parameter set
    that allows it; its first frame when patterns give several, all of which
    the final check applies), or ``None`` when no parameter set allows it."""
    for frame in getattr(root, "options", (root,)):
        frames = member_frames(frame, key) if isinstance(frame, ObjectFrame) else None
        if frames:
            return frames[0]
    return None


def _required(root: Frame) -> list[str]:
    objects = [f for f in getattr(root, "options", (root,)) if isinstance(f, ObjectFrame)]
    if len(objects) != 1:
        return []
    return list(objects[0].required)


def validate(tool: NormalizedTool, arguments: dict[str, Any]) -> None:
    """Validate against the tool's full JSON Schema, including every keyword
    the grammar relaxed."""
    validator = validator_for(tool.parameters)
    try:
        error = jsonschema.exceptions.best_match(validator.iter_errors(arguments))
    except Exception as exc:  # a reference the validator cannot follow, a bad pattern
        raise CallRejected(f"the schema of {tool.name!r} cannot be validated: {exc}") from None
    if error is not None:
        where = "/".join(str(p) for p in error.absolute_path)
        raise CallRejected(f"schema validation failed at /{where}: {error.message}")


def call_id(start: int, name: str) -> str:
    """A stable id for the call of ``name`` at offset ``start``: known as soon
    as the name is, and the same when streaming and when not."""
    digest = hashlib.sha256(f"{start}:{name}".encode("utf-8")).hexdigest()[:24]
    return f"call_{digest}"


def _byte_span(text: str, start: int, end: int) -> tuple[int, int]:
    begin = len(text[:start].encode("utf-8"))
    return begin, begin + len(text[start:end].encode("utf-8"))


__all__ = ["ParseResult", "RejectedCall", "Segment", "parse_tool_calls"]

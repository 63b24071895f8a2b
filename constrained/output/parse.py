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
import secrets
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import jsonschema

from ..compiler import CompiledTools
from ..dialects import get_dialect
from ..dialects.base import Dialect
from ..dialects.segments import CallSegment, Decoded, Malformed, Parsed, Raw, Segment
from ..dialects.writable import writable_tool_set
from ..frames.accepts import explain, frame_accepts, member_frames
from ..frames.model import EnumFrame, Frame, ObjectFrame
from ..frames.toolset import LeftOutTool, NormalizedTool, ToolSet, normalize_tool_set
from ..frames.types import json_types
from ..options import Reasoning, check_reasoning
from ..schema.json_values import json_type
from ..schema.validation import Failure, explain_error, json_pointer, validator_for

# Calls longer than this (in bytes of markup) are rejected, not parsed.
MAX_CALL_BYTES = 4 * 1024 * 1024

_PYTHON_LITERALS = {"True": True, "False": False, "None": None}


@dataclass(frozen=True)
class RejectedCall:
    """Why one call was rejected: the reason, the tool's name when the text
    names it, and the call's byte span in the text. A record in
    :attr:`ParseResult.errors`, not an exception.

    Where a value fails the schema, ``pointer`` is its JSON Pointer from
    the arguments object (``/items/0/qty``) and ``keyword`` the JSON Schema
    keyword it fails (``type``, ``minimum``, ``pattern``...); the reason
    says both, the value and the bound in one line (``/items/0/qty: "two"
    is not an integer``). Both are ``None`` for broken markup."""

    reason: str
    tool: str | None
    span: tuple[int, int]
    pointer: str | None = None
    keyword: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"reason": self.reason, "tool": self.tool, "span": list(self.span),
                "pointer": self.pointer, "keyword": self.keyword}


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
    """A call segment that does not make a valid call (internal), with the
    pointer and keyword of the failing value where there is one."""

    def __init__(self, reason: str, pointer: str | None = None, keyword: str | None = None) -> None:
        super().__init__(reason)
        self.pointer = pointer
        self.keyword = keyword

    @classmethod
    def of(cls, failure: Failure | None, otherwise: str) -> CallRejected:
        """The rejection ``failure`` says, or ``otherwise`` where none was found."""
        if failure is None:
            return cls(otherwise)
        return cls(failure.message, failure.pointer, failure.keyword)

    def said(self, reason: str) -> CallRejected:
        """This rejection with ``reason`` (one that wraps this one's)."""
        return CallRejected(reason, self.pointer, self.keyword)


def parse_tool_calls(text: str, tools: Any, dialect: str, *, reasoning: Reasoning | None = None) -> ParseResult:
    """Read ``text`` (a model's output in ``dialect``) into content, reasoning
    and typed tool calls. ``tools`` in any form :func:`load_tools` accepts,
    or the :class:`CompiledTools` the output was generated under. A call of a
    tool left out of the set (see :func:`usable_tools`) is an error.
    ``reasoning="open"`` says the prompt opened a reasoning block, so the
    text starts inside it (by default, the compiled set's own option)."""
    return read_output(text, tools, reader(dialect, tools, reasoning), CallIds())


def read_output(text: str, tools: Any, chosen: Dialect, ids: CallIds) -> ParseResult:
    """:func:`parse_tool_calls` with ``chosen`` (a dialect reading with its
    reasoning state) and the ids of one output (a stream's own, so that its
    result has the ids it streamed)."""
    tool_set = usable_tools(tools, chosen)
    by_name = tool_set.by_name()
    left_out = tool_set.left_out_by_name()
    content: list[str] = []
    reasoning: list[str] = []
    calls: list[dict[str, Any]] = []
    errors: list[RejectedCall] = []
    reading = chosen.for_tools(by_name)
    opening, accepted = "", False  # a calls section's opening before the next call; the last call's fate
    for segment in reading.scan(text):
        if segment.kind == "reasoning":
            reasoning.append(segment.text)
        elif segment.kind == "text":
            content.append(segment.text)
        elif segment.kind == "markup":
            continue  # a message's framing (see MessageFraming): never content
        elif segment.kind == "section_opening":
            opening = segment.text  # leaves the content with its call
        elif segment.kind == "section_closing":
            content.append("" if accepted else segment.text)
        else:
            assert isinstance(segment, CallSegment)
            try:
                calls.append(openai_call(segment, by_name, chosen.drift.python_literals, ids, left_out))
                accepted = True
            except CallRejected as exc:
                accepted = False
                content.append(opening + segment.text)
                span = _byte_span(text, segment.start, segment.end)
                errors.append(RejectedCall(str(exc), _called(reading, segment), span, exc.pointer, exc.keyword))
            opening = ""
    return ParseResult("".join(content), calls, errors, "".join(reasoning) if reasoning else None)


_NAME_WINDOW = 1024
"""How much of a call's body is read for the tool's name when the call is
broken: a name comes first, and reading more would cost as much as the call."""


def _called(dialect: Dialect, segment: CallSegment) -> str | None:
    """The tool a call names: the scan's reading, else, for broken markup
    (a call not closed, JSON that does not read), as far as the start of
    its body says it (``None`` for a call marker in fenced code, which is
    text)."""
    if segment.name is not None or segment.fenced or not segment.text.startswith(dialect.markup.open):
        return segment.name
    body = segment.text[len(dialect.markup.open) :]
    if body.endswith(dialect.markup.close):
        body = body[: -len(dialect.markup.close)]
    try:
        return dialect.partial_body(body[:_NAME_WINDOW]).name
    except Malformed as exc:
        return exc.name


def reader(dialect: str, tools: Any, reasoning: Reasoning | None) -> Dialect:
    """``dialect`` reading output generated with ``reasoning`` (``None``:
    as ``tools`` were compiled, when they are a :class:`CompiledTools`)."""
    if reasoning is None:
        reasoning = tools.reasoning if isinstance(tools, CompiledTools) else True
    check_reasoning(reasoning)
    return get_dialect(dialect).reading(reasoning)


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
    ids: CallIds,
    left_out: Mapping[str, LeftOutTool] | None = None,
) -> dict[str, Any]:
    """One call segment as an OpenAI tool call (raises CallRejected)."""
    if segment.error is not None:
        raise CallRejected(segment.error)
    if len(segment.text.encode("utf-8")) > MAX_CALL_BYTES:
        raise CallRejected(f"the call is larger than {MAX_CALL_BYTES} bytes")
    name = segment.name or ""
    tool = tools.get(name)
    if tool is None and left_out and name in left_out:
        raise CallRejected(f"tool {name!r} was left out of the tool set: {left_out[name].reason}")
    if tool is None:
        raise CallRejected(f"no tool is called {segment.name!r}")
    try:
        arguments = typed_arguments(tool, segment.arguments, python_literals)
    except CallRejected as exc:
        if any(isinstance(value, Decoded) for _, value in segment.arguments):
            raise exc.said(f"the arguments, a JSON-encoded string, decoded do not fit {tool.name!r}: {exc}") from None
        raise
    return {
        "id": ids(segment.start, tool.name),
        "type": "function",
        "function": {"name": tool.name, "arguments": json.dumps(arguments, ensure_ascii=False)},
    }


def typed_arguments(
    tool: NormalizedTool, pairs: Iterable[tuple[str, Raw | Parsed]], python_literals: bool
) -> dict[str, Any]:
    """The arguments of one call, each value read by its parameter's frame,
    then checked against the frames and validated against the full schema.

    Parameters that are a union of parameter sets (a root ``oneOf`` /
    ``anyOf`` of objects, such as a discriminated union) are read one set
    at a time: every value by that set's frames, the whole then checked and
    validated (see :func:`branch_arguments`)."""
    pairs = list(pairs)
    seen: set[str] = set()
    for key, _ in pairs:
        if key in seen:
            raise CallRejected(f"parameter {key!r} is given twice", json_pointer([key]))
        seen.add(key)
    branches = Dialect.argument_objects(tool)
    if len(branches) > 1:
        return branch_arguments(tool, branches, pairs, python_literals)
    return _arguments_by(tool, branches[0], pairs, python_literals)


def _arguments_by(
    tool: NormalizedTool, branch: ObjectFrame, pairs: list[tuple[str, Raw | Parsed]], python_literals: bool
) -> dict[str, Any]:
    """The arguments read by the frames of one parameter set ``branch``,
    checked against the frames and validated (raises :class:`CallRejected`)."""
    arguments: dict[str, Any] = {}
    for key, value in pairs:
        frames = member_frames(branch, key)
        if not frames:
            raise _no_parameter(tool, key)
        arguments[key] = read_value(value, frames, tool, key, python_literals)
    missing = [key for key in _required(branch) if key not in arguments]
    if missing:
        raise CallRejected(f"missing required parameter(s) {', '.join(map(repr, missing))}", "", "required")
    definitions = tool.schema.definitions
    if not frame_accepts(branch, arguments, definitions):
        failed = explain(branch, arguments, definitions)
        raise CallRejected.of(failed, f"the arguments do not match the schema of {tool.name!r}")
    validate(tool, arguments)
    return arguments


def branch_arguments(
    tool: NormalizedTool,
    branches: tuple[ObjectFrame, ...],
    pairs: list[tuple[str, Raw | Parsed]],
    python_literals: bool,
) -> dict[str, Any]:
    """The arguments of a call whose parameters are a union of parameter
    sets (``branches``, in schema order).

    A raw value's type depends on the set: in a discriminated union,
    ``value`` may be an integer where ``kind`` is ``"count"`` and a string
    where it is ``"text"``. So each set reads *all* the values with its own
    frames, and the reading is checked and validated as a whole; the
    arguments are those of the first set, in schema order, whose reading
    validates. A set whose ``const`` (or one-value ``enum``) key disagrees
    with the value read never validates, so a discriminator selects its set
    wherever it stands among the keys. Two sets can both validate only when
    the text is ambiguous (``5`` where one set has an integer and another a
    string, and no key tells them apart); then the first in schema order
    wins, the order JSON Schema's ``anyOf`` and Pydantic's left-to-right
    unions try, and the one the renderer, the writability and conformance
    checks follow when they pick a set for a value (:func:`union_branch`),
    so a call is always read the same way, whatever its key order.

    When no set validates, the reason is the one of the set the
    discriminators select (every ``const`` key it has agrees with the value
    read), else of the first set that has every key."""
    keys = [key for key, _ in pairs]
    unknown = next((key for key in keys if not any(member_frames(b, key) for b in branches)), None)
    if unknown is not None:
        raise _no_parameter(tool, unknown)
    candidates = [b for b in branches if all(member_frames(b, key) for key in keys)]
    if not candidates:
        raise CallRejected(f"no parameter set of {tool.name!r} takes all of {', '.join(map(repr, keys))}")
    failures: list[tuple[ObjectFrame, CallRejected]] = []
    for branch in candidates:
        try:
            return _arguments_by(tool, branch, pairs, python_literals)
        except CallRejected as exc:
            failures.append((branch, exc))
    selected = [(b, e) for b, e in failures if _discriminated(tool, b, pairs, python_literals)]
    if selected:
        branch, rejected = selected[0]
        rejected = _misfit(tool, branch, pairs, python_literals) or rejected
        tags = ", ".join(f"{key!r} is {json.dumps(value, ensure_ascii=False)}" for key, value in _tags(tool, branch))
        where = f" (in the parameter set where {tags})" if tags else ""
        raise rejected.said(f"{rejected}{where}")
    tagged = _discriminators(tool, candidates, keys)
    if tagged:
        key, values = tagged
        listed = ", ".join(json.dumps(v, ensure_ascii=False) for v in values)
        raise CallRejected(f"parameter {key!r} selects none of the parameter sets of {tool.name!r} (one of {listed})")
    first = failures[0][1]
    raise first.said(f"the arguments match none of the parameter sets of {tool.name!r}: {first}")


def _misfit(
    tool: NormalizedTool, branch: ObjectFrame, pairs: list[tuple[str, Raw | Parsed]], python_literals: bool
) -> CallRejected | None:
    """The rejection of the first value read (a JSON dialect's, or a raw
    value that reads) that does not fit its frames in ``branch``; ``None``
    when each fits (the set fails as a whole)."""
    definitions = tool.schema.definitions
    for key, value in pairs:
        frames = member_frames(branch, key) or []
        try:
            read = read_value(value, frames, tool, key, python_literals)
        except (CallRejected, IndexError) as exc:
            return exc if isinstance(exc, CallRejected) else None
        misfit = next((f for f in frames if not frame_accepts(f, read, definitions)), None)
        if misfit is not None:
            return CallRejected.of(explain(misfit, read, definitions, [key]), f"parameter {key!r} does not fit its schema")
    return None


def _tags(tool: NormalizedTool, branch: ObjectFrame) -> list[tuple[str, Any]]:
    """The keys of ``branch`` that hold one value only (``const``, a
    one-value ``enum``), with that value: a discriminated union's tags."""
    tags = []
    for key, frame in branch.properties:
        resolved = tool.schema.resolve(frame)
        if isinstance(resolved, EnumFrame) and len(resolved.values) == 1:
            tags.append((key, resolved.values[0]))
    return tags


def _discriminated(
    tool: NormalizedTool, branch: ObjectFrame, pairs: list[tuple[str, Raw | Parsed]], python_literals: bool
) -> bool:
    """Whether the call names ``branch`` by its tags: it gives at least one
    of them, and every one it gives reads as the tag's value."""
    given = dict(pairs)
    told = False
    for key, tag in _tags(tool, branch):
        if key not in given:
            continue
        value = given[key]
        frame = member_frames(branch, key)
        try:
            read = read_value(value, frame or [], tool, key, python_literals)
        except CallRejected:
            return False
        if not frame_accepts(EnumFrame((tag,)), read):
            return False
        told = True
    return told


def _discriminators(
    tool: NormalizedTool, branches: list[ObjectFrame], keys: list[str]
) -> tuple[str, list[Any]] | None:
    """A key given in the call that is a tag of every one of ``branches``,
    with the tags' values (in schema order), or ``None``."""
    for key in keys:
        values = []
        for branch in branches:
            tag = dict(_tags(tool, branch)).get(key, _NO_READING)
            if tag is _NO_READING:
                break
            values.append(tag)
        else:
            return key, values
    return None


def read_value(value: Raw | Parsed, frames: list[Frame], tool: NormalizedTool, key: str, python_literals: bool) -> Any:
    """The value of ``key``: as its syntax typed it, or, written as raw
    text, read by the first of its ``frames`` (:func:`read_raw`)."""
    return value.value if isinstance(value, Parsed) else read_raw(value.text, frames[0], tool, key, python_literals)


def read_raw(text: str, frame: Frame, tool: NormalizedTool, key: str, python_literals: bool) -> Any:
    """A raw-text value read by its frame: text for a string parameter; JSON
    (or, where the grammar allows them, ``True``/``False``/``None``) for the
    rest. A parameter that may be a string or something else takes the
    non-string reading only when that reading is valid for it.

    Spaces and line breaks around a value that cannot be a string (``" 5 "``
    for an integer) are not part of it: nothing else could be meant, so the
    value inside them is read. Where the value may be a string, the text
    stays what it is: then it is the string, exactly as written, as it
    always is in a well-formed call."""
    definitions = tool.schema.definitions
    types = json_types(frame, definitions)
    if types == {"string"}:
        return text
    reading = _non_string_reading(text, python_literals, padded="string" not in types)
    if reading is not _NO_READING and frame_accepts(frame, reading[0], definitions):
        return reading[0]
    if "string" in types and frame_accepts(frame, text, definitions):
        return text
    # Said of the value the model meant: the reading, where its type is one
    # the parameter takes (or the only one it may be), else the text.
    meant = text
    if reading is not _NO_READING and ("string" not in types or json_type(reading[0]) in types):
        meant = reading[0]
    raise CallRejected.of(explain(frame, meant, definitions, [key]), f"parameter {key!r} does not fit its schema")


_NO_READING: Any = object()
_JSON_WHITESPACE = " \t\n\r"


def _non_string_reading(text: str, python_literals: bool, padded: bool = False) -> Any:
    """``(value,)`` of ``text`` read as JSON (or a Python literal), else
    ``_NO_READING``. Whitespace around the text reads only when ``padded``
    (the value cannot be a string); the grammar never writes it."""
    if padded:
        text = text.strip(_JSON_WHITESPACE)
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
    """The frame that types top-level key ``key`` when the parameters are
    one object (its first frame when patterns give several, all of which
    the final check applies), or ``None`` when the key may not appear. For
    a union of parameter sets, the frame only when every set that allows
    the key gives it the same one (else the type depends on the other keys:
    see :func:`branch_arguments` and :func:`candidate_branches`)."""
    frames = [
        found[0]
        for frame in getattr(root, "options", (root,))
        if isinstance(frame, ObjectFrame) and (found := member_frames(frame, key))
    ]
    return frames[0] if frames and all(f == frames[0] for f in frames) else None


def candidate_branches(
    tool: NormalizedTool, pairs: Iterable[tuple[str, Raw | Parsed]], python_literals: bool
) -> list[ObjectFrame]:
    """The parameter sets (in schema order) that the pairs read so far
    leave possible: each has every key, and each value reads under it and
    fits all its frames there. The set :func:`branch_arguments` reads a
    complete call by is always among them, so a value every one of them
    reads the same is read so in the end too (for streaming)."""
    pairs = list(pairs)
    possible = []
    for branch in Dialect.argument_objects(tool):
        try:
            for key, value in pairs:
                frames = member_frames(branch, key)
                if not frames:
                    raise CallRejected(key)
                read = read_value(value, frames, tool, key, python_literals)
                if not all(frame_accepts(f, read, tool.schema.definitions) for f in frames):
                    raise CallRejected(key)
        except CallRejected:
            continue
        possible.append(branch)
    return possible


def _required(branch: Frame) -> list[str]:
    """The keys parameter set ``branch`` requires."""
    return list(branch.required) if isinstance(branch, ObjectFrame) else []


def validate(tool: NormalizedTool, arguments: dict[str, Any]) -> None:
    """Validate against the tool's full JSON Schema, including every keyword
    the grammar relaxed."""
    validator = validator_for(tool.parameters)
    try:
        error = jsonschema.exceptions.best_match(validator.iter_errors(arguments))
    except Exception as exc:  # a reference the validator cannot follow, a bad pattern
        raise CallRejected(f"the schema of {tool.name!r} cannot be validated: {exc}") from None
    if error is not None:
        failed = explain_error(error)
        raise CallRejected(failed.message, failed.pointer, failed.keyword)


def _no_parameter(tool: NormalizedTool, key: str) -> CallRejected:
    return CallRejected(f"{tool.name!r} has no parameter {key!r}", json_pointer([key]), "additionalProperties")


def _new_salt() -> str:
    return secrets.token_hex(16)


class CallIds:
    """The call ids of one output: ``call_`` and 24 hex digits, from the
    call's offset and name and a random salt of the output, so ids never
    repeat across outputs (clients match tool results to calls by id over a
    whole conversation), and a call's id is known as soon as its name is
    (a stream sends it then, and its result has the same)."""

    def __init__(self) -> None:
        self.salt = _new_salt()

    def __call__(self, start: int, name: str) -> str:
        digest = hashlib.sha256(f"{self.salt}:{start}:{name}".encode()).hexdigest()[:24]
        return f"call_{digest}"


def _byte_span(text: str, start: int, end: int) -> tuple[int, int]:
    begin = len(text[:start].encode("utf-8"))
    return begin, begin + len(text[start:end].encode("utf-8"))


__all__ = ["ParseResult", "RejectedCall", "Segment", "parse_tool_calls"]

"""Judging instances through the whole pipeline: render, constraint, parser.

The constraint alone can look right while the pipeline is wrong: text the
grammar accepts may be read back as another value (qwen3_coder writes the
string ``"5"`` and the integer ``5`` alike), or refused by the parser. So an
instance (arguments for one tool, and whether a JSON Schema validator calls
them valid) is written as the dialect writes it, checked by the compiled
constraint, parsed back with the tools, and the read-back arguments compared
with the instance, type for type. The result is one :class:`Verdict`.

This is how the corpus conformance report (``bench/conformance.py``) is
made, and how a user can check a compiled tool set against their own valid
and invalid examples::

    compiled = compile_tools(tools, "qwen3_coder", "qwen3", tool_choice="required")
    verdict = judge_call(compiled, "get_weather", {"city": "Paris"}, valid=True)
    assert not verdict.failed, verdict.reason
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any, assert_never

from ..compiler import CompiledTools, compile_tools
from ..dialects import get_dialect
from ..dialects.representable import unrepresentable
from ..errors import ConstrainedError
from ..frames.accepts import member_frames, union_branch
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
from ..frames.normalize import normalize_schema
from ..output.parse import parse_tool_calls
from ..schema.json_values import json_key
from ..schema.keywords import walk_schemas
from ..schema.refs import Specification, schema_id, specification_of
from ..tokenizers import Tokenizer

# The single parameter a non-object schema becomes.
WRAPPED_KEY = "value"


class Outcome(Enum):
    """What became of one instance."""

    ACCEPTED = "accepted"
    """A valid instance: accepted by the constraint, parsed, read back equal."""
    REJECTED = "rejected"
    """An invalid instance the constraint rejects."""
    REJECTED_BY_VALIDATION = "rejected by validation"
    """An invalid instance the constraint of a relaxed tool accepts (it
    enforces a superset) and the parser's validation rejects."""
    READS_AS_ANOTHER_VALUE = "reads as another value"
    """The text is read back as a different value that renders to the same
    text: the dialect cannot tell the two apart, so the instance is not
    representable in it (neither a pass nor a failure)."""
    UNREPRESENTABLE = "unrepresentable"
    """A valid instance the dialect's syntax cannot write at all, or any
    instance whose text the tokenizer cannot encode as it is."""
    KNOWN_LIMIT = "known limit"
    """A valid instance rejected for a documented limit of the grammar, and
    accepted once written around it."""
    NOT_AN_OBJECT = "not an object"
    """Tool arguments are always an object; this instance is not one."""
    REFUSED = "refused"
    """The compiler refuses the tool (unsatisfiable, malformed, not an object schema)."""
    VALID_REJECTED = "valid rejected"
    """A valid, representable instance the constraint or the parser rejects."""
    INVALID_ACCEPTED = "invalid accepted"
    """An invalid instance the pipeline lets through: the constraint accepts
    it although the tool compiled without relaxation, or a relaxed tool's
    constraint and validation both accept it."""
    READ_BACK_DIFFERS = "read back differs"
    """The parser reads the text as a value that does not render to it: the
    renderer and the parser disagree."""


PASSES = frozenset({Outcome.ACCEPTED, Outcome.REJECTED, Outcome.REJECTED_BY_VALIDATION})
FAILURES = frozenset({Outcome.VALID_REJECTED, Outcome.INVALID_ACCEPTED, Outcome.READ_BACK_DIFFERS})


@dataclass(frozen=True)
class Verdict:
    """The judgement of one instance in one dialect.

    ``relaxed``: the keywords of the tool's relaxation warnings; with none
    (:attr:`exact`) the constraint alone must reject every invalid
    instance. ``text`` is what was checked (empty when nothing was
    rendered). ``failed`` covers a valid instance of a refused tool too: the
    compiler refused a schema some value satisfies.
    """

    outcome: Outcome
    valid: bool
    relaxed: tuple[str, ...]
    reason: str
    text: str = ""

    @property
    def exact(self) -> bool:
        return not self.relaxed

    @property
    def passed(self) -> bool:
        return self.outcome in PASSES

    @property
    def failed(self) -> bool:
        return self.outcome in FAILURES or (self.outcome is Outcome.REFUSED and self.valid)


@dataclass(frozen=True)
class Call:
    """One instance: the arguments of a call of tool ``name``, and whether
    they are valid for its schema."""

    name: str
    arguments: Any
    valid: bool


def same_value(left: Any, right: Any) -> bool:
    """JSON equality that also compares types: ``1``, ``1.0`` and ``True``
    are three different values here (Python's ``==`` and JSON Schema's
    equality both merge some of them, which would hide a read-back that
    changed a type)."""
    if type(left) is not type(right):
        return False
    if isinstance(left, dict):
        return left.keys() == right.keys() and all(same_value(left[key], right[key]) for key in left)
    if isinstance(left, list):
        return len(left) == len(right) and all(same_value(a, b) for a, b in zip(left, right))
    return bool(left == right)


def judge_call(compiled: CompiledTools, name: str, arguments: Any, valid: bool) -> Verdict:
    """Render a call of ``name`` with ``arguments`` in the compiled tools'
    dialect, check it with the constraint, parse it back, compare. ``valid``
    is the instance's verdict by JSON Schema."""
    relaxed = tuple(sorted({w.warning.keyword for w in compiled.warnings if w.tool == name}))
    exact = not relaxed
    if not isinstance(arguments, dict):
        return Verdict(Outcome.NOT_AN_OBJECT, valid, relaxed, "tool arguments are always an object")
    left_out = compiled.tool_set.left_out_by_name().get(name)
    if left_out is not None:
        kind = type(left_out.error).__name__ if left_out.error is not None else "left out"
        return Verdict(Outcome.REFUSED, valid, relaxed, f"{kind}: {left_out}")
    (tool,) = [tool for tool in compiled.tools if tool.name == name]
    dialect = get_dialect(compiled.dialect)
    if valid:
        reason = unrepresentable(compiled.dialect, tool, arguments, compiled.tokenizer)
        if reason is not None:
            return Verdict(Outcome.UNREPRESENTABLE, valid, relaxed, reason)
    text = dialect.markup.calls_text([dialect.render_call(tool, arguments, compiled.key_order)])
    unwritable = _unencodable(text, compiled.tokenizer)
    if unwritable is not None:
        return Verdict(Outcome.UNREPRESENTABLE, valid, relaxed, unwritable, text)
    check = compiled.check(text)
    if not check.accepted:
        if valid:
            return _valid_rejected(compiled, name, arguments, relaxed, text, check.byte_offset or 0)
        return Verdict(Outcome.REJECTED, valid, relaxed, "the constraint rejects it", text)
    parsed = parse_tool_calls(text, compiled, compiled.dialect)
    if parsed.errors or len(parsed.tool_calls) != 1:
        why = "; ".join(error.reason for error in parsed.errors) or f"{len(parsed.tool_calls)} calls read"
        if valid:
            return Verdict(Outcome.VALID_REJECTED, valid, relaxed, f"the parser rejects it: {why}", text)
        if exact:
            reason = f"the constraint accepts it (the parser does not: {why})"
            return Verdict(Outcome.INVALID_ACCEPTED, valid, relaxed, reason, text)
        return Verdict(Outcome.REJECTED_BY_VALIDATION, valid, relaxed, why, text)
    back = json.loads(parsed.tool_calls[0]["function"]["arguments"])
    if not same_value(back, arguments):
        shown = json.dumps(back, ensure_ascii=False)[:200]
        if dialect.markup.calls_text([dialect.render_call(tool, back, compiled.key_order)]) == text:
            return Verdict(Outcome.READS_AS_ANOTHER_VALUE, valid, relaxed, f"the text reads as {shown}", text)
        return Verdict(Outcome.READ_BACK_DIFFERS, valid, relaxed, f"read back as {shown}", text)
    if valid:
        return Verdict(Outcome.ACCEPTED, valid, relaxed, "accepted and read back equal", text)
    if exact:
        return Verdict(Outcome.INVALID_ACCEPTED, valid, relaxed, "the constraint and the parser accept it", text)
    return Verdict(Outcome.INVALID_ACCEPTED, valid, relaxed, "the relaxed constraint and the validation accept it", text)


def _unencodable(text: str, tokenizer: Tokenizer) -> str | None:
    """Why no token sequence is exactly ``text``, or ``None``: a lone
    surrogate (no UTF-8 for it), or a tokenizer that normalizes what it
    encodes (Qwen's: NFC), so that ``check`` would judge other text."""
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError:
        return "the text holds a lone surrogate, which UTF-8 cannot encode"
    if b"".join(map(tokenizer.token_bytes, tokenizer.encode(text))) != data:
        return "the tokenizer encodes the text as other text (Unicode normalization)"
    return None


def _valid_rejected(
    compiled: CompiledTools, name: str, arguments: dict[str, Any], relaxed: tuple[str, ...], text: str, offset: int
) -> Verdict:
    """A valid instance the constraint rejects: a known limit when it is
    accepted once written as the grammar writes such values (integers
    without a fraction, object consts and enum members in their given key
    order); else a failure, with the text around the rejected byte."""
    (tool,) = [tool for tool in compiled.tools if tool.name == name]
    written = _as_written(arguments, tool.root, tool.schema)
    spelled_otherwise = json.dumps(written) != json.dumps(arguments)  # key order counts here
    if spelled_otherwise and judge_call(compiled, name, written, True).outcome is Outcome.ACCEPTED:
        reason = "accepted as the grammar writes it: integers without a fraction, consts and enum members as given"
        return Verdict(Outcome.KNOWN_LIMIT, True, relaxed, reason, text)
    data = text.encode("utf-8")
    before, after = data[max(0, offset - 40) : offset], data[offset : offset + 30]
    context = before.decode("utf-8", "replace") + "⟨here⟩" + after.decode("utf-8", "replace")
    return Verdict(Outcome.VALID_REJECTED, True, relaxed, f"the constraint rejects it at byte {offset}: {context!r}", text)


def _as_written(value: Any, frame: Frame, schema: NormalizedSchema) -> Any:
    """``value`` as the grammar writes it where a frame fixes the spelling:
    an integral float of an integer frame as an integer, a const or enum
    value as the member it equals (its key order, its number spelling)."""
    frame = schema.resolve(frame)
    match frame:
        case UnionFrame():
            chosen = union_branch(frame, value, schema.definitions)
            return value if chosen is None else _as_written(value, chosen, schema)
        case EnumFrame():
            return next((member for member in frame.values if json_key(member) == json_key(value)), value)
        case IntegerFrame() if isinstance(value, float) and value.is_integer():
            return int(value)
        case ObjectFrame() if isinstance(value, dict):
            return {k: _as_written(v, (member_frames(frame, k) or [FreeFrame()])[0], schema) for k, v in value.items()}
        case ArrayFrame() if isinstance(value, list):
            prefix = frame.prefix_items
            items = [prefix[i] if i < len(prefix) else frame.items or FreeFrame() for i in range(len(value))]
            return [_as_written(item, item_frame, schema) for item, item_frame in zip(value, items)]
        case (IntegerFrame() | ObjectFrame() | ArrayFrame() | StringFrame() | NumberFrame() | BooleanFrame()
              | NullFrame() | RefFrame() | FreeFrame()):
            return value  # the spelling is the value's own
        case _:
            assert_never(frame)


def judge_calls(
    tools: Any,
    calls: Iterable[Call],
    dialect: str,
    tokenizer: Tokenizer | str | None = None,
    *,
    strict: bool = True,
) -> list[Verdict]:
    """Compile ``tools`` (any form :func:`compile_tools` reads; with
    ``tool_choice="required"``) and judge each call. ``tokenizer`` defaults
    to the dialect's built-in one. When the compiler refuses the tools,
    every call is :attr:`Outcome.REFUSED` with the compiler's reason, and
    so is each call of a tool it left out of the set."""
    calls = list(calls)
    chosen = tokenizer if tokenizer is not None else get_dialect(dialect).default_tokenizer
    try:
        compiled = compile_tools(tools, dialect, chosen, tool_choice="required", strict=strict)
    except ConstrainedError as exc:
        reason = f"{type(exc).__name__}: {exc}"
        return [Verdict(Outcome.REFUSED, call.valid, (), reason) for call in calls]
    return [judge_call(compiled, call.name, call.arguments, call.valid) for call in calls]


@dataclass(frozen=True)
class SchemaTool:
    """A JSON Schema made the parameters of one tool, to test the pipeline
    with instances of the schema. An object schema is the parameters as it
    is; any other schema is wrapped as the single required parameter
    ``value``, and :meth:`arguments` wraps its instances alike."""

    definition: dict[str, Any]
    wrapped: bool

    @property
    def name(self) -> str:
        return str(self.definition["name"])

    def arguments(self, instance: Any) -> Any:
        return {WRAPPED_KEY: instance} if self.wrapped else instance

    def call(self, instance: Any, valid: bool) -> Call:
        return Call(self.name, self.arguments(instance), valid)


def schema_tool(schema: Any, name: str = "f") -> SchemaTool:
    """``schema`` as the parameters of a tool called ``name``.

    An object schema (or a union of them) is used as it is (its non-object
    instances cannot be arguments: :attr:`Outcome.NOT_AN_OBJECT`). Any
    other schema, an enum of objects included, is wrapped; its ``#`` and
    ``#/...`` references are rewritten to point into the wrapped copy (those
    inside embedded ``$id`` resources stay, as they resolve against their
    own resource), and the wrapper keeps its ``$schema``. Rewriting keeps
    the schema one resource, which both the normalizer and ``jsonschema``
    resolve alike (``$dynamicRef`` included; a wrapped copy given its own
    ``$id`` broke ``jsonschema`` there).
    """
    if _only_objects(schema):
        return SchemaTool({"name": name, "parameters": schema}, wrapped=False)
    wrapper: dict[str, Any] = {}
    if isinstance(schema, dict) and "$schema" in schema:
        wrapper["$schema"] = schema["$schema"]
    inner = _pointing_into(schema, f"#/properties/{WRAPPED_KEY}", specification_of(schema))
    wrapper.update(
        {"type": "object", "properties": {WRAPPED_KEY: inner}, "required": [WRAPPED_KEY], "additionalProperties": False}
    )
    return SchemaTool({"name": name, "parameters": wrapper}, wrapped=True)


_REFERENCE_KEYWORDS = ("$ref", "$dynamicRef")


def _pointing_into(schema: Any, base: str, specification: Specification[Any]) -> Any:
    """A copy of ``schema`` with every local JSON Pointer reference (``#``,
    ``#/...``) of the root resource prefixed by ``base``. Only schemas are
    read (:func:`~constrained.schema.keywords.walk_schemas`, with what a
    ``$ref`` may point at): a property *named* ``$ref`` or ``id`` is a
    name, and ``enum``/``const``/``default``/``examples`` values are data.
    An embedded resource (a schema with its own ``$id``, by the draft's
    rules) is left as it is, since its references resolve against its own
    URI."""
    try:
        copied = _copy(schema)
    except RecursionError:
        return schema  # deeper than any tool may nest: the compiler refuses it
    if not isinstance(copied, dict):
        return copied
    embedded = functools.partial(schema_id, specification)
    for node in walk_schemas(copied, possible=True, stop_at=lambda node: embedded(node) is not None):
        for key in _REFERENCE_KEYWORDS:
            value = node.get(key)
            if isinstance(value, str) and (value == "#" or value.startswith("#/")):
                node[key] = base + value[1:]
    return copied


def _copy(value: Any) -> Any:
    """A deep copy of the JSON ``value`` that shares no object: an object
    used at two places is rewritten for each (``copy.deepcopy`` would keep
    one)."""
    if isinstance(value, dict):
        return {key: _copy(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_copy(item) for item in value]
    return value


def _only_objects(schema: Any) -> bool:
    """Whether ``schema`` can be tool parameters as it is: it admits objects
    only, as an object schema or a union of them (an enum of objects cannot:
    :func:`~constrained.frames.toolset.normalize_tool` refuses it)."""
    try:
        normalized = normalize_schema(schema, strict=False)
    except ConstrainedError:
        return isinstance(schema, dict) and schema.get("type") == "object"
    root = normalized.resolve(normalized.root)
    options = root.options if isinstance(root, UnionFrame) else (root,)
    return all(isinstance(normalized.resolve(option), ObjectFrame) for option in options)


def judge_schema(
    schema: Any,
    instances: Sequence[tuple[Any, bool]],
    dialect: str,
    tokenizer: Tokenizer | str | None = None,
    *,
    strict: bool = False,
) -> list[Verdict]:
    """Judge JSON Schema test instances (``(data, valid)`` pairs, as the
    JSON-Schema-Test-Suite writes them) through the pipeline, ``schema``
    made a tool by :func:`schema_tool`. ``strict=False`` by default: JSON
    Schema's own reading, where objects without ``additionalProperties``
    stay open."""
    tool = schema_tool(schema)
    calls = [tool.call(data, valid) for data, valid in instances]
    return judge_calls([tool.definition], calls, dialect, tokenizer, strict=strict)


__all__ = [
    "Call",
    "Outcome",
    "SchemaTool",
    "Verdict",
    "judge_call",
    "judge_calls",
    "judge_schema",
    "same_value",
    "schema_tool",
]

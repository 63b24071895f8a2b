"""The dialect grammars against the corpus: calls the corpus says are
right are accepted exactly as a model writes them and parse back to the same
calls, and calls made wrong on purpose are rejected.

- BFCL v3 ground truth, rendered for the entry's functions (the first
  acceptable value of each parameter; none when the first is ``""``). Ground
  truth that is not a valid call of the entry's tools is a fact of the
  corpus, listed and counted, not a failure.
- MaskBench valid instances of object schemas, as the arguments of one tool
  ``f``. Compiled with ``strict=False``: the instances follow JSON Schema
  literally, so objects without ``additionalProperties`` stay open (the
  strict default is exercised by BFCL). Instances a dialect cannot write
  (key or text its syntax cannot hold) are classified with their reason and
  counted.
- Mutations of valid calls of corpus tools (a required key removed, an
  undeclared key added, a key repeated, a string for an integer, a number
  out of its bounds, a value outside its enum, a malformed value).

Runtime (about two minutes on two cores): every dialect runs every BFCL
entry; qwen3_coder and gemma4 run every MaskBench schema, hermes, glm45, glm47
and functiongemma every third (a fixed stride).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Any

import jsonschema
import pytest
from corpus import bfcl_entries, bfcl_facts, bfcl_functions, maskbench_groups, mcp_tools
from sample_tools import NEXT_MESSAGE, RAW_DIALECTS, reads_cut_off_call, turn

from constrained.compiler import CompiledTools, compile_tools
from constrained.dialects import DIALECTS, get_dialect
from constrained.dialects.deepseek import DeepSeekV31
from constrained.dialects.dsml import DeepSeekV32
from constrained.dialects.gemma import Gemma4, render_value
from constrained.dialects.raw_values import raw_text
from constrained.dialects.representable import unrepresentable
from constrained.errors import ConstrainedError
from constrained.frames.accepts import frame_accepts
from constrained.frames.model import (
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
    StringFrame,
    UnionFrame,
)
from constrained.frames.toolset import NormalizedTool, normalize_tool, normalize_tools
from constrained.output.parse import parse_tool_calls
from constrained.tokenizers import load_tokenizer
from constrained.tools import load_tools

TOKENIZERS = {name: dialect.default_tokenizer for name, dialect in DIALECTS.items()}

JSON_ARGUMENTS = ("hermes", "deepseek_v31", "deepseek_r1", "kimi_k2", "gpt_oss")
"""The dialects that write a call's arguments as one JSON object."""


def turns(dialect: str, texts: list[str]) -> list[str]:
    """What the grammar accepts of a turn's calls: the turn, or each call
    alone where a call's closing ends the turn."""
    return [turn(dialect, [text]) for text in texts] if dialect in NEXT_MESSAGE else [turn(dialect, texts)]


def call_ends(dialect: str, text: str, texts: list[str]) -> list[int]:
    """Where each of the calls ``texts`` ends in the turn ``text``: after
    its text, or after its closing where a call's closing ends the turn
    (the last call has none)."""
    close = DIALECTS[dialect].markup.close if dialect in NEXT_MESSAGE else ""
    ends: list[int] = []
    for call in texts:
        ends.append(text.index(call, ends[-1] if ends else 0) + len(call) + len(close))
    if close:
        ends[-1] = len(text) + 1
    return ends

FULL = {"qwen3_coder", "gemma4"}
STRIDE = 3


def sampled(items: list[Any], dialect: str) -> list[Any]:
    return items if dialect in FULL else items[::STRIDE]


# -- BFCL ground truth -----------------------------------------------------

# Ground truth that is no valid call of the entry's tools, by entry id.
BFCL_UNKNOWN_FUNCTION = {"simple_363"}  # calls find_closest; the tool is restaurant_search.find_closest
BFCL_INVALID = {
    "parallel_multiple_21",  # y: "data['future_sales']" where the schema says array
    "parallel_multiple_94",  # 'elderberry' in an array of integers
    "simple_200",  # required fuel_efficiency has only "" (omitted) as acceptable value
}
BFCL_CLOSED_BY_STRICT = {"parallel_multiple_26"}  # key "type" is not declared by bank.calculate_balance


def test_bfcl_corpus_facts():
    facts = bfcl_facts()
    listing = "\n".join(f"{id}: {kind}: {detail}" for id, (kind, detail) in sorted(facts.items()))
    by_kind = {kind: {id for id, (k, _) in facts.items() if k == kind} for kind in {k for k, _ in facts.values()}}
    assert by_kind == {
        "unknown function": BFCL_UNKNOWN_FUNCTION,
        "invalid per schema": BFCL_INVALID,
        "closed by strict": BFCL_CLOSED_BY_STRICT,
    }, listing
    assert len(bfcl_entries()) == 1000


@pytest.mark.slow
@pytest.mark.parametrize("dialect", list(TOKENIZERS))
def test_bfcl_ground_truth_accepted(dialect):
    chosen_dialect = get_dialect(dialect)
    tokenizer = load_tokenizer(TOKENIZERS[dialect])
    facts = bfcl_facts()
    entries = [entry for entry in bfcl_entries() if entry.id not in facts]
    rejected = []
    not_round_trip = []
    for entry in entries:
        compiled = compile_tools(entry.functions, dialect, tokenizer)
        tools = {tool.name: tool for tool in compiled.tools}
        texts = [chosen_dialect.render_call(tools[name], arguments, "trained") for name, arguments in entry.calls]
        for accepted_text in turns(dialect, texts):
            result = compiled.check(accepted_text)
            if not result.accepted:
                offset = result.byte_offset or 0
                window = accepted_text.encode()[max(0, offset - 60) : offset + 40]
                rejected.append(f"{entry.id} at byte {offset}: {window!r}")
        text = turn(dialect, texts)
        parsed = parse_tool_calls(text, compiled.tools, dialect)
        calls = [(c["function"]["name"], json.loads(c["function"]["arguments"])) for c in parsed.tool_calls]
        if calls != [(name, json.loads(json.dumps(arguments))) for name, arguments in entry.calls]:
            not_round_trip.append(f"{entry.id}: {parsed.errors or calls}")
    assert rejected == [], "\n".join(rejected)
    assert not_round_trip == [], "\n".join(not_round_trip)
    assert len(entries) == 995


@pytest.mark.slow
@pytest.mark.parametrize("dialect", list(TOKENIZERS))
def test_bfcl_prefixes_parse_without_completing_a_cut_call(dialect):
    """Every prefix of every rendered ground-truth turn (cut at each
    character; qwen3_coder and gemma4 over all entries, the others over the
    sample) parses without raising, and holds exactly the calls whose closing
    marker it contains (and, in hermes, a last call cut off after its whole
    JSON object)."""
    chosen_dialect = get_dialect(dialect)
    facts = bfcl_facts()
    cuts = 0
    for entry in sampled([e for e in bfcl_entries() if e.id not in facts], dialect):
        tools = normalize_tools(entry.functions)
        by_name = {tool.name: tool for tool in tools}
        texts = [chosen_dialect.render_call(by_name[name], arguments, "trained") for name, arguments in entry.calls]
        text = turn(dialect, texts)
        ends = call_ends(dialect, text, texts)
        for cut in range(len(text) + 1):
            result = parse_tool_calls(text[:cut], tools, dialect)
            finished = sum(end <= cut for end in ends) + reads_cut_off_call(dialect, text[:cut])
            assert len(result.tool_calls) == finished, (entry.id, cut)
            cuts += 1
    assert cuts > 10_000


# -- MaskBench ---------------------------------------------------------------

# What each dialect's sample holds, measured. "normalization raises": the
# parameters resolve to an enum or const of objects, which normalize_tool
# refuses. "unrepresentable": undeclared keys that are no bare Gemma key
# ("/home", "/Applications/MyApp.app", "7", "1").
FULL_COUNTS = {"no valid object instance": 512, "normalization raises ToolDefinitionError": 111}
SAMPLE_COUNTS = {"no valid object instance": 179, "normalization raises ToolDefinitionError": 32}
MASKBENCH_COUNTS = {
    # MCPspec JSONRPCError: id "12345" in anyOf[string, integer] is written
    # 12345 in raw text and read back as the integer (the parser's union rule).
    "qwen3_coder": {"accepted": 2833, "raw text reads as a non-string": 1, **FULL_COUNTS},
    "hermes": {"accepted": 941, **SAMPLE_COUNTS},
    "glm45": {"accepted": 941, "raw text reads as a non-string": 1, **SAMPLE_COUNTS},
    "glm47": {"accepted": 941, "raw text reads as a non-string": 1, **SAMPLE_COUNTS},
    "gemma4": {"accepted": 2827, "unrepresentable": 6, **FULL_COUNTS},
    "functiongemma": {"accepted": 939, "unrepresentable": 2, **SAMPLE_COUNTS},
    # DSML's string attribute tells "12345" from 12345: nothing is ambiguous.
    "deepseek_v32": {"accepted": 941, **SAMPLE_COUNTS},
    "deepseek_v4": {"accepted": 941, **SAMPLE_COUNTS},
    "deepseek_v41": {"accepted": 941, **SAMPLE_COUNTS},
    "deepseek_v31": {"accepted": 941, **SAMPLE_COUNTS},
    "deepseek_r1": {"accepted": 941, **SAMPLE_COUNTS},
    "kimi_k2": {"accepted": 941, **SAMPLE_COUNTS},
    "gpt_oss": {"accepted": 941, **SAMPLE_COUNTS},
    "minimax_m2": {"accepted": 941, "raw text reads as a non-string": 1, **SAMPLE_COUNTS},
}


@pytest.mark.slow
@pytest.mark.parametrize("dialect", list(TOKENIZERS))
def test_maskbench_valid_instances_accepted(dialect):
    chosen_dialect = get_dialect(dialect)
    tokenizer = load_tokenizer(TOKENIZERS[dialect])
    counts: Counter[str] = Counter()
    reasons = []
    rejected = []
    not_round_trip = []
    for case in sampled(list(maskbench_groups()), dialect):
        name = case.source
        instances = [test.data for test in case.tests if test.valid and isinstance(test.data, dict)]
        if not instances:
            counts["no valid object instance"] += 1
            continue
        try:
            tools = load_tools([{"name": "f", "parameters": case.schema}], format="function")
        except ConstrainedError:
            counts["not an object schema"] += 1
            continue
        try:
            compiled = compile_tools(tools, dialect, tokenizer, strict=False)
        except ConstrainedError as error:
            counts[f"normalization raises {type(error).__name__}"] += 1
            continue
        (tool,) = compiled.tools
        for data in instances:
            reason = unrepresentable(dialect, tool, data, tokenizer)
            text = turn(dialect, [chosen_dialect.render_call(tool, data, "trained")])
            result = compiled.check(text)
            if reason is not None:
                # The grammar must refuse what the dialect cannot write.
                counts["unrepresentable" if not result.accepted else "unrepresentable yet accepted"] += 1
                reasons.append(f"{name}: {reason}")
                continue
            counts["accepted" if result.accepted else "rejected"] += 1
            parsed = parse_tool_calls(text, compiled.tools, dialect)
            back = [json.loads(c["function"]["arguments"]) for c in parsed.tool_calls]
            if back != [data]:
                if len(back) == 1 and raw_text_ambiguity(dialect, data, back[0]):
                    counts["raw text reads as a non-string"] += 1
                else:
                    not_round_trip.append(f"{name}: {parsed.errors or back}")
            if not result.accepted:
                offset = result.byte_offset or 0
                rejected.append(f"{name} at byte {offset}: {text.encode()[max(0, offset - 60):offset + 40]!r}")
    assert rejected == [], "\n".join(rejected)
    assert not_round_trip == [], "\n".join(not_round_trip)
    assert counts == MASKBENCH_COUNTS[dialect], "\n".join(reasons)


def raw_text_ambiguity(dialect: str, sent: dict[str, Any], back: dict[str, Any]) -> bool:
    """In the raw-text dialects the string "12345" and the number 12345 are
    written alike; for a parameter that may be either, the parser documents
    that it takes the non-string reading when that is valid. True when that
    rule explains every difference between what was written and read."""
    if dialect not in RAW_DIALECTS or sent.keys() != back.keys():
        return False
    return all(
        sent[key] == back[key] or (isinstance(sent[key], str) and json.loads(sent[key]) == back[key])
        for key in sent
    )


# -- mutations ----------------------------------------------------------------


def value_text(dialect: str, value: Any) -> str:
    """A top-level argument value as ``dialect`` writes it."""
    chosen_dialect = get_dialect(dialect)
    if isinstance(chosen_dialect, Gemma4):
        return render_value(value, chosen_dialect.string_delimiter)
    if dialect in JSON_ARGUMENTS:
        return json.dumps(value, ensure_ascii=False)
    if isinstance(chosen_dialect, DeepSeekV32):  # the string attribute's value, then the value
        return f'{"true" if isinstance(value, str) else "false"}">{raw_text(value)}'
    return raw_text(value)


def call_text(dialect: str, name: str, members: list[tuple[str, str]]) -> str:
    """One call from its (key, value text) members, as ``dialect`` writes it."""
    if dialect == "qwen3_coder":
        body = "".join(f"<parameter={key}>\n{value}\n</parameter>\n" for key, value in members)
        return f"<tool_call>\n<function={name}>\n{body}</function>\n</tool_call>"
    if dialect in JSON_ARGUMENTS:
        body = "{" + ", ".join(f"{json.dumps(key, ensure_ascii=False)}: {value}" for key, value in members) + "}"
        chosen = get_dialect(dialect)
        if isinstance(chosen, DeepSeekV31):
            return f"{chosen.markup.open}{chosen.head.format(name=name)}{body}{chosen.tail}{chosen.markup.close}"
        return {
            "hermes": f'<tool_call>\n{{"name": {json.dumps(name)}, "arguments": {body}}}\n</tool_call>',
            "kimi_k2": f"<|tool_call_begin|>functions.{name}:0<|tool_call_argument_begin|>{body}<|tool_call_end|>",
            "gpt_oss": f"<|channel|>commentary to=functions.{name} <|constrain|>json<|message|>{body}",
        }[dialect]
    if dialect in ("glm45", "glm47"):
        nl = "\n" if dialect == "glm45" else ""
        body = "".join(f"<arg_key>{key}</arg_key>{nl}<arg_value>{value}</arg_value>{nl}" for key, value in members)
        return f"<tool_call>{name}{nl}{body}</tool_call>"
    if dialect == "minimax_m2":
        body = "".join(f'<parameter name="{key}">{value}</parameter>\n' for key, value in members)
        return f'<invoke name="{name}">\n{body}</invoke>'
    dsml = get_dialect(dialect)
    if isinstance(dsml, DeepSeekV32):
        tags = dsml.tags
        body = "".join(f'{tags.parameter_open(key)}{value}{tags.parameter_close}\n' for key, value in members)
        return f'{dsml.markup.open}{name}">\n{body or chr(10)}{dsml.markup.close}'
    gemma = get_dialect(dialect)
    assert isinstance(gemma, Gemma4)
    body = ",".join(f"{key}:{value}" for key, value in members)
    return f"{gemma.markup.open}call:{name}{{{body}}}{gemma.markup.close}"


def example(frame: Frame, schema: NormalizedSchema) -> Any:
    """A simple value of ``frame`` (``None`` where none is obvious; the
    caller validates the result)."""
    frame = schema.resolve(frame)
    if isinstance(frame, StringFrame):
        return "x" * max(frame.min_length, 1)
    if isinstance(frame, (IntegerFrame, NumberFrame)):
        return frame.minimum if frame.minimum is not None else 1
    if isinstance(frame, BooleanFrame):
        return True
    if isinstance(frame, (NullFrame, FreeFrame)):
        return None
    if isinstance(frame, EnumFrame):
        return frame.values[0]
    if isinstance(frame, UnionFrame):
        return example(frame.options[0], schema)
    if isinstance(frame, ArrayFrame):
        item = frame.items or (frame.prefix_items[0] if frame.prefix_items else FreeFrame())
        return [example(item, schema)] * max(frame.min_items, 1)
    assert isinstance(frame, ObjectFrame)
    return {key: example(value, schema) for key, value in frame.properties if key in frame.required}


Mutation = Callable[[str, list[tuple[str, str]]], list[tuple[str, str]]]


@dataclass(frozen=True)
class MutationCase:
    tool: NormalizedTool
    arguments: dict[str, Any]
    name: str
    mutate: Mutation


def replaced(key: str, value: Callable[[str, str], str]) -> Mutation:
    """A mutation replacing ``key``'s value text by ``value(dialect, text)``."""
    return lambda dialect, members: [(k, value(dialect, v) if k == key else v) for k, v in members]


def set_to(key: str, value: Any) -> Mutation:
    """A mutation giving ``key`` the value ``value``, written as the dialect writes it."""
    return replaced(key, lambda dialect, _: value_text(dialect, value))


def removed(key: str) -> Mutation:
    return lambda dialect, members: [(k, v) for k, v in members if k != key]


def frames_of(tool: NormalizedTool) -> list[tuple[str, Frame]]:
    root = tool.schema.resolve(tool.root)
    assert isinstance(root, ObjectFrame)
    return [(key, tool.schema.resolve(frame)) for key, frame in root.properties]


def mutation_cases() -> list[MutationCase]:
    """Valid arguments of corpus tools, each with one mutation that makes them
    invalid in every dialect (several tools per kind, chosen in corpus order)."""
    candidates = []
    loaded = [tool for function in bfcl_functions()[:400] for tool in load_tools([function])] + mcp_tools()
    for definition in loaded:
        normalized = normalize_tool(definition)
        root = normalized.schema.resolve(normalized.root)
        if not isinstance(root, ObjectFrame):
            continue
        arguments = example(root, normalized.schema)
        for key, frame in frames_of(normalized):
            if isinstance(frame, (IntegerFrame, NumberFrame, EnumFrame, ArrayFrame)) and key not in arguments:
                arguments[key] = example(frame, normalized.schema)
        valid = jsonschema.Draft202012Validator(normalized.parameters).is_valid(arguments)
        if valid and frame_accepts(root, arguments, normalized.schema.definitions):  # formats too
            candidates.append((normalized, arguments))

    cases: list[MutationCase] = []
    seen: Counter[str] = Counter()

    def add(kind: str, tool: NormalizedTool, arguments: dict[str, Any], mutate: Mutation) -> None:
        if seen[kind] < 3 and all(c.tool.name != tool.name or c.name != kind for c in cases):
            seen[kind] += 1
            cases.append(MutationCase(tool, arguments, kind, mutate))

    for tool, arguments in candidates:
        frames = frames_of(tool)
        root = tool.schema.resolve(tool.root)
        assert isinstance(root, ObjectFrame)
        if root.required:
            add("required key removed", tool, arguments, removed(root.required[-1]))
        if root.additional is None and arguments:
            add("undeclared key added", tool, arguments, lambda d, m: m + [("zz_undeclared", value_text(d, "x"))])
            add("key repeated", tool, arguments, lambda d, m: m + [m[-1]])
        for key, frame in frames:
            if isinstance(frame, IntegerFrame):
                add("string for an integer", tool, arguments, set_to(key, "five"))
                add("bare word for a number", tool, arguments, replaced(key, lambda d, v: "five"))
            if isinstance(frame, (IntegerFrame, NumberFrame)) and frame.maximum is not None and frame.maximum < 10**9:
                add("above maximum", tool, arguments, set_to(key, frame.maximum + 1))
            if isinstance(frame, (IntegerFrame, NumberFrame)) and frame.minimum is not None:
                add("below minimum", tool, arguments, set_to(key, frame.minimum - 1))
            if isinstance(frame, EnumFrame) and all(isinstance(v, str) for v in frame.values):
                add("value outside the enum", tool, arguments, set_to(key, "zz-not-listed"))
            if isinstance(frame, ArrayFrame):
                add("unbalanced array", tool, arguments, replaced(key, lambda d, v: v[:-1]))
            if isinstance(frame, StringFrame) and key in arguments:
                add("unterminated string", tool, arguments, replaced(key, unterminated))
    return cases


def unterminated(dialect: str, text: str) -> str:
    """A string value without its closing delimiter (unchanged in the XML
    dialects, whose raw strings have none: the case does not apply there)."""
    if dialect in JSON_ARGUMENTS:
        return text[:-1]
    chosen_dialect = get_dialect(dialect)
    if isinstance(chosen_dialect, Gemma4):
        return text[: -len(chosen_dialect.string_delimiter)]
    return text


@cache
def all_mutation_cases() -> tuple[MutationCase, ...]:
    return tuple(mutation_cases())


def test_mutation_cases_cover_every_kind():
    kinds = Counter(case.name for case in all_mutation_cases())
    assert kinds == {
        "required key removed": 3,
        "undeclared key added": 3,
        "key repeated": 3,
        "string for an integer": 3,
        "bare word for a number": 3,
        "above maximum": 3,
        "below minimum": 3,
        "value outside the enum": 3,
        "unbalanced array": 3,
        "unterminated string": 3,
    }, kinds


@pytest.mark.parametrize("dialect", list(TOKENIZERS))
def test_mutations_rejected(dialect):
    chosen_dialect = get_dialect(dialect)
    tokenizer = load_tokenizer(TOKENIZERS[dialect])
    accepted = []
    checked = 0
    for case in all_mutation_cases():
        compiled: CompiledTools = compile_tools([case.tool], dialect, tokenizer)
        (tool,) = compiled.tools
        ordered = chosen_dialect.arranged(tool, case.arguments, "trained")
        members = [(key, value_text(dialect, value)) for key, value in ordered.items()]
        original = call_text(dialect, tool.name, members)
        # The members rebuild the renderer's text, which the grammar accepts;
        # so a rejection below is the mutation's doing.
        assert original == chosen_dialect.render_call(tool, case.arguments, "trained")
        assert compiled.check(turn(dialect, [original])).accepted, original
        mutated = call_text(dialect, tool.name, case.mutate(dialect, members))
        if mutated == original:
            continue
        checked += 1
        if compiled.check(turn(dialect, [mutated])).accepted:
            accepted.append(f"{case.name} ({tool.name}): {mutated!r}")
    assert accepted == [], "\n".join(accepted)
    delimited = dialect in JSON_ARGUMENTS or isinstance(chosen_dialect, Gemma4)
    assert checked == sum(delimited or case.name != "unterminated string" for case in all_mutation_cases())


UNREPRESENTABLE_CASES = [
    ("qwen3_coder", {"x": {"type": "string"}}, {"x": "a\n</parameter>\nb"}, "line </parameter>"),
    ("qwen3_coder", {"x": {"type": "string", "maxLength": 20}}, {"x": "</parameter>"}, "line </parameter>"),
    ("qwen3_coder", {"x": {"type": "integer"}}, {"x": 1, "a>b": 1}, "key syntax"),
    ("glm45", {"x": {"type": "string"}}, {"x": "a</arg_value>b"}, "</arg_value>"),
    ("glm47", {"x": {"type": "string", "pattern": "^a"}}, {"x": "a</arg_value>"}, "</arg_value>"),
    ("hermes", {"x": {"type": "object"}}, {"x": {}, 'a"b': 1}, "key syntax"),
    ("hermes", {"x": {"type": "string"}}, {"x": "see <tool_call>"}, "special token"),
    ("gemma4", {"x": {"type": "object"}}, {"x": {"1st": 1}}, "key syntax"),
    ("glm47", {"x": {"type": "array", "items": {"type": "string"}}}, {"x": ["a</arg_value>b"]}, "</arg_value>"),
    ("glm47", {"x": {"type": "object"}}, {"x": {"k</arg_value>": 1}}, "</arg_value>"),
    ("gemma4", {"x": {"type": "string"}}, {"x": 'a<|"|>b'}, "special token"),
    ("functiongemma", {"x": {"type": "string"}}, {"x": "a<escape>b"}, "special token"),
]


@pytest.mark.parametrize("dialect, properties, arguments, reason", UNREPRESENTABLE_CASES)
def test_unrepresentable_is_refused(dialect, properties, arguments, reason):
    """What the classification calls unrepresentable, the grammar refuses."""
    schema = {"type": "object", "properties": properties}
    compiled = compile_tools([{"name": "f", "parameters": schema}], dialect, TOKENIZERS[dialect], strict=False)
    (tool,) = compiled.tools
    assert reason in (unrepresentable(dialect, tool, arguments, compiled.tokenizer) or "")
    assert not compiled.check(turn(dialect, [get_dialect(dialect).render_call(tool, arguments, "trained")])).accepted


# -- lexing ------------------------------------------------------------------

# llguidance's lexer is greedy: where one alternative's lexeme is a prefix of
# another's, the longer wins and the shorter alternative is lost. These
# arguments need the grammar to lex every alternative alike (found on
# MaskBench's MCPspec---ClientResult and JME_24, and around them).
LEXING_CASES = [
    # An undeclared key beginning with a declared one.
    ({"properties": {"a": {"type": "integer"}}, "additionalProperties": True}, {"ab": 2}),
    # A key declared by one option of a union and undeclared in another.
    ({"anyOf": [{"additionalProperties": True}, {"properties": {"a": {"type": "integer"}}, "required": ["a"]}]}, {"a": "x"}),
    # A const object or array beside an open one.
    ({"properties": {"x": {"anyOf": [{"const": {"a": 1}}, {"type": "object"}]}}}, {"x": {"a": 2}}),
    ({"properties": {"x": {"anyOf": [{"const": [1, 2]}, {"type": "array"}]}}}, {"x": [1, 3]}),
    # Enum text beside a pattern string that reads on past the closing tag.
    ({"properties": {"x": {"anyOf": [{"enum": ["ab"]}, {"type": "string", "pattern": "^a.*z$"}]}}}, {"x": "ab"}),
    # A number, boolean or null beside a string whose lexeme reads on past the
    # closing (the string needs two characters, or a letter anywhere).
    ({"properties": {"x": {"anyOf": [{"type": "string", "minLength": 2}, {"type": "integer"}]}}}, {"x": 1}),
    ({"properties": {"x": {"type": ["string", "number", "boolean", "null"], "pattern": "x"}}}, {"x": 2.5}),
    ({"properties": {"x": {"type": ["string", "boolean", "null"], "pattern": "x"}}}, {"x": None}),
    # Pattern text that may hold the closing tag's characters.
    ({"properties": {"x": {"type": "string", "pattern": "^/dev/[^/]+(/[^/]+)*$"}, "y": {"type": "integer"}}}, {"x": "/dev/sda1", "y": 1}),
]


@pytest.mark.parametrize("dialect", list(TOKENIZERS))
@pytest.mark.parametrize("schema, arguments", LEXING_CASES)
def test_alternatives_lexed_alike(dialect, schema, arguments):
    compiled = compile_tools([{"name": "f", "parameters": {"type": "object", **schema}}], dialect, TOKENIZERS[dialect], strict=False)
    text = turn(dialect, [get_dialect(dialect).render_call(compiled.tools[0], arguments, "trained")])
    assert compiled.check(text).accepted, text

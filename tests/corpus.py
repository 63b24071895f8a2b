"""The test corpus vendored in ``tests/corpus/`` (public suites and captured
tools, see ``tests/README.md``), read as it is."""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema

from constrained.frames.accepts import frame_accepts
from constrained.frames.toolset import NormalizedTool, normalize_tool
from constrained.tools import Tool, load_tools

CORPUS = Path(__file__).resolve().parent / "corpus"


def mcp_tools() -> list[Tool]:
    """Every tool of every captured MCP server, in file order."""
    tools: list[Tool] = []
    for path in sorted((CORPUS / "mcp").glob("*.json")):
        tools.extend(load_tools(json.loads(path.read_text())))
    return tools


def bfcl_functions() -> list[dict[str, Any]]:
    """Every BFCL v3 function definition (one per entry of each test case)."""
    functions: list[dict[str, Any]] = []
    for path in sorted((CORPUS / "bfcl").glob("BFCL_v3_*.json")):
        for line in path.read_text().splitlines():
            if line.strip():
                functions.extend(json.loads(line)["function"])
    return functions


def chosen(value: Any) -> Any:
    """A ground-truth value: nested objects hold lists of acceptable values too."""
    if isinstance(value, dict):
        return {key: chosen(options[0]) for key, options in value.items() if options[0] != ""}
    if isinstance(value, (list, tuple)):
        return [chosen(item) for item in value]
    return value


@dataclass(frozen=True)
class BfclEntry:
    id: str
    functions: list[dict[str, Any]]
    calls: list[tuple[str, dict[str, Any]]]


@cache
def bfcl_entries() -> tuple[BfclEntry, ...]:
    """Every BFCL v3 entry with its ground-truth calls (the first acceptable
    value of each parameter; none when the first is ``""``)."""
    entries = []
    for path in sorted((CORPUS / "bfcl").glob("BFCL_v3_*.json")):
        answers = {}
        for line in (CORPUS / "bfcl" / "possible_answer" / path.name).read_text().splitlines():
            answer = json.loads(line)
            answers[answer["id"]] = answer["ground_truth"]
        for line in path.read_text().splitlines():
            entry = json.loads(line)
            calls = [
                (name, {key: chosen(options[0]) for key, options in params.items() if options[0] != ""})
                for call in answers[entry["id"]]
                for name, params in call.items()
            ]
            entries.append(BfclEntry(entry["id"], entry["function"], calls))
    return tuple(entries)


# -- schema suites -------------------------------------------------------------


@dataclass(frozen=True)
class SchemaTest:
    description: str
    data: Any
    valid: bool


@dataclass(frozen=True)
class SchemaGroup:
    """A schema and its instances as its suite judges them: a
    JSON-Schema-Test-Suite test group or a MaskBench case. ``source`` is the
    file (JSTS: relative to ``draft2020-12/``)."""

    source: str
    description: str
    schema: Any
    tests: tuple[SchemaTest, ...]


def _group(source: str, raw: dict[str, Any]) -> SchemaGroup:
    tests = tuple(SchemaTest(t["description"], t["data"], t["valid"]) for t in raw["tests"])
    return SchemaGroup(source, raw["description"], raw["schema"], tests)


JSTS = CORPUS / "jsts" / "draft2020-12"


@cache
def jsts_groups(optional: bool = False) -> tuple[SchemaGroup, ...]:
    """Every test group of the draft 2020-12 suite; with ``optional``, the
    groups of ``optional/`` (and ``optional/format/``) too."""
    paths = sorted(JSTS.glob("*.json"))
    if optional:
        paths += sorted((JSTS / "optional").glob("*.json")) + sorted((JSTS / "optional" / "format").glob("*.json"))
    return tuple(
        _group(path.relative_to(JSTS).as_posix(), raw) for path in paths for raw in json.loads(path.read_text())
    )


@cache
def maskbench_groups() -> tuple[SchemaGroup, ...]:
    """Every MaskBench case, in file order."""
    return tuple(
        _group(path.name, json.loads(path.read_text())) for path in sorted((CORPUS / "maskbench").glob("*.json"))
    )


# Where this library knowingly differs from the JSON-Schema-Test-Suite, by
# (file, test group), or (file, "*") for every group of a file: why. A
# deviation explains an instance the pipeline gets "wrong" by design; it is
# counted as such, never as a pass.
ANNOTATION = "formats are enforced, not annotations"
REMOTE = "remote references are not fetched (nothing is, while compiling or parsing)"
PYTHON_RE = "patterns are checked after generation with Python's re, whose \\d, \\w, \\s are Unicode-aware"
# Where the frames themselves differ (tests/test_normalize_corpus.py).
FRAME_DEVIATIONS = {
    **{("format.json", f"{name} format"): ANNOTATION for name in (
        "email", "ipv4", "ipv6", "date", "date-time", "time", "duration", "uuid", "hostname", "uri",
        "uri-reference", "iri", "iri-reference", "uri-template", "json-pointer", "relative-json-pointer",
    )},
    ("pattern.json", "pattern with Unicode property escape requires unicode mode"): (
        "Python's re lacks \\p{...}; frame_accepts treats such patterns as matching"
    ),
    ("vocabulary.json", "schema that uses custom metaschema with with no validation vocabulary"): (
        "custom metaschemas that switch off the validation vocabulary are not read"
    ),
}
# Where the whole pipeline differs: the frames' deviations and the parser's.
JSTS_DEVIATIONS = {
    **FRAME_DEVIATIONS,
    # Not enforced by the constraint, but checked by the parser's jsonschema validation.
    **{("format.json", f"{name} format"): ANNOTATION for name in (
        "idn-email", "idn-hostname", "regex",
    )},
    ("patternProperties.json", "patternProperties with Unicode property escape"): "Python's re lacks \\p{...}",
    ("refRemote.json", "*"): REMOTE,
    ("optional/cross-draft.json", "*"): REMOTE,
    **{("dynamicRef.json", group): REMOTE for group in (
        "$ref and $dynamicAnchor are independent of order - $defs first",
        "$ref and $dynamicAnchor are independent of order - $ref first",
        "$ref to $dynamicRef finds detached $dynamicAnchor",
        "strict-tree schema, guards against misspelled properties",
        "tests for implementation dynamic anchor and reference link",
    )},
    **{("optional/ecmascript-regex.json", group): PYTHON_RE for group in (
        "ECMA 262 \\D matches everything but ascii digits",
        "ECMA 262 \\W matches everything but ascii letters",
        "ECMA 262 \\s matches whitespace",
    )},
    **{("optional/ecmascript-regex.json", group): "Python's re lacks \\p{...}" for group in (
        "pattern with non-ASCII digits",
        "patternProperties with non-ASCII digits",
        "patterns always use unicode semantics with pattern",
        "patterns always use unicode semantics with patternProperties",
    )},
    **{("optional/ecmascript-regex.json", f"ECMA 262 regex escapes control codes with \\c and {case} letter"): (
        "Python's re lacks \\c control escapes") for case in ("lower", "upper")},
    ("optional/format/ecmascript-regex.json", "*"): "the regex format is checked with Python's re, not ECMA 262",
    ("optional/dependencies-compatibility.json", "*"): (
        "dependencies (draft 7) is no 2020-12 keyword: relaxed, and ignored by 2020-12 validation"
    ),
}


LEAP_SECONDS = (
    "no leap second is allowed: RFC 3339 allows one only where the UTC time is 23:59:60, which one pattern "
    "states only with about 3,000 alternatives of hour, minute and offset (jsonschema's checker refuses every one too)"
)
# Misses of the whole pipeline that are not deliberate, by JSTS file: what
# causes them. All lie in the string formats (constrained/schema/formats.py);
# they stay counted as misses.
JSTS_KNOWN_MISSES = {
    "optional/format/email.json": (
        "in the raw dialects, beside an object option an e-mail's text may start with '{' (atext): llguidance's "
        "lexer takes '{' as the e-mail's and does not backtrack, so the object {} is rejected"
    ),
    **{f"optional/format/{name}.json": LEAP_SECONDS for name in ("time", "date-time")},
}


# MaskBench's, likewise: none.
MASKBENCH_KNOWN_MISSES: dict[str, str] = {}


def jsts_deviation(group: SchemaGroup) -> str | None:
    """Why the pipeline deliberately differs from the suite on ``group``, or ``None``."""
    return JSTS_DEVIATIONS.get((group.source, group.description)) or JSTS_DEVIATIONS.get((group.source, "*"))


# -- calls -----------------------------------------------------------------------


def bfcl_fact(entry: BfclEntry, tools: dict[str, NormalizedTool]) -> tuple[str, str] | None:
    """Why the entry's ground truth is no valid call of its tools (kind,
    detail), or ``None``: an unknown function, arguments invalid per schema,
    or keys the strict object policy closes out."""
    for name, arguments in entry.calls:
        tool = tools.get(name)
        if tool is None:
            return "unknown function", name
        error = jsonschema.exceptions.best_match(jsonschema.Draft202012Validator(tool.parameters).iter_errors(arguments))
        if error is not None:
            return "invalid per schema", f"{name}: {error.message}"
        if not frame_accepts(tool.root, arguments, tool.schema.definitions):
            return "closed by strict", f"{name}: {sorted(arguments)}"
    return None


@cache
def bfcl_facts() -> dict[str, tuple[str, str]]:
    """:func:`bfcl_fact` of every entry whose ground truth is no valid call, by id."""
    facts = {}
    for entry in bfcl_entries():
        tools = {tool.name: normalize_tool(tool) for tool in load_tools(entry.functions)}
        fact = bfcl_fact(entry, tools)
        if fact is not None:
            facts[entry.id] = fact
    return facts


def sample_arguments(schema: Any, defs: dict[str, Any], depth: int = 0) -> Any:
    """A plain value for ``schema``: every property filled, short text (the
    caller validates the result)."""
    if not isinstance(schema, dict) or depth > 6:
        return None
    if "$ref" in schema:
        return sample_arguments(defs.get(schema["$ref"].rsplit("/", 1)[-1], {}), defs, depth + 1)
    for key in ("anyOf", "oneOf"):
        if key in schema:
            return sample_arguments(schema[key][0], defs, depth + 1)
    if "enum" in schema:
        return schema["enum"][0]
    if "const" in schema:
        return schema["const"]
    kind = schema.get("type")
    kind = kind[0] if isinstance(kind, list) else kind
    if kind == "object" or "properties" in schema:
        return {k: sample_arguments(v, defs, depth + 1) for k, v in schema.get("properties", {}).items()}
    if kind == "array":
        return [sample_arguments(schema.get("items", {}), defs, depth + 1)] * max(schema.get("minItems", 1), 1)
    if kind in ("integer", "number"):
        return schema.get("minimum", schema.get("default", 3))
    if kind == "boolean":
        return True
    if kind == "null":
        return None
    if schema.get("format") in FORMAT_EXAMPLES:
        return FORMAT_EXAMPLES[schema["format"]]
    return schema.get("default") if isinstance(schema.get("default"), str) else "example text"


# A value of each format the constraint enforces, for sample_arguments.
FORMAT_EXAMPLES = {
    "date-time": "2024-05-01T12:30:00Z",
    "date": "2024-05-01",
    "time": "12:30:00Z",
    "uuid": "123e4567-e89b-12d3-a456-426614174000",
    "email": "someone@example.com",
    "uri": "https://example.com/page",
    "ipv4": "192.0.2.1",
    "ipv6": "2001:db8::1",
    "hostname": "example.com",
}


@dataclass(frozen=True)
class McpCall:
    """A call of one MCP corpus tool, with every tool of its server."""

    server: str
    tools: list[Tool]
    name: str
    arguments: dict[str, Any]


def mcp_calls() -> list[McpCall]:
    """One call of every MCP corpus tool whose :func:`sample_arguments` are
    valid for it, in file order."""
    calls = []
    for path in sorted((CORPUS / "mcp").glob("*.json")):
        tools = load_tools(json.loads(path.read_text()))
        for tool in tools:
            arguments = sample_arguments(tool.parameters, tool.parameters.get("$defs", {}))
            if isinstance(arguments, dict) and jsonschema.Draft202012Validator(tool.parameters).is_valid(arguments):
                calls.append(McpCall(path.stem, tools, tool.name, arguments))
    return calls

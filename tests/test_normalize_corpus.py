"""The normalizer against material written by others: the JSON-Schema-Test-Suite,
MaskBench, the MCP tool captures and BFCL function definitions.

Frames are compared with the suites' own verdicts (and ``jsonschema``'s): every
valid instance must be accepted by the frame; an invalid instance must be
rejected unless the normalizer reported a relaxation for that schema.
"""

from __future__ import annotations

import json
from collections import Counter

import pytest

from constrained.errors import UnsatisfiableSchemaError
from constrained.schema.normalize import normalize_schema
from constrained.schema.tool import normalize_tool
from constrained.schema.values import frame_accepts
from constrained.tools import load_tools

from corpus import CORPUS, bfcl_functions, mcp_tools

# Where the frames knowingly differ from the JSON-Schema-Test-Suite, by
# (file, test group): why.
JSTS_DEVIATIONS = {
    ("format.json", "email format"): "formats are enforced, not annotations",
    ("format.json", "ipv4 format"): "formats are enforced, not annotations",
    ("format.json", "ipv6 format"): "formats are enforced, not annotations",
    ("format.json", "date format"): "formats are enforced, not annotations",
    ("format.json", "date-time format"): "formats are enforced, not annotations",
    ("format.json", "time format"): "formats are enforced, not annotations",
    ("format.json", "uuid format"): "formats are enforced, not annotations",
    ("format.json", "hostname format"): "formats are enforced, not annotations",
    ("format.json", "uri format"): "formats are enforced, not annotations",
    ("pattern.json", "pattern with Unicode property escape requires unicode mode"): (
        "Python's re lacks \\p{...}; frame_accepts treats such patterns as matching"
    ),
    ("vocabulary.json", "schema that uses custom metaschema with with no validation vocabulary"): (
        "custom metaschemas that switch off the validation vocabulary are not read"
    ),
}


def jsts_groups():
    for path in sorted((CORPUS / "jsts" / "draft2020-12").glob("*.json")):
        for group in json.loads(path.read_text()):
            yield path.name, group


def test_jsts_verdicts():
    counts: Counter[str] = Counter()
    misses = []
    for file_name, group in jsts_groups():
        if (file_name, group["description"]) in JSTS_DEVIATIONS:
            counts["deviation"] += 1
            continue
        try:
            normalized = normalize_schema(group["schema"], strict=False)
        except UnsatisfiableSchemaError:
            # Only schemas no value satisfies may be refused.
            assert not any(test["valid"] for test in group["tests"]), group["description"]
            counts["unsatisfiable"] += 1
            continue
        for test in group["tests"]:
            accepted = frame_accepts(normalized.root, test["data"], normalized.definitions)
            if test["valid"] and not accepted:
                misses.append((file_name, group["description"], test["description"], "valid rejected"))
            elif not test["valid"] and accepted and not normalized.warnings:
                misses.append((file_name, group["description"], test["description"], "invalid accepted"))
            counts["relaxed" if normalized.warnings else "exact"] += 1
    assert misses == []
    assert counts["exact"] > 500 and counts["unsatisfiable"] == 7, counts


def maskbench_cases():
    for path in sorted((CORPUS / "maskbench").glob("*.json")):
        yield path.name, json.loads(path.read_text())


def test_maskbench_verdicts():
    counts: Counter[str] = Counter()
    misses = []
    for name, case in maskbench_cases():
        schema = case["schema"]
        normalized = normalize_schema(schema, strict=False)
        for test in case["tests"]:
            valid = test["valid"]
            accepted = frame_accepts(normalized.root, test["data"], normalized.definitions)
            if valid and not accepted:
                misses.append((name, test["description"], "valid rejected"))
            elif not valid and accepted and not normalized.warnings:
                misses.append((name, test["description"], "invalid accepted"))
            counts["instances"] += 1
        counts["relaxed" if normalized.warnings else "exact"] += 1
    assert misses == []
    assert counts["exact"] + counts["relaxed"] == 3455
    assert counts["instances"] > 4000


def test_every_mcp_tool_normalizes():
    tools = mcp_tools()
    normalized = [normalize_tool(tool) for tool in tools]
    assert len(normalized) == 61
    warnings = [(tool.name, str(w)) for tool in normalized for w in tool.warnings]
    assert warnings == []


def test_every_bfcl_function_normalizes():
    functions = bfcl_functions()
    assert len(functions) == 1677
    warnings = []
    for function in functions:
        (tool,) = load_tools([function])
        warnings.extend((tool.name, str(w)) for w in normalize_tool(tool).warnings)
    assert warnings == []


def test_aws_pricing_refs_inside_anyof_and_items_resolve():
    (get_pricing,) = [t for t in mcp_tools() if t.name == "get_pricing"]
    normalized = normalize_tool(get_pricing)
    root = normalized.schema.resolve(normalized.root)
    filters = root.property("filters")
    assert filters is not None
    good = [{"Field": "regionCode", "Value": "us-east-1", "Type": "TERM_MATCH"}]
    assert frame_accepts(filters, good, normalized.schema.definitions)
    assert frame_accepts(filters, None, normalized.schema.definitions)
    assert not frame_accepts(filters, [{"Value": "x"}], normalized.schema.definitions)


@pytest.mark.parametrize("name", ["git_log", "fetch"])
def test_pydantic_servers_keep_integer_defaults_typed(name):
    (tool,) = [t for t in mcp_tools() if t.name == name]
    normalized = normalize_tool(tool)
    assert normalized.warnings == ()
    root = normalized.schema.resolve(normalized.root)
    assert root.additional is None and root.required

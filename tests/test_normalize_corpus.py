"""The normalizer against material written by others: the JSON-Schema-Test-Suite,
MaskBench, the MCP tool captures and BFCL function definitions.

Frames are compared with the suites' own verdicts (and ``jsonschema``'s): every
valid instance must be accepted by the frame; an invalid instance must be
rejected unless the normalizer reported a relaxation for that schema.
"""

from __future__ import annotations

from collections import Counter

import pytest
from corpus import FRAME_DEVIATIONS, bfcl_functions, jsts_groups, maskbench_groups, mcp_tools

from constrained.errors import UnsatisfiableSchemaError
from constrained.frames.accepts import frame_accepts
from constrained.frames.normalize import normalize_schema
from constrained.frames.toolset import normalize_tool
from constrained.tools import load_tools


def test_jsts_verdicts():
    counts: Counter[str] = Counter()
    misses = []
    for group in jsts_groups():
        if (group.source, group.description) in FRAME_DEVIATIONS:
            counts["deviation"] += 1
            continue
        try:
            normalized = normalize_schema(group.schema, strict=False)
        except UnsatisfiableSchemaError:
            # Only schemas no value satisfies may be refused.
            assert not any(test.valid for test in group.tests), group.description
            counts["unsatisfiable"] += 1
            continue
        for test in group.tests:
            accepted = frame_accepts(normalized.root, test.data, normalized.definitions)
            if test.valid and not accepted:
                misses.append((group.source, group.description, test.description, "valid rejected"))
            elif not test.valid and accepted and not normalized.warnings:
                misses.append((group.source, group.description, test.description, "invalid accepted"))
            counts["relaxed" if normalized.warnings else "exact"] += 1
    assert misses == []
    assert counts["exact"] > 500 and counts["unsatisfiable"] == 7, counts


def test_maskbench_verdicts():
    counts: Counter[str] = Counter()
    misses = []
    for case in maskbench_groups():
        normalized = normalize_schema(case.schema, strict=False)
        for test in case.tests:
            accepted = frame_accepts(normalized.root, test.data, normalized.definitions)
            if test.valid and not accepted:
                misses.append((case.source, test.description, "valid rejected"))
            elif not test.valid and accepted and not normalized.warnings:
                misses.append((case.source, test.description, "invalid accepted"))
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

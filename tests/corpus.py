"""The shared test corpus (``../shared/corpus`` beside the project root), read as it is."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from constrained.tools import Tool, load_tools

CORPUS = Path(__file__).resolve().parents[1].parent / "shared" / "corpus"


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

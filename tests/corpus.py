"""The shared test corpus (``../shared/corpus`` beside the project root), read as it is."""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
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


@lru_cache(maxsize=None)
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

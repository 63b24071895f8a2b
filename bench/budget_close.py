"""Calls that close within their budget, on the real default model (Gemma 3
270M, its GGUF run by llama.cpp on CPU, greedy): how many outputs end with
a complete, valid call with ``close_within_budget`` on and off, side by
side in one run on the same prompts.

    python bench/budget_close.py [--out bench/GENERATION.md]

Two sets:

- the generation cases (``tests/data/generation_cases.json``: 26 prompts,
  29 corpus MCP tools, ``tool_choice`` required or named) at budgets of 64
  and 128 tokens;
- runaway-prone tools (a nested order with an array of items under a
  ``pattern``; a route of waypoints with no ``maxItems``): four prompts at
  budgets of 96 and 256 tokens, where the small model tends to keep writing
  inside a string or an array.

A call is valid when the output parses with no error into at least one
call of an allowed tool whose arguments validate against its schema; an
output is cut off when the budget ended it before the grammar was done
and the constraint did not close it.
"Closed by budget": the constraint allowed only what closes the call
(``GenerationResult.closed_by_budget``), so a value may be cut short;
"refused": no complete call fits the budget (``BudgetError`` before
generating).
"""

from __future__ import annotations

import argparse
import json
import sys
from importlib.metadata import version
from pathlib import Path
from typing import Any

from constrained import BudgetError, compile_tools, load_model
from constrained.runtime.generate import generate
from constrained.tools import load_tools

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
from generation import CASES, case_tools, valid  # noqa: E402
from report import environment, write_section  # noqa: E402

ORDER = {"type": "function", "function": {"name": "create_order", "parameters": {
    "type": "object",
    "properties": {
        "customer": {"type": "object", "properties": {"name": {"type": "string"}, "email": {"type": "string"}},
                     "required": ["name"]},
        "items": {"type": "array", "items": {"type": "object", "properties": {
            "sku": {"type": "string", "pattern": "^[A-Z]{3}-\\d{4}$"}, "qty": {"type": "integer"}},
            "required": ["sku", "qty"]}},
        "priority": {"type": "string", "enum": ["express", "standard"]},
    },
    "required": ["customer", "items"],
}}}
ROUTE = {"type": "function", "function": {"name": "fly_route", "parameters": {
    "type": "object",
    "properties": {
        "via": {"type": "array", "items": {"type": "object", "properties": {
            "x": {"type": "number"}, "y": {"type": "number"}, "z": {"type": "number"}}, "required": ["x", "y", "z"]}},
        "speed": {"type": "number", "maximum": 2.5},
    },
    "required": ["via"],
}}}
RUNAWAY = [
    {"tools": [ORDER], "prompt": "Create an order for Alice (alice@example.com): 2 of ABC-1234 and 1 of XYZ-0001, express."},
    {"tools": [ORDER], "prompt": "Order three boxes of SKU QRS-0042 for Bob Lee, standard shipping."},
    {"tools": [ROUTE], "prompt": "Fly the drone through (1.5, 0, 2), then (3, 1, 2), then land at (0, 0, 0), slowly."},
    {"tools": [ROUTE], "prompt": "Plan a square route of side 2 at height 1."},
]


def run_set(lm: Any, cases: list[dict[str, Any]], budget: int, close: bool) -> dict[str, int]:
    counts = {"valid": 0, "cut off": 0, "closed by budget": 0, "refused": 0}
    for case in cases:
        tools = load_tools(case["tools"]) if "server" not in case else case_tools(case)
        choice = case.get("tool_choice", "required")
        ct = compile_tools(tools, "gemma4", lm.tokenizer, tool_choice=choice, reasoning=False)
        try:
            result = generate(lm.model, lm.tokenizer, case["prompt"], ct, max_new_tokens=budget, engine="llama-cpp",
                              close_within_budget=close)
        except BudgetError:
            counts["refused"] += 1
            continue
        assert not isinstance(result, list)
        counts["valid"] += valid(result.text, {"tool_choice": choice}, tools)
        counts["cut off"] += not result.finished and not result.closed_by_budget
        counts["closed by budget"] += result.closed_by_budget
    return counts


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default=str(ROOT / "bench" / "GENERATION.md"))
    args = parser.parse_args()
    lm = load_model(engine="llama-cpp")
    rows = []
    for name, cases, budgets in (("generation cases", CASES, (64, 128)), ("runaway-prone tools", RUNAWAY, (96, 256))):
        for budget in budgets:
            for close in (False, True):
                counts = run_set(lm, cases, budget, close)
                rows.append((name, len(cases), budget, "on" if close else "off", counts))
                print(rows[-1], flush=True)
    lines = [
        "## Calls closed within their budget (`bench/budget_close.py`)",
        "",
        f"{environment()}; llama-cpp-python {version('llama-cpp-python')}. Default model (Gemma 3 270M GGUF, "
        "llama.cpp, greedy); `close_within_budget` off and on, same prompts.",
        "",
        "| prompts | budget (tokens) | close within budget | valid calls | cut off | closed by budget | refused |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, count, budget, close, counts in rows:
        lines.append(f"| {name} ({count}) | {budget} | {close} | {counts['valid']}/{count} | {counts['cut off']} | "
                     f"{counts['closed by budget']} | {counts['refused']} |")
    write_section("budget_close", "\n".join(lines), Path(args.out))
    print(json.dumps([list(r[:4]) + [r[4]] for r in rows]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

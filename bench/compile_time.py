"""Compile time to the first mask, side by side:

    python bench/compile_time.py [--dialect qwen3_coder] [--repeat 3]

Tool sets from the corpus: the first 1, 10 and 100 tools, and all of them
(every MCP corpus tool, then every distinct BFCL function), declared with
``tool_choice="auto"``. For each engine, the time from the tool list to the
first mask (the tokenizer is loaded beforehand):
- ``constrained`` cold: :func:`~constrained.compile_tools` with an empty
  cache (schema normalization, grammar text, llguidance parser), a
  :class:`~constrained.ToolCallConstraint` and its first ``mask_logits``;
  cached: ``compile_tools`` alone when the in-process cache holds the
  result (what every request after the first pays), and the same with a
  new constraint and its first mask (buffers allocated, the mask from the
  tool set's mask cache);
- ``llguidance (our grammar)``: only building an llguidance matcher from
  the grammar text and its first mask, the part of the cold time that is
  llguidance's;
- ``XGrammar 0.2.9``: its structural tag for the dialect compiled by a
  ``GrammarCompiler`` (cold: cache cleared; cached: compiled again by the
  same compiler), a matcher and its first bitmask.
The median of ``--repeat`` runs is reported.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import llguidance
import numpy as np
import torch

from constrained import ToolCallConstraint, compile_tools, load_tokenizer
from constrained import compiler as compiler_module
from constrained.dialects.base import openai_function
from constrained.frames.toolset import NormalizedTool, normalize_tools

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from corpus import CORPUS, bfcl_functions  # noqa: E402
from report import BENCH, environment, write_section  # noqa: E402

TOKENIZER = {"qwen3_coder": "qwen3", "hermes": "qwen3", "gemma4": "gemma4"}
XGRAMMAR_TAG = {"qwen3_coder": "qwen_3_coder", "hermes": "qwen_3", "gemma4": "gemma_4"}


def corpus_tools() -> list[NormalizedTool]:
    """Every MCP corpus tool, then every BFCL function whose name is new."""
    tools: list[NormalizedTool] = []
    for path in sorted((CORPUS / "mcp").glob("*.json")):
        tools.extend(normalize_tools(json.loads(path.read_text())))
    seen = {tool.name for tool in tools}
    for function in bfcl_functions():
        if function["name"] not in seen:
            seen.add(function["name"])
            tools.extend(normalize_tools([function]))
    return tools


def median_ms(run: Callable[[], Any], repeat: int, before: Callable[[], Any] = lambda: None) -> float:
    times = []
    for _ in range(repeat):
        before()
        start = time.perf_counter()
        run()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--dialect", default="qwen3_coder", choices=sorted(TOKENIZER))
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    import xgrammar as xgr

    dialect = args.dialect
    tok = load_tokenizer(TOKENIZER[dialect])
    table, _ = tok.token_table
    info = xgr.TokenizerInfo(list(table), xgr.VocabType.RAW, vocab_size=tok.vocab_size,
                             stop_token_ids=list(tok.eos_token_ids))
    xgr_compiler = xgr.GrammarCompiler(info)
    bitmask = xgr.allocate_token_bitmask(1, tok.vocab_size)
    logits = torch.zeros(1, tok.vocab_size)
    words = np.zeros((tok.vocab_size + 31) // 32, dtype=np.uint32)
    everything = corpus_tools()
    rows = []
    for count in (1, 10, 100, len(everything)):
        tools = everything[:count]
        specs = [{"type": "function", "function": openai_function(t)} for t in tools]

        def ours() -> None:
            compiled = compile_tools(tools, dialect, tok, tool_choice="auto")
            ToolCallConstraint(compiled).mask_logits(logits)

        grammar = compile_tools(tools, dialect, tok, tool_choice="auto").grammar

        def llg() -> None:
            matcher = llguidance.LLMatcher(tok.ll_tokenizer, grammar, log_level=0)
            matcher.unsafe_compute_mask_ptr(words.ctypes.data, words.nbytes)

        def xgrammar() -> None:
            tag = xgr.get_model_structural_tag(XGRAMMAR_TAG[dialect], tools=specs, tool_choice="auto", reasoning="disabled")
            xgr.GrammarMatcher(xgr_compiler.compile_structural_tag(tag)).fill_next_token_bitmask(bitmask, 0)

        cold = median_ms(ours, args.repeat, compiler_module.clear_compile_cache)
        cached = median_ms(lambda: compile_tools(tools, dialect, tok, tool_choice="auto"), args.repeat)
        cached_mask = median_ms(ours, args.repeat)
        llg_ms = median_ms(llg, args.repeat)
        xgr_cold = median_ms(xgrammar, args.repeat, xgr_compiler.clear_cache)
        xgr_cached = median_ms(xgrammar, args.repeat)
        rows.append((count, cold, cached, cached_mask, llg_ms, xgr_cold, xgr_cached))
        print(rows[-1], file=sys.stderr)
    lines = [
        f"## Compile time to the first mask (`bench/compile_time.py --dialect {dialect}`)",
        "",
        f"{environment()}. Tools from the corpus (MCP, then distinct BFCL functions), `tool_choice=\"auto\"`, "
        f"tokenizer `{tok.name}` loaded beforehand; median of {args.repeat} runs, milliseconds.",
        "",
        "| tools | constrained cold | constrained cached: compile_tools | cached, to first mask "
        "| llguidance (our grammar) | XGrammar cold | XGrammar cached | XGrammar cold / constrained cold |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for count, cold, cached, cached_mask, llg_ms, xgr_cold, xgr_cached in rows:
        lines.append(
            f"| {count} | {cold:.1f} | {cached:.2f} | {cached_mask:.2f} | {llg_ms:.1f} | {xgr_cold:.1f} "
            f"| {xgr_cached:.2f} | {xgr_cold / cold:.1f}x |"
        )
    lines += [
        "",
        "Cold times leave out what is built once per tokenizer and process (llguidance's token trie, the raw-text "
        "rows of `constrained`, about 0.1 s; XGrammar's `TokenizerInfo`). \"Cached, to first mask\" includes a new "
        "constraint and its buffers; its first mask comes from the tool set's mask cache, which the cold run filled.",
    ]
    plot = BENCH / f"compile_time_{dialect}.png"
    draw(rows, plot)
    lines += ["", f"Plot: [`{plot.name}`]({plot.name})."]
    section = "\n".join(lines)
    write_section(f"compile_time_{dialect}", section)
    print(section)
    return 0


def draw(rows: list[tuple[Any, ...]], plot: Path) -> None:
    """Milliseconds against the number of tools, log-log, one line per engine."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    counts = [row[0] for row in rows]
    fig, ax = plt.subplots(figsize=(6, 4))
    for column, label in enumerate(("constrained cold", "constrained cached", "constrained cached, to first mask",
                                    "llguidance (our grammar)", "XGrammar cold", "XGrammar cached"), start=1):
        ax.plot(counts, [row[column] for row in rows], marker="o", label=label)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("tools")
    ax.set_ylabel("ms to the first mask (median)")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(plot, dpi=90)


if __name__ == "__main__":
    sys.exit(main())

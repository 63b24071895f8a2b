"""Per decoding step through the transformers logits processors, side by side:

    python bench/processor_step.py [--bfcl-stride 10] [--plot bench/processor_step.png]

What ``model.generate`` pays per token for the constraint: the processor
called with the ids so far and one row of float32 scores, which it masks in
place (mask and apply). The same token sequences as ``bench/mask_time.py``
(BFCL v3 ground truth, one call of every MCP corpus tool, a coding
``write_file`` call), in qwen3_coder and gemma4:

- ``constrained, first call``: :class:`~constrained.hf.ToolCallLogitsProcessor`
  with the tool set's mask cache emptied before the processor is made
  (which warms it, as for a new tool set; not timed, as XGrammar's
  compile is not);
- ``constrained, repeated call``: the same call a third time (the second,
  untimed, indexes each reused mask once);
- ``XGrammar 0.2.9``: ``xgrammar.contrib.hf.LogitsProcessor`` on its
  built-in structural tag for the dialect (one new processor per call, as
  it asks), after one warm-up call.

One torch thread; the scores are copied from a fixed random row before each
step (not timed). A workload of one case (``write_file``) runs in rounds,
the processors taking turns, so a slow phase of the machine falls on each.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from constrained import load_tokenizer
from constrained.hf import ToolCallLogitsProcessor

sys.path.insert(0, str(Path(__file__).resolve().parent))
from mask_time import (  # noqa: E402
    FIRST,
    REPEATED,
    TOKENIZER,
    Workload,
    fresh_cache,
    prepared_cases,
    report_tail,
    run_all,
    workloads,
    xgrammar_grammar,
)
from report import BENCH, environment, summary, write_section  # noqa: E402

XGRAMMAR = "XGrammar 0.2.9"
ROUNDS = 5
DIALECTS = ("qwen3_coder", "gemma4")


def time_processor(make: Callable[[], Any], tokens: list[int], vocab: int) -> list[float]:
    """Microseconds of each processor call over ``tokens`` (a one-token prompt first)."""
    processor = make()
    ids = torch.tensor([[0, *tokens]])
    base = torch.randn(1, vocab, generator=torch.Generator().manual_seed(0))
    scores = base.clone()
    times = []
    for step in range(len(tokens)):
        scores.copy_(base)
        start = time.perf_counter_ns()
        processor(ids[:, : step + 1], scores)
        times.append((time.perf_counter_ns() - start) / 1000.0)
    return times


def run(load: Workload) -> None:
    import xgrammar as xgr

    tok = load_tokenizer(TOKENIZER[load.dialect])
    cases = list(prepared_cases(load, tok))
    # A workload of one case runs in rounds, the engines taking turns, so a
    # slow phase of the machine falls on every engine alike.
    rounds = ROUNDS if len(cases) == 1 else 1
    for index, (_, compiled, tokens, specs) in enumerate(cases * rounds):
        grammar = xgrammar_grammar(load.dialect, specs, tok)
        try:
            time_processor(lambda: xgr.contrib.hf.LogitsProcessor(grammar), tokens, tok.vocab_size)
        except AssertionError:  # a token XGrammar's tag refuses: the case is left out for both
            load.refused[f"refused by {XGRAMMAR}"] = load.refused.get(f"refused by {XGRAMMAR}", 0) + 1
            continue
        theirs = time_processor(lambda: xgr.contrib.hf.LogitsProcessor(grammar), tokens, tok.vocab_size)
        ours = lambda: ToolCallLogitsProcessor(compiled)  # noqa: E731
        time_processor(ours, tokens, tok.vocab_size)  # warm-up
        first = time_processor(lambda: ToolCallLogitsProcessor(fresh_cache(compiled)), tokens, tok.vocab_size)
        time_processor(ours, tokens, tok.vocab_size)  # the second call
        repeated = time_processor(ours, tokens, tok.vocab_size)
        if index < len(cases):  # counted once, whatever the rounds
            load.measured += 1
            load.tokens += len(tokens)
        for engine, times in ((FIRST, first), (REPEATED, repeated), (XGRAMMAR, theirs)):
            load.times.setdefault(engine, []).extend(times)


def report(loads: list[Workload], plot: str) -> str:
    lines = [
        "## Per decoding step through the transformers processors (`bench/processor_step.py`)",
        "",
        f"{environment()}; one torch thread. Each processor is called before every token of the same rendered "
        "calls with one row of float32 scores, which it masks in place (mask and apply). "
        f"`{FIRST}`: the tool set's mask cache emptied before the processor is made (making it warms the cache, "
        f"`warm_mask_cache`; not timed, as XGrammar's compile is not); `{REPEATED}`: the third call of the same tokens. "
        f"A workload of one case (write_file) runs in {ROUNDS} rounds, the processors taking turns, and its "
        "statistics are over every round's steps.",
        "",
        "| dialect | workload | cases | tokens | processor | mean us | p50 us | p99 us | mean / XGrammar | p99 / XGrammar |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for load in loads:
        if not load.times:
            continue
        ref = summary(load.times[XGRAMMAR])
        for engine, times in load.times.items():
            mean, p50, p99, _ = summary(times)
            lines.append(
                f"| {load.dialect} | {load.name} | {load.measured} | {load.tokens} | {engine} | {mean:.1f} | {p50:.1f} "
                f"| {p99:.1f} | {mean / ref[0]:.2f} | {p99 / ref[2]:.2f} |"
            )
    return "\n".join(lines + report_tail(loads, plot, "processor", "processor us per step (whiskers p1-p99)"))


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bfcl-stride", type=int, default=10)
    parser.add_argument("--plot", default=str(BENCH / "processor_step.png"))
    args = parser.parse_args()
    torch.set_num_threads(1)
    loads = [load for load in workloads(args.bfcl_stride)
             if load.dialect in DIALECTS and load.name != "edit" and not (load.never_seen or load.other_values)]
    run_all(loads, run)
    section = report(loads, args.plot)
    write_section("processor_step", section)
    print(section)
    return 0


if __name__ == "__main__":
    sys.exit(main())

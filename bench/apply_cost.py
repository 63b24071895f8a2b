"""Mask apply cost per decoding step on CPU, side by side:

    python bench/apply_cost.py [--steps 300] [--plot bench/apply_cost.png]

For vocabularies of 151,936 (Qwen3) and 262,144 (Gemma 4) tokens at batch 1
and 16, float32 logits, the mask of a string value (nearly every token
allowed, the common case in coding calls): the time to apply it to the
logits in place. The rows are real: every row of the constraint has
consumed a ``write_file`` call (qwen3_coder for Qwen3, gemma4 for Gemma 4)
up to its ``content`` value, and the mask is the one it filled.
- ``constrained, sparse``: :meth:`~constrained.ToolCallConstraint.apply`
  where every row is a precomputed raw-text row, so only the few forbidden
  tokens are set;
- ``constrained, dense``: the same call with every row's forbidden set
  unknown, as at structural points (byte lookup table to +inf/-inf, then an
  in-place minimum);
- ``XGrammar 0.2.9``: ``xgrammar.apply_token_bitmask_inplace`` on CPU;
- ``masked_fill_``: unpacking the bitmask to a boolean tensor and
  ``masked_fill_`` with -inf, the straightforward way.
Mean and p99 over ``--steps`` steps after 20 warm-up steps; torch's default
threads.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

from constrained import ToolCallConstraint, compile_tools, load_tokenizer, render_tool_calls

sys.path.insert(0, str(Path(__file__).resolve().parent))
from report import environment, plot_distributions, summary, write_section  # noqa: E402

TOOL = {"type": "function", "function": {"name": "write_file", "parameters": {
    "type": "object", "properties": {"content": {"type": "string"}}, "required": ["content"]}}}
CALL = {"name": "write_file", "arguments": {"content": "print('hello')\n"}}


def timed(step: Callable[[], object], steps: int) -> list[float]:
    for _ in range(20):
        step()
    times = []
    for _ in range(steps):
        start = time.perf_counter_ns()
        step()
        times.append((time.perf_counter_ns() - start) / 1000.0)
    return times


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--plot", default=str(Path(__file__).resolve().parent / "apply_cost.png"))
    args = parser.parse_args()
    import xgrammar as xgr

    rows = []
    panels = []
    for name, dialect in (("qwen3", "qwen3_coder"), ("gemma4", "gemma4")):
        tok = load_tokenizer(name)
        compiled = compile_tools([TOOL], dialect, tok, tool_choice="required", reasoning=False)
        vocab = tok.vocab_size
        tokens = tok.encode(render_tool_calls([CALL], [TOOL], dialect))
        header = tokens[: tokens.index(tok.encode("print")[0])]
        for batch in (1, 16):
            logits = torch.randn(batch, vocab)
            constraint = ToolCallConstraint(compiled, batch)
            constraint.prepare(logits)
            for row in range(batch):
                constraint.consume_row(row, header)
            constraint.fill_masks()
            assert constraint.precomputed_rows == batch and all(f is not None for f in constraint.masks.forbidden)
            words = constraint.buffers().host_bits.numpy()[0].copy()
            bitmask = torch.from_numpy(np.tile(words, (batch, 1)))
            bits = torch.from_numpy(np.unpackbits(np.tile(words, (batch, 1)).view(np.uint8), axis=1,
                                                  bitorder="little")[:, :vocab].astype(bool))
            unpacked = torch.empty(batch, vocab, dtype=torch.bool)
            forbidden = list(constraint.masks.forbidden)

            def ours_sparse() -> None:
                constraint.apply(logits)

            def ours_dense() -> None:
                constraint.masks.forbidden[:] = [None] * batch
                constraint.apply(logits)
                constraint.masks.forbidden[:] = forbidden

            def xgrammar() -> None:
                xgr.apply_token_bitmask_inplace(logits, bitmask)

            def masked_fill() -> None:
                torch.logical_not(bits, out=unpacked)
                logits.masked_fill_(unpacked, float("-inf"))

            engines = [("constrained, sparse", ours_sparse), ("constrained, dense", ours_dense),
                       ("XGrammar 0.2.9", xgrammar), ("masked_fill_", masked_fill)]
            times = {engine: timed(step, args.steps) for engine, step in engines}
            panels.append((f"vocabulary {vocab:,}, batch {batch}", times))
            results = {engine: summary(samples) for engine, samples in times.items()}
            for engine, (mean, _, p99, _) in results.items():
                rows.append((vocab, batch, engine, mean, p99, mean / results["XGrammar 0.2.9"][0]))
            print(rows[-len(engines):], file=sys.stderr)
    lines = [
        "## Mask apply cost per step on CPU (`bench/apply_cost.py`)",
        "",
        f"{environment()}; torch threads {torch.get_num_threads()}. The mask of a string value applied to float32 logits "
        f"in place (the constraint's real rows inside a `content` value: qwen3_coder for Qwen3, gemma4 for Gemma 4); "
        f"mean and p99 over {args.steps} steps.",
        "",
        "| vocabulary | batch | engine | mean us | p99 us | mean / XGrammar |",
        "|---|---|---|---|---|---|",
    ]
    lines += [f"| {v:,} | {b} | {e} | {m:.1f} | {p:.1f} | {r:.2f} |" for v, b, e, m, p, r in rows]
    lines += ["", "The masked_fill_ row has the bitmask unpacked to booleans beforehand (not timed; its negation and the fill are), so it "
              "is a lower bound for that approach.", "", f"Distributions: [`{Path(args.plot).name}`]({Path(args.plot).name})."]
    plot_distributions(panels, args.plot, "apply us per step (whiskers p1-p99)")
    section = "\n".join(lines)
    write_section("apply_cost", section)
    print(section)
    return 0


if __name__ == "__main__":
    sys.exit(main())

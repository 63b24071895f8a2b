"""Filling a batch's masks in one step, side by side:

    python bench/batch_fill.py [--batches 16 64] [--threads 2]

An engine's batch holds requests with different tools. Each row here is one
BFCL v3 ground-truth call with its own tool set (as in ``bench/mask_time.py``),
and every step fills the masks of all rows still generating, then feeds each
row its next token (not timed), until every row is done:

- ``constrained, first call``: one :class:`~constrained.ToolCallConstraint`
  per row, filled by :func:`~constrained.runtime.constraint.fill_masks_together`
  (the rows llguidance computes one after another in the calling thread),
  every tool set's mask cache as an engine's compile leaves it: emptied,
  then the masks every request starts with
  (:func:`~constrained.runtime.constraint.warm_mask_cache`; the warm-up
  ran without the cache);
- ``constrained, repeated call``: the same batch a third time;
- ``constrained, first call, llguidance pool``: as the first call, the
  llguidance rows on its thread pool of ``--threads`` threads;
- ``XGrammar 0.2.9``: one ``GrammarMatcher`` per row on its structural tag,
  filled by ``BatchGrammarMatcher.batch_fill_next_token_bitmask`` on
  ``--threads`` threads;
- ``..., calls never seen``: both engines on another batch (BFCL entries
  every third from the second), compiled cold (compile caches cleared; ours
  as an engine compiles, with ``warm_mask_cache``) and timed on their first
  run, no warm-up. XGrammar's matchers have run once over these tokens (the check that it
  accepts them), which can only favour it.

Rows whose tokens XGrammar's tag refuses are left out before the batch is
made.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from constrained import ToolCallConstraint, load_tokenizer
from constrained.compiler import clear_compile_cache
from constrained.runtime.constraint import fill_masks_together, warm_mask_cache

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from corpus import bfcl_entries  # noqa: E402
from mask_time import (  # noqa: E402
    FIRST,
    REPEATED,
    TOKENIZER,
    Case,
    Workload,
    _xgr_compilers,
    fresh_cache,
    prepared,
    xgrammar_grammar,
)
from report import environment, summary, write_section  # noqa: E402

XGRAMMAR = "XGrammar 0.2.9"
UNSEEN, XGRAMMAR_UNSEEN = "constrained, calls never seen", "XGrammar 0.2.9, calls never seen"
POOLED = "constrained, first call, llguidance pool"
DIALECTS = ("qwen3_coder", "gemma4")

Row = tuple[Any, list[int], Any]  # (compiled tools, tokens, XGrammar's compiled grammar)


def rows_for(dialect: str, count: int, first: int = 0) -> list[Row]:
    """``count`` BFCL calls that both engines accept, each with its tools
    (every third entry from ``first``)."""
    import xgrammar as xgr

    tok = load_tokenizer(TOKENIZER[dialect])
    load = Workload(dialect, "BFCL", [])
    rows: list[Row] = []
    for entry in bfcl_entries()[first::3]:
        found = prepared(load, Case(entry.functions, entry.calls), tok)
        if found is None:
            continue
        compiled, tokens, specs = found
        warm_mask_cache(compiled)  # the rest of an engine's compile (ToolsRequest.compile)
        grammar = xgrammar_grammar(dialect, specs, tok)
        matcher = xgr.GrammarMatcher(grammar)
        if all(matcher.accept_token(token) for token in tokens):
            rows.append((compiled, tokens, grammar))
        if len(rows) == count:
            return rows
    raise RuntimeError(f"only {len(rows)} BFCL calls for a batch of {count}")


def time_batch(fill: Callable[[list[int]], None], feed: Callable[[int, int], None], rows: list[Row]) -> list[float]:
    """Microseconds of each step's fill over the rows still generating."""
    times, step = [], 0
    while True:
        live = [index for index, (_, tokens, _) in enumerate(rows) if step < len(tokens)]
        if not live:
            return times
        start = time.perf_counter_ns()
        fill(live)
        times.append((time.perf_counter_ns() - start) / 1000.0)
        for index in live:
            feed(index, rows[index][1][step])
        step += 1


def ours(rows: list[Row], threads: int | None, cache_masks: bool = True) -> list[float]:
    vocab = rows[0][0].tokenizer.vocab_size
    constraints = [ToolCallConstraint(compiled, cache_masks=cache_masks) for compiled, _, _ in rows]
    for constraint in constraints:
        constraint.prepare(torch.zeros(1, vocab))
    return time_batch(lambda live: fill_masks_together([constraints[i] for i in live], threads),
                      lambda index, token: constraints[index].consume_row(0, [token]), rows)


def theirs(rows: list[Row], threads: int) -> list[float]:
    import xgrammar as xgr

    batch = xgr.BatchGrammarMatcher(max_threads=threads)
    matchers = [xgr.GrammarMatcher(grammar) for _, _, grammar in rows]
    bitmask = xgr.allocate_token_bitmask(len(rows), rows[0][0].tokenizer.vocab_size)
    return time_batch(lambda live: batch.batch_fill_next_token_bitmask([matchers[i] for i in live], bitmask, live),
                      lambda index, token: matchers[index].accept_token(token), rows)


def table_rows(dialect: str, rows: list[Row], measured: tuple[tuple[str, list[float]], ...]) -> list[str]:
    """The table's lines for one batch: each engine's step times, against
    the last engine's (XGrammar's) mean."""
    masks = sum(len(tokens) for _, tokens, _ in rows)
    base = summary(measured[-1][1])[0]
    lines = []
    for engine, times in measured:
        mean, p50, p99, _ = summary(times)
        lines.append(f"| {dialect} | {len(rows)} | {len(times)} | {engine} | {mean:.0f} | {p50:.0f} | {p99:.0f} "
                     f"| {sum(times) / masks:.1f} | {mean / base:.2f} |")
    return lines


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--batches", type=int, nargs="+", default=[16, 64])
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    lines = [
        "## Filling a batch of masks (`bench/batch_fill.py`)",
        "",
        f"{environment()}; XGrammar and the llguidance pool on {args.threads} threads. Each row is a BFCL v3 ground-truth call with its own "
        "tools; a step fills the masks of every row still generating. Calls never seen: another batch, compiled cold and timed "
        "on its first run (each engine's ratio against XGrammar's run on that batch). "
        f"`{FIRST}`: every tool set's mask cache as an engine's compile leaves it (emptied, then warm_mask_cache); `{REPEATED}`: the same batch a third time.",
        "",
        "| dialect | rows | steps | engine | mean us per step | p50 | p99 | us per row-mask | mean / XGrammar |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for dialect in DIALECTS:
        for count in args.batches:
            clear_compile_cache()
            _xgr_compilers.clear()
            unseen = rows_for(dialect, count, first=1)
            never_seen = ours(unseen, None)
            reference_unseen = theirs(unseen, args.threads)
            rows = rows_for(dialect, count)
            ours(rows, None, cache_masks=False)  # warm-up
            for compiled, _, _ in rows:
                warm_mask_cache(fresh_cache(compiled))
            first = ours(rows, None)
            ours(rows, None)
            repeated = ours(rows, None)
            for compiled, _, _ in rows:
                warm_mask_cache(fresh_cache(compiled))
            pooled = ours(rows, args.threads)
            theirs(rows, args.threads)
            reference = theirs(rows, args.threads)
            lines += table_rows(dialect, rows, ((FIRST, first), (REPEATED, repeated), (POOLED, pooled),
                                                (XGRAMMAR, reference)))
            lines += table_rows(dialect, unseen, ((UNSEEN, never_seen), (XGRAMMAR_UNSEEN, reference_unseen)))
            print(f"{dialect} batch {count}: done", file=sys.stderr)
    section = "\n".join(lines)
    write_section("batch_fill", section)
    print(section)
    return 0


if __name__ == "__main__":
    sys.exit(main())

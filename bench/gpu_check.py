"""GPU check of the constraint's apply step, run on a CUDA machine:

    python bench/gpu_check.py [--out bench/GPU_CHECK.md]

1. Allocation-free: ``torch.cuda.memory_stats`` allocation counts before and
   after 1,000 steps of fill + apply at batch 64 on the 262,144 vocabulary
   (Gemma 4 layout) must be equal.
2. CUDA graph: the apply step (upload from pinned memory, unpack, minimum)
   is captured once and replayed; the replayed result must equal the eager one.
3. Timing of apply (eager and graph replay) at batch 1, 64 and 256 on the
   262,144 vocabulary, with CUDA events, 200 repetitions each: ours with the
   Triton kernel (the default where Triton is installed) and with the bit
   planes, XGrammar's ``apply_token_bitmask_inplace`` on the same bitmask
   (when xgrammar is installed), and a device-to-device copy of the same
   logits, the memory floor each is compared with; then a torch.profiler
   table of where the apply's time goes at batch 64.

Exits 1 if a check fails. Writes a Markdown report (``--out``).
"""

from __future__ import annotations

import argparse
import datetime
import importlib.util
import platform
import statistics
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from constrained import compile_tools, load_tokenizer, render_tool_calls
from constrained.runtime.constraint import ToolCallConstraint
from constrained.runtime.logits_mask import MaskBuffers

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from sample_tools import WRITE_FILE  # noqa: E402  (the tests' write_file, from the project's tests/)


def constraint_inside_a_string(batch: int, device: torch.device) -> tuple[ToolCallConstraint, torch.Tensor]:
    """A batch of rows each halfway into the ``content`` string of a
    write_file call (the largest allowed sets), with logits allocated."""
    tok = load_tokenizer("gemma4")
    compiled = compile_tools([WRITE_FILE], "gemma4", tok, tool_choice="required", reasoning=False)
    content = "x = 1\n" * 20
    text = render_tool_calls([{"name": "write_file", "arguments": {"path": "a.py", "content": content}}],
                             [WRITE_FILE], "gemma4")
    prefix = tok.encode(text[: text.index(content) + len(content) // 2])  # halfway into the content
    constraint = ToolCallConstraint(compiled, batch)
    for row in range(batch):
        constraint.consume_row(row, prefix)
    logits = torch.randn(batch, tok.vocab_size, device=device)
    constraint.prepare(logits)
    return constraint, logits


def check_allocations(device: torch.device) -> tuple[bool, str]:
    constraint, logits = constraint_inside_a_string(64, device)
    constraint.mask_logits(logits)
    torch.cuda.synchronize()
    before = torch.cuda.memory_stats(device)
    for _ in range(1000):
        constraint.mask_logits(logits)
    torch.cuda.synchronize()
    after = torch.cuda.memory_stats(device)
    keys = ("allocation.all.allocated", "segment.all.allocated", "allocated_bytes.all.allocated")
    deltas = {k: after.get(k, 0) - before.get(k, 0) for k in keys}
    ok = all(v == 0 for v in deltas.values())
    return ok, ", ".join(f"{k} +{v}" for k, v in deltas.items())


def check_graph(device: torch.device) -> tuple[bool, str]:
    constraint, logits = constraint_inside_a_string(64, device)
    original = logits.clone()
    constraint.fill_masks()
    eager = original.clone()
    constraint.apply(eager)
    static = original.clone()
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        constraint.apply(static)  # warm-up outside the graph
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    static.copy_(original)
    with torch.cuda.graph(graph):
        constraint.apply(static)
    static.copy_(original)
    graph.replay()
    torch.cuda.synchronize()
    allowed = int(torch.isfinite(eager[0]).sum())
    on_cpu, cpu_logits = constraint_inside_a_string(64, torch.device("cpu"))
    cpu_logits.copy_(original.cpu())
    on_cpu.fill_masks()
    on_cpu.apply(cpu_logits)
    same_as_cpu = torch.equal(cpu_logits, eager.cpu())
    ok = torch.equal(static, eager) and same_as_cpu and allowed > eager.shape[1] // 2  # inside the string
    return ok, (f"replayed result equals eager: {torch.equal(static, eager)}; eager equals the CPU apply: "
                f"{same_as_cpu}; allowed per row: {allowed}")


APPLIES = ("constrained (Triton kernel)", "constrained (bit planes)", "XGrammar apply_token_bitmask_inplace",
           "device-to-device copy")


def apply_step(name: str, batch: int, device: torch.device) -> Callable[[], Any]:
    """One apply of ``name`` on a batch whose rows stand inside a string:
    ours with each GPU path (the upload from pinned memory included),
    XGrammar's kernel on the same bitmask already on the device, and a copy
    of the same logits (the memory floor)."""
    constraint, logits = constraint_inside_a_string(batch, device)
    if name.startswith("constrained"):  # each GPU path by name, whatever the default
        words = (constraint.vocab_size + 31) // 32
        kernel = name == "constrained (Triton kernel)"
        constraint.masks.buffers = MaskBuffers.allocate(constraint.compiled.tokenizer, batch, words, logits, kernel=kernel)
        for row in range(batch):
            constraint.masks.forget(row)  # the new buffers hold nothing yet: the fill writes every row
    constraint.fill_masks()
    if name.startswith("constrained"):
        return lambda: constraint.apply(logits)
    if name.startswith("XGrammar"):
        import xgrammar as xgr

        bits = constraint.buffers().host_bits.to(device)
        return lambda: xgr.apply_token_bitmask_inplace(logits, bits)
    target = torch.empty_like(logits)
    return lambda: target.copy_(logits)


def time_apply(name: str, batch: int, device: torch.device, graphed: bool, reps: int = 200) -> list[float]:
    run = apply_step(name, batch, device)
    if graphed:
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            run()
        torch.cuda.current_stream().wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            run()
        run = graph.replay
    for _ in range(10):
        run()
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        run()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1000.0)  # us
    return times


def profile_apply(batch: int, device: torch.device, reps: int = 20) -> str:
    """Where the eager apply's GPU time goes at ``batch``: torch.profiler's
    table of operators, by total device time."""
    from torch.profiler import ProfilerActivity, profile

    constraint, logits = constraint_inside_a_string(batch, device)
    constraint.fill_masks()
    constraint.apply(logits)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(reps):
            constraint.apply(logits)
        torch.cuda.synchronize()
    return prof.key_averages().table(sort_by="self_device_time_total", row_limit=10)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default="bench/GPU_CHECK.md")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("no CUDA device: this check needs a GPU", file=sys.stderr)
        return 2
    device = torch.device("cuda")
    alloc_ok, alloc_msg = check_allocations(device)
    graph_ok, graph_msg = check_graph(device)
    lines = [
        "# GPU check of the constraint's apply step",
        "",
        f"{datetime.date.today()}, {torch.cuda.get_device_name(device)}, torch {torch.__version__}, "
        f"Python {platform.python_version()}; vocabulary 262,144 (gemma4 layout); produced by `bench/gpu_check.py`.",
        "",
        f"- Allocations over 1,000 fill+apply steps at batch 64: {'PASS' if alloc_ok else 'FAIL'} ({alloc_msg})",
        f"- Apply captured in a CUDA graph: {'PASS' if graph_ok else 'FAIL'} ({graph_msg})",
        "",
        "| batch | mode | apply | mean us | p50 us | p99 us | mean / copy |",
        "|---|---|---|---|---|---|---|",
    ]
    names = [name for name in APPLIES if not name.startswith("XGrammar") or importlib.util.find_spec("xgrammar")]
    for batch in (1, 64, 256):
        for graphed in (False, True):
            measured = {name: sorted(time_apply(name, batch, device, graphed)) for name in names}
            copy = statistics.mean(measured["device-to-device copy"])
            for name, times in measured.items():
                p99 = times[min(len(times) - 1, int(len(times) * 0.99))]
                lines.append(
                    f"| {batch} | {'graph replay' if graphed else 'eager'} | {name} | {statistics.mean(times):.1f} | "
                    f"{statistics.median(times):.1f} | {p99:.1f} | {statistics.mean(times) / copy:.2f} |"
                )
    lines += ["", "Where the eager apply's time goes at batch 64 (torch.profiler, 20 applies):", "", "```",
              profile_apply(64, device), "```"]
    report = "\n".join(lines) + "\n"
    print(report)
    with open(args.out, "w", encoding="utf-8") as f:
        f.write(report)
    return 0 if alloc_ok and graph_ok else 1


if __name__ == "__main__":
    sys.exit(main())

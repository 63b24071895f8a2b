"""A batch's host bitmask and what each of its rows holds.

:class:`HostMasks` owns the buffers (:class:`.logits_mask.MaskBuffers`,
allocated once, by the first logits or without torch for a caller that
reads rows itself) and, per row, what the last fill left there in short:
the tokens the mask forbids when they are few and known, the one token it
allows when known, and what the row holds (a kept mask, a token, a
precomputed raw-text row, by identity), so the next fill writes only what
changed and the CPU apply takes its shorter paths. The constraint fills
the rows; this class is the memory they are filled into.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from ..caches import LruCache
from ..errors import ConstraintError
from .logits_mask import MaskBuffers, apply_mask
from .mask_cache import NOTHING, MaskNode

if TYPE_CHECKING:
    import torch

    from ..tokenizers import Tokenizer


class Pending(NamedTuple):
    """A row whose mask llguidance computes this step: its matcher, its
    index and its node in the mask cache (where the mask is kept)."""

    matcher: Any
    row: int
    node: MaskNode | None


class HostMasks:
    """The host bitmask of ``batch_size`` rows over ``tokenizer``'s
    vocabulary, and per row what it holds (read as lists by the apply)."""

    __slots__ = ("tokenizer", "batch_size", "vocab_size", "words", "buffers", "forbidden", "single", "holding")

    def __init__(self, tokenizer: Tokenizer, batch_size: int) -> None:
        self.tokenizer = tokenizer
        self.batch_size = batch_size
        self.vocab_size = tokenizer.vocab_size
        self.words = (self.vocab_size + 31) // 32
        """``uint32`` words in a row of the bitmask."""
        self.buffers: MaskBuffers | None = None
        self.forbidden: list[Any] = [None] * batch_size
        """Per row, the tokens its filled mask forbids when they are few and
        known (the CPU apply sets just those)."""
        self.single: list[int | None] = [None] * batch_size
        """Per row, the one token its mask allows when known (the CPU apply
        keeps just that logit)."""
        self.holding: list[object] = [None] * batch_size
        """Per row, what it holds when known, so the next fill need not
        write it again."""

    def forget(self, row: int) -> None:
        """Nothing is known in short of ``row``'s mask (it was written another way)."""
        self.forbidden[row] = self.single[row] = self.holding[row] = None

    def prepare(self, logits: torch.Tensor) -> None:
        """Allocate the buffers for logits shaped like ``logits``, once."""
        if self.buffers is None:
            self.buffers = MaskBuffers.allocate(self.tokenizer, self.batch_size, self.words, logits)
            self.holding = [NOTHING] * self.batch_size  # a new bitmask is zeros
        else:
            self.buffers.check(logits)

    def prepare_host(self) -> None:
        """Allocate the host bitmask alone, without torch."""
        if self.buffers is None:
            self.buffers = MaskBuffers.host_only(self.tokenizer, self.batch_size, self.words)
            self.holding = [NOTHING] * self.batch_size  # a new bitmask is zeros

    def require(self) -> MaskBuffers:
        """The buffers, which must exist by now."""
        if self.buffers is None:
            raise ConstraintError("no buffers yet: call prepare(logits) or mask_logits(logits) first")
        return self.buffers

    def apply(self, logits: torch.Tensor) -> torch.Tensor:
        """The filled bitmask applied to ``logits`` in place (:func:`.logits_mask.apply_mask`)."""
        buffers = self.require()
        buffers.check(logits)
        return apply_mask(buffers, logits, self.forbidden, self.single, self.vocab_size)

    def allows(self, row: int, token: int) -> bool:
        """Whether the bitmask, as the last fill left it, allows ``token`` in ``row``."""
        assert self.buffers is not None
        return bool((self.buffers.host_view[row, token >> 5] >> (token & 31)) & 1)

    def read_only_row(self, row: int) -> np.ndarray:
        """Row ``row`` of the bitmask as a read-only view (the buffer stays writable)."""
        words: np.ndarray = self.require().host_words[row]
        words.flags.writeable = False
        return words


_scratches = threading.local()


def scratch(rows: int, words: int) -> np.ndarray:
    """This thread's scratch bitmask of at least ``rows`` x ``words``
    (grown, never shrunk), so a step allocates nothing once it is big enough."""
    bits = getattr(_scratches, "bits", None)
    if bits is None or bits.shape[0] < rows or bits.shape[1] != words:
        bits = np.zeros((max(rows, 16), words), dtype=np.uint32)
        _scratches.bits = bits
    return bits[:rows]


_executors: LruCache[int, Any] = LruCache("llguidance thread pools", 4)


def executor(num_threads: int) -> Any:
    """One ``llguidance.LLExecutor`` (a thread pool) per thread count,
    shared by every constraint of the process."""

    def make() -> Any:
        import llguidance

        return llguidance.LLExecutor(num_threads)

    return _executors.get_or_make(num_threads, make)

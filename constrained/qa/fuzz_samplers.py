"""Seeded samplers for the fuzzer's walks, reading a bitmask row directly:
``uniform`` (uniform over the allowed set) and ``steered``, which leans
towards structure so that walks reach the ends of values and calls, which
uniform sampling almost never does.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np

from ..compiler import CompiledTools
from .fuzz_structure import StructureTokens, structure_tokens

SAMPLERS = ("uniform", "steered")


def allowed_ids(words: np.ndarray, vocab_size: int) -> np.ndarray:
    """Every token id a bitmask row allows, from its nonzero words only."""
    nonzero = np.flatnonzero(words)
    bits = np.unpackbits(words[nonzero].view(np.uint8), bitorder="little").reshape(-1, 32)
    rows, columns = np.nonzero(bits)
    ids = nonzero[rows] * 32 + columns
    return ids[ids < vocab_size]


def allows(words: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """Per id of ``ids`` (int64), whether the row allows it."""
    return ((words[ids >> 5] >> (ids & 31).astype(np.uint32)) & 1).astype(bool)


def allows_one(words: np.ndarray, token: int) -> bool:
    """Whether the row allows ``token``."""
    return bool((int(words[token >> 5]) >> (token & 31)) & 1)


class Sampler(Protocol):
    """Picks the next token from a filled bitmask row; ``None`` when the row
    allows nothing. One instance per walk (a sampler may keep a plan)."""

    def choose(self, words: np.ndarray, rng: np.random.Generator) -> int | None: ...


class UniformSampler:
    """Uniform over the allowed set: a few random ids tested against the
    row (rejection sampling: exact, and cheap when many tokens are allowed),
    else a draw from the allowed ids enumerated."""

    _TRIES = 16

    def __init__(self, vocab_size: int) -> None:
        self.vocab_size = vocab_size

    def choose(self, words: np.ndarray, rng: np.random.Generator) -> int | None:
        ids = rng.integers(0, self.vocab_size, self._TRIES)
        hits = ids[allows(words, ids)]
        if hits.size:
            return int(hits[0])
        allowed = allowed_ids(words, self.vocab_size)
        return int(allowed[rng.integers(allowed.size)]) if allowed.size else None


class SteeredSampler:
    """Leans towards structure so that walks close values and calls.

    Each step: go on with the literal being written, if its next token is
    allowed; else, by a seeded draw, pick uniformly among the allowed special
    tokens, or start an allowed closing, or start an allowed literal (drawn
    by how often the grammar uses it), or pick uniformly among the allowed
    punctuation tokens, or uniformly among all allowed tokens (also whenever
    the chosen group has nothing allowed). Inside text of any content every
    literal is allowed, and only a closing ends it: without the closings
    group a walk would write markup into the text for a long time first.
    """

    SPECIAL = 0.15
    CLOSING = 0.2
    LITERAL = 0.25
    PUNCTUATION = 0.15

    def __init__(self, structure: StructureTokens, vocab_size: int) -> None:
        self.structure = structure
        self.uniform = UniformSampler(vocab_size)
        self._literal_firsts = structure.literal_firsts
        self._closing_firsts = structure.closing_firsts
        self._plan: list[int] = []

    def choose(self, words: np.ndarray, rng: np.random.Generator) -> int | None:
        if self._plan:
            token = self._plan.pop(0)
            if allows_one(words, token):
                return token
            self._plan.clear()
        structure, draw = self.structure, rng.random()
        picked = None
        if draw < self.SPECIAL:
            picked = _pick(structure.specials, words, rng)
        elif draw < self.SPECIAL + self.CLOSING:
            picked = self._start(structure.closings, self._closing_firsts, None, words, rng)
        elif draw < self.SPECIAL + self.CLOSING + self.LITERAL:
            picked = self._start(structure.literals, self._literal_firsts, structure.weights, words, rng)
        elif draw < self.SPECIAL + self.CLOSING + self.LITERAL + self.PUNCTUATION:
            picked = _pick(structure.punctuation, words, rng)
        return picked if picked is not None else self.uniform.choose(words, rng)

    def _start(
        self,
        sequences: tuple[tuple[int, ...], ...],
        firsts: np.ndarray,
        weights: np.ndarray | None,
        words: np.ndarray,
        rng: np.random.Generator,
    ) -> int | None:
        """Start one of ``sequences`` whose first token is allowed (by
        ``weights``, else uniformly); the rest becomes the plan."""
        candidates = np.flatnonzero(allows(words, firsts))
        if not candidates.size:
            return None
        if weights is None:
            index = candidates[rng.integers(candidates.size)]
        else:
            cumulative = np.cumsum(weights[candidates])
            index = candidates[np.searchsorted(cumulative, rng.random() * cumulative[-1], side="right")]
        chosen = sequences[int(index)]
        self._plan = list(chosen[1:])
        return chosen[0]


def _pick(ids: np.ndarray, words: np.ndarray, rng: np.random.Generator) -> int | None:
    allowed = ids[allows(words, ids)]
    return int(allowed[rng.integers(allowed.size)]) if allowed.size else None


def make_sampler(name: str, compiled: CompiledTools) -> Sampler:
    """A fresh sampler ``name`` (one of :data:`SAMPLERS`) for one walk."""
    vocab_size = compiled.tokenizer.vocab_size
    if name == "steered":
        return SteeredSampler(structure_tokens(compiled), vocab_size)
    return UniformSampler(vocab_size)

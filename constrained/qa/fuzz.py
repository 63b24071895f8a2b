"""Random-walk fuzzing of a compiled constraint.

A walk drives :class:`~constrained.runtime.constraint.ToolCallConstraint` as a
decoding loop does (fill the host bitmask, pick a token it allows, consume
it), so the precomputed raw-text rows, the mask cache and the cheap
consume path are exercised, not only llguidance. It ends when the grammar
finishes, when the token budget runs out, when no token is allowed while
the grammar is unfinished (a wedge), or when something goes wrong (an exception, the
constraint refusing a token its own mask allowed, a mask that differs from a
plain llguidance matcher fed the same tokens). A finished output is parsed
and checked against the schema and ``tool_choice``: what the grammar lets
through must be a valid answer.

This module is the walk itself. Beside it: ``fuzz_runs`` (the options and
records of walks), ``fuzz_samplers`` (the seeded samplers, ``uniform`` and
``steered``), ``fuzz_structure`` (the tokens the steered sampler leans
towards) and ``fuzz_checks`` (what makes a finished output wrong).
"""

from __future__ import annotations

import time
import traceback

import numpy as np

from ..compiler import CompiledTools
from ..output.parse import parse_tool_calls
from ..runtime.constraint import RowState, ToolCallConstraint
from .fuzz_checks import output_problems, output_text
from .fuzz_runs import FuzzRun, FuzzSummary, Outcome, WalkOptions
from .fuzz_samplers import SAMPLERS, allows_one, make_sampler

__all__ = ["SAMPLERS", "FuzzRun", "FuzzSummary", "Outcome", "WalkOptions", "fuzz", "walk"]


class _Walk:
    """One row of a constraint driven by a sampler, with an optional plain
    llguidance matcher fed the same tokens to compare masks with."""

    ROLLBACK_CHANCE = 1 / 32  # per step, with WalkOptions.rollback
    ROLLBACK_MOST = 8

    def __init__(self, compiled: CompiledTools, options: WalkOptions, rng: np.random.Generator) -> None:
        import torch

        self.compiled = compiled
        self.options = options
        self.rng = rng
        self.sampler = make_sampler(options.sampler, compiled)
        self.vocab_size = compiled.tokenizer.vocab_size
        self.constraint = ToolCallConstraint(compiled, 1)
        self.logits = torch.zeros(1, self.vocab_size)
        self.constraint.prepare(self.logits)
        self.reference = compiled.matcher() if options.crosscheck_every else None
        words = (self.vocab_size + 31) // 32
        self.reference_words = np.zeros(words, dtype=np.uint32)
        self.finite = np.zeros(words * 32, dtype=bool)  # the applied logits' allowed set, padded to whole words
        self.tokens: list[int] = []
        self.consumed = 0  # tokens fed, rolled back ones included
        self.masks = 0

    def run(self) -> tuple[Outcome, str]:
        """Walk until the grammar finishes or the budget runs out; how it
        ended and what went wrong, if anything."""
        options, constraint = self.options, self.constraint
        while self.consumed < options.budget:
            if options.rollback and self.tokens and self.rng.random() < self.ROLLBACK_CHANCE:
                self._rollback(int(self.rng.integers(1, min(self.ROLLBACK_MOST, len(self.tokens)) + 1)))
            forced = constraint.forced_tokens(0) if options.fast_forward else []
            if forced:
                problem = self._feed(forced[: options.budget - self.consumed], forced=True)
            else:
                token, problem = self._sample()
                if token is None:
                    if problem:
                        return Outcome.ERROR, problem
                    return Outcome.WEDGE, f"no token allowed after {len(self.tokens)} tokens"
                problem = self._feed([token], forced=False)
            if problem:
                return Outcome.ERROR, problem
            if constraint.state(0) is RowState.FINISHED:
                return Outcome.FINISHED, ""
        return Outcome.BUDGET_EXHAUSTED, ""

    def _sample(self) -> tuple[int | None, str]:
        """Fill the mask, check it, pick a token; ``(None, why)`` when the row
        allows nothing (why: '') or the mask is wrong."""
        constraint = self.constraint
        constraint.fill_masks()
        words = constraint.allowed_words(0)
        self.masks += 1
        every = self.options.crosscheck_every
        if every and self.masks % every == 1 % every:
            mismatch = self._crosscheck(words)
            if mismatch:
                return None, mismatch
        return self.sampler.choose(words, self.rng), ""

    def _feed(self, tokens: list[int], *, forced: bool) -> str:
        """Consume ``tokens`` (a sampled one, or forced ones as fast-forward
        appends them); what went wrong, if anything."""
        if forced:
            self.constraint.consume_row(0, tokens)
        else:
            self.constraint.consume(tokens)
        self.tokens.extend(tokens)
        self.consumed += len(tokens)
        if self.constraint.events:
            kind = "token the grammar forced" if forced else "sampled token its own mask allowed"
            return f"the constraint refused a {kind}: {self.constraint.events[0]}"
        if self.reference is not None and not all(self.reference.consume_token(t) for t in tokens):
            return f"llguidance refused tokens {tokens} that the constraint accepted: {self.reference.get_error()}"
        return ""

    def _rollback(self, count: int) -> None:
        """Take back ``count`` tokens; the reference is a new matcher fed the
        tokens kept, so its masks owe nothing to a rollback of its own."""
        self.constraint.rollback(count)
        del self.tokens[-count:]
        if self.reference is not None:
            self.reference = self.compiled.matcher()
            self.reference.consume_tokens(self.tokens)

    def _crosscheck(self, words: np.ndarray) -> str:
        """Compare the row with llguidance's own mask and with the applied
        logits; a description of the first difference, or ''."""
        assert self.reference is not None
        self.reference.unsafe_compute_mask_ptr(self.reference_words.ctypes.data, self.reference_words.nbytes)
        tok = self.compiled.tokenizer
        if not np.array_equal(words, self.reference_words):
            shown = [(t, tok.token_bytes(t), allows_one(words, t)) for t in _differing(words, self.reference_words)]
            return f"mask differs from llguidance's at tokens (id, bytes, allowed by ours) {shown}"
        self.logits.zero_()
        self.constraint.apply(self.logits)
        np.isfinite(self.logits[0].numpy(), out=self.finite[: self.vocab_size])
        applied = np.packbits(self.finite, bitorder="little").view(np.uint32)
        if not np.array_equal(applied, words):
            return f"applied logits differ from the bitmask at tokens {_differing(applied, words)}"
        return ""


def _differing(first: np.ndarray, second: np.ndarray, shown: int = 6) -> list[int]:
    """The first token ids where two bitmask rows differ."""
    return [int(t) for t in np.flatnonzero(np.unpackbits((first ^ second).view(np.uint8), bitorder="little"))[:shown]]


def walk(compiled: CompiledTools, seed: int, options: WalkOptions | None = None) -> FuzzRun:
    """One random walk over ``compiled``, seeded by ``seed``. Nothing raises:
    an exception is reported as an error outcome, with where it was raised."""
    options = options or WalkOptions()
    started = time.perf_counter()
    tok = compiled.tokenizer
    state: _Walk | None = None
    outcome, detail, text, parsed, problems = Outcome.ERROR, "", "", None, []
    try:
        state = _Walk(compiled, options, np.random.default_rng(seed))
        outcome, detail = state.run()
        if outcome is Outcome.FINISHED:
            text, utf8 = output_text(tok, state.tokens[:-1])  # without the end token
            parsed = parse_tool_calls(text, compiled, compiled.dialect)
            problems = output_problems(compiled, state.tokens, text, parsed) + ([] if utf8 else ["the output is not valid UTF-8"])
    except Exception as exc:  # a fuzz run reports whatever raised, with where
        where = traceback.extract_tb(exc.__traceback__)[-1]
        outcome, detail = Outcome.ERROR, f"{type(exc).__name__}: {exc} (at {where.filename}:{where.lineno})"
    tokens = tuple(state.tokens) if state is not None else ()
    if outcome is not Outcome.FINISHED:
        text = output_text(tok, tokens)[0]
    return FuzzRun(
        dialect=compiled.dialect,
        compile_options=compiled.options,
        seed=seed,
        options=options,
        outcome=outcome,
        tokens=tokens,
        text=text,
        parsed=parsed,
        problems=tuple(problems),
        detail=detail,
        precomputed_steps=state.constraint.precomputed_rows if state is not None else 0,
        cached_steps=state.constraint.cached_rows if state is not None else 0,
        seconds=time.perf_counter() - started,
    )


def fuzz(compiled: CompiledTools, runs: int, seed: int = 0, options: WalkOptions | None = None, *,
         keep: int = 5) -> FuzzSummary:
    """``runs`` walks with seeds ``seed``, ``seed + 1``, ...; their summary
    (with the first ``keep`` failing walks)."""
    summary = FuzzSummary(keep=keep)
    for offset in range(runs):
        summary.add(walk(compiled, seed + offset, options))
    return summary
